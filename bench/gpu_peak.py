"""Matrix-product FLOPs of a transformer encoder's forward pass and the GPU's fp16 tensor peak,
shared by bench/bench_gpu.py and bench/profile_gpu.py (issue 39: "the bare fp16 forward's share
of the fp16 tensor peak").

FLOPs are counted analytically over the padded batches the model actually ran (every padded
token costs what a real one does). Per token and layer, with h the hidden size, f the
feed-forward size and L the batch's padded length:

    Q, K, V and output projections   4 h^2 multiply-adds  = 2 * 4 h^2 FLOPs
    feed-forward (up and down)       2 h f multiply-adds  = 2 * 2 h f FLOPs
    attention scores and weighted sum: 2 L h multiply-adds = 2 * 2 L h FLOPs

Embeddings, layer norms, softmax, GELU and the bias additions are not counted (they are not matrix
products). The peak is the vendor's dense (no sparsity) fp16 tensor-core rate for the GPU's name;
a name outside the table gives no peak ("n/a") rather than a guess. Nothing here imports torch.
"""

from __future__ import annotations

import json
from pathlib import Path

# (what the name must contain, what it must not, dense fp16 tensor FLOP/s, label). First match wins.
FP16_DENSE_PEAKS = (
    (("H200",), (), 989.4e12, "H200 (SXM): 989.4 TFLOP/s fp16 dense"),
    (("H100", "PCIE"), (), 756e12, "H100 PCIe: 756 TFLOP/s fp16 dense"),
    (("H100", "SXM"), (), 989.4e12, "H100 SXM: 989.4 TFLOP/s fp16 dense"),
    (("H100", "HBM3"), ("NVL",), 989.4e12, "H100 SXM (HBM3): 989.4 TFLOP/s fp16 dense"),
    (("A100",), (), 312e12, "A100: 312 TFLOP/s fp16 dense"),
)


def fp16_dense_peak(gpu_name: str | None) -> tuple[float | None, str]:
    """(FLOP/s, label) of the GPU's dense fp16 tensor peak; (None, "n/a (...)") when the name is
    not in the table (or there is no GPU)."""
    if not gpu_name:
        return None, "n/a (no GPU)"
    upper = gpu_name.upper()
    for needed, refused, peak, label in FP16_DENSE_PEAKS:
        if all(word in upper for word in needed) and not any(word in upper for word in refused):
            return peak, label
    return None, f"n/a (no fp16 peak known for {gpu_name!r})"


def model_dims(model_dir) -> dict:
    """hidden size and feed-forward size from a Hugging Face config.json (BERT-style names, with
    the DistilBERT / BART spellings as fallbacks)."""
    config = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    hidden = config.get("hidden_size") or config.get("dim") or config.get("d_model")
    ffn = (config.get("intermediate_size") or config.get("hidden_dim") or config.get("encoder_ffn_dim")
           or config.get("ffn_dim"))
    if not hidden or not ffn:
        raise ValueError(f"{model_dir}: config.json has no hidden / feed-forward size")
    return {"hidden": int(hidden), "ffn": int(ffn), "model_type": config.get("model_type", "unknown")}


def layer_flops_per_token(hidden: int, ffn: int, padded_length: int) -> float:
    """Matrix-product FLOPs of one token through one layer in a batch padded to ``padded_length``."""
    return 2.0 * 4 * hidden * hidden + 2.0 * 2 * hidden * ffn + 2.0 * 2 * padded_length * hidden


def encoder_flops(hidden: int, ffn: int, layers: int, shapes) -> float:
    """Matrix-product FLOPs of ``layers`` layers over batches of ``shapes`` ((batch, padded
    length) pairs), padding included."""
    total = 0.0
    for batch, length in shapes:
        total += batch * length * layer_flops_per_token(hidden, ffn, length)
    return total * layers


def achieved(flops: float, seconds: float | None, gpu_name: str | None) -> dict:
    """TFLOP/s achieved and the share of the fp16 dense peak (None where unknown)."""
    peak, label = fp16_dense_peak(gpu_name)
    rate = flops / seconds if seconds else None
    return {"flops": flops, "seconds": seconds, "tflops_per_s": None if rate is None else rate / 1e12,
            "fp16_peak_tflops": None if peak is None else peak / 1e12, "peak_label": label,
            "share_of_fp16_peak": None if rate is None or peak is None else rate / peak}
