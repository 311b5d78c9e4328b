"""``precision="int8"``: the exported graph with every weight matrix in int8, run by ONNX Runtime.

Each weighted MatMul / Gemm ``y = x @ W (+ b)`` becomes two int8 passes, over the activation ``x``
and over its rounding residual (:func:`activation_bits` bits each: 8, or 7 on x86 CPUs without
VNNI), against weights in int8 per output column, asymmetric, rounded by GPTQ (:func:`gptq_int8`)
on the second moments of the inputs measured on the shipped calibration corpus
(``int8_calibration.txt``), after the weight rows are equalised (``EQUALISE``). The graph is built
on first use (:func:`cached_int8`) and kept in the disk cache beside the fp32 export
(``<cache>/onnx/<fp32 key>.int8-<hash>``; ``encoder/export/disk_cache.py``: one build per machine,
checked on load); a model whose int8 graph does not reproduce its fp32 embeddings
(``VALIDATION_BOUND``), or that has no weight matrices, is refused with :class:`Int8Error`. It
runs in the same thread-safe ``OnnxRunner`` as fp32.

Why this scheme, what it costs and how it was chosen: docs/encoder.md, "The int8 graph"; the
measurements: bench/RESULTS.md ("int8 schemes", "Issue 26").
"""
from __future__ import annotations

import functools
import hashlib
import logging
import time
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from rapidscore.errors import Int8Error

__all__ = ["Int8Error", "SCHEME", "VALIDATION_BOUND", "calibration_texts", "cached_int8", "quantize_graph",
           "gptq_int8"]

logger = logging.getLogger("rapidscore")

#: the scheme's name, recorded in the cache entry (bump the version when the graph changes)
SCHEME = "int8-2pass-gptq-asymmetric-equalise0.25/v2"  # the activation bits go into the digest
#: largest accepted relative error of the int8 graph's token embeddings against fp32 on the
#: calibration texts (median over tokens): a guard against a graph the rewriting broke, not the
#: accuracy bound (all-MiniLM-L6-v2: 1.4e-2; a broken graph: 0.3 and more)
VALIDATION_BOUND = 0.1
#: X^T X of the calibrated inputs held at once (float64), bytes: larger models calibrate in rounds
HESSIAN_BUDGET = 1 << 30
#: calibration batches: token budget per padded batch
CALIBRATION_BATCH_TOKENS = 1024
#: weight-range equalisation exponent (0: off): input channel j of the weights reading an
#: activation is scaled by t_j = (max_k |W_jk| / median_j)^-EQUALISE, the activation by 1 / t_j
EQUALISE = 0.25


def activation_bits() -> int:
    """Bits per activation pass on this machine: 7 on x86 CPUs without VNNI (their ``vpmaddubsw``
    adds two u8 x s8 products in 16 bits and saturates when both are large: 255 * 127 * 2 > 32767,
    while 127 * 128 * 2 = 32512 fits), 8 where the products are summed in 32 bits (VNNI's
    ``vpdpbusd``; ARM's dot-product and widening multiplies)."""
    from rapidscore.encoder.precision import cpu_has_vnni, is_x86

    return 7 if is_x86() and not cpu_has_vnni() else 8


def _residual_levels(bits: int) -> int:
    """Steps of the residual pass, centred on the code levels / 2: codes in [0, 2^bits - 2]."""
    return (1 << bits) - 2


def calibration_texts() -> list[str]:
    """The calibration corpus shipped with rapidscore (one text per line)."""
    text = resources.files("rapidscore.encoder").joinpath("int8_calibration.txt").read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line.strip()]


def _scheme_digest(bits: int) -> str:
    digest = hashlib.sha256(f"{SCHEME}/{bits}-bit activations".encode())
    digest.update("\n".join(calibration_texts()).encode("utf-8"))
    return digest.hexdigest()[:12]


# ---------------------------------------------------------------- weights ---------------------

