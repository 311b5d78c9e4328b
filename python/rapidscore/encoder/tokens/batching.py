"""Length-sorted batching under a token budget, to keep padding small."""

from __future__ import annotations

import numpy as np

# Padded tokens per batch. On CPUs, per-token speed falls once a batch's activations outgrow the
# caches: all-MiniLM-L6-v2 under ONNX Runtime on a 2-core EPYC ran 17.2k tokens/s at 512-1024
# tokens per batch and 15k at 4096; a roberta-large-sized model 950 at 500-1000 and 760 at 5120.
# OpenVINO's bf16 kernels peak a little later (2048). GPUs want large batches.
CPU_BATCH_TOKENS = {"fp32": 1024, "bf16": 2048, "int8": 1024}
GPU_BATCH_TOKENS = 16384
# Large inputs: a batch's real tokens must fill this share of its padded size (padding is the
# larger waste there; the call cost below is under 3% of a full batch).
MIN_FILL = 0.95
# The fixed cost of one runtime call, in tokens' worth of time. On CPUs a call streams every weight
# from memory once whatever its size: all-MiniLM-L6-v2 under ONNX Runtime on a 2-core EPYC took
# 2.7 ms for one 12-token sentence and 1 ms more per further one (a roberta-large-sized model has
# the same ratio: weights per token and weights per call grow together). So a few short
# sentences of mixed lengths (a served request, a micro-batch) run fastest in one or two padded
# calls, not one call per length.
CALL_COST_TOKENS = 24
# Up to this many sequences the plan is the exact optimum of padded tokens + call costs (a
# dynamic programme, quadratic in the count); larger inputs use the greedy fill rule.
EXACT_PLAN_MAX_SEQUENCES = 256


def default_batch_tokens(device: str, precision: str) -> int:
    """Token budget per batch for where and how the model runs."""
    return GPU_BATCH_TOKENS if device == "cuda" else CPU_BATCH_TOKENS.get(precision, CPU_BATCH_TOKENS["fp32"])


def plan_batches(lengths, batch_tokens: int, max_batch_size: int, min_fill: float = MIN_FILL,
                 call_cost: int = CALL_COST_TOKENS) -> list[np.ndarray]:
    """Group sequence indices into batches, longest first.

    Each batch holds sequences of similar length: its padded size (count x longest) stays within
    ``batch_tokens`` (a single over-long sequence still gets a batch of its own) and its count
    within ``max_batch_size``. Up to ``EXACT_PLAN_MAX_SEQUENCES`` sequences, the batches minimise
    padded tokens + ``call_cost`` per batch; beyond, each batch's real tokens fill at least
    ``min_fill`` of its padded size. Returns arrays of indices into ``lengths``.
    """
    if batch_tokens < 1 or max_batch_size < 1:
        raise ValueError(f"batch_tokens and max_batch_size must be >= 1, got {batch_tokens}, {max_batch_size}")
    lengths = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(-lengths, kind="stable")
    sorted_lengths = np.maximum(lengths[order], 1)
    if len(order) <= EXACT_PLAN_MAX_SEQUENCES:
        cuts = cheapest_cuts(sorted_lengths, batch_tokens, max_batch_size, call_cost)
        return [order[start:end] for start, end in zip(cuts[:-1], cuts[1:])]
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


def cheapest_cuts(sorted_lengths: np.ndarray, batch_tokens: int, max_batch_size: int, call_cost: int) -> list[int]:
    """Batch boundaries [0, ..., n] over lengths sorted longest first that minimise the sum over
    batches of (count x longest + call_cost), within the budgets (a single sequence always fits).
    Batches of sorted lengths are contiguous runs, so best[j] = min over i of best[i] + cost(i, j).
    Plain Python: for the few dozen sentences of a served batch it is ten times quicker than
    numpy's per-call overhead, and the padded size only grows as a batch reaches back, so the
    inner loop stops at the token budget."""
    lengths = [int(length) for length in sorted_lengths]
    n = len(lengths)
    best = [0] * (n + 1)
    start_of = [0] * (n + 1)
    for end in range(1, n + 1):
        best_cost, best_start = best[end - 1] + lengths[end - 1] + call_cost, end - 1
        for start in range(end - 2, max(0, end - max_batch_size) - 1, -1):
            padded = (end - start) * lengths[start]
            if padded > batch_tokens:
                break
            cost = best[start] + padded + call_cost
            if cost <= best_cost:  # ties: the larger batch (fewer calls)
                best_cost, best_start = cost, start
        best[end], start_of[end] = best_cost, best_start
    cuts = [n]
    while cuts[-1] > 0:
        cuts.append(start_of[cuts[-1]])
    return cuts[::-1]


