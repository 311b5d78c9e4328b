"""BERTScore's settings are resolved once per scorer, whatever the front end (issue 47, item 1).

``resolve_settings`` (and the encoder's ``resolve_encoder_settings``) are replaced by counting
wrappers wherever a module holds them; building and calling a scorer through the API, the CLI,
an HTTP request and a Ray batch each resolve exactly once, and the object that reaches the
runtime is the one the signature was made from.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator

import numpy as np
import pytest

CANDS = ["The cat sat on the mat.", "Stocks fell sharply on Monday.", "It rained all day."]
REFS = ["A cat was sitting on the mat.", "Shares dropped on Monday.", "The day was wet."]


@pytest.fixture
def resolutions(monkeypatch) -> Iterator[Counter]:
    """Counts of ``resolve_settings`` and ``resolve_encoder_settings`` calls, by function name:
    each is wrapped in every loaded module that holds it (a module may import the name)."""
    from rapidscore.bertscore import settings as bertscore_settings
    from rapidscore.encoder import settings as encoder_settings

    counts: Counter = Counter()
    for original in (bertscore_settings.resolve_settings, encoder_settings.resolve_encoder_settings):
        def counting(*args, _original=original, **kwargs):
            counts[_original.__name__] += 1
            return _original(*args, **kwargs)

        for module in list(sys.modules.values()):
            if module is not None and module.__name__.startswith("rapidscore") \
                    and getattr(module, original.__name__, None) is original:
                monkeypatch.setattr(module, original.__name__, counting)
    yield counts


def _check_runtime_settings(scorer) -> None:
    """The encoder runs the settings' encoder settings, and the signature says what they say."""
    from rapidscore.common.signature import Signature

    assert scorer.encoder.settings == scorer.settings.encoder
    fields = Signature.parse(scorer.signature).as_dict()
    encoder = scorer.settings.encoder
    assert fields["model"] == scorer.settings.model and fields["layer"] == str(scorer.settings.layer)
    assert fields["precision"] == encoder.precision != "fast"
    assert fields["backend"] == f"{encoder.backend}-{encoder.device}"
    assert fields["idf"] == scorer.settings.idf.signature_value
    assert fields["rescaled"] == ("yes" if scorer.settings.rescale_with_baseline else "no")


@pytest.mark.slow  # the embedded MiniLM (the model with a baseline and no lang)
def test_the_api_resolves_once_and_runs_what_it_signs(resolutions) -> None:
    from rapidscore.bertscore import BERTScore

    scorer = BERTScore(precision="fast", idf=True, rescale_with_baseline=True)
    result = scorer.score(CANDS, REFS)
    assert resolutions == {"resolve_settings": 1, "resolve_encoder_settings": 1}
    assert result.signature == scorer.signature
    _check_runtime_settings(scorer)
    assert scorer.settings.rescale_with_baseline and scorer.settings.baseline_path.is_file()
    # the same scorer from the same settings: nothing resolved again, the same numbers
    again = BERTScore.from_settings(scorer.settings).score(CANDS, REFS)
    assert resolutions == {"resolve_settings": 1, "resolve_encoder_settings": 1}
    assert np.array_equal(again.f1, result.f1) and again.signature == result.signature


@pytest.mark.slow  # the embedded MiniLM
def test_the_cli_resolves_once(resolutions, tmp_path, capsys) -> None:
    import json

    from rapidscore.cli import main

    cand, ref = tmp_path / "cand.txt", tmp_path / "ref.txt"
    cand.write_text("\n".join(CANDS) + "\n", encoding="utf-8")
    ref.write_text("\n".join(REFS) + "\n", encoding="utf-8")
    assert main(["bertscore", "-c", str(cand), "-r", str(ref), "--idf", "--rescale_with_baseline",
                 "--precision", "fast", "--json", "-q"]) == 0
    assert resolutions == {"resolve_settings": 1, "resolve_encoder_settings": 1}
    document = json.loads(capsys.readouterr().out)
    assert "|idf:yes|rescaled:yes|" in document["signature"]


