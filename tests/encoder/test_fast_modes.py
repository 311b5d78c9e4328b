"""The OpenVINO backend (exact fp32) and the bf16 fast mode's accuracy bounds."""

from __future__ import annotations

import numpy as np
import pytest

from rapidscore.bertscore import BERTScore
from rapidscore.encoder import Encoder
from rapidscore.testing.approximation import kendall_tau, word_salad

pytestmark = pytest.mark.slow  # every test here exports MiniLM

ov = pytest.importorskip("openvino", reason="the OpenVINO backend needs the [openvino] extra")


def has_bf16() -> bool:
    return "BF16" in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")


def test_openvino_fp32_matches_onnx_runtime(minilm_path):
    texts = word_salad(40, 0) + ["café 東京 😀", ""]
    exact = Encoder(str(minilm_path), layer=4).token_embeddings(texts)
    fast = Encoder(str(minilm_path), layer=4, backend="openvino").token_embeddings(texts)
    assert max(np.abs(a - b).max() for a, b in zip(exact, fast)) <= 1e-4


@pytest.mark.skipif(not has_bf16(), reason="this CPU has no bf16 instructions; the fast mode refuses to run")
def test_bf16_bertscore_stays_within_the_accuracy_bounds(minilm_path):
    cands, refs = word_salad(150, 1), word_salad(150, 2)
    exact = BERTScore(str(minilm_path), 6).score(cands, refs).f1.astype(np.float64)
    fast = BERTScore(str(minilm_path), 6, precision="bf16").score(cands, refs).f1.astype(np.float64)
    # Bounds from the issue: mean |dF| <= 5e-4 and Kendall tau >= 0.995 against fp32.
    assert np.abs(fast - exact).mean() <= 5e-4
    assert kendall_tau(fast, exact) >= 0.995
    assert not np.array_equal(fast, exact)  # it really ran in reduced precision


def test_kendall_tau_helper_agrees_with_scipy():
    stats = pytest.importorskip("scipy.stats", reason="scipy is the independent Kendall tau reference")
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=60), rng.normal(size=60)
    assert kendall_tau(a, b) == pytest.approx(stats.kendalltau(a, b).statistic, abs=1e-12)


def test_bad_fast_mode_combinations(minilm_path):
    with pytest.raises(ValueError, match="backend='openvino'"):
        Encoder(str(minilm_path), layer=2, backend="onnx", precision="bf16")
    with pytest.raises(ValueError, match="device='cpu'"):
        Encoder(str(minilm_path), layer=2, backend="openvino", device="cuda")
    with pytest.raises(ValueError, match="precision='fp16' runs on backend='torch'"):
        Encoder(str(minilm_path), layer=2, backend="onnx", precision="fp16")


@pytest.mark.skipif(__import__("rapidscore.threads", fromlist=["thread_budget"]).thread_budget() < 2,
                    reason="one thread in the budget: a share below it does not exist")
def test_openvino_with_a_per_call_thread_share_runs_concurrent_callers_in_streams(minilm_path):
    # A server's workers share one runner, each given num_threads = budget // workers: the model gets
    # that many streams, so their calls run side by side (one stream ran them one after another).
    from concurrent.futures import ThreadPoolExecutor

    from rapidscore.encoder.runtime.openvino import OpenVinoRunner
    graph = Encoder(str(minilm_path), layer=4).cache_entry / "model.onnx"
    shared = OpenVinoRunner(graph, "cpu", "fp32", num_threads=1)
    whole = OpenVinoRunner(graph, "cpu", "fp32", num_threads=None)
    assert int(shared.compiled.get_property("NUM_STREAMS")) >= 2  # OpenVINO caps it at the cores
    assert int(whole.compiled.get_property("NUM_STREAMS")) == 1  # the budget: one stream, all threads
    rng = np.random.default_rng(1)
    batches = [(rng.integers(1000, 20000, (3, 9 + k)).astype(np.int64), np.ones((3, 9 + k), np.int64))
               for k in range(8)]
    expected = [whole(ids, mask) for ids, mask in batches]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda batch: shared(*batch), batches))
    for a, b in zip(expected, got):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-4)  # fp32 both; kernels may split work differently