def gptq_int8(w: np.ndarray, hessian: np.ndarray, damp: float = 0.01,
              block: int = 128) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """GPTQ rounding of the weight ``w`` (inputs x outputs) to asymmetric int8 per output column: the
    column's range [min(w, 0), max(w, 0)] in 255 steps (scale), 0 at the code ``zero``, so
    ``w ~ (q - zero) * scale`` (an asymmetric grid is up to twice as fine as a symmetric one where a
    column's largest weights lie on one side). Inputs in order of descending ``hessian`` diagonal
    (X^T X of the inputs), each rounding error spread over the inputs not yet rounded. Returns
    (int8 codes, float32 scales, int8 zero points); with ``hessian`` the identity this is plain
    rounding."""
    w = w.astype(np.float64, copy=True)
    k = w.shape[0]
    hi, lo = np.maximum(w.max(axis=0), 0), np.minimum(w.min(axis=0), 0)
    scale = (hi - lo) / 255
    scale[scale == 0] = 1
    zero = np.round(-lo / scale) - 128  # in [-128, 127]: lo maps to -128, 0 exactly to zero

    def rounded_row(row: np.ndarray) -> np.ndarray:
        return np.clip(np.round(row / scale) + zero, -128, 127)

    h = hessian.astype(np.float64, copy=True)
    dead = np.diag(h) == 0  # inputs never nonzero in calibration: their weights do not matter
    h[dead, dead] = 1
    w[dead] = 0
    order = np.argsort(-np.diag(h), kind="stable")
    w, h = w[order], h[order][:, order]
    h[np.diag_indices(k)] += damp * np.mean(np.diag(h))
    hinv = np.linalg.cholesky(np.linalg.inv(h)).T
    codes = np.zeros_like(w)
    for i1 in range(0, k, block):
        i2 = min(i1 + block, k)
        part, errors = w[i1:i2].copy(), np.zeros((i2 - i1, w.shape[1]))
        for i in range(i2 - i1):
            codes[i1 + i] = rounded_row(part[i])
            errors[i] = (part[i] - (codes[i1 + i] - zero) * scale) / hinv[i1 + i, i1 + i]
            part[i + 1:] -= np.outer(hinv[i1 + i, i1 + i + 1:i2], errors[i])
        w[i2:] -= hinv[i1:i2, i2:].T @ errors
    codes = codes[np.argsort(order)]
    return codes.astype(np.int8), scale.astype(np.float32), zero.astype(np.int8)


class _Weighted:
    """A MatMul or Gemm of the graph with a constant 2-D weight: what gets quantised. The weight
    (inputs x outputs) is read from its initializer on first use only."""

    def __init__(self, node, initializer, transposed: bool, bias: str | None):
        self.node, self.bias, self._initializer, self._transposed = node, bias, initializer, transposed
        self.key = (node.input[1], transposed)  # one quantised matrix per stored weight and orientation
        self.inputs = int(initializer.dims[1 if transposed else 0])

    @property
    def activation(self) -> str:
        return self.node.input[0]

    @functools.cached_property
    def weight(self) -> np.ndarray:
        from onnx import numpy_helper

        weight = numpy_helper.to_array(self._initializer)
        return np.ascontiguousarray(weight.T if self._transposed else weight)


def _weighted_nodes(model) -> list[_Weighted]:
    from onnx import helper

    inits = {init.name: init for init in model.graph.initializer}
    found = []
    for node in model.graph.node:
        if node.op_type not in ("MatMul", "Gemm") or len(node.input) < 2 or node.input[1] not in inits \
                or node.input[0] in inits:
            continue
        if inits[node.input[1]].data_type != 1 or len(inits[node.input[1]].dims) != 2:  # float32 matrices only
            continue
        bias, transposed = None, False
        if node.op_type == "Gemm":
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            if attrs.get("transA", 0) or attrs.get("alpha", 1.0) != 1.0 or attrs.get("beta", 1.0) != 1.0:
                continue
            transposed = bool(attrs.get("transB", 0))
            if len(node.input) > 2 and node.input[2]:
                if node.input[2] not in inits or len(inits[node.input[2]].dims) != 1:
                    continue
                bias = node.input[2]
        found.append(_Weighted(node, inits[node.input[1]], transposed, bias))
    return found


