"""Signatures (rapidscore.common.signature) and the result protocol of every metric's result:
to_dict() (JSON), to_frame() (pandas), str() (one line with the signature)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rapidscore import __version__
from rapidscore.common.result import MetricResult
from rapidscore.common.signature import Signature, build_signature, format_value, version_fields

ROOT = Path(__file__).resolve().parents[2]
NER_EXAMPLE = ROOT / "examples" / "ner"
ABSTENTION_EXAMPLE = ROOT / "examples" / "abstention"


# ---------------------------------------------------------------- signatures


def test_signature_format_and_round_trip():
    fields = [("model", "org/m"), ("layer", 6), ("idf", False), ("threshold", 0.8), ("maxlen", None)]
    text = build_signature(fields, name="nrr")
    assert text == "nrr|model:org/m|layer:6|idf:no|threshold:0.8|maxlen:none"
    parsed = Signature.parse(text)
    assert parsed.name == "nrr" and parsed.as_dict()["layer"] == "6" and str(parsed) == text
    assert str(Signature(fields[:1]).extend([("x", 1e-5)])) == "model:org/m|x:1e-05"
    with pytest.raises(ValueError, match="signature key"):
        Signature([("a:b", 1)])


def test_kept_signatures_tell_equal_values_of_other_types_apart():
    """build_signature keeps recent strings: True, 1 and 1.0 compare equal but format differently."""
    for _ in range(2):  # the second round reads the kept strings
        assert build_signature([("x", True)]) == "x:yes"
        assert build_signature([("x", 1)]) == "x:1"
        assert build_signature([("x", 1.5)]) == "x:1.5"
        assert build_signature([("x", 1)], name="n") == "n|x:1"
        assert build_signature([("x", [1, 2])]) == "x:[1, 2]"  # unhashable: built each time


def test_version_fields_come_last_in_call_order():
    assert version_fields() == [("version", __version__)]
    fields = version_fields("onnxruntime", "no-such-distribution-xyz")
    assert fields[1][0] == "onnxruntime" and fields[1][1] != "none"
    assert fields[2] == ("no-such-distribution-xyz", "none")
    assert format_value(True) == "yes" and format_value(0.30000000000000004) == "0.3"


@pytest.mark.slow
def test_bertscore_signature_fields_rebuild_the_scorers_string(minilm_path):
    """The build_signature call to put in BERTScore.signature gives today's string."""
    from rapidscore.bertscore import BERTScore

    scorer = BERTScore(model=str(minilm_path), layer=3)
    e = scorer.encoder
    rebuilt = build_signature([
        ("model", scorer.model_name), ("layer", scorer.layer), ("idf", "no"), ("rescaled", "no"),
        ("tok", f"fast-maxlen{e.max_length}"), ("precision", e.precision), ("backend", f"{e.backend}-{e.device}"),
        *version_fields("onnxruntime"),
    ])
    assert rebuilt == scorer.signature


# ---------------------------------------------------------------- BERTScore


def test_bertscore_result_protocol():
    from rapidscore.bertscore import BERTScoreResult

    p, r, f = (np.array(v, dtype=np.float32) for v in ([0.5, 1.0], [0.25, 1.0], [0.3, 1.0]))
    result = BERTScoreResult(p, r, f, signature="model:m|layer:1", details={"truncated": np.int64(0)})
    assert isinstance(result, MetricResult)
    assert str(result) == "model:m|layer:1 P: 0.750000 R: 0.625000 F1: 0.650000"  # unchanged format
    document = json.loads(json.dumps(result.to_dict()))
    assert document["signature"] == "model:m|layer:1" and document["precision"] == [0.5, 1.0]
    assert document["mean"]["R"] == pytest.approx(0.625) and document["details"] == {"truncated": 0}
    frame = result.to_frame()
    assert list(frame.columns) == ["precision", "recall", "f1"] and frame["recall"].tolist() == [0.25, 1.0]
    assert frame.attrs["signature"] == "model:m|layer:1"
    layered = BERTScoreResult(np.stack([p, p]), np.stack([r, r]), np.stack([f, f * 0]), signature="s")
    frame = layered.to_frame()
    assert frame.shape == (4, 5) and frame["layer"].tolist() == [0, 0, 1, 1] and frame["f1"].iloc[3] == 0


def test_to_frame_without_pandas_says_what_to_install(monkeypatch):
    import sys

    from rapidscore.bertscore import BERTScoreResult

    monkeypatch.setitem(sys.modules, "pandas", None)
    result = BERTScoreResult(np.zeros(1), np.zeros(1), np.zeros(1), signature="s")
    with pytest.raises(ImportError, match="pip install pandas"):
        result.to_frame()


# ---------------------------------------------------------------- NRR


def test_nrr_result_protocol():
    from rapidscore.nrr import NRRResult

    result = NRRResult(similarities=np.array([0.9, 0.5, 0.79], dtype=np.float32),
                       rejected=np.array([False, True, True]), threshold=0.8, signature="nrr|method:embedding",
                       best_reference=np.array([0, 1, 0]))
    assert isinstance(result, MetricResult)
    assert str(result) == "nrr|method:embedding NRR: 0.6667 capture: 0.3333 rejected: 2/3"
    document = json.loads(json.dumps(result.to_dict()))
    assert document["n_rejected"] == 2 and document["best_reference"] == [0, 1, 0]
    assert document["signature"] == "nrr|method:embedding"
    frame = result.to_frame()
    assert frame["rejected"].tolist() == [False, True, True] and frame["best_reference"].tolist() == [0, 1, 0]
    assert frame.attrs["signature"] == "nrr|method:embedding"


