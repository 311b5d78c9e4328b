"""The metric contract (issue 27): a metric added through the registry alone runs in every front
end (the streaming runner, Ray's batch class, the service's batching); the built-in metrics are
found by their names and older aliases; bad rows are named the way each caller names rows."""

from __future__ import annotations

import numpy as np
import pytest

from rapidscore.common.metric import ColumnError, Metric
from rapidscore.errors import RapidscoreError
from rapidscore.metrics import get_metric, metric_names, register, unregister
from rapidscore.streaming import score_stream


def test_builtin_metrics_and_their_older_names():
    assert metric_names()[:4] == ["bertscore", "nrr", "ner", "refusal"]
    assert get_metric("similarity") is get_metric("nrr")  # the HTTP path's and Ray's older name
    with pytest.raises(ValueError, match=r"unknown metric 'bleu': the metrics are 'bertscore', 'nrr'"):
        get_metric("bleu")
    for metric in map(get_metric, metric_names()):
        assert metric.inputs and metric.outputs and metric.front_ends.summary


# The metric contract (issue 47): what a metric author learns, on one page. The row facts and the
# front ends' presentation are one declared object each (``Rows``, ``FrontEnds``).
CONTRACT = ("name", "inputs", "outputs", "options", "rows", "front_ends",
            "settings", "build", "score", "stream", "totals", "signature", "task")


def test_the_contract_is_a_dozen_names():
    declared = {*dir(Metric), *Metric.__annotations__}  # name, inputs, outputs: annotated, no default
    public = sorted(name for name in declared if not name.startswith("_"))
    assert len(public) <= 13 and sorted(CONTRACT) == public, public


def test_older_declarations_fold_into_the_grouped_objects():
    """A metric written against the older contract (``row_noun``, ``aliases``, ``takes_solo``, ...
    as class attributes of their own) declares the same thing."""
    from rapidscore.common.metric import Column, FrontEnds, Rows

    class Older(Metric):
        name = "older"
        aliases = ("elder",)
        summary = "an older declaration"
        inputs = (Column("text", "text"),)
        outputs = ("x",)
        row_noun = "record"
        min_rows = 1
        takes_solo = True

    assert Older.rows == Rows(noun="record", minimum=1)
    assert Older.front_ends == FrontEnds(aliases=("elder",), summary="an older declaration", takes_solo=True)
    assert Metric.rows == Rows() and Metric.front_ends == FrontEnds()  # the base's defaults untouched


def test_a_name_is_taken_once(toy_metric):
    class Other(Metric):
        name = "other"
        aliases = ("shout",)  # the toy's alias
        inputs = toy_metric.inputs
        outputs = ("x",)

    with pytest.raises(ValueError, match="the metric name 'shout' is taken by <metric 'toy'>"):
        register(Other())
    with pytest.raises(TypeError, match="must be a rapidscore.common.metric.Metric"):
        register("toy")  # type: ignore[arg-type]
    with pytest.raises(KeyError):
        unregister("never-registered")


def test_toy_metric_streams_with_totals(toy_metric):
    totals = toy_metric.totals()
    rows = list(score_stream("shout", iter(["ab", "c", "xyz"]), chunk_size=2, suffix="?", totals=totals))
    assert rows == [{"length": 3, "shout": "AB?"}, {"length": 2, "shout": "C?"}, {"length": 4, "shout": "XYZ?"}]
    assert totals.summary() == {"rows": 3, "characters": 9}
    with pytest.raises(TypeError, match=r"^item 3: the text must be a str, got int"):  # the stream's position
        list(score_stream("toy", ["a", "b", "c", 4], chunk_size=2))
    with pytest.raises(TypeError, match="pass options or a built engine, not both"):
        score_stream("toy", [], engine={"suffix": ""}, suffix="!")


