"""Wrapper of the paired resampling kernel of :mod:`rapidscore.compare`: the native kernel
(``rapidscore._core.resampling``, csrc/core/resample.hpp) or its pure-Python twin
(:mod:`rapidscore.kernels.resampling_py`, also the specification of the random stream), as
``RAPIDSCORE_IMPLEMENTATION`` chooses (:mod:`rapidscore.kernels._native`). Both give the same
sums, bit for bit.

``bootstrap_sums(rows, key, first, count)``: ``(count, columns)`` float64, the column sums of
``rows`` (``(n, columns)``) over bootstrap resamples ``first .. first + count - 1``;
``randomization_sums(gaps, key, first, count)``: the column sums of ``gaps`` over the items each
approximate randomization trial swaps. ``rows`` / ``gaps``: C-contiguous float64 with 1, 2, 4 or a
multiple of 8 columns (:func:`padded` makes them), ``1 <= n < 2**32``; ``key``: ``stream_key(seed,
stream)``. The arguments are checked here, with the same messages for both implementations.
"""

from __future__ import annotations

import numpy as np

from rapidscore.kernels import _native, resampling_py
from rapidscore.kernels.resampling_py import bootstrap_indices, stream_key, swap_bits

__all__ = ["stream_key", "bootstrap_indices", "swap_bits", "padded", "bootstrap_sums", "randomization_sums",
           "MAX_ITEMS"]

MAX_ITEMS = 2**32 - 1


def padded(columns: np.ndarray) -> np.ndarray:
    """``columns`` (``(n, k)``) as the kernel's C-contiguous float64 rows, zero columns added up to
    1, 2, 4 or a multiple of 8 (a row of 8 doubles is one 64-byte cache line)."""
    columns = np.asarray(columns, dtype=np.float64)
    k = columns.shape[1]
    width = k if k in (1, 2, 4) else (4 if k == 3 else -(-k // 8) * 8)
    out = np.zeros((columns.shape[0], width))
    out[:, :k] = columns
    return out


def bootstrap_sums(rows: np.ndarray, key: int, first: int, count: int) -> np.ndarray:
    """See the module docstring."""
    resampling_py.check_rows(rows, "rows", key, first, count, "items")
    if _native.implementation() == "native":
        return _native.core().resampling.bootstrap_sums(rows, key, first, count)
    return resampling_py.bootstrap_sums(rows, key, first, count)


def randomization_sums(gaps: np.ndarray, key: int, first: int, count: int) -> np.ndarray:
    """See the module docstring."""
    resampling_py.check_rows(gaps, "gaps", key, first, count, "words")
    if _native.implementation() == "native":
        return _native.core().resampling.randomization_sums(gaps, key, first, count)
    return resampling_py.randomization_sums(gaps, key, first, count)
