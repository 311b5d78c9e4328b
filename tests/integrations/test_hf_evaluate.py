"""Hugging Face ``evaluate`` (issue 28): ``evaluate.load`` of rapidscore's module scripts, then
``compute`` / ``add_batch`` / ``add``, give rapidscore's own BERTScore and similarity numbers on
the same rows (the embedded MiniLM); bad inputs get errors naming the argument."""

from __future__ import annotations

import threading

import evaluate
import pytest

from rapidscore.errors import RapidscoreError
from rapidscore.integrations.hf_evaluate import (
    BERTScoreModule,
    IntegrationInputError,
    IntegrationTypeError,
    NRRModule,
    module_path,
)

PREDICTIONS = ["a cat sat on the mat", "dogs bark at night", "the weather is sunny today", "I don't know."]
# the hub metric's two forms: one reference per prediction, or a list of them
REFERENCES = ["a cat sat down on the mat", ["cats meow", "dogs bark loudly at night"],
              ["it is raining today"], "Paris is the capital of France."]
REFERENCE_LISTS = [[r] if isinstance(r, str) else r for r in REFERENCES]

pytestmark = pytest.mark.slow  # the embedded MiniLM


@pytest.fixture(scope="module")
def model(minilm_path) -> str:
    return str(minilm_path)


def load(name: str):
    return evaluate.load(module_path(name), keep_in_memory=True)


def test_module_paths_load_as_rapidscore_modules():
    assert isinstance(load("bertscore"), BERTScoreModule)
    assert isinstance(load("nrr"), NRRModule) and module_path("similarity") == module_path("nrr")
    with pytest.raises(ValueError, match="unknown rapidscore evaluation module 'rouge'"):
        module_path("rouge")


def test_bertscore_compute_equals_rapidscore(model):
    from rapidscore.bertscore import BERTScore

    scorer = BERTScore(model)
    expected = scorer.score(PREDICTIONS, REFERENCE_LISTS, reference_batch_size=64)  # the hub's batch_size
    out = load("bertscore").compute(predictions=PREDICTIONS, references=REFERENCES, model_type=model)
    assert set(out) == {"precision", "recall", "f1", "hashcode"}
    assert out["precision"] == expected.precision.tolist()
    assert out["recall"] == expected.recall.tolist()
    assert out["f1"] == expected.f1.tolist()
    assert out["hashcode"] == scorer.signature


def test_bertscore_add_batch_and_add_equal_one_compute(model):
    module = load("bertscore")
    whole = module.compute(predictions=PREDICTIONS, references=REFERENCES, model_type=model)
    module.add_batch(predictions=PREDICTIONS[:2], references=REFERENCES[:2])  # a str, then a list
    module.add(prediction=PREDICTIONS[2], reference=REFERENCES[2])
    module.add_batch(predictions=PREDICTIONS[3:], references=REFERENCES[3:])
    assert module.compute(model_type=model) == whole


def test_bertscore_keywords_map_onto_rapidscore(model):
    from rapidscore.bertscore import BERTScore

    model = "all-MiniLM-L6-v2"  # the embedded model by its hub name: its baseline is looked up by that name
    flat = [ref for group in REFERENCE_LISTS for ref in group]
    scorer = BERTScore(model, layer=3, idf=True, idf_sents=flat, lang="en", rescale_with_baseline=True)
    expected = scorer.score(PREDICTIONS, REFERENCE_LISTS, reference_batch_size=2)
    out = load("bertscore").compute(predictions=PREDICTIONS, references=REFERENCES, model_type=model,
                                    num_layers=3, idf=True, batch_size=2, lang="en", rescale_with_baseline=True)
    assert out["f1"] == expected.f1.tolist() and out["precision"] == expected.precision.tolist()
    assert out["hashcode"] == scorer.signature and "idf:yes" in out["hashcode"]


