"""One vocabulary of options (issue 27): ``num_threads`` (None = the thread budget) on every public
entry point that takes threads, ``n_threads`` kept as a deprecated alias; the engine keywords
(backend, device, precision, num_threads, batch_tokens, cache_dir) as typed keyword parameters on
every metric that runs a model, ``encoder_options=`` kept as a deprecated alias where it existed."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

GOLD = [{"id": 1, "text": "Ada Lovelace met Babbage in London", "labels": [[0, 12, "PER"], [17, 24, "PER"],
                                                                          [28, 34, "LOC"]]}]
PRED = [{"id": 1, "text": "Ada Lovelace met Babbage in London", "labels": [[0, 3, "PER"], [17, 24, "ORG"],
                                                                          [28, 34, "LOC"]]}]
TEXTS = ["I'm sorry, but I cannot help with that.", "Sure, here is the recipe.", "Abstained."] * 5


def _spans():
    from rapidscore.ner.alignment import PackedSpans

    gold = PackedSpans.from_records([[(0, 4), (10, 20)], [(0, 3)]])
    pred = PackedSpans.from_records([[(0, 4), (12, 20)], [(1, 3)]])
    return gold, pred


def _align_spans_batch(**threads):
    from rapidscore.kernels.alignment import align_spans_batch

    gold, pred = _spans()
    return align_spans_batch(gold.offsets, gold.starts, gold.ends, pred.offsets, pred.starts, pred.ends, **threads)


def _align_batch(**threads):
    from rapidscore.ner.alignment import align_batch

    out = align_batch(*_spans(), **threads)
    return out.pair_offsets, out.gold_index, out.pred_index, out.jaccard


def _match_phrases(**threads):
    from rapidscore.abstention.detectors import KeywordMatcher
    from rapidscore.kernels.phrases import match_phrases

    return match_phrases(KeywordMatcher()._native, [t.lower() for t in TEXTS], **threads)


def _keyword_matcher(**threads):
    from rapidscore.abstention.detectors import KeywordMatcher

    return KeywordMatcher(**threads).match(TEXTS)


def _select_detector(**threads):
    from rapidscore.abstention.detectors import SelectDetector

    return SelectDetector("keyword", **threads)(TEXTS)


def _get_detector(**threads):
    from rapidscore.abstention.detectors import get_detector

    return get_detector("heuristic", **threads)(TEXTS)


def _detect_refusal(**threads):
    from rapidscore.abstention.detectors import detect_refusal

    return detect_refusal(TEXTS, "phr+kw", **threads)


def _ner_evaluate(**threads):
    from rapidscore import ner

    return ner.evaluate(GOLD, PRED, label_similarity="exact", **threads).to_dict()


def _ner_compare(**threads):
    from rapidscore import ner

    return ner.compare(GOLD, {"a": PRED, "b": GOLD}, label_similarity="exact", **threads).to_dict()


ENTRY_POINTS = {"align_spans_batch": _align_spans_batch, "align_batch": _align_batch, "match_phrases": _match_phrases,
                "KeywordMatcher": _keyword_matcher, "SelectDetector": _select_detector,
                "get_detector": _get_detector, "detect_refusal": _detect_refusal, "evaluate": _ner_evaluate,
                "compare": _ner_compare}


def _same(a, b) -> bool:
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(a, b)
    return a == b


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_n_threads_is_a_deprecated_alias_of_num_threads(entry) -> None:
    # issue 27: one keyword for threads; the old one still works, with a warning naming the new one
    call = ENTRY_POINTS[entry]
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # the new keyword warns of nothing
        expected = call(num_threads=2)
        default = call()
    with pytest.warns(DeprecationWarning, match=r"n_threads=\.\.\.\) is deprecated: use num_threads"):
        old = call(n_threads=2)
    assert _same(old, expected) and _same(default, expected)
    with pytest.warns(DeprecationWarning):
        assert _same(call(n_threads=0), default)  # its 0 (all cores) is num_threads=None
    with pytest.raises(TypeError, match="both num_threads and its deprecated alias n_threads"):
        call(num_threads=2, n_threads=2)


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
@pytest.mark.parametrize(("value", "error"), [(0, ValueError), (-1, ValueError), ("4", TypeError), (2.0, TypeError)])
def test_num_threads_is_none_or_a_positive_int(entry, value, error) -> None:
    # issue 27: 0 meant "all cores" under n_threads; under num_threads it is an error, as in BERTScore
    with pytest.raises(error, match="num_threads must be"):
        ENTRY_POINTS[entry](num_threads=value)


class _FakeEncoder:
    """A stand-in for the shared encoder (no model loads); ``get_encoder`` below records the
    keywords it is asked with."""

    def sentence_embeddings(self, texts, progress=False):
        # a fixed vector per text (its length and vowels): equal texts, equal vectors
        return np.array([[len(t), sum(c in "aeiou" for c in t.lower()), 1.0] for t in texts], dtype=np.float64)


@pytest.fixture
def encoder_calls(monkeypatch) -> list:
    import rapidscore.encoder

    calls: list = []

    def get_encoder(model=None, **keywords):
        calls.append(keywords)
        return _FakeEncoder()

    monkeypatch.setattr(rapidscore.encoder, "get_encoder", get_encoder)
    return calls


@pytest.fixture
def engine(tmp_path) -> dict:
    """Every engine keyword, set: the cache directory in the test's own folder (issue 36 row 11:
    a fixed "/tmp/rs" made the suite's result depend on where the checkout lives)."""
    return dict(backend="onnx", device="cpu", precision="fp32", num_threads=2, batch_tokens=512,
                cache_dir=str(tmp_path / "cache"))