# ---------------------------------------------------------------- calibration -----------------

def _calibration_batches(texts: list[str], tokenizer, pad_id: int) -> list[tuple[np.ndarray, np.ndarray]]:
    from rapidscore.encoder.tokens.batching import pad_batch

    ids, _ = tokenizer.encode(texts)
    ids = sorted((seq for seq in ids if len(seq)), key=len)
    batches, start = [], 0
    while start < len(ids):
        end = start + 1
        while end < len(ids) and (end - start + 1) * len(ids[end]) <= CALIBRATION_BATCH_TOKENS:
            end += 1
        batches.append(pad_batch(ids[start:end], pad_id))
        start = end
    return batches


def _session(graph: Path, num_threads: int | None):
    """An ONNX Runtime CPU session of the graph file (from the file, not from bytes: a large
    model's weights are held once)."""
    from rapidscore.encoder.runtime.onnx import import_onnxruntime
    from rapidscore.threads import thread_budget

    ort = import_onnxruntime("precision='int8'")
    options = ort.SessionOptions()
    options.intra_op_num_threads = num_threads or thread_budget()
    options.log_severity_level = 3
    return ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])


def _feed(session, input_ids: np.ndarray, attention_mask: np.ndarray) -> dict[str, np.ndarray]:
    names = {i.name for i in session.get_inputs()}
    return {k: v for k, v in {"input_ids": input_ids, "attention_mask": attention_mask}.items() if k in names}


def _real_rows(out: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    """The rows of an activation that belong to real tokens, as (tokens, channels)."""
    mask = attention_mask.astype(bool)
    if out.shape[:2] == mask.shape:
        return out[mask]
    flat = out.reshape(-1, out.shape[-1])
    return flat[mask.ravel()] if flat.shape[0] == mask.size else flat


def calibration_hessians(model, batches, channels: dict[str, int], workdir: Path,
                         num_threads: int | None = None) -> dict[str, np.ndarray]:
    """X^T X (float64) over the real tokens of ``batches`` for each activation of ``model`` named
    in ``channels`` (its width). One session of ``model`` with every such activation as an output
    (written to ``workdir``); the matrices are accumulated in rounds that fit ``HESSIAN_BUDGET``,
    each round a pass over the batches (roberta-large to layer 17: 3 rounds)."""
    import onnx

    probe_file = Path(workdir) / "calibration.onnx"
    outputs = list(model.graph.output)
    del model.graph.output[:]
    model.graph.output.extend(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None)
                              for name in channels)
    try:
        onnx.save(model, str(probe_file))
    finally:
        del model.graph.output[:]
        model.graph.output.extend(outputs)
    session = _session(probe_file, num_threads)
    hessians: dict[str, np.ndarray] = {}
    remaining = list(channels)
    try:
        while remaining:
            round_names: list[str] = []
            held = 0
            for name in remaining:
                cost = 8 * channels[name] ** 2
                if round_names and held + cost > HESSIAN_BUDGET:
                    break
                round_names.append(name)
                held += cost
            for input_ids, attention_mask in batches:
                values = session.run(round_names, _feed(session, input_ids, attention_mask))
                for name, out in zip(round_names, values):
                    x = _real_rows(out, attention_mask).astype(np.float64)
                    if name not in hessians:
                        hessians[name] = np.zeros((x.shape[1], x.shape[1]))
                    hessians[name] += x.T @ x
            remaining = remaining[len(round_names):]
    finally:
        del session
        probe_file.unlink(missing_ok=True)
    return hessians