def test_nrr_compute_equals_rapidscore(model):
    from rapidscore.nrr import SentenceSimilarity, negative_rejection

    sims, best = SentenceSimilarity(model).pairs(PREDICTIONS, REFERENCE_LISTS)
    module = load("nrr")
    out = module.compute(predictions=PREDICTIONS, references=REFERENCES, model=model)
    assert out["similarity"] == sims.tolist() and out["best_reference"] == best.tolist()
    assert "rejected" not in out and out["hashcode"] == SentenceSimilarity(model).signature
    decided = negative_rejection(PREDICTIONS, REFERENCES, model=model, threshold=0.6)
    module.add_batch(predictions=PREDICTIONS, references=REFERENCES)
    out = module.compute(model=model, threshold=0.6)
    assert out["rejected"] == decided.rejected.tolist() and out["negative_rejection_rate"] == decided.rate
    assert out["similarity"] == decided.similarities.tolist()


def test_modules_in_several_threads_give_one_thread_s_numbers(model):
    expected = load("bertscore").compute(predictions=PREDICTIONS, references=REFERENCES, model_type=model)
    results: list = [None] * 4
    errors: list = []

    def run(index: int) -> None:
        try:  # one module per thread (evaluate's module state); the encoder behind them is shared
            results[index] = load("bertscore").compute(predictions=PREDICTIONS, references=REFERENCES,
                                                       model_type=model)
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and results == [expected] * 4


@pytest.mark.parametrize("name", ["bertscore", "nrr"])
def test_bad_inputs_are_named(name):
    module = load(name)
    with pytest.raises(IntegrationInputError, match=r"missing: \['references'\]") as caught:
        module.compute(predictions=PREDICTIONS)
    assert isinstance(caught.value, RapidscoreError) and isinstance(caught.value, ValueError)
    with pytest.raises(IntegrationTypeError, match=r"predictions\[1\] must be a str, got int: 3") as wrong:
        module.add_batch(predictions=["a", 3], references=["b", "c"])
    assert isinstance(wrong.value, TypeError)
    with pytest.raises(IntegrationTypeError, match="predictions must be a list of strings, got str"):
        module.compute(predictions="a cat", references="a dog")
    with pytest.raises(IntegrationTypeError, match=r"references\[1\] must be a str or a list of str, got int"):
        module.add_batch(predictions=["a", "b"], references=["c", 5])
    with pytest.raises(IntegrationInputError, match=r"references\[0\] is an empty list of references"):
        module.add_batch(predictions=["a"], references=[[]])
    with pytest.raises(IntegrationInputError, match="Different number of candidates and references: 2 != 1"):
        module.add_batch(predictions=["a", "b"], references=["c"])
    with pytest.raises(IntegrationTypeError, match=r"prediction .* must be a str, got a list"):
        module.add(prediction=["a"], reference="b")


def test_bad_bertscore_keywords_are_named(model):
    module = load("bertscore")
    with pytest.raises(IntegrationTypeError, match="idf must be a bool"):
        module.compute(predictions=["a"], references=["b"], model_type=model, idf={"a": 1.0})
    with pytest.raises(ValueError, match="nthreads"):
        module.compute(predictions=["a"], references=["b"], model_type=model, nthreads=0)


@pytest.mark.parametrize("idf", [False, True])
def test_bertscore_module_equals_the_hub_metric_s_computation(model, idf):
    """The hub ``bertscore`` metric runs bert-score's BERTScorer on references wrapped in lists,
    idf from the call's references, batch_size 64: the same steps with the reference package."""
    bert_score = pytest.importorskip("bert_score", reason="the reference package is needed for parity")
    flat = [ref for group in REFERENCE_LISTS for ref in group]
    # nthreads=0: bert-score counts idf serially (the hub metric's 4 give the same counts through a
    # multiprocessing Pool, whose fork from this many-threaded test process hung once)
    hub = bert_score.BERTScorer(model_type=model, num_layers=6, batch_size=64, nthreads=0, idf=idf,
                                idf_sents=flat if idf else None)
    expected = hub.score(PREDICTIONS, REFERENCE_LISTS, batch_size=64)
    out = load("bertscore").compute(predictions=PREDICTIONS, references=REFERENCES, model_type=model,
                                    num_layers=6, idf=idf)
    for key, want in zip(("precision", "recall", "f1"), expected):
        assert max(abs(a - b) for a, b in zip(out[key], want.tolist())) <= 1e-5  # ONNX vs torch, as tests/bertscore
