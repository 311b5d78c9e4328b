"""Length-sorted batching under a token budget, to keep padding small."""

from __future__ import annotations

import numpy as np

# Padded tokens per batch. On CPUs, per-token speed falls once a batch's activations outgrow the
# caches: all-MiniLM-L6-v2 under ONNX Runtime on a 2-core EPYC ran 17.2k tokens/s at 512-1024
# tokens per batch and 15k at 4096; a roberta-large-sized model 950 at 500-1000 and 760 at 5120.
# OpenVINO's bf16 kernels peak a little later (2048). GPUs want large batches.
CPU_BATCH_TOKENS = {"fp32": 1024, "bf16": 2048}
GPU_BATCH_TOKENS = 16384
# A batch's real tokens must fill this share of its padded size. Small batches cost little extra
# per call (about 20 tokens' worth of time), so padding is the larger waste.
MIN_FILL = 0.95


def default_batch_tokens(device: str, precision: str) -> int:
    """Token budget per batch for where and how the model runs."""
    return GPU_BATCH_TOKENS if device == "cuda" else CPU_BATCH_TOKENS.get(precision, CPU_BATCH_TOKENS["fp32"])


def plan_batches(lengths, batch_tokens: int, max_batch_size: int, min_fill: float = MIN_FILL) -> list[np.ndarray]:
    """Group sequence indices into batches, longest first.

    Each batch holds sequences of similar length: its padded size (count x longest) stays within
    ``batch_tokens`` (a single over-long sequence still gets a batch of its own), its count within
    ``max_batch_size``, and its real tokens fill at least ``min_fill`` of the padded size (so a
    batch never mixes very different lengths). Returns arrays of indices into ``lengths``.
    """
    if batch_tokens < 1 or max_batch_size < 1:
        raise ValueError(f"batch_tokens and max_batch_size must be >= 1, got {batch_tokens}, {max_batch_size}")
    lengths = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(-lengths, kind="stable")
    sorted_lengths = np.maximum(lengths[order], 1)
    batches: list[np.ndarray] = []
    start, n = 0, len(order)
    while start < n:
        longest = int(sorted_lengths[start])
        size = max(1, min(max_batch_size, batch_tokens // longest, n - start))
        # Real-token fill of the batch's first k sequences; keep the largest k that fills enough.
        fill = np.cumsum(sorted_lengths[start:start + size]) / (longest * np.arange(1, size + 1))
        size = int(np.flatnonzero(fill >= min_fill)[-1]) + 1
        batches.append(order[start:start + size])
        start += size
    return batches


def pad_batch(sequences: list[np.ndarray], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Right-pad id sequences into (input_ids, attention_mask), both int64 (batch, longest)."""
    lengths = np.fromiter((len(seq) for seq in sequences), dtype=np.int64, count=len(sequences))
    longest = int(lengths.max())
    attention_mask = (np.arange(longest) < lengths[:, None]).astype(np.int64)
    input_ids = np.full((len(sequences), longest), pad_id, dtype=np.int64)
    input_ids[attention_mask.astype(bool)] = np.concatenate(sequences)  # row-major: row after row
    return input_ids, attention_mask
