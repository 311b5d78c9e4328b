"""The engine's contracts: phased scoring, one model per process, thread safety, thread budget,
the token store, and a missing extra named in the error."""

from __future__ import annotations

import importlib.util
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from rapidscore.bertscore import BERTScore
from rapidscore.encoder import Encoder, cache_info, clear_cache, get_encoder

CANDIDATES = [
    "The cat sat on the mat.",
    "Rob Halford is the lead singer of Judas Priest.",
    "Paris is the capital of France.",
    "I like green apples more than red ones.",
    "",
    "A completely unrelated sentence about the stock market.",
]
REFERENCES = [
    ["A cat was sitting on the mat."],
    ["Halford fronts the heavy metal band Judas Priest.", "He is a singer."],
    ["France's capital city is Paris."],
    ["Green apples are my favourite."],
    ["Something."],
    ["The weather was lovely yesterday afternoon."],
]

# (backend, precision): every runner the 8-thread test covers.
BACKENDS = [("onnx", "fp32"), ("openvino", "fp32"), ("openvino", "bf16"), ("torch", "fp32")]


def _has_bf16() -> bool:
    try:
        import openvino as ov
    except ImportError:
        return False
    return "BF16" in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")


@pytest.mark.slow
@pytest.mark.parametrize("backend,precision", BACKENDS, ids=[f"{b}-{p}" for b, p in BACKENDS])
def test_eight_threads_on_one_scorer_get_the_sequential_results(minilm_path, backend, precision):
    if backend == "openvino":
        pytest.importorskip("openvino", reason="the OpenVINO backend needs the [openvino] extra")
    if precision == "bf16" and not _has_bf16():
        pytest.skip("this CPU has no bf16 instructions (OpenVINO bf16 needs AVX512_BF16 or AMX)")
    scorer = BERTScore(str(minilm_path), backend=backend, precision=precision)
    # Different inputs per call, so a runner that mixed up two threads' buffers would be caught.
    jobs = [(CANDIDATES[k:] + CANDIDATES[:k], REFERENCES[k:] + REFERENCES[:k]) for k in range(len(CANDIDATES))] * 4
    sequential = [scorer.score(c, r) for c, r in jobs]
    with ThreadPoolExecutor(8) as pool:
        threaded = list(pool.map(lambda job: scorer.score(*job), jobs))
    for expected, got in zip(sequential, threaded):
        np.testing.assert_array_equal(got.precision, expected.precision)
        np.testing.assert_array_equal(got.recall, expected.recall)
        np.testing.assert_array_equal(got.f1, expected.f1)


@pytest.mark.slow
def test_bertscore_nrr_and_ner_load_the_model_once(minilm_path):
    from rapidscore.ner import evaluate
    from rapidscore.nrr import negative_rejection

    clear_cache()
    before = cache_info()["models_loaded"]
    BERTScore(str(minilm_path), layer=6).score(["a cat"], ["a dog"])
    negative_rejection(["a cat sat"], ["a cat was sitting"], model=str(minilm_path))
    gold = [{"text": "Ann lives in Paris", "entities": [{"start": 0, "end": 3, "label": "PERSON"}]}]
    pred = [{"text": "Ann lives in Paris", "entities": [{"start": 0, "end": 3, "label": "person name"}]}]
    evaluate(gold, pred, label_model=str(minilm_path))
    assert cache_info()["models_loaded"] - before == 1


@pytest.mark.slow
def test_get_encoder_returns_one_object_per_setting(minilm_path):
    first = get_encoder(str(minilm_path))
    assert get_encoder(str(minilm_path), layer=first.num_layers, backend="onnx") is first
    assert get_encoder(minilm_path) is first
    other_length = get_encoder(str(minilm_path), max_length=64)
    assert other_length is not first and other_length.runner is first.runner  # one loaded model
    with pytest.raises(TypeError, match="progress"):
        get_encoder(str(minilm_path), progress=True)


def test_concurrent_first_requests_load_once(tiny_model_path):
    clear_cache()
    before = cache_info()["models_loaded"]
    barrier = threading.Barrier(6)

    def load(_):
        barrier.wait()
        return get_encoder(str(tiny_model_path("bert")), layer=2)

    with ThreadPoolExecutor(6) as pool:
        encoders = list(pool.map(load, range(6)))
    assert all(e is encoders[0] for e in encoders)
    assert cache_info()["models_loaded"] - before == 1


@pytest.mark.slow
def test_phases_equal_one_call(minilm_path):
    scorer = BERTScore(str(minilm_path), idf=True)
    plan = scorer.plan(CANDIDATES, REFERENCES)
    # Deduplicated and stripped once: each distinct sentence is encoded once.
    assert len(plan.texts) == len({t.strip() for t in CANDIDATES + [r for g in REFERENCES for r in g]})
    assert plan.pairs.shape == (sum(len(g) for g in REFERENCES), 2)
    store = scorer.encode(plan)
    phased = scorer.finish(plan, store, reference_batch_size=3)
    direct = scorer.score(CANDIDATES, REFERENCES, reference_batch_size=3)
    np.testing.assert_array_equal(phased.f1, direct.f1)
    # finish normalises the store once: a second finish on the same store gives the same numbers
    np.testing.assert_array_equal(scorer.finish(plan, store, reference_batch_size=3).f1, direct.f1)


