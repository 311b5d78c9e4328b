"""``precision="int8"`` (``rapidscore.encoder.export.int8``): GPTQ weights (asymmetric per column), the two
7- or 8-bit activation passes against a numpy model of the same arithmetic, accuracy on the real
MiniLM, the cache entry, and what every tiny family does with it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

from rapidscore.bertscore import BERTScore
from rapidscore.encoder import Encoder
from rapidscore.encoder import cache as cache_module
from rapidscore.encoder.cache import KeyedCache
from rapidscore.encoder.export import int8
from rapidscore.encoder.export.disk_cache import entry_damage
from rapidscore.encoder.export.int8 import Int8Error, cached_int8, gptq_int8, quantize_graph
from rapidscore.nrr import SentenceSimilarity
from rapidscore.testing import tiny_models
from rapidscore.testing.approximation import kendall_tau, word_salad

if TYPE_CHECKING:
    import onnx

# Word salad and W1-like texts (test_fast_precision.py has the same word list).

FAMILY_TEXTS = [
    "The cat sat on the mat.",
    "We had crème brûlée at a small café in Zürich.",
    "我喜欢学习中文。",
    "Don't STOP believing, it's 3.5% at 7:30 pm",
    "the band played jazz in the city and the singer was famous",
]


def relative_token_errors(exact: list[np.ndarray], approx: list[np.ndarray]) -> np.ndarray:
    """|approx - exact| / |exact| per token, over all texts."""
    return np.concatenate([np.linalg.norm(b.astype(np.float64) - a, axis=-1)
                           / np.maximum(np.linalg.norm(a.astype(np.float64), axis=-1), 1e-12)
                           for a, b in zip(exact, approx)])


# ---------------------------------------------------------------- GPTQ ------------------------

def round_to_nearest(w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Plain asymmetric int8 rounding per output column: [min(w, 0), max(w, 0)] in 255 steps."""
    w = w.astype(np.float64)
    hi, lo = np.maximum(w.max(axis=0), 0), np.minimum(w.min(axis=0), 0)
    scale = (hi - lo) / 255
    zero = np.round(-lo / scale) - 128
    return np.clip(np.round(w / scale) + zero, -128, 127).astype(np.int8), scale, zero.astype(np.int8)


def dequantised(q: np.ndarray, scale: np.ndarray, zero: np.ndarray) -> np.ndarray:
    return (q.astype(np.float64) - zero.astype(np.float64)) * scale.astype(np.float64)


def rounding_objective(w: np.ndarray, q: np.ndarray, scale: np.ndarray, zero: np.ndarray,
                       hessian: np.ndarray) -> float:
    """tr(dW^T H dW): the output error on inputs whose second moments are H."""
    dw = w.astype(np.float64) - dequantised(q, scale, zero)
    return float(np.trace(dw.T @ hessian @ dw))


def test_gptq_with_an_identity_hessian_is_round_to_nearest() -> None:
    rng = np.random.default_rng(0)
    w = rng.normal(size=(96, 40)).astype(np.float32) * rng.uniform(0.1, 3, size=40).astype(np.float32)
    w[:, 3] = np.abs(w[:, 3])  # a column with no negative weight: 0 is its lowest code
    q, scale, zero = gptq_int8(w, np.eye(96))
    expected_q, expected_scale, expected_zero = round_to_nearest(w)
    assert q.dtype == np.int8 and scale.dtype == np.float32 and zero.dtype == np.int8
    np.testing.assert_array_equal(q, expected_q)
    np.testing.assert_array_equal(zero, expected_zero)
    np.testing.assert_allclose(scale, expected_scale, rtol=1e-6)
    assert int(zero[3]) == -128 and int(q[:, 3].min()) >= -128
    others = [j for j in range(40) if j != 3]
    assert q[:, others].min(axis=0).tolist() == [-128] * 39  # each column's lowest weight is the lowest code
    assert (q[:, others].max(axis=0) >= 126).all()  # and its highest the highest, up to rounding
    # Zero is exact: a weight of 0 dequantises to 0.
    np.testing.assert_array_equal(dequantised(np.broadcast_to(zero, (1, 40)), scale, zero), np.zeros((1, 40)))