def test_toy_metric_in_a_ray_batch_class(toy_metric):
    pandas = pytest.importorskip("pandas")
    from rapidscore.integrations.ray import BatchError, MetricBatch

    batch = MetricBatch("toy", columns={"text": "body"}, id_column="id", suffix="")
    out = batch({"id": np.array(["a", "b"]), "body": np.array(["hi", "there"], dtype=object)})
    assert out["length"].tolist() == [2, 5] and out["shout"].tolist() == ["HI", "THERE"]
    frame = batch(pandas.DataFrame({"id": ["a"], "body": ["x"]}))
    assert frame["shout"].tolist() == ["X"] and frame["body"].tolist() == ["x"]
    with pytest.raises(BatchError, match=r"MetricBatch: row 1 of the batch \(id='b'\): the text must be a str"):
        batch({"id": np.array(["a", "b"]), "body": np.array(["x", 3], dtype=object)})
    with pytest.raises(BatchError, match="no column 'body'"):
        batch({"id": np.array(["a"]), "text": np.array(["x"])})
    with pytest.raises(ValueError, match=r"toy has no input column\(s\) \['txt'\]"):
        MetricBatch("toy", columns={"txt": "body"})


def test_toy_metric_behind_the_service_batcher(toy_metric):
    from rapidscore.serve.batching import BatchingScorer

    engine = toy_metric.build(suffix="")
    with BatchingScorer(engine, metric="toy") as scorer:
        assert scorer.metric is toy_metric
        futures = [scorer.submit({"text": [f"t{i}", "u"]}) for i in range(5)]
        assert [f.result(30) for f in futures] == [toy_metric.score(engine, {"text": [f"t{i}", "u"]})
                                                   for i in range(5)]
        with pytest.raises(ColumnError, match=r"toy needs the column\(s\) \['text'\]") as caught:
            scorer.submit({"txt": ["a"]})
        assert isinstance(caught.value, RapidscoreError) and isinstance(caught.value, ValueError)


def test_builtin_metric_streams_equal_their_own_calls(tiny_model_path):
    from rapidscore.abstention import detect_refusal
    from rapidscore.nrr import SentenceSimilarity

    model = str(tiny_model_path("bert"))
    pairs = [("a cat sat", "a cat sat down"), ("dogs bark", ["cats meow", "dogs bark loudly"]), ("", "x")]
    rows = list(score_stream("similarity", pairs, model=model, threshold=0.5, chunk_size=2))
    sims, best = SentenceSimilarity(model).pairs([p[0] for p in pairs], [p[1] for p in pairs])
    assert [r["similarity"] for r in rows] == sims.tolist() and [r["best_reference"] for r in rows] == best.tolist()
    assert [r["rejected"] for r in rows] == (sims < np.float32(0.5)).tolist()
    responses = ["I can't help with that.", "Sure, here it is.", {"complete": "...", "answer": "I won't."}]
    assert [r["refusal"] for r in score_stream("refusal", responses)] == detect_refusal(responses).tolist()


def test_registry_and_streams_from_many_threads(toy_metric):
    """The registry (lookups while others register) and a shared engine under many streams."""
    from concurrent.futures import ThreadPoolExecutor

    class Extra(Metric):
        inputs = toy_metric.inputs
        outputs = ("x",)

    engine = toy_metric.build(suffix="")
    texts = [f"text {i}" for i in range(200)]
    expected = [len(t) for t in texts]

    def work(k: int) -> list:
        if k % 4 == 0:  # registrations racing with lookups
            metric = type(f"Extra{k}", (Extra,), {"name": f"extra-{k}"})()
            register(metric)
            assert get_metric(f"extra-{k}") is metric
            unregister(f"extra-{k}")
        assert get_metric("shout") is toy_metric
        return [row["length"] for row in score_stream("toy", texts, chunk_size=7 + k, engine=engine)]

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(work, range(32)))
    assert all(result == expected for result in results)
    assert not [name for name in metric_names() if name.startswith("extra-")]
