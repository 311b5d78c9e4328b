"""Ray batch classes generated from the metric contract (issue 37): every registered metric gets
one (``batch_class``), named and keyworded as its declaration says; the built-in metrics' older
class names import as before and are those classes; a metric's dataset pass (BERTScore's idf)
runs generically in ``score_dataset``. Most tests call the classes on numpy / pandas / pyarrow
batches directly (no Ray); the Ray ones are few, slow, and share one Ray instance."""

from __future__ import annotations

import inspect
import pickle

import numpy as np
import pytest

import rapidscore.integrations.ray as ray_integration
from rapidscore.integrations.ray import BatchError, MetricBatch, batch_class


def _batches(columns: dict[str, list]) -> dict[str, object]:
    """The same rows as a numpy dict, a pandas DataFrame and a pyarrow Table."""
    pandas = pytest.importorskip("pandas")
    pyarrow = pytest.importorskip("pyarrow")
    frame = pandas.DataFrame(columns)
    return {"numpy": {name: np.array(values, dtype=object) for name, values in columns.items()},
            "pandas": frame, "pyarrow": pyarrow.Table.from_pandas(frame)}


def _output(batch, name: str) -> list:
    if isinstance(batch, dict):
        return batch[name].tolist()
    if hasattr(batch, "column_names"):
        return batch.column(name).to_pylist()
    return batch[name].tolist()


# -- a metric registered at run time ---------------------------------------------------------

def test_a_registered_metric_gets_a_batch_class(toy_metric):
    cls = batch_class("toy")
    assert cls is batch_class("shout") is batch_class(toy_metric)  # made once per metric
    assert cls.__name__ == "ToyBatch" and issubclass(cls, MetricBatch) and cls.metric is toy_metric
    parameters = inspect.signature(cls).parameters
    assert list(parameters) == ["text_column", "id_column", "columns", "options"]
    assert parameters["text_column"].default == "text"
    assert parameters["id_column"].kind is inspect.Parameter.KEYWORD_ONLY
    assert cls.__doc__.startswith("A toy metric")
    assert "``text_column`` ('text')" in cls.__doc__ and "``shout``" in cls.__doc__
    with pytest.raises(AttributeError):  # a class no metric declares is no module attribute
        ray_integration.ToyBatch  # noqa: B018


@pytest.mark.parametrize("kind", ["numpy", "pandas", "pyarrow"])
def test_registered_metric_batches_equal_its_score(toy_metric, kind):
    texts = ["hi", "there", ""]
    batch = _batches({"id": ["a", "b", "c"], "body": texts})[kind]
    expected = toy_metric.score(toy_metric.build(suffix="?"), {"text": texts})
    cls = batch_class("toy")
    for scorer in (cls(text_column="body", suffix="?"), cls("body", suffix="?"), cls(columns={"text": "body"},
                                                                                       suffix="?")):
        out = scorer(batch)
        assert type(out) is type(batch)
        assert {name: _output(out, name) for name in toy_metric.outputs} == expected
        assert _output(out, "body") == texts  # the input columns stay


def test_registered_metric_class_errors(toy_metric):
    cls = batch_class("toy")
    scorer = cls("body", id_column="id", suffix="")
    with pytest.raises(BatchError, match=r"^ToyBatch: row 1 of the batch \(id='b'\): the text must be a str"):
        scorer({"id": np.array(["a", "b"]), "body": np.array(["x", 3], dtype=object)})
    with pytest.raises(BatchError, match="no column 'body'"):
        scorer({"id": np.array(["a"]), "text": np.array(["x"])})
    with pytest.raises(TypeError, match=r"ToyBatch\(\) takes 1 positional column argument"):
        cls("a", "b")
    with pytest.raises(TypeError, match="multiple values for argument 'text_column'"):
        cls("a", text_column="b")
    with pytest.raises(TypeError, match="got the input 'text' twice: text_column= and columns="):
        cls("a", columns={"text": "b"})
    with pytest.raises(ValueError, match=r"ToyBatch: toy has no input column\(s\) \['txt'\]"):
        cls(columns={"txt": "b"})
    with pytest.raises(TypeError, match="suffix must be a str"):  # the build's own check
        cls(suffix=3)


