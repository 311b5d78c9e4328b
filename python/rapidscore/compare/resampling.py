"""The resampling core: paired bootstrap and paired approximate randomization, vectorised.

Every system is resampled with the same items (paired), and every system's column sums of a
resample come from one pass. Two resamplers draw the resamples:

- ``splitmix64`` (default): the native kernel :mod:`rapidscore.kernels.resampling` (a
  counter-based SplitMix64 stream, bounded draws by a 64-bit multiply, one gather of every
  system's row per draw; the randomization's swaps 64 items a draw, summed through per-byte
  subset tables), or its pure-Python twin, which gives the same sums bit for bit.
- ``numpy``: numpy's own streams, for exact reproduction of sacrebleu's
  (``sacrebleu/significance.py``) and scipy's resamples: the bootstrap's indices are
  ``default_rng(seed).integers(0, n, (resamples, n))`` (what ``rng.choice(n, (R, n))`` and
  ``scipy.stats.bootstrap`` draw), turned into per-resample item counts and one matrix product;
  the trials' swaps ``default_rng(seed).integers(2, (R, n), dtype=bool)``; drawn block by
  block, they are the same numbers.

Blocks keep memory bounded (``block_bytes``): 10,000 x 100,000 indices at once would be 8 GB.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from rapidscore.compare.statistics import ItemStats

__all__ = ["DEFAULT_BLOCK_BYTES", "RESAMPLERS", "DEFAULT_RESAMPLER", "bootstrap_values", "randomization_differences",
           "exhaustive", "percentile_interval", "bootstrap_p_value", "randomization_p_value", "adjust_p_values",
           "CORRECTIONS"]

DEFAULT_BLOCK_BYTES = 64 << 20  # the indices and counts of one block of resamples
CORRECTIONS = ("holm", "bonferroni", "none")
RESAMPLERS = ("splitmix64", "numpy")
DEFAULT_RESAMPLER = "splitmix64"


def _rows_per_block(n_items: int, total: int, block_bytes: int) -> int:
    # 16 bytes an element: the int64 indices (or bools) and their float64 counts
    rows = max(1, block_bytes // (16 * n_items))
    if rows >= 32:
        rows -= rows % 32  # whole 32-bit words of boolean draws: blocks draw the stream unsplit
    return min(rows, total)


def _stacked(systems: Sequence[ItemStats]) -> tuple[np.ndarray, list[slice]]:
    """The systems' columns side by side (n, K) and each system's slice of them."""
    slices, start = [], 0
    for stats in systems:
        slices.append(slice(start, start + stats.columns.shape[1]))
        start += stats.columns.shape[1]
    return np.ascontiguousarray(np.concatenate([s.columns for s in systems], axis=1)), slices


def bootstrap_blocks(n_items: int, resamples: int, seed: int | None,
                     block_bytes: int = DEFAULT_BLOCK_BYTES) -> Iterator[np.ndarray]:
    """Per-resample item counts, ``(rows, n_items)`` float64 blocks, ``resamples`` rows in all
    (one buffer: a block is overwritten by the next)."""
    rng = np.random.default_rng(seed)
    rows = _rows_per_block(n_items, resamples, block_bytes)
    index_type = np.int32 if n_items < 2**31 else np.int64
    counts = np.empty((rows, n_items), dtype=np.float64)
    for start in range(0, resamples, rows):
        size = min(rows, resamples - start)
        # int32 draws are the int64 draws' numbers (numpy's bounded draw below 2**32 is one
        # algorithm for both), a fifth faster and half the memory
        indices = rng.integers(0, n_items, size=(size, n_items), dtype=index_type)
        # one bincount per resample: a counts row stays in cache, where one bincount over the
        # block's offset indices scatters over the whole block
        for row in range(size):
            counts[row] = np.bincount(indices[row], minlength=n_items)
        yield counts[:size]


def _check_resampler(resampler: str) -> None:
    if resampler not in RESAMPLERS:
        raise ValueError(f"resampler: expected one of {', '.join(RESAMPLERS)}, got {resampler!r}")


def _stream_key(seed: int | None, stream: str) -> int:
    from rapidscore.kernels.resampling import stream_key

    if seed is None:  # as default_rng(None): fresh entropy from the operating system
        seed = int(np.random.SeedSequence().generate_state(1, np.uint64)[0])
    return stream_key(seed, stream)


def _kernel_sums(columns: np.ndarray, total: int, seed: int | None, stream: str, block_bytes: int,
                 constant_one: float | None) -> np.ndarray:
    """``(total, k)``: the kernel's sums of each column of ``columns`` over resamples (or trials)
    0 .. total - 1 of ``stream``. Columns of zeros sum to 0 and, with ``constant_one`` (the
    resample size), columns of ones to it, exactly: they are not sent to the kernel."""
    from rapidscore.kernels import resampling as kernel

    zeros = np.all(columns == 0.0, axis=0)
    ones = np.all(columns == 1.0, axis=0) if constant_one is not None else np.zeros_like(zeros)
    live = ~(zeros | ones)
    sums = np.zeros((total, columns.shape[1]))
    if constant_one is not None:
        sums[:, ones] = constant_one
    if not live.any():
        return sums
    rows = kernel.padded(columns[:, live])
    run = kernel.bootstrap_sums if stream == "bootstrap" else kernel.randomization_sums
    key = _stream_key(seed, stream)
    width = int(live.sum())
    per_call = max(1, block_bytes // (8 * rows.shape[1]))
    for first in range(0, total, per_call):
        count = min(per_call, total - first)
        sums[first:first + count, live] = run(rows, key, first, count)[:, :width]
    return sums


def bootstrap_values(systems: Sequence[ItemStats], resamples: int, seed: int | None,
                     block_bytes: int = DEFAULT_BLOCK_BYTES, resampler: str = DEFAULT_RESAMPLER) -> np.ndarray:
    """``(resamples, n_systems)``: each system's value on each bootstrap resample, every system
    on the same resampled items."""
    _check_resampler(resampler)
    stacked, slices = _stacked(systems)
    out = np.empty((resamples, len(systems)))
    if resampler == "splitmix64":
        blocks: Iterator[np.ndarray] = iter([_kernel_sums(stacked, resamples, seed, "bootstrap", block_bytes,
                                                          constant_one=float(stacked.shape[0]))])
    else:
        blocks = (counts @ stacked for counts in bootstrap_blocks(stacked.shape[0], resamples, seed, block_bytes))
    done = 0
    for sums in blocks:
        for k, (stats, part) in enumerate(zip(systems, slices)):
            out[done:done + len(sums), k] = stats.value(sums[:, part])
        done += len(sums)
    return out


def exhaustive(n_items: int, trials: int) -> bool:
    """Whether the randomization test enumerates every swap pattern (2**n of them, at most
    ``trials``): the exact test."""
    return n_items < 63 and 2 ** n_items <= trials


def _swap_blocks(n_items: int, trials: int, seed: int | None, block_bytes: int) -> Iterator[np.ndarray]:
    if exhaustive(n_items, trials):
        patterns = np.arange(2 ** n_items, dtype=np.int64)[:, None] >> np.arange(n_items, dtype=np.int64)
        yield (patterns & 1).astype(np.float64)
        return
    rng = np.random.default_rng(seed)
    rows = _rows_per_block(n_items, trials, block_bytes)
    for start in range(0, trials, rows):
        size = min(rows, trials - start)
        yield rng.integers(2, size=(size, n_items), dtype=bool).astype(np.float64)


def randomization_differences(baseline: ItemStats, systems: Sequence[ItemStats], trials: int, seed: int | None,
                              block_bytes: int = DEFAULT_BLOCK_BYTES,
                              resampler: str = DEFAULT_RESAMPLER) -> np.ndarray:
    """``(trials, n_systems)``: on each trial, the items marked swap exchange their statistics
    between a system and the baseline, and the value is the system's minus the baseline's
    (sacrebleu's ``shuf_a - shuf_b``). With ``exhaustive``, every one of the 2**n patterns once
    (either resampler)."""
    _check_resampler(resampler)
    n = baseline.n_items
    base_sum = baseline.columns.sum(axis=0)
    # swapped sums: system = sys_sum + swap @ (base - sys); baseline = base_sum - swap @ (base - sys)
    gaps = [baseline.columns - stats.columns for stats in systems]
    stacked = np.ascontiguousarray(np.concatenate(gaps, axis=1))
    widths = [g.shape[1] for g in gaps]
    rows_total = 2 ** n if exhaustive(n, trials) else trials
    if resampler == "splitmix64" and not exhaustive(n, trials):
        blocks: Iterator[np.ndarray] = iter([_kernel_sums(stacked, trials, seed, "randomization", block_bytes,
                                                          constant_one=None)])
    else:
        blocks = (swaps @ stacked for swaps in _swap_blocks(n, trials, seed, block_bytes))
    out = np.empty((rows_total, len(systems)))
    done = 0
    for moved in blocks:
        start = 0
        for k, (stats, width) in enumerate(zip(systems, widths)):
            part = moved[:, start:start + width]
            out[done:done + len(moved), k] = (stats.value(stats.columns.sum(axis=0) + part)
                                              - baseline.value(base_sum - part))
            start += width
        done += len(moved)
    return out


def percentile_interval(values: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """The percentile interval along axis 0 (``scipy.stats.bootstrap(method="percentile")``'s:
    linear interpolation between order statistics). NaN values (a resample whose ratio has no
    denominator) are left out."""
    alpha = (1 - confidence) / 2
    low, high = np.nanquantile(values, [alpha, 1 - alpha], axis=0)
    return low, high


def _tolerance(observed: np.ndarray) -> np.ndarray:
    # scipy.stats.permutation_test's: a resampled statistic within 100 ulp of the observed one
    # counts as equal (sums in another order round differently)
    return np.abs(observed) * np.finfo(np.float64).eps * 100


def bootstrap_p_value(differences: np.ndarray, observed: np.ndarray, definition: str = "two-sided") -> np.ndarray:
    """The paired bootstrap p-value of each system's difference from the baseline (columns of
    ``differences``, one row per resample; ``observed``: the differences on the items as they are).

    ``two-sided``: the share of resampled differences at least as far from the observed
    difference as the observed one is from 0 (the bootstrap distribution shifted to the null;
    Efron & Tibshirani 16.4), ``(count + 1) / (resamples + 1)``. ``sacrebleu``: sacrebleu's
    ``_compute_p_value`` over ``|d*| - mean|d*|`` against ``|d|``, counting strictly greater."""
    resamples = np.sum(~np.isnan(differences), axis=0)
    if definition == "sacrebleu":
        spread = np.abs(differences)
        centred = spread - np.nanmean(spread, axis=0)
        count = np.sum(centred > np.abs(observed), axis=0)
    elif definition == "two-sided":
        count = np.sum(np.abs(differences - observed) >= np.abs(observed) - _tolerance(observed), axis=0)
    else:
        raise ValueError(f"bootstrap p-value definition: expected two-sided or sacrebleu, got {definition!r}")
    return (count + 1) / (resamples + 1)


def randomization_p_value(differences: np.ndarray, observed: np.ndarray, exact: bool) -> np.ndarray:
    """The share of trials whose absolute difference is at least the observed one (ties count:
    a system equal to the baseline gets p = 1). Monte Carlo: ``(count + 1) / (trials + 1)``;
    exact (every pattern): ``count / 2**n``, scipy.stats.permutation_test's exact p-value."""
    valid = ~np.isnan(differences)
    count = np.sum(valid & (np.abs(differences) >= np.abs(observed) - _tolerance(observed)), axis=0)
    trials = np.sum(valid, axis=0)
    if exact:
        return np.minimum(1.0, count / trials)
    return (count + 1) / (trials + 1)


def adjust_p_values(p_values: Sequence[float] | np.ndarray, correction: str) -> list[float]:
    """p-values adjusted for testing several systems against one baseline: ``holm`` (Holm 1979:
    step-down, controls the family-wise error rate as Bonferroni does, never less powerful),
    ``bonferroni`` (each times the number of tests) or ``none``. NaN stays NaN."""
    if correction not in CORRECTIONS:
        raise ValueError(f"correction: expected one of {', '.join(CORRECTIONS)}, got {correction!r}")
    values = np.asarray(p_values, dtype=np.float64)
    if correction == "none" or values.size == 0:
        return values.tolist()
    known = ~np.isnan(values)
    m = int(known.sum())
    out = values.copy()
    if correction == "bonferroni":
        out[known] = np.minimum(1.0, values[known] * m)
        return out.tolist()
    order = np.argsort(values[known], kind="stable")
    ranked = values[known][order] * (m - np.arange(m))
    adjusted = np.minimum(1.0, np.maximum.accumulate(ranked))
    held = np.empty(m)
    held[order] = adjusted
    out[known] = held
    return out.tolist()
