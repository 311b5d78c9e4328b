"""The idf matrix (issue 46 items 0 and 1): every route into BERTScore x every idf spelling gives
the numbers and the signature of the API given the same weights.

Spellings: none, ``--idf`` (the references), ``--idf-file F`` (a file of other references'
counts), ``--idf --idf-file F`` (the file: an idf file implies idf and wins), ``--write-idf G``
then ``--idf-file G`` (G counted from these references: the numbers of ``--idf``). Routes: the
API ``BERTScore``, ``score_iter`` / ``chunk_results``, the drop-in ``rapidscore.bert_score``,
the CLI (``-c/-r`` batch, ``--json``, ``--input`` streamed, ``-c/-r`` streamed), the HTTP app,
Ray and the adapters. Numbers are compared EXACTLY (float32 equal): every route weighs with the
same idf table (``IdfSource``) and the same kernels.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from rapidscore.bertscore import BERTScore
from rapidscore.bertscore.idf import DocumentFrequencies
from rapidscore.bertscore.idf_source import IdfSource, resolve_idf_source
from rapidscore.cli import main

CANDS = [f"candidate {i}: the {'quick ' * (i % 3)}brown fox {i % 5} jumps over the lazy dog" for i in range(14)]
REFS = [f"reference {i}: a {'slow ' * (i % 4)}red fox {i % 3} sleeps under the old tree" for i in range(14)]
OTHER = [f"another corpus {i}: the fox and the dog {'never ' * (i % 2)}meet by the river" for i in range(9)]
LAYER = 2
BATCH = 64  # the CLI's default -b: the reference's padding, reproduced by reference_batch_size


@pytest.fixture(scope="module")
def files(tiny_bert, tmp_path_factory) -> dict:
    """The inputs, an idf file of OTHER's counts, and an idf file of REFS' counts."""
    root = tmp_path_factory.mktemp("idf-routes")
    (root / "c.txt").write_text("".join(f"{c}\n" for c in CANDS), encoding="utf-8")
    (root / "r.txt").write_text("".join(f"{r}\n" for r in REFS), encoding="utf-8")
    (root / "pairs.jsonl").write_text("".join(json.dumps({"candidate": c, "reference": r}) + "\n"
                                              for c, r in zip(CANDS, REFS)), encoding="utf-8")
    scorer = BERTScore(tiny_bert, LAYER, idf=True)
    scorer.document_frequencies([("", r) for r in OTHER]).save(root / "other.json")
    return {"root": root, "c": str(root / "c.txt"), "r": str(root / "r.txt"), "pairs": str(root / "pairs.jsonl"),
            "other": str(root / "other.json")}


def api(model: str, idf, batch: int | None = BATCH):
    """The API's numbers (3, N) and signature, the reference every route is held to."""
    result = BERTScore(model, LAYER, idf=idf).score(CANDS, REFS, reference_batch_size=batch)
    return np.stack([result.precision, result.recall, result.f1]), result.signature


def scores(rows) -> np.ndarray:
    return np.array([[r["precision"] for r in rows], [r["recall"] for r in rows], [r["f1"] for r in rows]],
                    dtype=np.float32)


def read_jsonl(path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]


# -- the one decision -----------------------------------------------------------------------------

def test_every_spelling_resolves_to_one_source(files):
    other = files["other"]
    counts = DocumentFrequencies.load(other)
    digest = hashlib.sha256(Path(other).read_bytes()).hexdigest()
    assert resolve_idf_source(False).signature_value == resolve_idf_source(None).signature_value == "no"
    assert resolve_idf_source(True).signature_value == "yes"
    assert resolve_idf_source({1: 1.0}).signature_value == "dict"
    for spelling in (other, Path(other), counts, resolve_idf_source(other)):
        source = resolve_idf_source(spelling)
        assert source.kind == "file" and source.digest == digest, spelling  # save's bytes: the file's sha256
        assert source.signature_value == f"file={digest[:8]}"
    # the CLI's and the service's pair: an idf file implies idf, and with idf it is the file
    assert resolve_idf_source(False, other) == resolve_idf_source(True, other) == resolve_idf_source(other)
    with pytest.raises(ValueError, match="not both"):
        resolve_idf_source({1: 1.0}, other)
    with pytest.raises(TypeError, match="idf must be"):
        resolve_idf_source(1)


# -- the API ------------------------------------------------------------------------------------

