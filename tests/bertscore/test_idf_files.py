"""Regressions of issue 46 items 0 and 12: an idf file is never silently ignored (``-c/-r
--idf-file``, ``--idf --idf-file``, the API's ``BERTScore(idf="file.json")``), and every idf
file is read strictly: a count that is not a non-negative JSON integer within the document
count, or a missing key, is a ValueError naming the file, the key and the value (the CLI: exit 2,
one line). Uses only APIs that existed before the fix, so that it runs against the old code too."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rapidscore.bertscore import BERTScore
from rapidscore.bertscore.idf import DocumentFrequencies
from rapidscore.cli import main

CANDS = ["the cat sat on the mat", "a dog barked at the moon", "the sun is bright today", "rain falls softly"]
REFS = ["a cat was sitting on a mat", "the dog barks at night", "it is a sunny day", "the rain is soft"]
OTHER = ["a corpus of other sentences", "the cat and the dog", "bright sun, soft rain", "the moon at night"]
LAYER = 2


@pytest.fixture(scope="module")
def inputs(tiny_bert, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("idf-files")
    (root / "c.txt").write_text("".join(f"{c}\n" for c in CANDS), encoding="utf-8")
    (root / "r.txt").write_text("".join(f"{r}\n" for r in REFS), encoding="utf-8")
    BERTScore(tiny_bert, LAYER, idf=True).document_frequencies([("", r) for r in OTHER]).save(root / "other.json")
    return {"c": str(root / "c.txt"), "r": str(root / "r.txt"), "other": str(root / "other.json")}


def _file_weighted(model: str, path: str):
    """The numbers of weights from the file's counts, through the API that predates the fix (a dict)."""
    result = BERTScore(model, LAYER, idf=DocumentFrequencies.load(path).idf()).score(CANDS, REFS,
                                                                                     reference_batch_size=64)
    return [result.precision.tolist(), result.recall.tolist(), result.f1.tolist()]


def _cli_json(capsys, argv: list[str]) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


# -- item 0: the file is applied ----------------------------------------------------------------

@pytest.mark.parametrize("with_idf", [False, True], ids=["idf-file", "idf-and-idf-file"])
def test_an_idf_file_on_candidate_and_reference_files_is_applied(tiny_bert, inputs, capsys, with_idf):
    argv = ["bertscore", "-m", tiny_bert, "-l", str(LAYER), "-c", inputs["c"], "-r", inputs["r"],
            *(["--idf"] if with_idf else []), "--idf-file", inputs["other"], "--json"]
    document = _cli_json(capsys, argv)
    assert [document["precision"], document["recall"], document["f1"]] == _file_weighted(tiny_bert, inputs["other"])
    assert "|idf:file=" in document["signature"] and "_idf_" in document["hash"]
    plain = _cli_json(capsys, argv[:argv.index("--idf-file")] + ["--json"])
    assert plain["f1"] != document["f1"]  # neither no idf nor idf from the references


def test_the_api_takes_an_idf_file(tiny_bert, inputs):
    result = BERTScore(tiny_bert, LAYER, idf=inputs["other"]).score(CANDS, REFS, reference_batch_size=64)
    assert [result.precision.tolist(), result.recall.tolist(), result.f1.tolist()] == \
        _file_weighted(tiny_bert, inputs["other"])
    assert "|idf:file=" in result.signature


# -- item 12: strict idf files ------------------------------------------------------------------

def _idf_json(n_documents="3", counts='{"5": 1, "7": 2}', extra: str = "") -> str:
    return (f'{{"format": "rapidscore-idf", "version": 1, "tokenizer": null, "n_documents": {n_documents}, '
            f'"document_counts": {counts}{extra}}}')


BAD_FILES = {  # name -> (file content, what the message must say besides the file name)
    "count-infinity": (_idf_json(counts='{"5": Infinity}'), ['document_counts["5"]', "Infinity"]),
    "count-nan": (_idf_json(counts='{"5": NaN}'), ['document_counts["5"]', "NaN"]),
    "count-true": (_idf_json(counts='{"5": true}'), ['document_counts["5"]', "true"]),
    "count-float": (_idf_json(counts='{"5": 1.5}'), ['document_counts["5"]', "1.5"]),
    "count-string": (_idf_json(counts='{"5": "3"}'), ['document_counts["5"]', '"3"']),
    "count-negative": (_idf_json(counts='{"5": -1}'), ['document_counts["5"]', "-1"]),
    "count-above-documents": (_idf_json(counts='{"5": 4}'), ['document_counts["5"]', "4", "n_documents = 3"]),
    "documents-infinity": (_idf_json(n_documents="Infinity"), ["n_documents", "Infinity"]),
    "documents-string": (_idf_json(n_documents='"3"'), ["n_documents", '"3"']),
    "documents-negative": (_idf_json(n_documents="-2"), ["n_documents", "-2"]),
    "no-documents": ('{"format": "rapidscore-idf", "version": 1, "document_counts": {}}', ["n_documents"]),
    "no-counts": ('{"format": "rapidscore-idf", "version": 1, "n_documents": 2}', ["document_counts"]),
    "counts-a-list": (_idf_json(counts="[1, 2]"), ["document_counts", "[1, 2]"]),
    "token-not-an-id": (_idf_json(counts='{"x": 1}'), ['"x"', "document_counts"]),
    "token-negative": (_idf_json(counts='{"-5": 1}'), ['"-5"', "document_counts"]),
    "version-true": ('{"format": "rapidscore-idf", "version": true, "n_documents": 1, "document_counts": {}}',
                     ["version", "true"]),
    "tokenizer-a-number": (_idf_json(extra=', "tokenizer": 5'), ["tokenizer", "5"]),
}


@pytest.mark.parametrize("case", BAD_FILES)
def test_a_bad_idf_file_is_a_clear_error_naming_file_key_and_value(tmp_path, case):
    content, said = BAD_FILES[case]
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError) as caught:
        DocumentFrequencies.load(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and all(part in message for part in said), message
    assert type(caught.value) is ValueError  # not an OverflowError or a TypeError from a conversion


@pytest.mark.parametrize("case", ["count-infinity", "count-float", "count-above-documents", "no-counts"])
def test_every_reader_of_an_idf_file_refuses_it(tiny_bert, inputs, tmp_path, capsys, case):
    content, said = BAD_FILES[case]
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match="bad.json: "):
        BERTScore(tiny_bert, LAYER, idf=True).score_iter(list(zip(CANDS, REFS)), idf=str(path)).__next__()
    for argv in (["-c", inputs["c"], "-r", inputs["r"], "--idf-file", str(path)],
                 ["-c", inputs["c"], "-r", inputs["r"], "--idf-file", str(path), "--output", str(tmp_path / "o.jsonl")]):
        assert main(["bertscore", "-m", tiny_bert, "-l", str(LAYER), *argv]) == 2
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("rapidscore bertscore: error: "), err
        assert str(path) in lines[0] and all(part in lines[0] for part in said), lines[0]
    assert not (tmp_path / "o.jsonl").exists()


def test_a_valid_file_still_loads_exactly(tmp_path):
    path = tmp_path / "good.json"
    path.write_text(_idf_json(counts='{"5": 0, "7": 3}'), encoding="utf-8")
    counts = DocumentFrequencies.load(path)
    assert counts == DocumentFrequencies({5: 0, 7: 3}, 3)
    assert np.isclose(counts.idf()[7], np.log(4 / 4)) and np.isclose(counts.idf()[1], np.log(4))
