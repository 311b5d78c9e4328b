"""Streaming for the other metrics, each against its in-memory function over the same items:
similarity / NRR, NER (per record and corpus totals), refusal decisions."""

from __future__ import annotations

import random

import numpy as np
import pytest

from rapidscore.abstention import detect_refusal
from rapidscore.ner import evaluate
from rapidscore.nrr import SentenceSimilarity, negative_rejection
from rapidscore.streaming import NerTotals, RateCounter, negative_rejection_iter, ner_records_iter, refusal_iter

GENERATED = [f"answer {i}: the {'big ' * (i % 3)}capital is city {i % 9}" for i in range(70)]
REFERENCES = [[f"the capital is city {i % 9}", f"reference {i}"] if i % 4 == 0 else f"city {i % 5} is the capital"
              for i in range(70)]
GENERATED[3] = ""  # empty: similarity 0


@pytest.fixture(scope="module")
def model(tiny_model_path) -> str:
    return str(tiny_model_path("bert"))


@pytest.mark.parametrize("method", ["embedding", "bertscore"])
def test_similarity_stream_equals_pairs(model, method):
    sim = SentenceSimilarity(model, method=method)
    groups = [[r] if isinstance(r, str) else r for r in REFERENCES]
    expected_sims, expected_best = sim.pairs(GENERATED, groups)
    got = list(sim.score_iter(zip(GENERATED, REFERENCES), chunk_size=16))
    assert np.array_equal(np.array([s for s, _ in got], np.float32), expected_sims)
    assert [b for _, b in got] == expected_best.tolist()


def test_nrr_stream_equals_negative_rejection(model):
    sim = SentenceSimilarity(model)
    result = negative_rejection(GENERATED, REFERENCES, threshold=0.5, similarity_model=sim)
    counter = RateCounter()
    rows = list(negative_rejection_iter(iter(zip(GENERATED, REFERENCES)), 0.5, similarity_model=sim, chunk_size=9))
    for row in rows:
        counter.add(row["rejected"])
    assert [r["rejected"] for r in rows] == result.rejected.tolist()
    assert counter.rate == result.rate and counter.capture_rate == result.capture_rate


def test_similarity_stream_names_a_bad_item(model):
    with pytest.raises(TypeError, match="item 2: the generated must be a str"):
        list(SentenceSimilarity(model).score_iter([("a", "b"), ("c", "d"), (None, "e")]))


def ner_corpus(n: int, seed: int = 0):
    rng = random.Random(seed)
    labels = ["person", "org", "location", "date", "fullname"]
    gold, pred = [], []
    for i in range(n):
        text = " ".join(f"w{i}x{k}" for k in range(12))
        starts = [text.index(f"w{i}x{k} ") for k in range(11)]

        def entities(prob):
            return [[s, s + len(f"w{i}x{k}"), rng.choice(labels)] for k, s in enumerate(starts) if rng.random() < prob]

        gold.append({"id": f"doc{i}", "text": text, "labels": entities(0.3)})
        pred.append({"id": f"doc{i}", "text": text, "labels": entities(0.3)})
    return gold, pred


@pytest.mark.parametrize("label_similarity", ["exact", "embedding"])
def test_ner_stream_equals_evaluate(model, label_similarity):
    gold, pred = ner_corpus(45)
    options = dict(label_similarity=label_similarity, format="tuples")
    if label_similarity == "embedding":
        options["label_model"] = model
    whole = evaluate(gold, pred, **options)
    totals = NerTotals()
    records = []
    for record in ner_records_iter(iter(zip(gold, pred)), chunk_size=8, **options):
        records.append(record)
        totals.add(record)
    assert records == whole.records
    assert totals.semeval == whole.semeval
    for key, value in whole.dmberta.items():
        assert totals.dmberta[key] == pytest.approx(value, rel=1e-12, abs=1e-12), key


def test_ner_stream_names_bad_records(model):
    gold, pred = ner_corpus(12)
    pred[10]["labels"] = [[5, 2, "person"]]  # end before start
    with pytest.raises(ValueError, match="records 8-11 of the stream"):
        list(ner_records_iter(zip(gold, pred), chunk_size=4, label_similarity="exact", format="tuples"))
    with pytest.raises(TypeError, match="item 1 must be a"):
        list(ner_records_iter([(gold[0], pred[0]), "oops"], label_similarity="exact"))


def test_refusal_stream_equals_detect_refusal():
    responses = ["I'm sorry, I can't help with that.", "Paris is the capital.",
                 {"complete": "...", "answer": "I cannot answer that."}, "As an AI, I won't.", "Sure: 42."] * 9
    for method in ("heuristic", "arditi", "keyword"):
        got = list(refusal_iter(iter(responses), method, chunk_size=4))
        assert got == detect_refusal(responses, method).tolist()
    with pytest.raises(TypeError, match="at position 6"):
        list(refusal_iter(responses[:6] + [7], chunk_size=4))