def test_api_takes_an_idf_file_a_path_and_counts_alike(tiny_bert, files):
    other = files["other"]
    counts = DocumentFrequencies.load(other)
    expected, signature = api(tiny_bert, other)
    assert "|idf:file=" in signature
    for spelling in (Path(other), counts, IdfSource.from_counts(counts)):
        assert np.array_equal(api(tiny_bert, spelling)[0], expected)
        assert api(tiny_bert, spelling)[1] == signature
    # the same numbers as the counts' weights given as a dict (signed idf:dict: another spelling)
    by_dict, dict_signature = api(tiny_bert, counts.idf())
    assert np.array_equal(by_dict, expected) and dict_signature == signature.replace(
        signature.split("|")[2], "idf:dict")
    # and not the numbers of idf from the references, nor of no idf
    assert not np.array_equal(api(tiny_bert, True)[0], expected)
    assert not np.array_equal(api(tiny_bert, False)[0], expected)
    scorer = BERTScore(tiny_bert, LAYER, idf=other)
    assert scorer.idf is True and scorer.weights_fixed and "_idf_" in scorer.hash


def test_write_idf_then_the_file_equals_idf_from_the_references(tiny_bert, files, tmp_path):
    # --write-idf G over the references, then G: the numbers of idf=True (its own signature)
    out = tmp_path / "refs.json"
    assert main(["bertscore", "-m", tiny_bert, "-l", str(LAYER), "-q", "-c", files["c"], "-r", files["r"],
                 "--write-idf", str(out)]) == 0
    assert np.array_equal(api(tiny_bert, str(out))[0], api(tiny_bert, True)[0])
    assert api(tiny_bert, str(out))[1] == api(tiny_bert, True)[1].replace(
        "|idf:yes|", f"|idf:file={hashlib.sha256(out.read_bytes()).hexdigest()[:8]}|")


def test_score_iter_and_chunks_equal_the_api(tiny_bert, files):
    from rapidscore.bertscore.streaming import chunk_results

    pairs = list(zip(CANDS, REFS))
    for idf, call_idf in [(False, None), (True, None), (True, files["other"]), (files["other"], None),
                          (True, DocumentFrequencies.load(files["other"]))]:
        expected_idf = call_idf if call_idf is not None else idf
        expected, signature = api(tiny_bert, expected_idf)
        scorer = BERTScore(tiny_bert, LAYER, idf=idf)
        got = np.array(list(scorer.score_iter(pairs, chunk_size=5, idf=call_idf, reference_batch_size=BATCH)),
                       dtype=np.float32).T
        assert np.array_equal(got, expected), (idf, call_idf)
        signatures = {result.signature for _chunk, result in chunk_results(
            scorer, pairs, chunk_size=5, idf=call_idf, reference_batch_size=BATCH)}
        assert signatures == {signature}, (idf, call_idf)


def test_the_drop_in_takes_idf_as_bert_score_does(tiny_bert, files):
    from rapidscore import bert_score

    for idf in (False, True, files["other"]):
        (P, R, F), code = bert_score.score(CANDS, REFS, model_type=tiny_bert, num_layers=LAYER, idf=idf,
                                           batch_size=BATCH, return_hash=True)
        expected, _ = api(tiny_bert, idf)
        assert np.array_equal(np.stack([P.numpy(), R.numpy(), F.numpy()]), expected), idf
        assert code == BERTScore(tiny_bert, LAYER, idf=idf).hash


# -- the command line --------------------------------------------------------------------------

SPELLINGS = {  # the CLI's flags -> what the API is given
    "none": ([], lambda f: False),
    "idf": (["--idf"], lambda f: True),
    "idf-file": (["--idf-file", "{other}"], lambda f: f["other"]),
    "both": (["--idf", "--idf-file", "{other}"], lambda f: f["other"]),
}