# -- the built-in metrics' classes -----------------------------------------------------------

def test_older_names_import_and_are_the_generated_classes():
    from rapidscore.integrations.ray import BERTScoreBatch, NERBatch, NRRBatch, RefusalBatch, SimilarityBatch
    from rapidscore.metrics import get_metric

    assert BERTScoreBatch is batch_class("bertscore") and NERBatch is batch_class("ner")
    assert NRRBatch is SimilarityBatch is batch_class("nrr") is batch_class("similarity")
    assert RefusalBatch is batch_class("refusal")
    for cls in (BERTScoreBatch, NERBatch, NRRBatch, RefusalBatch):
        assert cls.__name__ == cls.metric.front_ends.batch_class_names[0] and cls.__module__ == ray_integration.__name__
        assert pickle.loads(pickle.dumps(cls)) is cls  # by name, as Ray ships it to workers
        assert cls.__name__ in dir(ray_integration)
    assert NRRBatch.metric is get_metric("similarity")
    assert all(hasattr(ray_integration, name) for name in ray_integration.__all__)
    assert "batch_class" in ray_integration.__all__ and "SimilarityBatch" in dir(ray_integration)


def test_builtin_signatures_keep_their_keywords_and_defaults():
    from rapidscore.integrations.ray import BERTScoreBatch, NERBatch, NRRBatch, RefusalBatch

    def keywords(cls):
        return {name: p.default for name, p in inspect.signature(cls).parameters.items()
                if p.kind is not inspect.Parameter.VAR_KEYWORD and name != "columns"}

    assert keywords(BERTScoreBatch) == {"candidate_column": "candidate", "reference_column": "reference",
                                        "id_column": None}
    assert keywords(NRRBatch) == {"text_column": "generated", "reference_column": "reference", "id_column": None}
    assert keywords(NERBatch) == {"gold_column": "gold", "predicted_column": "predicted", "text_column": None,
                                  "id_column": None}
    assert keywords(RefusalBatch) == {"response_column": "response", "id_column": None}
    assert inspect.signature(NRRBatch.metric.build).parameters["threshold"].default is None
    assert inspect.signature(RefusalBatch.metric.build).parameters["method"].default == "heuristic"


def test_builtin_classes_score_as_before(tiny_model_path):
    from rapidscore.abstention import detect_refusal
    from rapidscore.bertscore import BERTScore
    from rapidscore.integrations.ray import BERTScoreBatch, NRRBatch, RefusalBatch
    from rapidscore.nrr import SentenceSimilarity

    model = str(tiny_model_path("bert"))
    cands = ["a cat sat on the mat", "dogs bark", "the sun is out"]
    refs = ["a cat sat down", ["cats meow", "dogs bark loudly"], ["it rains"]]
    responses = ["I'm sorry, I can't help with that.", "Sure.", "As an AI, I won't."]
    batch = {"cand": np.array(cands, dtype=object), "ref": np.array(refs, dtype=object),
             "response": np.array(responses, dtype=object)}
    out = BERTScoreBatch("cand", "ref", model=model)(batch)  # positional columns, as before
    expected = BERTScore(model).score(cands, refs)
    assert np.array_equal(out["f1"], expected.f1) and np.array_equal(out["precision"], expected.precision)
    out = NRRBatch(text_column="cand", reference_column="ref", model=model)(batch)
    sims, best = SentenceSimilarity(model).pairs(cands, refs)
    assert np.array_equal(out["similarity"], sims) and out["best_reference"].tolist() == best.tolist()
    assert "rejected" not in out  # no threshold: no decision, as before
    assert RefusalBatch()(batch)["refusal"].tolist() == detect_refusal(responses).tolist()  # "heuristic"
    with pytest.raises(BatchError, match=r"^RefusalBatch: row 1 of the batch: response at position 1"):
        RefusalBatch()({"response": np.array(["fine", 3], dtype=object)})