@pytest.mark.slow  # the embedded MiniLM in a service
def test_an_http_engine_is_resolved_once_and_reused(resolutions) -> None:
    pytest.importorskip("fastapi", reason="the [serve] extra (fastapi) is not installed")
    from fastapi.testclient import TestClient

    from rapidscore.serve.app import create_app
    from rapidscore.serve.config import ServeConfig
    from rapidscore.serve.service import ScoringService

    service = ScoringService(ServeConfig(model="all-MiniLM-L6-v2", warmup=False, workers=1,
                                         ner_label_similarity="exact"))
    service.start()
    try:
        client = TestClient(create_app(service=service, start=False))
        resolutions.clear()  # what the service loaded at start is not a request's
        body = {"candidates": CANDS, "references": REFS, "idf": True, "rescale_with_baseline": True}
        first = client.post("/v1/bertscore", json=body)
        assert first.status_code == 200, first.text
        assert resolutions["resolve_settings"] == 1 and resolutions["resolve_encoder_settings"] <= 1
        second = client.post("/v1/bertscore", json=body)  # equal options: the same engine
        assert second.json() == first.json()
        assert resolutions["resolve_settings"] == 1 and resolutions["resolve_encoder_settings"] <= 1
    finally:
        service.close()


def test_a_ray_batch_resolves_once_per_engine(resolutions, tiny_bert) -> None:
    from rapidscore.bertscore import BERTScore
    from rapidscore.integrations.ray import BERTScoreBatch

    counts = BERTScore(tiny_bert, 2, idf=True).document_frequencies(list(zip(CANDS, REFS)))
    resolutions.clear()
    batch = BERTScoreBatch("cand", "ref", model=tiny_bert, layer=2, idf=counts)
    out = batch({"cand": np.array(CANDS, dtype=object), "ref": np.array(REFS, dtype=object)})
    out = batch({"cand": np.array(CANDS, dtype=object), "ref": np.array(REFS, dtype=object)})
    assert resolutions == {"resolve_settings": 1, "resolve_encoder_settings": 1}
    expected = BERTScore(tiny_bert, 2, idf=counts).score(CANDS, REFS)
    assert np.array_equal(out["f1"], expected.f1)


def test_equal_settings_are_equal_and_hash_alike(tiny_bert, tmp_path) -> None:
    # the service's engine key and the encoder cache key are these objects: spellings that run the
    # same thing are equal, and an idf file equals the counts it holds
    from pathlib import Path

    from rapidscore.bertscore import BERTScore
    from rapidscore.bertscore.settings import resolve_settings

    counts = BERTScore(tiny_bert, 2, idf=True).document_frequencies(list(zip(CANDS, REFS)))
    counts.save(tmp_path / "refs.idf.json")
    by_file = resolve_settings(tiny_bert, 2, idf=str(tmp_path / "refs.idf.json"))
    by_flag = resolve_settings(tiny_bert, 2, idf=True, idf_file=Path(tmp_path / "refs.idf.json"))
    by_counts = resolve_settings(tiny_bert, 2, idf=counts)
    assert by_file == by_flag == by_counts and len({by_file, by_flag, by_counts}) == 1
    assert resolve_settings(tiny_bert, 2, idf=True) != by_file != resolve_settings(tiny_bert, 2)
    assert resolve_settings(tiny_bert, 2, idf={1: 2.0}) == resolve_settings(tiny_bert, 2, idf={1: 2.0})
    assert resolve_settings(tiny_bert, 2, idf={1: 2.0}) != resolve_settings(tiny_bert, 2, idf={1: 3.0})
    assert resolve_settings(tiny_bert, None) == resolve_settings(tiny_bert, 4)  # layer=None: the last (of 4)


# -- a second metric: NRR resolves its settings once per call, request and batch too --------------

GENERATED = ["The cat sat on the mat.", "I cannot answer that.", "It rained all day."]
GROUND_TRUTH = ["A cat was sitting on the mat.", "Shares dropped on Monday.", "The day was wet."]