def test_token_store_order_and_input_order_view(tiny_model_path):
    encoder = Encoder(str(tiny_model_path("bert")), layer=2)
    texts = ["a short one", "a much longer sentence than the others by far", "a short one", "mid length text"]
    store = encoder.encode(texts)
    assert len(store) == 4 and store.n_sentences == 3  # the duplicate is stored once
    assert store.order[0] == store.order[2]
    flat = store.in_input_order()
    for k in range(4):
        np.testing.assert_array_equal(flat.token_embeddings(k), store.token_embeddings(k))
        np.testing.assert_array_equal(flat.ids[flat.offsets[k]:flat.offsets[k + 1]], store.token_ids(k))
    single = [encoder.token_embeddings([t])[0] for t in texts]
    for k in range(4):
        np.testing.assert_allclose(store.token_embeddings(k), single[k], atol=1e-5, rtol=0)


@pytest.mark.slow
def test_torch_store_matches_host_store(minilm_path):
    torch = pytest.importorskip("torch", reason="the device-resident store holds torch tensors")
    from rapidscore.encoder import TokenStore

    scorer = BERTScore(str(minilm_path))
    plan = scorer.plan(CANDIDATES, REFERENCES)
    host = scorer.encode(plan)
    as_tensor = TokenStore(host.ids, host.offsets, torch.from_numpy(host.embeddings.copy()), host.order,
                           host.truncated)
    assert not as_tensor.on_host and as_tensor.device == "cpu"
    expected = scorer.finish(plan, host)
    got = scorer.finish(plan, as_tensor)
    # Different arithmetic (torch matmul vs the C++ kernel), same float32 dot products: about 1e-7.
    np.testing.assert_allclose(got.f1, expected.f1, atol=1e-6, rtol=0)


def test_thread_budget_lease_shares_the_cores(monkeypatch):
    from rapidscore import threads

    monkeypatch.setattr(threads, "_BUDGET", threads._Budget())
    threads.set_thread_budget(4)
    with threads.lease() as first:
        assert first == 4
        with threads.lease(2) as second:
            assert second == 1  # nothing left: still one thread, never zero
            assert threads.threads_in_use() == 5
    assert threads.threads_in_use() == 0
    with pytest.raises(ValueError, match="num_threads must be in"):
        with threads.lease(10**6):
            pass
    with pytest.raises(ValueError, match="num_threads must be in"):
        Encoder(num_threads=100000)


def test_missing_export_extra_names_the_extra(monkeypatch, tiny_model_path, tmp_path):
    real_find_spec = importlib.util.find_spec

    def without_onnxscript(name, *args, **kwargs):
        return None if name == "onnxscript" else real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", without_onnxscript)
    with pytest.raises(ImportError, match=r"onnxscript.*rapidscore\[export\]"):
        Encoder(str(tiny_model_path("bert")), layer=3, cache_dir=tmp_path)


def test_span_alignment_and_phrase_kernels_lease_the_budget_too():
    from rapidscore import threads
    from rapidscore.abstention.detectors import KeywordMatcher
    from rapidscore.kernels.alignment import align_spans_batch

    offsets = np.array([0, 2])
    starts, ends = np.array([0, 10]), np.array([5, 15])
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: align_spans_batch(offsets, starts, ends, offsets, starts, ends,
                                                            num_threads=None), range(16)))
    assert all(np.array_equal(r[1], results[0][1]) for r in results)
    matcher = KeywordMatcher()
    texts = ["I'm sorry, but I cannot help with that.", "Sure, here is the recipe."] * 50
    with ThreadPoolExecutor(8) as pool:
        matches = list(pool.map(lambda _: matcher.match(texts)[0], range(16)))
    assert all(np.array_equal(m, matches[0]) for m in matches)
    assert threads.threads_in_use() == 0
    with pytest.raises(ValueError, match="num_threads must be in"):
        align_spans_batch(offsets, starts, ends, offsets, starts, ends, num_threads=99999999999)


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.mark.skipif(not _cuda_available(), reason="needs a CUDA GPU and a CUDA build of torch")
@pytest.mark.parametrize("all_layers", [False, True])
def test_cuda_store_stays_on_the_device_and_matches_the_cpu(tiny_model_path, all_layers):
    model = str(tiny_model_path("bert"))
    cands = ["the cat sat on the mat", "a dog barks loudly", "", "same words"]
    refs = [["a cat was on a mat", "cats sit"], ["the dog is loud"], ["nothing"], ["same words"]]
    layer = None if all_layers else 3
    on_gpu = BERTScore(model, layer, backend="torch", device="cuda", all_layers=all_layers, idf=True)
    on_cpu = BERTScore(model, layer, backend="torch", device="cpu", all_layers=all_layers, idf=True)
    plan = on_gpu.plan(cands, refs)
    store = on_gpu.encode(plan)
    assert not store.on_host and store.device.startswith("cuda")  # no copy to the host before matching
    got = on_gpu.finish(plan, store, reference_batch_size=2)
    expected = on_cpu.score(cands, refs, reference_batch_size=2)
    # Same model on two devices: GPU kernels (no TF32) vs CPU differ in float32 rounding, ~1e-6.
    np.testing.assert_allclose(got.f1, expected.f1, atol=1e-5, rtol=0)
    np.testing.assert_allclose(got.precision, expected.precision, atol=1e-5, rtol=0)
