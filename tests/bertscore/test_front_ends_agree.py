"""The two disagreements between BERTScore's front ends (issue 47), gone on each of them: the
API, the drop-in ``rapidscore.bert_score``, the CLI, HTTP and Ray.

1. The embedded all-MiniLM-L6-v2 rescales with no ``lang`` (its baseline is English):
   ``BERTScore(rescale_with_baseline=True)`` asked for ``lang``, and ``lang="en"`` then swapped
   the model for roberta-large, while the CLI and the service rescaled it. ``lang`` never changes
   a model the user named; ``lang`` alone picks bert-score's model, as bert-score does.
2. A signature describes what ran: idf over a single reference gives every token weight 0, and
   the sentences fall back to uniform weights; the signature said ``idf:yes`` (a warning in a
   log only). It now says ``idf:yes+uniform``.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator

import numpy as np
import pytest

from rapidscore.errors import RapidscoreWarning

CANDS = ["The cat sat on the mat.", "Stocks fell sharply on Monday.", "It rained all day."]
REFS = ["A cat was sitting on the mat.", "Shares dropped on Monday.", "The day was wet."]


def _arrays(document: dict) -> np.ndarray:
    return np.array([document["precision"], document["recall"], document["f1"]], dtype=np.float32)


def _result_arrays(result) -> np.ndarray:
    return np.array([result.precision, result.recall, result.f1], dtype=np.float32)


def _files(tmp_path, cands: list[str], refs: list[str]) -> tuple[str, str]:
    cand, ref = tmp_path / "cand.txt", tmp_path / "ref.txt"
    cand.write_text("\n".join(cands) + "\n", encoding="utf-8")
    ref.write_text("\n".join(refs) + "\n", encoding="utf-8")
    return str(cand), str(ref)


def _cli_json(capsys, *argv: str) -> dict:
    from rapidscore.cli import main

    assert main(["bertscore", *argv, "--json", "-q"]) == 0
    return json.loads(capsys.readouterr().out)


class _Http:
    """The service in process (its real app, over a test client) on ``model``."""

    def __init__(self, model: str) -> None:
        pytest.importorskip("fastapi", reason="the [serve] extra (fastapi) is not installed")
        from fastapi.testclient import TestClient

        from rapidscore.serve.app import create_app
        from rapidscore.serve.config import ServeConfig
        from rapidscore.serve.service import ScoringService

        self.service = ScoringService(ServeConfig(model=model, warmup=False, workers=1, ner_label_similarity="exact"))
        self.service.start()
        self.client = TestClient(create_app(service=self.service, start=False))

    def bertscore(self, cands: list[str], refs: list[str], **options) -> dict:
        answer = self.client.post("/v1/bertscore", json={"candidates": cands, "references": refs, **options})
        assert answer.status_code == 200, answer.text
        return answer.json()


@pytest.fixture(scope="module")
def minilm_http() -> Iterator[_Http]:
    http = _Http("all-MiniLM-L6-v2")
    yield http
    http.service.close()


@pytest.fixture(scope="module")
def tiny_http(tiny_model_path) -> Iterator[_Http]:
    http = _Http(str(tiny_model_path("bert")))
    yield http
    http.service.close()


# ---- 1. the embedded model rescales with no lang; lang never changes a named model ---------------

def test_lang_picks_the_model_only_when_none_is_named() -> None:
    from rapidscore.bertscore.settings import choose_model
    from rapidscore.encoder.model_source import DEFAULT_MODEL

    assert choose_model(None, None) == DEFAULT_MODEL
    assert choose_model(None, "en") == "roberta-large"  # bert-score's rule, kept by the drop-in
    assert choose_model(None, "zh") == "bert-base-chinese"
    assert choose_model("all-MiniLM-L6-v2", "en") == "all-MiniLM-L6-v2"  # named: lang picks the baseline only


def test_another_model_still_needs_lang_to_rescale(tiny_bert) -> None:
    from rapidscore.bertscore.settings import resolve_settings

    with pytest.raises(ValueError, match="needs lang"):
        resolve_settings(tiny_bert, rescale_with_baseline=True)


@pytest.mark.slow  # the embedded MiniLM on every front end
def test_the_embedded_model_rescales_without_lang_everywhere(tmp_path, capsys, minilm_http) -> None:
    import rapidscore.bert_score as drop_in
    from rapidscore.bertscore import BERTScore
    from rapidscore.integrations.ray import BERTScoreBatch

    expected = BERTScore("all-MiniLM-L6-v2", lang="en", rescale_with_baseline=True)
    assert expected.model_name == "all-MiniLM-L6-v2"  # lang kept the named model
    want = _result_arrays(expected.score(CANDS, REFS))
    api = BERTScore(rescale_with_baseline=True)  # used to ask for lang
    assert api.settings.baseline_path == expected.settings.baseline_path and api.baseline is not None
    assert np.array_equal(_result_arrays(api.score(CANDS, REFS)), want)
    assert "rescaled:yes" in api.signature

    # the drop-in (exact bert-score, with padding batches of 64 here: three pairs fit one batch)
    P, R, F = drop_in.score(CANDS, REFS, model_type="all-MiniLM-L6-v2", rescale_with_baseline=True)
    drop_in_want = _result_arrays(expected.score(CANDS, REFS, reference_batch_size=64))
    np.testing.assert_array_equal(np.stack([P.numpy(), R.numpy(), F.numpy()]), drop_in_want)
    scorer = drop_in.BERTScorer(model_type="all-MiniLM-L6-v2", rescale_with_baseline=True)
    np.testing.assert_array_equal(np.stack([t.numpy() for t in scorer.score(CANDS, REFS)]), drop_in_want)

    cand, ref = _files(tmp_path, CANDS, REFS)
    document = _cli_json(capsys, "-c", cand, "-r", ref, "--rescale_with_baseline", "-b", "0")
    assert np.array_equal(_arrays(document), want) and "rescaled:yes" in document["signature"]

    document = minilm_http.bertscore(CANDS, REFS, rescale_with_baseline=True)
    assert np.array_equal(_arrays(document), want)

    out = BERTScoreBatch("cand", "ref", model="all-MiniLM-L6-v2", rescale_with_baseline=True)(
        {"cand": np.array(CANDS, dtype=object), "ref": np.array(REFS, dtype=object)})
    assert np.array_equal(np.array([out["precision"], out["recall"], out["f1"]], dtype=np.float32), want)


# ---- 2. a signature says when idf fell back to uniform weights -----------------------------------

def test_idf_over_one_reference_says_uniform_in_the_api(tiny_bert) -> None:
    from rapidscore.bertscore import BERTScore

    scorer = BERTScore(tiny_bert, 2, idf=True)
    with pytest.warns(RapidscoreWarning, match="uniform weights"):
        result = scorer.score(CANDS[:1], REFS[:1])
    assert "|idf:yes+uniform|" in result.signature
    assert "|idf:yes|" in scorer.signature  # the scorer's: what its settings ask for
    with warnings.catch_warnings():
        warnings.simplefilter("error", RapidscoreWarning)  # no fallback over several references
        assert "|idf:yes|" in scorer.score(CANDS, REFS).signature


def test_idf_over_one_reference_says_uniform_on_the_device_engine(tiny_bert) -> None:
    pytest.importorskip("torch", reason="the device engine runs torch")
    from rapidscore.bertscore import BERTScore

    scorer = BERTScore(tiny_bert, 2, idf=True, backend="torch", device_engine=True)
    with pytest.warns(RapidscoreWarning, match="uniform weights"):
        assert "|idf:yes+uniform|" in scorer.score(CANDS[:1], REFS[:1]).signature


def test_a_micro_batch_signs_each_request_by_its_own_sentences(tiny_bert) -> None:
    # finish_plans scores many requests at once: only the ones whose sentences fell back say so
    from rapidscore.bertscore import BERTScore
    from rapidscore.bertscore.idf import DocumentFrequencies

    counts = DocumentFrequencies(tokenizer=tiny_bert)
    scorer = BERTScore(tiny_bert, 2)
    counts.add(scorer.encoder.tokenize(["the cat", "the cat sat"]))  # "the", "cat": in every document
    weighted = BERTScore(tiny_bert, 2, idf=counts)
    plans = [weighted.plan(["the cat"], ["cat the"]), weighted.plan(CANDS, REFS)]
    texts = list(dict.fromkeys(t for plan in plans for t in plan.texts))
    store = weighted.encoder.encode_unique(texts)
    rows = [np.array([texts.index(t) for t in plan.texts]) for plan in plans]
    with pytest.warns(RapidscoreWarning, match="uniform weights"):
        first, second = weighted.finish_plans(plans, store, rows, [0, 0])
    assert "|idf:file=" in first.signature and first.signature.split("|")[2].endswith("+uniform")
    assert second.signature == weighted.signature
    with pytest.warns(RapidscoreWarning, match="uniform weights"):
        assert weighted.score(["the cat"], ["cat the"]).signature == first.signature


def test_idf_over_one_reference_says_uniform_in_the_cli(tiny_bert, tmp_path, capsys) -> None:
    cand, ref = _files(tmp_path, CANDS[:1], REFS[:1])
    with pytest.warns(RapidscoreWarning, match="uniform weights"):
        document = _cli_json(capsys, "-c", cand, "-r", ref, "-m", tiny_bert, "-l", "2", "--idf")
    assert "|idf:yes+uniform|" in document["signature"]
    cand, ref = _files(tmp_path, CANDS, REFS)
    assert "|idf:yes|" in _cli_json(capsys, "-c", cand, "-r", ref, "-m", tiny_bert, "-l", "2", "--idf")["signature"]


def test_idf_over_one_reference_says_uniform_over_http(tiny_http, tiny_bert) -> None:
    from rapidscore.bertscore import BERTScore

    with pytest.warns(RapidscoreWarning, match="uniform weights"):
        expected = BERTScore(tiny_bert, idf=True).score(CANDS[:1], REFS[:1])
    with warnings.catch_warnings():  # the server's log has it; the warning is not the point here
        warnings.simplefilter("ignore", RapidscoreWarning)
        document = tiny_http.bertscore(CANDS[:1], REFS[:1], idf=True)
    assert "|idf:yes+uniform|" in document["signature"] and document["signature"] == expected.signature
    assert np.array_equal(_arrays(document), _result_arrays(expected))
    assert "|idf:yes|" in tiny_http.bertscore(CANDS, REFS, idf=True)["signature"]


def test_idf_over_one_reference_says_uniform_in_a_ray_batch(tiny_bert) -> None:
    # Ray's rows carry no signature: the results its engine scores carry it (the streamed chunks)
    from rapidscore.bertscore import BERTScore
    from rapidscore.integrations.ray import BERTScoreBatch

    counts = BERTScore(tiny_bert, 2, idf=True).document_frequencies([(CANDS[0], REFS[0])])  # one document
    batch = BERTScoreBatch("cand", "ref", model=tiny_bert, layer=2, idf=counts)
    with pytest.warns(RapidscoreWarning, match="uniform weights"):
        results = [result for _chunk, result in batch.metric.chunks(batch.engine, [(CANDS[0], [REFS[0]])])]
    assert len(results) == 1 and results[0].signature.split("|")[2].endswith("+uniform")