def test_gptq_on_a_correlated_hessian_beats_round_to_nearest() -> None:
    rng = np.random.default_rng(1)
    k, n = 64, 32
    mixing = rng.normal(size=(k, k)) * np.linspace(0.2, 2, k)
    x = rng.normal(size=(2000, k)) @ mixing  # strongly correlated input channels
    hessian = x.T @ x
    w = rng.normal(size=(k, n)).astype(np.float32)
    q, scale, zero = gptq_int8(w, hessian)
    rtn_q, rtn_scale, rtn_zero = round_to_nearest(w)
    np.testing.assert_allclose(scale, rtn_scale, rtol=1e-6)
    np.testing.assert_array_equal(zero, rtn_zero)
    gptq_error = rounding_objective(w, q, scale, zero, hessian)
    rtn_error = rounding_objective(w, rtn_q, rtn_scale, rtn_zero, hessian)
    assert gptq_error <= rtn_error, (gptq_error, rtn_error)


# ---------------------------------------------------------------- the rewritten graph ---------

K, N1, N3, N2 = 48, 24, 16, 20  # input channels; outputs of the MatMul + Add, the bias-free MatMul, the Gemm


def small_model(rng: np.random.Generator) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """x [batch, seq, K] -> MatMul(W1) + b1 and MatMul(W3) (one shared activation);
    x2 [rows, K] -> Gemm(x2, W2, b2, transB=1)."""
    from onnx import TensorProto, helper, numpy_helper

    weights = {"w1": rng.normal(size=(K, N1)).astype(np.float32) * rng.uniform(0.05, 4, size=(K, 1)).astype(np.float32),
               "w3": rng.normal(size=(K, N3)).astype(np.float32),
               "w2": rng.normal(size=(N2, K)).astype(np.float32) * rng.uniform(0.05, 4, size=K).astype(np.float32),
               "b1": rng.normal(size=N1).astype(np.float32),
               "b2": rng.normal(size=N2).astype(np.float32)}
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["m1"]),
             helper.make_node("Add", ["m1", "b1"], ["y1"]),
             helper.make_node("MatMul", ["x", "w3"], ["y3"]),
             helper.make_node("Gemm", ["x2", "w2", "b2"], ["y2"], transB=1)]
    graph = helper.make_graph(
        nodes, "small",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", K]),
         helper.make_tensor_value_info("x2", TensorProto.FLOAT, ["rows", K])],
        [helper.make_tensor_value_info("y1", TensorProto.FLOAT, ["batch", "seq", N1]),
         helper.make_tensor_value_info("y3", TensorProto.FLOAT, ["batch", "seq", N3]),
         helper.make_tensor_value_info("y2", TensorProto.FLOAT, ["rows", N2])],
        [numpy_helper.from_array(v, k) for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # onnxruntime 1.31 reads up to 10
    return model, weights


def inputs_with_an_outlier_channel(rng, batch: int = 3) -> dict[str, np.ndarray]:
    x = rng.normal(size=(batch, 7, K)).astype(np.float32)
    x[..., 5] *= 80  # an outlier channel, as trained BERTs have
    x[..., 9] = np.abs(x[..., 9]) * 3 + 1  # a channel that is never negative
    x2 = rng.normal(size=(4 * batch, K)).astype(np.float32) * 0.3
    x2[:, 2] = 40 + rng.normal(size=4 * batch).astype(np.float32)
    return {"x": x, "x2": x2}


def equalisation(weights: list[np.ndarray]) -> np.ndarray:
    """t_j = (max_k |W_jk| / median_j)^-EQUALISE over the weights (inputs x outputs) reading one
    activation, clipped to [1e-2, 1e2]."""
    m = np.max([np.abs(w.astype(np.float64)).max(axis=1) for w in weights], axis=0)
    m = np.maximum(m, 1e-8)
    return np.clip((m / np.median(m)) ** -int8.EQUALISE, 1e-2, 1e2)


def two_pass_reference(x: np.ndarray, inv_t: np.ndarray, wq: np.ndarray, ws: np.ndarray, wz: np.ndarray,
                       bias: np.ndarray | None, bits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The module's arithmetic in numpy: (y, first-pass codes, residual codes). float32 where the
    graph computes in float32; the integer products exact; np.rint rounds half to even, as
    QuantizeLinear does."""
    f32 = np.float32
    xe = (x * inv_t).astype(f32).reshape(-1, x.shape[-1])
    lo, hi = min(xe.min(), f32(0)), max(xe.max(), f32(0))
    s = max(f32(hi - lo) / f32(255 if bits == 8 else 126), f32(1e-30))  # codes in [0, 2^bits - 1]
    zp = f32(np.rint(-(lo / s)))
    q1 = np.clip(np.rint(xe / s) + zp, 0, 255)
    r = xe - (q1 - zp) * s
    residual_levels = 2 ** bits - 2  # r in [-s/2, s/2]: codes in [0, 2^bits - 2]
    rs = f32(s / f32(residual_levels))
    residual_zp = residual_levels // 2
    q2 = np.clip(np.rint(r / rs) + residual_zp, 0, 255)
    w = wq.astype(np.int64) - wz.astype(np.int64)
    y = ((q1 - zp).astype(np.int64) @ w) * (float(s) * ws.astype(np.float64)) \
        + ((q2 - residual_zp).astype(np.int64) @ w) * (float(rs) * ws.astype(np.float64))
    if bias is not None:
        y = y + bias
    return y.reshape(*x.shape[:-1], -1), q1.astype(np.uint8), q2.astype(np.uint8)


def quantised_weights(model, activation: str) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Output name of each first-pass MatMulIntegerToFloat reading ``activation``'s codes ->
    (int8 weights, scales, zero points) read back from the graph's initializers."""
    from onnx import numpy_helper

    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    producers = {o: n for n in model.graph.node for o in n.output}
    found = {}
    for node in model.graph.node:
        if node.op_type != "MatMulIntegerToFloat" or node.input[1] not in inits:
            continue
        quantise = producers[node.input[0]]
        source = producers.get(quantise.input[0])
        reads = quantise.input[0] == activation or (source is not None and source.op_type == "Mul"
                                                    and source.input[0] == activation)
        if reads and node.input[4] not in inits:  # the first pass: its zero point is computed
            found[node.output[0]] = (inits[node.input[1]], inits[node.input[3]], inits[node.input[5]])
    return found


def inverse_equalisation(model, activation: str) -> np.ndarray | None:
    from onnx import numpy_helper

    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    muls = [n for n in model.graph.node if n.op_type == "Mul" and n.input[0] == activation]
    assert len(muls) <= 1, f"{activation} divided by its equalisation {len(muls)} times"
    return inits[muls[0].input[1]] if muls else None


@pytest.mark.parametrize("equalise", [int8.EQUALISE, 0.0], ids=["equalised", "not-equalised"])
@pytest.mark.parametrize("hessian_kind", ["identity", "xtx"])
@pytest.mark.parametrize("bits", [7, pytest.param(8, marks=pytest.mark.skipif(
    int8.activation_bits() != 8, reason="8-bit passes are built only where u8 x s8 products are exact (VNNI, "
    "non-x86); this x86 CPU has no VNNI, so its int8 kernels saturate 8-bit products"))], ids=["7-bit", "8-bit"])
def test_quantised_graph_computes_the_two_pass_arithmetic(monkeypatch, equalise, hessian_kind, bits) -> None:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    monkeypatch.setattr(int8, "EQUALISE", equalise)
    rng = np.random.default_rng(7)
    model, weights = small_model(rng)
    feed = inputs_with_an_outlier_channel(rng)
    if hessian_kind == "identity":
        hessians = {"x": np.eye(K), "x2": np.eye(K)}
    else:
        calibration = inputs_with_an_outlier_channel(rng, 100)  # enough rows for a full-rank X^T X
        hessians = {name: v.reshape(-1, K).T.astype(np.float64) @ v.reshape(-1, K) for name, v in calibration.items()}
    exact_model = onnx.ModelProto()
    exact_model.CopyFrom(model)
    assert quantize_graph(model, hessians, bits) == 3
    assert {n.op_type for n in model.graph.node}.isdisjoint({"MatMul", "Gemm"})
    # Every QuantizeLinear's codes as graph outputs too: they must stay within ``bits`` bits.
    # (8-bit first passes: DynamicQuantizeLinear)
    quantisers = [n for n in model.graph.node if n.op_type in ("QuantizeLinear", "DynamicQuantizeLinear")]
    assert len(quantisers) == 4  # two passes for each of the two activations (x read by two MatMuls)
    for node in quantisers:
        model.graph.output.append(helper.make_tensor_value_info(node.output[0], TensorProto.UINT8, None))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    got = dict(zip(names, session.run(None, feed)))
    for node in quantisers:
        codes = got[node.output[0]]
        assert int(codes.min()) >= 0 and int(codes.max()) <= 2 ** bits - 1, \
            (node.output[0], int(codes.min()), int(codes.max()))
    exact = dict(zip(["y1", "y3", "y2"], ort.InferenceSession(exact_model.SerializeToString(),
                                                              providers=["CPUExecutionProvider"]).run(None, feed)))

    # (activation, [(output, weight as inputs x outputs, bias added after the products)])
    layout = [("x", [("y1", weights["w1"], weights["b1"]), ("y3", weights["w3"], None)]),
              ("x2", [("y2", weights["w2"].T, weights["b2"])])]
    for activation, products in layout:
        t = equalisation([w for _, w, _ in products]) if equalise else None
        stored_inv_t = inverse_equalisation(model, activation)
        if t is None:
            assert stored_inv_t is None
            inv_t = np.ones(K, np.float32)
        else:
            np.testing.assert_allclose(stored_inv_t, 1 / t, rtol=1e-6)
            inv_t = (1 / t).astype(np.float32)
        read_back = quantised_weights(model, activation)
        assert len(read_back) == len(products)
        codes_seen = []
        for (wq, ws, wz), (output, w, bias) in zip(read_back.values(), products):
            assert wq.dtype == np.int8 and wq.shape == w.shape and ws.shape == wz.shape == (w.shape[1],)
            scaled = w.astype(np.float64) * (1.0 if t is None else t[:, None])
            rtn_q, rtn_scale, rtn_zero = round_to_nearest(scaled)
            np.testing.assert_allclose(ws, rtn_scale, rtol=1e-6)
            np.testing.assert_array_equal(wz, rtn_zero)
            if hessian_kind == "identity":  # a diagonal Hessian: GPTQ is plain rounding
                np.testing.assert_array_equal(wq, rtn_q)
            y, q1, q2 = two_pass_reference(feed[activation], inv_t, wq, ws, wz, bias, bits)
            np.testing.assert_allclose(got[output], y, rtol=1e-5, atol=1e-5 * np.abs(y).max(), err_msg=output)
            # Against the exact graph: the two passes carry ~14 bits of the activations, outlier
            # channel included, so nearly all the error is the int8 weights' (measured: 0.1-1% more).
            weights_only = (feed[activation] * inv_t).astype(np.float64) @ dequantised(wq, ws, wz)
            weights_only = weights_only + (0 if bias is None else bias)
            norm = np.linalg.norm(exact[output])
            error = np.linalg.norm(got[output] - exact[output]) / norm
            weights_error = np.linalg.norm(weights_only - exact[output]) / norm
            assert error <= 1.05 * weights_error + 1e-4, (output, error, weights_error)
            codes_seen.append((q1, q2))
        # The codes the graph made: those of the reference (a rare ulp-level tie may round the other way).
        q1, q2 = codes_seen[0]
        graph_codes = [got[n.output[0]].reshape(q1.shape) for n in quantisers
                       if n.output[0].startswith(f"{activation}__")]
        assert len(graph_codes) == 2
        for graph, reference in zip(graph_codes, (q1, q2)):
            differ = graph.astype(int) != reference.astype(int)
            assert differ.mean() <= 1e-3 and np.abs(graph.astype(int) - reference.astype(int)).max() <= 1


# ---------------------------------------------------------------- the real MiniLM -------------

@pytest.fixture(scope="module")
def int8_scorer(minilm_path: Path) -> BERTScore:
    """BERTScore on MiniLM's layer 6 in int8, from the session cache (built on first use, ~20 s)."""
    return BERTScore(str(minilm_path), 6, precision="int8")


@pytest.fixture(scope="module")
def exact_scorer(minilm_path: Path) -> BERTScore:
    return BERTScore(str(minilm_path), 6)


def int8_entry_of(fp32_entry: Path) -> Path:
    entries = [p for p in fp32_entry.parent.glob(f"{fp32_entry.name}.int8-*") if p.is_dir()]
    assert len(entries) == 1, entries
    return entries[0]


@pytest.mark.slow
def test_minilm_int8_says_so_and_is_within_the_fast_mode_bound_on_w1_pairs(w1_pairs, int8_scorer,
                                                                           exact_scorer) -> None:
    assert "precision:int8" in int8_scorer.signature and int8_scorer.hash.endswith("_precision=int8")
    assert int8_scorer.encoder.precision == "int8" and int8_scorer.encoder.backend == "onnx"
    cands, refs = w1_pairs(150, seed=21)
    f_int8 = int8_scorer.score(cands, refs).f1.astype(np.float64)
    f_exact = exact_scorer.score(cands, refs).f1.astype(np.float64)
    assert np.abs(f_int8 - f_exact).mean() <= 5e-4  # the fast-mode bound (W1 in bench/RESULTS.md: 3.2e-4)
    assert kendall_tau(f_int8, f_exact) >= 0.995  # (W1: 0.998)


@pytest.mark.slow
def test_minilm_int8_on_word_salad_stays_within_a_looser_regression_bound(int8_scorer, exact_scorer) -> None:
    # Not the fast-mode bound: F1 values of unrelated word salad lie close together, so int8's
    # errors reorder more of them (measured 5.4e-4 / 0.9966 here; unrelated real questions
    # 6.6e-4 / 0.9957, bench/RESULTS.md). This pins the measured behaviour against regressions.
    cands, refs = word_salad(150, 23), word_salad(150, 24)
    f_int8 = int8_scorer.score(cands, refs).f1.astype(np.float64)
    f_exact = exact_scorer.score(cands, refs).f1.astype(np.float64)
    assert np.abs(f_int8 - f_exact).mean() <= 1e-3
    assert kendall_tau(f_int8, f_exact) >= 0.99


@pytest.mark.slow
def test_minilm_int8_sentence_similarity(w1_pairs, minilm_path) -> None:
    # The fast-mode bound on related pairs (measured 7.2e-4 here; unrelated sentences, the bench's
    # pairs: 9.3e-4 to 1.0e-3, bench/RESULTS.md).
    generated, references = w1_pairs(100, seed=25)
    int8_sim = SentenceSimilarity(str(minilm_path), precision="int8")
    assert "precision:int8" in int8_sim.signature
    cos_int8 = np.asarray(int8_sim.pairs(generated, [[r] for r in references])[0], np.float64)
    cos_exact = np.asarray(SentenceSimilarity(str(minilm_path)).pairs(generated, [[r] for r in references])[0],
                           np.float64)
    assert np.abs(cos_int8 - cos_exact).mean() <= 1e-3


# One int8 scorer shared by 8 threads, and the CLI's hash line in int8: test_fast_precision.py
# (test_a_fast_scorer_shared_by_many_threads, test_cli_header_line_says_the_mode).


# ---------------------------------------------------------------- the cache entry -------------

@pytest.mark.slow
def test_the_int8_cache_entry_beside_the_export(int8_scorer, monkeypatch) -> None:
    import hashlib

    encoder = int8_scorer.encoder
    entry = int8_entry_of(encoder.cache_entry)
    meta = json.loads((entry / "meta.json").read_text(encoding="utf-8"))
    assert meta["scheme"] == int8.SCHEME
    assert meta["matrices"] == 36  # 6 layers x (Q, K, V, attention output, two feed-forward)
    assert meta["validation"]["median_relative_error"] <= int8.VALIDATION_BOUND
    assert meta["source"]["entry"] == encoder.cache_entry.name
    assert meta["files"]["model.onnx"]["sha256"] == hashlib.sha256((entry / "model.onnx").read_bytes()).hexdigest()
    assert entry_damage(entry) is None
    # Built once: a second request finds it (and quantises nothing).
    monkeypatch.setattr(int8, "_quantize_into", lambda *a: pytest.fail("the cached int8 graph was rebuilt"))
    assert cached_int8(encoder.cache_entry, encoder.tokenizer, encoder.spec.pad_id) == (entry, False)


def test_activation_bits_follow_the_cpu(monkeypatch) -> None:
    from rapidscore.encoder import precision

    for x86, vnni, bits in [(True, False, 7), (True, True, 8), (False, False, 8)]:
        monkeypatch.setattr(precision, "is_x86", lambda x86=x86: x86)
        monkeypatch.setattr(precision, "cpu_has_vnni", lambda vnni=vnni: vnni)
        assert int8.activation_bits() == bits, (x86, vnni)


@pytest.mark.slow
def test_each_activation_width_has_its_own_cache_entry(tiny_model_path, tmp_path, monkeypatch) -> None:
    # A cache shared by CPUs with and without VNNI holds both graphs, each saying which it is.
    encoder = Encoder(str(tiny_model_path("bert")), cache_dir=tmp_path)
    built = []
    for bits in (7, 8):
        monkeypatch.setattr(int8, "activation_bits", lambda bits=bits: bits)
        built.append(cached_int8(encoder.cache_entry, encoder.tokenizer, encoder.spec.pad_id))
    assert [new for _, new in built] == [True, True]
    entries = sorted(p for p in tmp_path.rglob("*.int8-*") if p.is_dir())
    assert sorted(entry for entry, _ in built) == entries and len(entries) == 2
    metas = [json.loads((e / "meta.json").read_text(encoding="utf-8")) for e in entries]
    assert sorted(m["activation_bits"] for m in metas) == [7, 8]
    graphs = {m["activation_bits"]: onnx_ops(e / "model.onnx") for m, e in zip(metas, entries)}
    assert "DynamicQuantizeLinear" in graphs[8] and "DynamicQuantizeLinear" not in graphs[7]


def onnx_ops(path: Path) -> set[str]:
    import onnx

    return {n.op_type for n in onnx.load(str(path)).graph.node}


@pytest.mark.slow
def test_a_damaged_int8_entry_is_rebuilt(tiny_model_path, tmp_path, monkeypatch) -> None:
    # A tiny model in its own cache (a MiniLM rebuild takes ~15 s; the logic is the same).
    encoder = Encoder(str(tiny_model_path("bert")), precision="int8", cache_dir=tmp_path)
    expected = encoder.token_embeddings(FAMILY_TEXTS)
    entry = int8_entry_of(encoder.cache_entry)
    size = (entry / "model.onnx").stat().st_size
    with open(entry / "model.onnx", "r+b") as handle:
        handle.truncate(size // 2)
    assert entry_damage(entry) is not None
    rebuilt, built = cached_int8(encoder.cache_entry, encoder.tokenizer, encoder.spec.pad_id)
    assert (rebuilt, built) == (entry, True)
    assert entry_damage(entry) is None and (entry / "model.onnx").stat().st_size == size
    # And a new process's encoder (an empty model cache) runs the rebuilt graph.
    monkeypatch.setattr(cache_module, "MODELS", KeyedCache(cache_module.MAX_MODELS))
    again = Encoder(str(tiny_model_path("bert")), precision="int8", cache_dir=tmp_path)
    for got, want in zip(again.token_embeddings(FAMILY_TEXTS), expected):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())


@pytest.mark.slow
def test_a_model_with_nothing_to_quantise_is_refused_and_the_refusal_recorded(minilm_path, tmp_path,
                                                                               monkeypatch) -> None:
    with pytest.raises(Int8Error, match="no weight matrices to quantise"):
        Encoder(str(minilm_path), layer=0, precision="int8", cache_dir=tmp_path)  # the embeddings only
    refusals = list(tmp_path.rglob("*.int8-*.refused.json"))
    assert len(refusals) == 1
    assert "no weight matrices" in json.loads(refusals[0].read_text(encoding="utf-8"))["reason"]
    # Again: the recorded refusal answers, without another look at the graph.
    monkeypatch.setattr(int8, "_quantize_into", lambda *a: pytest.fail("the refused model was quantised again"))
    with pytest.raises(Int8Error, match="no weight matrices to quantise"):
        Encoder(str(minilm_path), layer=0, precision="int8", cache_dir=tmp_path)


# ---------------------------------------------------------------- errors ----------------------

@pytest.mark.parametrize("options, named", [({"backend": "openvino"}, "backend='openvino'"),
                                            ({"backend": "torch"}, "backend='torch'"),
                                            ({"device": "cuda"}, "device='cuda'")])
def test_int8_off_onnx_runtime_on_the_cpu_is_a_value_error(minilm_path, options, named) -> None:
    with pytest.raises(ValueError, match="precision='int8'") as raised:
        Encoder(str(minilm_path), precision="int8", **options)
    assert named in str(raised.value)


# ---------------------------------------------------------------- tiny families ---------------

@pytest.mark.slow
@pytest.mark.parametrize("tiny_model", tiny_models.FAMILIES, indirect=True)
def test_every_family_runs_int8_close_to_fp32_or_is_refused(tiny_model) -> None:
    # The session cache: the fp32 exports are shared with the other tiny-family tests.
    exact = Encoder(str(tiny_model)).token_embeddings(FAMILY_TEXTS)
    try:
        encoder = Encoder(str(tiny_model), precision="int8")
        approx = encoder.token_embeddings(FAMILY_TEXTS)
    except Int8Error as exc:  # refused: it must say why and what to use instead
        assert "precision='int8'" in str(exc) and "fp32" in str(exc), str(exc)
        return
    assert encoder.precision == "int8" and encoder.backend == "onnx"
    assert [a.shape for a in approx] == [e.shape for e in exact]
    errors = relative_token_errors(exact, approx)
    assert np.isfinite(errors).all()
    assert np.median(errors) <= int8.VALIDATION_BOUND, (tiny_model.name, float(np.median(errors)))


@pytest.mark.slow
def test_int8_on_a_model_without_a_matching_onnx_graph_is_refused_clearly(tiny_model_path, tmp_path) -> None:
    # Longformer's graph differs from the model (tests/bertscore/test_families.py: TORCH_ONLY): fp32
    # falls back to torch with a warning, but int8 runs on ONNX Runtime only.
    with pytest.raises(Int8Error, match="precision='int8' runs the ONNX export"):
        Encoder(str(tiny_model_path("longformer")), layer=3, precision="int8", cache_dir=tmp_path)