@pytest.fixture
def nrr_settings_calls(monkeypatch) -> Counter:
    """Calls of the NRR metric's ``settings`` (the contract's one resolution of its options)."""
    from rapidscore.metrics import get_metric

    metric = get_metric("nrr")
    calls: Counter = Counter()
    original = type(metric).settings

    def counting(self, **options):
        calls["settings"] += 1
        return original(self, **options)

    monkeypatch.setattr(type(metric), "settings", counting)
    return calls


def test_the_nrr_api_resolves_its_encoder_once(resolutions, tiny_bert) -> None:
    from rapidscore.nrr import negative_rejection
    from rapidscore.streaming import score_stream

    result = negative_rejection(GENERATED, GROUND_TRUTH, threshold=0.5, model=tiny_bert)
    assert resolutions == {"resolve_encoder_settings": 1}
    resolutions.clear()
    rows = list(score_stream("nrr", list(zip(GENERATED, GROUND_TRUTH)), model=tiny_bert, threshold=0.5))
    assert resolutions == {"resolve_encoder_settings": 1}
    assert [row["similarity"] for row in rows] == result.similarities.tolist()


def test_the_nrr_cli_resolves_its_encoder_once(resolutions, tiny_bert, tmp_path, capsys) -> None:
    import json

    from rapidscore.cli import main

    generated, truth = tmp_path / "generated.txt", tmp_path / "truth.txt"
    generated.write_text("\n".join(GENERATED) + "\n", encoding="utf-8")
    truth.write_text("\n".join(GROUND_TRUTH) + "\n", encoding="utf-8")
    assert main(["nrr", "--generated", str(generated), "--references", str(truth), "--model", tiny_bert,
                 "--json", "-q"]) == 0
    assert resolutions == {"resolve_encoder_settings": 1}
    assert "signature" in json.loads(capsys.readouterr().out)


def test_an_nrr_http_engine_is_resolved_once_and_reused(resolutions, nrr_settings_calls, tiny_bert) -> None:
    pytest.importorskip("fastapi", reason="the [serve] extra (fastapi) is not installed")
    from fastapi.testclient import TestClient

    from rapidscore.serve.app import create_app
    from rapidscore.serve.config import ServeConfig
    from rapidscore.serve.service import ScoringService

    service = ScoringService(ServeConfig(model=tiny_bert, metrics=("nrr",), warmup=False, workers=1))
    service.start()
    try:
        client = TestClient(create_app(service=service, start=False))
        resolutions.clear()  # what the service loaded at start is not a request's
        nrr_settings_calls.clear()
        body = {"generated": GENERATED, "references": GROUND_TRUTH, "threshold": 0.5}
        first = client.post("/v1/nrr", json=body)
        assert first.status_code == 200, first.text
        second = client.post("/v1/nrr", json={**body, "threshold": 0.7})  # per request: the same engine
        assert second.status_code == 200 and second.json()["similarities"] == first.json()["similarities"]
        # the served model was loaded at start; the requests' settings resolved once, then reused
        assert nrr_settings_calls["settings"] <= 1 and resolutions["resolve_encoder_settings"] == 0
    finally:
        service.close()


def test_an_nrr_ray_batch_resolves_its_encoder_once(resolutions, tiny_bert) -> None:
    from rapidscore.integrations.ray import NRRBatch
    from rapidscore.nrr import SentenceSimilarity

    batch = NRRBatch(model=tiny_bert, threshold=0.5)
    columns = {"generated": np.array(GENERATED, dtype=object), "reference": np.array(GROUND_TRUTH, dtype=object)}
    out = batch(columns)
    out = batch(columns)
    assert resolutions == {"resolve_encoder_settings": 1}
    sims, _best = SentenceSimilarity(tiny_bert).pairs(GENERATED, GROUND_TRUTH)
    assert out["similarity"].tolist() == sims.tolist()