# ---------------------------------------------------------------- rewriting -------------------

def quantize_graph(model, hessians: dict[str, np.ndarray], bits: int | None = None) -> int:
    """Rewrite ``model`` in place: every weighted MatMul / Gemm as two int8 passes of ``bits`` bits
    each (7 or 8; default :func:`activation_bits`), see the module. Returns the number of matrices
    quantised."""
    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    weighted = _weighted_nodes(model)
    by_weight: dict[str, list[_Weighted]] = {}
    for w in weighted:
        by_weight.setdefault(w.node.input[1], []).append(w)
    quantised_weights: dict[tuple[str, bool], tuple[str, str, str]] = {}
    bits = activation_bits() if bits is None else bits
    if bits not in (7, 8):
        raise ValueError(f"int8 activation passes have 7 or 8 bits, got {bits!r}")
    residual_levels = _residual_levels(bits)
    new_initializers = [numpy_helper.from_array(np.array(126, np.float32), "int8_levels"),
                        numpy_helper.from_array(np.array(residual_levels, np.float32), "int8_residual_levels"),
                        numpy_helper.from_array(np.array(0.0, np.float32), "int8_zero"),
                        numpy_helper.from_array(np.array(1e-30, np.float32), "int8_tiny"),
                        numpy_helper.from_array(np.array(residual_levels // 2, np.uint8), "int8_residual_zp")]
    quantised_activations: set[str] = set()
    replaced: dict[int, list] = {}  # by id(node): exported nodes may have no name
    equalise = _equalisation(weighted, by_weight)
    for w in weighted:
        node, x = w.node, w.activation
        tag = f"int8_{len(replaced)}"
        nodes = []
        p = f"{x}__int8"
        if x not in quantised_activations:  # once per activation: Q, K and V share it
            quantised_activations.add(x)
            if x in equalise:
                new_initializers.append(numpy_helper.from_array((1 / equalise[x]).astype(np.float32), p + "_inv_t"))
                nodes.append(helper.make_node("Mul", [x, p + "_inv_t"], [p + "_x"]))
                x = p + "_x"
            if bits == 8:  # scale (max - min) / 255 and zero point in one node
                nodes.append(helper.make_node("DynamicQuantizeLinear", [x], [p + "_q", p + "_s", p + "_zp"]))
            else:  # the same with 126 steps: codes in [0, 127]
                nodes += [
                    helper.make_node("ReduceMin", [x], [p + "_min"], keepdims=0),
                    helper.make_node("ReduceMax", [x], [p + "_max"], keepdims=0),
                    helper.make_node("Min", [p + "_min", "int8_zero"], [p + "_lo"]),
                    helper.make_node("Max", [p + "_max", "int8_zero"], [p + "_hi"]),
                    helper.make_node("Sub", [p + "_hi", p + "_lo"], [p + "_range"]),
                    helper.make_node("Div", [p + "_range", "int8_levels"], [p + "_s0"]),
                    helper.make_node("Max", [p + "_s0", "int8_tiny"], [p + "_s"]),
                    helper.make_node("Div", [p + "_lo", p + "_s"], [p + "_lo_steps"]),
                    helper.make_node("Neg", [p + "_lo_steps"], [p + "_zp_f"]),
                    helper.make_node("Round", [p + "_zp_f"], [p + "_zp_r"]),
                    helper.make_node("Cast", [p + "_zp_r"], [p + "_zp"], to=TensorProto.UINT8),
                    helper.make_node("QuantizeLinear", [x, p + "_s", p + "_zp"], [p + "_q"]),
                ]
            nodes += [
                helper.make_node("DequantizeLinear", [p + "_q", p + "_s", p + "_zp"], [p + "_dq"]),
                helper.make_node("Sub", [x, p + "_dq"], [p + "_r"]),
                helper.make_node("Div", [p + "_s", "int8_residual_levels"], [p + "_rs"]),
                helper.make_node("QuantizeLinear", [p + "_r", p + "_rs", "int8_residual_zp"], [p + "_rq"]),
            ]
        key = w.key
        if key not in quantised_weights:
            sharing = by_weight[node.input[1]]
            hessian = np.sum([hessians[x] for x in {s.activation for s in sharing}], axis=0)
            weight = w.weight
            if w.activation in equalise:  # x / t times t W
                t = equalise[w.activation].astype(np.float64)
                weight, hessian = weight * t[:, None], hessian / np.outer(t, t)
            q, scale, zero = gptq_int8(weight, hessian)
            name = f"{tag}_w"
            new_initializers += [numpy_helper.from_array(q, name + "q"), numpy_helper.from_array(scale, name + "s"),
                                 numpy_helper.from_array(zero, name + "z")]
            quantised_weights[key] = (name + "q", name + "s", name + "z")
        wq, ws, wz = quantised_weights[key]
        first = [p + "_q", wq, p + "_s", ws, p + "_zp", wz]
        if w.bias is not None:
            first.append(w.bias)  # the bias added in the first pass
        nodes += [helper.make_node("MatMulIntegerToFloat", first, [tag + "_y1"], domain="com.microsoft"),
                  helper.make_node("MatMulIntegerToFloat", [p + "_rq", wq, p + "_rs", ws, "int8_residual_zp", wz],
                                   [tag + "_y2"], domain="com.microsoft"),
                  helper.make_node("Add", [tag + "_y1", tag + "_y2"], [node.output[0]])]
        replaced[id(node)] = nodes
    new_nodes = [m for n in graph.node for m in replaced.get(id(n), [n])]
    used = {i for n in new_nodes for i in n.input}
    kept = [init for init in graph.initializer if init.name in used]
    del graph.node[:]
    graph.node.extend(new_nodes)
    del graph.initializer[:]
    graph.initializer.extend(kept + [i for i in new_initializers if i.name in used])
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return len(quantised_weights)


def _equalisation(weighted: list[_Weighted], by_weight: dict) -> dict[str, np.ndarray]:
    if not EQUALISE:
        return {}
    rows: dict[str, np.ndarray] = {}
    shared = {w.activation for ws in by_weight.values() for w in ws if len({v.activation for v in ws}) > 1}
    for w in weighted:
        if w.activation in shared:
            continue
        m = np.abs(w.weight).max(axis=1)
        rows[w.activation] = np.maximum(rows.get(w.activation, m), m)
    out = {}
    for x, m in rows.items():
        m = np.maximum(m, 1e-8)
        out[x] = np.clip((m / np.median(m)) ** -EQUALISE, 1e-2, 1e2)
    return out


def _validate(fp32_graph: Path, int8_graph: Path, batches, num_threads: int | None) -> dict[str, float]:
    """Relative error of the int8 graph's token embeddings against fp32 on ``batches``."""
    errors = []
    exact = _session(fp32_graph, num_threads)
    expected = [_real_rows(exact.run(None, _feed(exact, ids, mask))[0], mask) for ids, mask in batches]
    del exact
    fast = _session(int8_graph, num_threads)
    for (input_ids, attention_mask), a in zip(batches, expected):
        b = _real_rows(fast.run(None, _feed(fast, input_ids, attention_mask))[0], attention_mask)
        if not np.isfinite(b).all():
            return {"median_relative_error": float("inf"), "max_relative_error": float("inf")}
        errors.append(np.linalg.norm(b - a, axis=-1) / np.maximum(np.linalg.norm(a, axis=-1), 1e-12))
    e = np.concatenate(errors)
    return {"median_relative_error": float(np.median(e)), "max_relative_error": float(e.max())}


# ---------------------------------------------------------------- the cache entry -------------

def cached_int8(fp32_entry: Path, tokenizer, pad_id: int, num_threads: int | None = None, *,
                root: Path | None = None) -> tuple[Path, bool]:
    """The int8 cache entry of the fp32 export ``fp32_entry`` (built on first use: calibration,
    GPTQ, rewriting, validation; seconds for all-MiniLM-L6-v2, minutes for large models) and
    whether this call built it. ``tokenizer``: a ``BatchTokenizer`` of the model. ``root``: the
    disk cache it goes to (default: beside ``fp32_entry``; a shipped entry's is read-only)."""
    from rapidscore.encoder.export.disk_cache import build_entry, entry_damage, refusal_reason, write_entry_meta
    from rapidscore.encoder.export.onnx_export import EXPORTER_VERSION

    fp32_entry = Path(fp32_entry)
    root = fp32_entry.parent if root is None else Path(root)
    bits = activation_bits()  # one entry per kind of CPU sharing the cache: the graphs differ
    key = f"{fp32_entry.name}.int8-{_scheme_digest(bits)}"
    entry = root / key
    refused = root / f"{key}.refused.json"
    if entry.exists() and entry_damage(entry) is None:
        return entry, False
    if refused.is_file():
        raise Int8Error(refusal_reason(refused))
    from rapidscore.encoder.runtime.torch import require_torch_stack

    require_torch_stack("precision='int8' (quantising the ONNX graph on first use)", ("onnx",))

    def quantise(staging: Path) -> None:
        logger.info("quantising %s to int8 (first use of precision='int8' for this model and layer; "
                    "about 20 s for all-MiniLM-L6-v2, minutes for large models)", fp32_entry)
        started = time.perf_counter()
        meta = _quantize_into(staging, fp32_entry, tokenizer, pad_id, num_threads, bits)
        write_entry_meta(staging, meta)  # every file recorded, checked whenever the entry is loaded
        logger.info("quantised %s to int8 in %.1f s", fp32_entry, time.perf_counter() - started)

    return build_entry(root, key, quantise, refusal=refused, refused_by=Int8Error,
                       refusal_record={"exporter_version": EXPORTER_VERSION})


def _quantize_into(target: Path, fp32_entry: Path, tokenizer, pad_id: int, num_threads: int | None,
                   bits: int) -> dict[str, Any]:
    import onnx

    from rapidscore.encoder.export.disk_cache import file_record

    source = fp32_entry / "model.onnx"
    model = onnx.load(str(source))
    weighted = _weighted_nodes(model)
    if not weighted:
        raise Int8Error(f"precision='int8' found no weight matrices to quantise in {source} (an embedding-only "
                        "layer?); use precision='fp32'")
    texts = calibration_texts()
    batches = _calibration_batches(texts, tokenizer, pad_id)
    channels = {w.activation: w.inputs for w in weighted}
    hessians = calibration_hessians(model, batches, channels, target, num_threads)
    matrices = quantize_graph(model, hessians, bits)  # in place: the fp32 graph stays on disk
    del hessians
    onnx.save(model, str(target / "model.onnx"))
    del model
    validation = _validate(source, target / "model.onnx", batches, num_threads)
    if not validation["median_relative_error"] <= VALIDATION_BOUND:
        raise Int8Error(f"the int8 graph of {source} does not reproduce its fp32 embeddings: median relative "
                        f"error {validation['median_relative_error']:.3g} on the calibration texts (bound "
                        f"{VALIDATION_BOUND}); this model cannot run in precision='int8', use 'fp32' or 'bf16'")
    tokens = int(sum(int(mask.sum()) for _, mask in batches))
    return {"scheme": SCHEME, "activation_bits": bits,
            "source": {"entry": fp32_entry.name, "sha256": file_record(source)["sha256"]},
            "matrices": matrices, "validation": validation,
            "calibration": {"texts": len(texts), "tokens": tokens, "corpus": "rapidscore/encoder/int8_calibration.txt"}}