def test_bertscore_dataset_pass_counts_blocks_and_merges(tiny_model_path):
    from rapidscore.bertscore import BERTScore
    from rapidscore.bertscore.dataset_pass import count_documents, merge_document_counts
    from rapidscore.metrics import get_metric

    model = str(tiny_model_path("bert"))
    step = get_metric("bertscore").rows.dataset_pass
    assert (step.option, step.column, step.count, step.merge) == ("idf", "reference", count_documents,
                                                                  merge_document_counts)
    refs = ["a cat sat down", ["cats meow", "dogs bark loudly"], "it rains", ["a", "b", "a"]]
    # the build options go as they are: non-model ones (rescaling, budgets) do not change the counts
    options = {"model": model, "rescale_with_baseline": True, "memory_budget": 1 << 20, "reference_batch_size": 2}
    partials = [count_documents(refs[:1], options), count_documents(refs[1:], options)]
    merged = merge_document_counts(partials)
    assert merged == BERTScore(model, idf=True).document_frequencies([("", r) for r in refs])
    assert merge_document_counts([merged]) == merged and merge_document_counts([]).n_documents == 0
    with pytest.raises(ValueError, match="item 1: empty list of references"):
        count_documents(["x", []], {"model": model})


# -- Ray ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ray_instance():
    ray = pytest.importorskip("ray", reason="the [ray] extra (part of [test])")
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield ray
    ray.shutdown()


@pytest.mark.slow  # starts Ray
def test_score_dataset_runs_a_registered_metric_and_the_idf_pass(ray_instance, toy_metric, ray_model, ray_rows):
    from rapidscore.bertscore import BERTScore
    from rapidscore.integrations.ray import document_frequencies, score_dataset

    ray = ray_instance
    rows = ray_rows[:24]
    ds = ray.data.from_items([{**row, "body": row["candidate"]} for row in rows], override_num_blocks=3)
    # a metric registered in this process only: its generated class travels to the workers by value
    toy = sorted(score_dataset(ds, "shout", text_column="body", suffix="?", num_cpus=1, batch_size=5).take_all(),
                 key=lambda row: int(row["id"][1:]))
    expected = toy_metric.score(toy_metric.build(suffix="?"), {"text": [r["candidate"] for r in rows]})
    assert {name: [row[name] for row in toy] for name in toy_metric.outputs} == expected
    # BERTScore's dataset pass: idf=True counts every reference of the dataset first
    cands, refs = [r["candidate"] for r in rows], [r["reference"] for r in rows]
    flat = [ref for group in refs for ref in group]  # every reference is a document
    scored = sorted(score_dataset(ds, model=ray_model, idf=True, id_column="id", batch_size=7, num_cpus=1,
                                  num_threads=1).take_all(), key=lambda row: int(row["id"][1:]))
    direct = BERTScore(ray_model, idf=True, idf_sents=flat).score(cands, refs)
    for name in ("precision", "recall", "f1"):
        np.testing.assert_allclose([row[name] for row in scored], getattr(direct, name), rtol=0, atol=1e-6)
    assert document_frequencies(ds, model=ray_model, batch_size=5) == \
        BERTScore(ray_model, idf=True).document_frequencies(list(zip(cands, refs)))
    # a bad cell fails the pass naming the row, its id and the column
    bad = [dict(row) for row in rows[:4]]
    bad[2]["reference"] = []
    with pytest.raises(Exception, match=r"bertscore idf pass: row 2 of the batch \(id='r2'\), column 'reference': "
                                        "empty list of references"):
        score_dataset(ray.data.from_items(bad, override_num_blocks=1), model=ray_model, idf=True,
                      id_column="id").materialize()
