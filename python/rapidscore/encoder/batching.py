"""Length-sorted batching under a token budget, to keep padding small."""

from __future__ import annotations

import numpy as np


def plan_batches(lengths, batch_tokens: int, max_batch_size: int, min_fill: float = 0.85) -> list[np.ndarray]:
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
    longest = max(len(seq) for seq in sequences)
    input_ids = np.full((len(sequences), longest), pad_id, dtype=np.int64)
    attention_mask = np.zeros((len(sequences), longest), dtype=np.int64)
    for row, seq in enumerate(sequences):
        input_ids[row, : len(seq)] = seq
        attention_mask[row, : len(seq)] = 1
    return input_ids, attention_mask