def equal_length_batches(lengths, batch_tokens: int, max_batch_size: int) -> list[np.ndarray]:
    """Batches of sequences of one length each (no padding), longest first, each within
    ``batch_tokens`` and ``max_batch_size``: for models whose output depends on padding (ConvBERT's
    convolution reads the pad positions), so each sentence comes out as if run alone."""
    if batch_tokens < 1 or max_batch_size < 1:
        raise ValueError(f"batch_tokens and max_batch_size must be >= 1, got {batch_tokens}, {max_batch_size}")
    lengths = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(-lengths, kind="stable")
    batches: list[np.ndarray] = []
    for group in np.split(order, np.flatnonzero(np.diff(lengths[order])) + 1) if len(order) else []:
        size = max(1, min(max_batch_size, batch_tokens // max(int(lengths[group[0]]), 1)))
        batches.extend(group[start:start + size] for start in range(0, len(group), size))
    return batches


def packed_batches(lengths, batch_tokens: int, max_batch_size: int) -> list[np.ndarray]:
    """Batches for the packed forward (no padding): longest first, each holding at most
    ``batch_tokens`` real tokens (a single longer sequence gets a batch of its own) and
    ``max_batch_size`` sequences. Padding costs nothing there, so no fill rule: fewer, fuller
    calls, which is what a GPU's launch-bound small model wants."""
    if batch_tokens < 1 or max_batch_size < 1:
        raise ValueError(f"batch_tokens and max_batch_size must be >= 1, got {batch_tokens}, {max_batch_size}")
    lengths = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(-lengths, kind="stable")
    totals = np.cumsum(np.maximum(lengths[order], 1))
    batches: list[np.ndarray] = []
    start, n, used = 0, len(order), 0
    while start < n:
        end = int(np.searchsorted(totals, used + batch_tokens, side="right"))
        end = min(max(end, start + 1), start + max_batch_size, n)
        batches.append(order[start:end])
        used, start = int(totals[end - 1]), end
    return batches


def pad_batch(sequences: list[np.ndarray], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Right-pad id sequences into (input_ids, attention_mask), both int64 (batch, longest)."""
    lengths = np.fromiter((len(seq) for seq in sequences), dtype=np.int64, count=len(sequences))
    longest = int(lengths.max())
    attention_mask = (np.arange(longest) < lengths[:, None]).astype(np.int64)
    input_ids = np.full((len(sequences), longest), pad_id, dtype=np.int64)
    input_ids[attention_mask.astype(bool)] = np.concatenate(sequences)  # row-major: row after row
    return input_ids, attention_mask


def unpadded_inputs(ids: list, pad_id: int, roberta_positions: bool) -> dict[str, np.ndarray]:
    """The unpadded graph's inputs (see ``torch_model.UnpaddedLayerOutput``) for non-empty token id
    sequences, int64. RoBERTa-style positions count the real (non-pad) tokens of a sentence from
    ``pad_id + 1``, as the model itself numbers them."""
    lengths = np.fromiter((len(seq) for seq in ids), dtype=np.int64, count=len(ids))
    if len(ids) == 0 or lengths.min() < 1:
        raise ValueError("unpadded_inputs takes one or more non-empty sequences")
    total, longest = int(lengths.sum()), int(lengths.max())
    input_ids = np.concatenate(ids).astype(np.int64, copy=False)
    starts = np.cumsum(lengths) - lengths
    positions = np.arange(total, dtype=np.int64) - np.repeat(starts, lengths)
    if roberta_positions:
        real = (input_ids != pad_id).astype(np.int64)
        counts = np.cumsum(real)  # real tokens so far, over the whole batch
        before = np.repeat(counts[starts] - real[starts], lengths)  # ... before each sentence
        positions = (counts - before) * real + pad_id
    attention_mask = (np.arange(longest) < lengths[:, None]).astype(np.int64)
    gather = np.full((len(ids), longest), total, dtype=np.int64)
    slots = np.flatnonzero(attention_mask.ravel())
    gather.ravel()[slots] = np.arange(total, dtype=np.int64)
    return {"input_ids": input_ids, "position_ids": positions, "gather": gather, "scatter": slots,
            "attention_mask": attention_mask}