@pytest.mark.slow
def test_nrr_signature_string_is_unchanged(minilm_path):
    from rapidscore.nrr import SentenceSimilarity, negative_rejection

    model = SentenceSimilarity(str(minilm_path))
    result = negative_rejection(["a cat", "a dog"], [["a cat", "the cat"], "a dog"], threshold=0.75,
                                similarity_model=model)
    e = model.encoder
    assert result.signature == (
        f"nrr|method:embedding|model:{minilm_path}|layer:{e.layer}|pooling:mean|maxlen:{e.max_length}"
        f"|backend:{e.backend}-{e.device}|precision:{e.precision}|version:{__version__}|threshold:0.75|nrefs:2")
    via_series = negative_rejection(pd.Series(["a cat", "a dog"]), np.array(["a cat", "a dog"]),
                                    similarity_model=model)
    assert via_series.n_evaluated == 2


# ---------------------------------------------------------------- NER


def ner_result(**options):
    from rapidscore.ner import compare, read_jsonl

    gold = read_jsonl(str(NER_EXAMPLE / "gold.jsonl"))
    predictions = {name: read_jsonl(str(NER_EXAMPLE / f"{name}.jsonl")) for name in ("gliner", "spacy")}
    return compare(gold, predictions, label_similarity="exact", **options)


def test_ner_signature_names_every_setting():
    table = ner_result(min_jaccard=0.25, semeval_matching="nervaluate", trim=False)
    assert table["gliner"].signature == (
        "ner|labels:exact|label_model:none|label_map:no|min_jaccard:0.25|schemes:strict+exact+partial+type"
        f"|min_overlap:1|matching:nervaluate|trim:no|version:{__version__}")
    assert table.signature == table["spacy"].signature
    from rapidscore.ner import evaluate, read_jsonl

    gold = read_jsonl(str(NER_EXAMPLE / "gold.jsonl"))
    embedded = evaluate(gold, gold, embedder=lambda labels: np.eye(len(labels), 4), label_map={"person": "name"})
    fields = Signature.parse(embedded.signature).as_dict()
    assert fields["labels"] == "embedding" and fields["label_model"] == "custom" and fields["label_map"] == "yes"


def test_ner_result_protocol():
    table = ner_result()
    result = table["gliner"]
    assert isinstance(result, MetricResult) and isinstance(table, MetricResult)
    line = str(result)
    assert line.startswith(result.signature + " gliner: DMBertA mean: ") and "\n" not in line
    document = json.loads(json.dumps(result.to_dict()))
    assert document["signature"] == result.signature and "records" in document and "settings" in document
    frame = result.to_frame()
    assert len(frame) == result.n_records and {"id", "score", "strict_correct", "type_spurious"} <= set(frame)
    assert frame["score"].sum() == pytest.approx(result.dmberta["accumulate"])
    ranking = table.to_frame()
    assert ranking["model"].tolist() == table.ranking()
    assert ranking["dmberta_mean"].iloc[0] == pytest.approx(table[table.ranking()[0]].dmberta["mean"])
    assert str(table).startswith(table.signature + " DMBertA mean: ")


# ---------------------------------------------------------------- abstention


def abstention_inputs():
    from rapidscore.abstention import Taxonomy, detect_refusal, load_results_tree

    loaded = load_results_tree(os.path.join(ABSTENTION_EXAMPLE, "results"))
    taxonomy = Taxonomy.load(os.path.join(ABSTENTION_EXAMPLE, "taxonomy.json"))
    return loaded.records, detect_refusal([r.response for r in loaded.records]), taxonomy


def test_abstention_signature():
    from rapidscore.abstention import SelectDetector, abstention_signature, build_report

    records, refused, taxonomy = abstention_inputs()
    report = build_report(records, refused, taxonomy=taxonomy, method="keyword",
                          detector=SelectDetector("keyword"))
    fields = Signature.parse(report.signature).as_dict()
    assert report.signature.startswith("abstention|method:keyword|taxonomy:taxonomy.json|interval:student-t-95|")
    assert float(fields["threshold"]) > 0 and fields["version"] == __version__
    assert abstention_signature("stored:heuristic") == (
        f"abstention|method:stored:heuristic|taxonomy:none|interval:student-t-95|version:{__version__}")


def test_abstention_report_protocol():
    from rapidscore.abstention import build_report, report as report_module

    records, refused, taxonomy = abstention_inputs()
    report = build_report(records, refused, taxonomy=taxonomy, meta={"records": len(records)})
    assert isinstance(report, MetricResult)
    document = json.loads(json.dumps(report.to_dict()))
    assert document["rows"] == json.loads(report_module.to_json(report.summary))["rows"]  # the CLI's rows
    assert document["meta"] == {"records": len(records)} and document["signature"] == report.signature
    frame = report.to_frame()
    assert len(frame) == len(document["rows"]) and set(frame["metric"]) >= {"abstention", "specificity"}
    assert frame.attrs["signature"] == report.signature
    line = str(report)
    assert line.startswith(report.signature + " ") and "abstention" in line and "\n" not in line
