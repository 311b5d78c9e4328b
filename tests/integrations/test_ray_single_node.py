"""Ray Data on a single node (``ray.init``): every batch class against single-process results,
multi-reference and idf included; every batch format; bad rows named. One Ray instance for the
module (starting Ray takes seconds on 2 cores), loopback only, small data."""

from __future__ import annotations

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="the [ray] extra (part of [test])")
pytestmark = pytest.mark.slow  # starts Ray

from rapidscore.abstention import detect_refusal  # noqa: E402
from rapidscore.bertscore import BERTScore  # noqa: E402
from rapidscore.integrations.ray import (  # noqa: E402
    BatchError,
    BERTScoreBatch,
    NERBatch,
    RefusalBatch,
    SimilarityBatch,
    document_frequencies,
    score_dataset,
)
from rapidscore.ner import evaluate  # noqa: E402
from rapidscore.nrr import SentenceSimilarity  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def ray_instance():
    ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield
    ray.shutdown()


def by_id(dataset) -> dict[str, list]:
    """The output rows in input order (Ray Data does not keep the order), as columns."""
    rows = sorted(dataset.take_all(), key=lambda row: int(row["id"][1:]))
    return {key: [row[key] for row in rows] for key in rows[0]}


def test_bertscore_with_idf_similarity_and_refusal_equal_single_process(ray_model, ray_rows):
    ds = ray.data.from_items(ray_rows, override_num_blocks=4)
    counts = document_frequencies(ds, model=ray_model)
    scorer = BERTScore(ray_model, idf=True)
    cands, refs = [r["candidate"] for r in ray_rows], [r["reference"] for r in ray_rows]
    assert counts == scorer.document_frequencies(list(zip(cands, refs)))  # merged blocks = one pass
    scored = score_dataset(ds, model=ray_model, idf=True, id_column="id", batch_size=7, num_cpus=1,
                           num_threads=1)
    scored = scored.map_batches(SimilarityBatch, fn_constructor_kwargs=dict(
        text_column="candidate", model=ray_model, threshold=0.5, num_threads=1), concurrency=1, num_cpus=1,
        batch_size=9, batch_format="pandas")
    scored = scored.map_batches(RefusalBatch, fn_constructor_kwargs=dict(method="heuristic"), concurrency=1,
                                num_cpus=1, batch_size=11, batch_format="numpy")
    frame = by_id(scored)
    expected = scorer.score(cands, refs)
    for name in ("precision", "recall", "f1"):
        assert np.array_equal(np.array(frame[name], np.float32), getattr(expected, name))
    sims, best = SentenceSimilarity(ray_model).pairs(cands, refs)
    assert np.array_equal(np.array(frame["similarity"], np.float32), sims)
    assert frame["best_reference"] == best.tolist()
    assert frame["rejected"] == (sims < np.float32(0.5)).tolist()
    assert frame["refusal"] == detect_refusal([r["response"] for r in ray_rows]).tolist()


def test_ner_batches_equal_evaluate(ray_model, ner_rows):
    ds = ray.data.from_items(ner_rows, override_num_blocks=3)
    rows = score_dataset(ds, "ner", text_column="text", label_model=ray_model, batch_size=6, num_cpus=1).take_all()
    rows.sort(key=lambda row: int(row["id"][3:]))
    whole = evaluate([r["gold"] for r in ner_rows], [r["predicted"] for r in ner_rows],
                     texts=[r["text"] for r in ner_rows], label_model=ray_model)
    for key in ("n_gold", "n_pred", "precision", "recall", "score"):
        assert [row[key] for row in rows] == [record[key] for record in whole.records], key
    assert sum(row["strict_correct"] for row in rows) == whole.semeval["strict"]["correct"]
    assert sum(row["partial_missed"] for row in rows) == whole.semeval["partial"]["missed"]


def test_a_bad_row_fails_the_job_naming_the_row(ray_model, ray_rows):
    rows = [dict(r) for r in ray_rows[:6]]
    rows[4]["reference"] = []
    ds = ray.data.from_items(rows, override_num_blocks=1)
    with pytest.raises(Exception, match=r"row 4 of the batch \(id='r4'\): empty list of references"):
        score_dataset(ds, model=ray_model, id_column="id", num_cpus=1).materialize()


# -- the classes called directly: every batch format, bad rows --------------------------------

@pytest.mark.parametrize("batch_format", ["numpy", "pandas", "pyarrow"])
def test_batch_formats_in_and_out(ray_model, ray_rows, batch_format):
    pandas = pytest.importorskip("pandas")
    pyarrow = pytest.importorskip("pyarrow")
    frame = pandas.DataFrame(ray_rows[:12])
    batch = {"numpy": {c: frame[c].to_numpy() for c in frame.columns}, "pandas": frame,
             "pyarrow": pyarrow.Table.from_pandas(frame)}[batch_format]
    out = BERTScoreBatch(model=ray_model, reference_batch_size=4)(batch)
    expected = BERTScore(ray_model).score(frame["candidate"].tolist(), frame["reference"].tolist(),
                                          reference_batch_size=4)
    f1 = {"numpy": lambda: out["f1"], "pandas": lambda: out["f1"].to_numpy(),
          "pyarrow": lambda: out.column("f1").to_numpy()}[batch_format]()
    assert type(out) is type(batch) and np.array_equal(f1, expected.f1)
    assert "candidate" in (out.column_names if batch_format == "pyarrow" else list(out))


def test_bad_batches_name_rows_and_columns(ray_model, ray_rows):
    scorer = BERTScoreBatch(model=ray_model, id_column="id")
    rows = {"id": np.array(["a", "b"]), "candidate": np.array(["x", None], dtype=object),
            "reference": np.array(["y", "z"], dtype=object)}
    with pytest.raises(BatchError, match=r"row 1 of the batch \(id='b'\): the candidate must be a str"):
        scorer(rows)
    with pytest.raises(BatchError, match="no column 'reference'"):
        scorer({"id": np.array(["a"]), "candidate": np.array(["x"])})
    with pytest.raises(BatchError, match=r"row 1 of the batch: response at position 1 must be a str"):
        RefusalBatch()({"response": np.array(["fine", 3], dtype=object)})
    with pytest.raises(ValueError, match="needs its document counts"):
        BERTScoreBatch(model=ray_model, idf=True)