def test_ner_engine_keywords_reach_the_label_encoder(encoder_calls, engine) -> None:
    # issue 27: typed engine keywords in place of the encoder_options dict
    from rapidscore import ner

    new = ner.evaluate(GOLD, PRED, **engine).to_dict()
    assert encoder_calls == [engine]
    encoder_calls.clear()
    options = dict(engine)
    with pytest.warns(DeprecationWarning, match=r"evaluate\(encoder_options=\.\.\.\) is deprecated"):
        old = ner.evaluate(GOLD, PRED, encoder_options=options).to_dict()
    assert encoder_calls == [engine] and old == new
    with pytest.warns(DeprecationWarning), pytest.raises(TypeError, match="encoder_options and the keyword"):
        ner.compare(GOLD, {"m": PRED}, encoder_options=options, device="cuda")
    with pytest.warns(DeprecationWarning), pytest.raises(TypeError, match=r"encoder_options has no option.*max_len"):
        ner.evaluate(GOLD, PRED, encoder_options={"max_len": 3})
    with pytest.raises(TypeError, match="unexpected keyword argument 'encoder'"):
        ner.evaluate(GOLD, PRED, encoder={"device": "cpu"})


def test_ner_defaults_ask_for_the_shared_default_encoder(encoder_calls) -> None:
    # issue 27: keywords left at their defaults ask get_encoder for what every other metric asks
    from rapidscore import ner

    ner.evaluate(GOLD, PRED)
    assert encoder_calls == [dict(backend=None, device="cpu", precision="fp32")]


def test_embedding_detector_engine_keywords(encoder_calls, engine) -> None:
    # issue 27: get_detector("embedding", ...) and detect_refusal take the same engine keywords
    from rapidscore.abstention.detectors import EmbeddingDetector, detect_refusal, get_detector

    new = detect_refusal(TEXTS, "embedding", **engine)
    assert encoder_calls == [engine]
    encoder_calls.clear()
    with pytest.warns(DeprecationWarning, match=r"EmbeddingDetector\(encoder_options=\.\.\.\) is deprecated"):
        old = get_detector("embedding", encoder_options=dict(engine))(TEXTS)
    assert encoder_calls == [engine] and np.array_equal(old, new)
    with pytest.raises(TypeError, match="unexpected keyword argument 'devices'"):
        get_detector("embedding", devices="cpu")
    with pytest.raises(ValueError, match="num_threads must be in"):
        EmbeddingDetector(num_threads=0)


@pytest.mark.parametrize("call", ["SentenceSimilarity", "similarity", "negative_rejection"])
def test_nrr_takes_explicit_engine_keywords(call) -> None:
    # issue 27: no **encoder_options: an unknown keyword is refused by name before any model loads
    from rapidscore import nrr

    args = () if call == "SentenceSimilarity" else (["a"], ["b"])
    with pytest.raises(TypeError, match="unexpected keyword argument 'num_thread'"):
        getattr(nrr, call)(*args, num_thread=2)


@pytest.mark.slow  # exports a tiny model: about 10 s on 2 cores
def test_nrr_engine_keywords_reach_the_encoder(tiny_model_path) -> None:
    # issue 27: the typed keywords select the encoder as the old **encoder_options did
    from rapidscore.nrr import SentenceSimilarity, similarity

    model = str(tiny_model_path("bert"))
    sim = SentenceSimilarity(model, num_threads=1, batch_tokens=256)
    assert (sim.encoder.num_threads, sim.encoder.batch_tokens) == (1, 256)
    assert np.array_equal(similarity(["a cat"], ["a dog"], model, num_threads=1, batch_tokens=256),
                          sim.pairs(["a cat"], ["a dog"])[0])
    with pytest.raises(TypeError, match="max_length applies to method='embedding'"):
        SentenceSimilarity(model, "bertscore", max_length=8)


def test_registered_metrics_pass_the_engine_keywords_on(encoder_calls) -> None:
    # issue 27: the registry's ner and refusal engines take the same keywords (their label encoder
    # and embedding detector); ner's num_threads goes to the alignment and the label encoder
    from rapidscore.metrics import get_metric

    ner = get_metric("ner")
    engine = ner.build(num_threads=2, device="cpu", batch_tokens=512)
    rows = ner.score(engine, {"gold": GOLD, "predicted": PRED})
    assert encoder_calls == [dict(backend=None, device="cpu", precision="fp32", num_threads=2, batch_tokens=512)]
    assert rows["record"] == get_metric("ner").score(ner.build(), {"gold": GOLD, "predicted": PRED})["record"]
    encoder_calls.clear()
    refusal = get_metric("refusal")
    refusal.score(refusal.build(method="embedding", num_threads=3), {"response": TEXTS})
    assert encoder_calls == [dict(backend=None, device="cpu", precision="fp32", num_threads=3)]