def _flags(spelling: str, files: dict) -> tuple[list[str], object]:
    flags, api_idf = SPELLINGS[spelling]
    return [flag.format(**files) for flag in flags], api_idf(files)


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_cli_batch_and_json(tiny_bert, files, spelling, capsys):
    flags, idf = _flags(spelling, files)
    expected, signature = api(tiny_bert, idf)
    base = ["bertscore", "-m", tiny_bert, "-l", str(LAYER), "-c", files["c"], "-r", files["r"], *flags]
    assert main([*base, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert np.array_equal(scores([{"precision": p, "recall": r, "f1": f} for p, r, f in zip(
        document["precision"], document["recall"], document["f1"])]), expected)
    assert document["signature"] == signature
    hash_ = BERTScore(tiny_bert, LAYER, idf=idf, use_fast_tokenizer=True).hash  # the reference CLI's default
    assert document["hash"] == hash_ and ("_idf_" in hash_) == (spelling != "none")
    assert main([*base, "-s"]) == 0  # the reference CLI's lines: the hash, then P R F per pair
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(hash_ + " P: ")
    assert np.allclose(np.array([line.split("\t") for line in lines[1:]], dtype=np.float64).T, expected,
                       atol=5e-7)  # six decimals


@pytest.mark.parametrize("spelling", SPELLINGS)
@pytest.mark.parametrize("route", ["input", "files"])
def test_cli_streamed_outputs(tiny_bert, files, spelling, route, tmp_path):
    flags, idf = _flags(spelling, files)
    source = ["--input", files["pairs"]] if route == "input" else ["-c", files["c"], "-r", files["r"]]
    out = tmp_path / "out.jsonl"
    assert main(["bertscore", "-m", tiny_bert, "-l", str(LAYER), "-q", *source, *flags, "--chunk-size", "4",
                 "--output", str(out)]) == 0
    assert np.array_equal(scores(read_jsonl(out)), api(tiny_bert, idf)[0])


def test_cli_write_idf_then_idf_file_equals_idf(tiny_bert, files, tmp_path):
    base = ["bertscore", "-m", tiny_bert, "-l", str(LAYER), "-q", "-c", files["c"], "-r", files["r"]]
    assert main([*base, "--write-idf", str(tmp_path / "g.json")]) == 0
    assert main([*base, "--idf-file", str(tmp_path / "g.json"), "--output", str(tmp_path / "a.jsonl")]) == 0
    assert main([*base, "--idf", "--output", str(tmp_path / "b.jsonl")]) == 0
    assert read_jsonl(tmp_path / "a.jsonl") == read_jsonl(tmp_path / "b.jsonl")
    assert np.array_equal(scores(read_jsonl(tmp_path / "a.jsonl")), api(tiny_bert, True)[0])


def test_cli_single_pair_with_an_idf_file(tiny_bert, files, capsys):
    # idf from a file needs no corpus: one pair of strings can be weighted by it
    assert main(["bertscore", "-m", tiny_bert, "-l", str(LAYER), "-c", CANDS[0], "-r", REFS[0], "--idf-file",
                 files["other"], "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    result = BERTScore(tiny_bert, LAYER, idf=files["other"]).score(CANDS[:1], REFS[:1], reference_batch_size=BATCH)
    assert document["f1"] == result.f1.tolist() and document["signature"] == result.signature
    assert main(["bertscore", "-m", tiny_bert, "-l", str(LAYER), "-c", CANDS[0], "-r", REFS[0], "--idf"]) == 2
    assert "more than a single pair" in capsys.readouterr().err


# -- the resume state records what idf was computed from (item 1) ---------------------------------

def _resume_state_settings(out: Path) -> dict:
    return json.loads(Path(f"{out}.resume.json").read_text())["settings"]


def test_a_resume_after_an_edited_reference_is_refused(tiny_bert, files, tmp_path, capsys, monkeypatch):
    from rapidscore.common.stream_io import StreamWriter

    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(Path(files["pairs"]).read_text())
    out = tmp_path / "out.jsonl"
    argv = ["bertscore", "-m", tiny_bert, "-l", str(LAYER), "-q", "--input", str(pairs), "--idf", "--chunk-size",
            "4", "--output", str(out)]
    write = StreamWriter.write

    def write_then_stop(self, *args, **kwargs):  # a run interrupted after its first chunk
        write(self, *args, **kwargs)
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(StreamWriter, "write", write_then_stop)
        assert main(argv) == 130
    recorded = _resume_state_settings(out)["idf source sha256"]
    assert recorded.startswith("references ")
    # a reference after the written rows edited, the row count the same
    rows = read_jsonl(pairs)
    rows[-1]["reference"] = rows[-1]["reference"] + " edited"
    pairs.write_text("".join(json.dumps(row) + "\n" for row in rows))
    capsys.readouterr()
    assert main([*argv, "--resume"]) == 2
    line = capsys.readouterr().err.strip()
    assert "idf source sha256" in line and "without --resume" in line, line
    # the unedited input resumes (the digest is of the column, not of the run)
    rows[-1]["reference"] = rows[-1]["reference"][:-len(" edited")]
    pairs.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert main([*argv, "--resume"]) == 0
    assert np.array_equal(scores(read_jsonl(out)), api(tiny_bert, True)[0])


def test_the_resume_state_names_an_idf_file_by_its_content(tiny_bert, files, tmp_path, monkeypatch):
    from rapidscore.common.stream_io import StreamWriter

    out = tmp_path / "out.jsonl"
    argv = ["bertscore", "-m", tiny_bert, "-l", str(LAYER), "-q", "--input", files["pairs"], "--idf-file",
            files["other"],
            "--chunk-size", "4", "--output", str(out)]

    def stop(self, *args, **kwargs):  # interrupted before the output is finished: the state stays
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(StreamWriter, "close", stop)
        assert main(argv) == 130
    digest = hashlib.sha256(Path(files["other"]).read_bytes()).hexdigest()
    assert _resume_state_settings(out)["idf source sha256"] == f"idf file {digest}"


# -- HTTP ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def http(tiny_bert, files):
    pytest.importorskip("fastapi", reason="the [serve] extra (fastapi) is not installed")
    from fastapi.testclient import TestClient

    from rapidscore.serve.app import create_app
    from rapidscore.serve.config import ServeConfig
    from rapidscore.serve.service import ScoringService

    service = ScoringService(ServeConfig(model=tiny_bert, layer=(LAYER,), warmup=False, workers=1,
                                         idf_file=(files["other"],)))
    service.start()
    with TestClient(create_app(service=service, start=False)) as client:  # its lifespan closes the service
        yield client


@pytest.mark.slow  # starts the service
@pytest.mark.parametrize(("body", "idf"), [
    ({}, False), ({"idf": True}, True), ({"idf_file": "other"}, "other"), ({"idf": True, "idf_file": "other"}, "other"),
])
def test_http_equals_the_api(tiny_bert, files, http, body, idf):
    idf = files["other"] if idf == "other" else idf
    answer = http.post("/v1/bertscore", json={"candidates": CANDS, "references": REFS, **body})
    assert answer.status_code == 200, answer.text
    expected, signature = api(tiny_bert, idf, batch=None)
    assert np.array_equal(scores([{"precision": p, "recall": r, "f1": f} for p, r, f in zip(
        answer.json()["precision"], answer.json()["recall"], answer.json()["f1"])]), expected)
    assert answer.json()["signature"] == signature


# -- Ray and the adapters -------------------------------------------------------------------------

def test_the_metric_engine_signs_a_dataset_pass_as_the_references(tiny_bert, files):
    from rapidscore.bertscore.metric import METRIC

    counts = BERTScore(tiny_bert, LAYER, idf=True).document_frequencies(list(zip(CANDS, REFS)))
    for idf, expected_idf in [(IdfSource.references(counts), True), (files["other"], files["other"]),
                              (counts, counts), (None, False)]:
        engine = METRIC.build(model=tiny_bert, layer=LAYER, idf=idf, reference_batch_size=BATCH)
        got = METRIC.score(engine, {"candidate": CANDS, "reference": REFS})
        expected, signature = api(tiny_bert, expected_idf)
        assert np.array_equal(np.stack([got["precision"], got["recall"], got["f1"]]), expected), idf
        assert engine.signature == signature


@pytest.mark.slow  # starts Ray
def test_ray_equals_the_api(tiny_bert, files):
    ray = pytest.importorskip("ray", reason="the [ray] extra (part of [test])")
    from rapidscore.integrations.ray import score_dataset

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             _node_ip_address="127.0.0.1")
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False
        rows = [{"id": i, "candidate": c, "reference": r} for i, (c, r) in enumerate(zip(CANDS, REFS))]
        for idf in (False, True, files["other"]):
            ds = ray.data.from_items(rows, override_num_blocks=3)
            scored = sorted(score_dataset(ds, model=tiny_bert, layer=LAYER, idf=idf, batch_size=5, num_cpus=1,
                                          num_threads=1).take_all(), key=lambda row: row["id"])
            assert np.array_equal(scores(scored), api(tiny_bert, idf, batch=None)[0]), idf
    finally:
        ray.shutdown()


@pytest.mark.slow  # imports evaluate, mlflow, deepeval and ragas
def test_the_adapters_equal_the_api(tiny_bert, files):
    import evaluate

    from rapidscore.integrations.hf_evaluate import module_path

    module = evaluate.load(module_path("bertscore"))
    for idf in (False, True, files["other"]):
        out = module.compute(predictions=CANDS, references=[[r] for r in REFS], model_type=tiny_bert,
                             num_layers=LAYER, idf=idf)
        expected, signature = api(tiny_bert, idf)
        assert np.array_equal(scores([{"precision": p, "recall": r, "f1": f} for p, r, f in zip(
            out["precision"], out["recall"], out["f1"])]), expected), idf
        assert out["hashcode"] == signature

    from rapidscore.integrations.mlflow import bertscore_scorers

    f1_scorer = bertscore_scorers("f1", model=tiny_bert, layer=LAYER, idf=files["other"])[0]
    single = BERTScore(tiny_bert, LAYER, idf=files["other"]).score(CANDS[:1], REFS[:1])
    assert np.float32(f1_scorer(outputs=CANDS[0], expectations={"expected_response": REFS[0]})) == single.f1[0]

    from deepeval.test_case import LLMTestCase

    from rapidscore.integrations.deepeval import BERTScoreMetric

    metric = BERTScoreMetric(scorer=BERTScore(tiny_bert, LAYER, idf=files["other"]))
    assert np.float32(metric.measure(LLMTestCase(input="q", actual_output=CANDS[0], expected_output=REFS[0]))) \
        == single.f1[0]
