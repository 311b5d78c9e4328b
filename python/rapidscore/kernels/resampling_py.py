"""The pure-Python twin of the paired resampling kernel (``rapidscore._core.resampling``,
csrc/core/resample.hpp), and the specification of its random stream.

Stream: draw ``c`` of the stream keyed ``key`` is SplitMix64's ``mix(key + (c + 1) * GAMMA)``
(mod 2**64), so any draw is computed from its counter alone, vectorised.

- Bootstrap: resample ``r``, item slot ``i`` draws ``c = r * n + i`` and takes item
  ``floor(z * n / 2**64)`` (``n < 2**32``: computed exactly in 64-bit pieces; each item gets
  ``floor`` or ``ceil`` of ``2**64 / n`` of the 2**64 values, a relative bias of at most
  ``n / 2**64``). Every system is summed over the same draws (paired).
- Approximate randomization: trial ``t`` draws ``c = t * words + w`` for word ``w`` of
  ``words = ceil(n / 64)``; bit ``j`` of the draw swaps item ``64 w + j``.

Sums are defined to the last bit, so that this twin and the kernel agree exactly: bootstrap
sums run in 4 interleaved lanes (item slot ``i`` in lane ``i % 4``, each lane summed in slot
order from 0.0, then ``((lane0 + lane1) + lane2) + lane3``); randomization sums add, word by
word in item order, each byte's entry of a table of the sums of every subset of its 8 items
(``table[v + 2**k] = table[v] + row k``, rows past ``n`` zero). ``np.add.accumulate`` is the
sequential sum here (``sum`` may add pairwise). Memory is bounded by blocks of resamples, items
and words.
"""

from __future__ import annotations

import numpy as np

__all__ = ["GAMMA", "LANES", "STREAMS", "stream_key", "mix", "bounded", "bootstrap_indices", "swap_bits",
           "check_rows", "bootstrap_sums", "randomization_sums"]

GAMMA = 0x9E3779B97F4A7C15
LANES = 4
STREAMS = {"bootstrap": 1, "randomization": 2}
_MASK = (1 << 64) - 1
_BLOCK_BYTES = 32 << 20


def _mix_int(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def stream_key(seed: int, stream: str) -> int:
    """The key of ``stream`` (``bootstrap`` or ``randomization``) for ``seed`` (an int in [0, 2**64)):
    ``mix(mix(seed + GAMMA) ^ STREAMS[stream])``, so that the two tests of one seed draw apart."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) <= _MASK:
        raise ValueError(f"seed: expected an integer in [0, 2**64), got {seed!r}")
    if stream not in STREAMS:
        raise ValueError(f"stream: expected one of {', '.join(STREAMS)}, got {stream!r}")
    return _mix_int(_mix_int((int(seed) + GAMMA) & _MASK) ^ STREAMS[stream])


def mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64's output function of uint64 values (wrapping arithmetic)."""
    z = np.asarray(z, dtype=np.uint64)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _draws(key: int, counters: np.ndarray) -> np.ndarray:
    return mix(np.uint64(key) + (counters + np.uint64(1)) * np.uint64(GAMMA))


def bounded(z: np.ndarray, n: int) -> np.ndarray:
    """``floor(z * n / 2**64)`` for uint64 ``z`` and ``n < 2**32``, exactly (int64)."""
    size = np.uint64(n)
    high = (z >> np.uint64(32)) * size
    low = ((z & np.uint64(0xFFFFFFFF)) * size) >> np.uint64(32)
    return ((high + low) >> np.uint64(32)).astype(np.int64)


def bootstrap_indices(n: int, key: int, first: int, count: int, start: int = 0, stop: int | None = None) -> np.ndarray:
    """``(count, stop - start)`` int64: the items drawn by resamples ``first .. first + count - 1``
    in item slots ``start .. stop - 1`` (default: all ``n``)."""
    stop = n if stop is None else stop
    resamples = np.arange(first, first + count, dtype=np.uint64)[:, None]
    counters = resamples * np.uint64(n) + np.arange(start, stop, dtype=np.uint64)[None, :]
    return bounded(_draws(key, counters), n)


def swap_bits(n: int, key: int, first: int, count: int) -> np.ndarray:
    """``(count, n)`` bool: the items each of trials ``first .. first + count - 1`` swaps."""
    words = (n + 63) // 64
    counters = (np.arange(first, first + count, dtype=np.uint64)[:, None] * np.uint64(words)
                + np.arange(words, dtype=np.uint64)[None, :])
    z = _draws(key, counters).astype("<u8")  # little-endian bytes: bit j of a word is item 64 w + j
    bits = np.unpackbits(z.view(np.uint8).reshape(count, words * 8), axis=1, bitorder="little")
    return bits[:, :n].astype(bool)


def check_rows(rows: np.ndarray, name: str, key: int, first: int, count: int, per_step: str) -> None:
    """The kernel's argument checks (the native binding makes the same): ``rows`` a C-contiguous
    float64 ``(n, columns)`` array, 1 <= n < 2**32, 1, 2, 4 or a multiple of 8 columns; ``key``,
    ``first``, ``count`` ints in [0, 2**64) whose draw counters stay below 2**64 (``per_step``:
    ``items`` or ``words`` drawn per resample)."""
    for what, value in (("key", key), ("first", first), ("count", count)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{what} must be an int, got {type(value).__name__}")
        if not 0 <= value <= _MASK:
            raise ValueError(f"{what} must be an int in [0, 2**64), got {value!r}")
    if not isinstance(rows, np.ndarray):
        raise TypeError(f"{name} must be a numpy array, got {type(rows).__name__}")
    if rows.dtype != np.float64:
        raise TypeError(f"{name} must be a float64 array, got dtype {rows.dtype}")
    if rows.ndim != 2:
        raise ValueError(f"{name} must have 2 dimensions (items, columns), got {rows.ndim}")
    if not rows.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous")
    n, columns = rows.shape
    if not 1 <= n < 2**32:
        raise ValueError(f"{name} must have between 1 and 2**32 - 1 items, got {n}")
    if not (columns in (1, 2, 4) or (columns > 0 and columns % 8 == 0)):
        raise ValueError(f"{name} must have 1, 2, 4 or a multiple of 8 columns, got {columns}")
    step = n if per_step == "items" else (n + 63) // 64
    if (first + count) * step > _MASK:
        raise ValueError(f"first + count ({first} + {count}) runs past the 64-bit draw counter")


def _sequential_sum(carried: np.ndarray, terms: np.ndarray) -> np.ndarray:
    """``carried + terms[:, 0] + terms[:, 1] + ...`` in that order (axis 1 of ``terms``)."""
    return np.add.accumulate(np.concatenate([carried[:, None], terms], axis=1), axis=1)[:, -1]


def bootstrap_sums(rows: np.ndarray, key: int, first: int, count: int) -> np.ndarray:
    """``(count, columns)``: the column sums of ``rows`` over bootstrap resamples ``first ..
    first + count - 1`` (the module docstring's draws and order of additions)."""
    check_rows(rows, "rows", key, first, count, "items")
    n, columns = rows.shape
    out = np.empty((count, columns))
    per_resample = 24 * columns + 16  # a gathered element, its running sum, the index and its draw
    item_block = max(LANES, min(n + (-n) % LANES, (_BLOCK_BYTES // per_resample) // LANES * LANES))
    resample_block = max(1, min(count, _BLOCK_BYTES // (per_resample * item_block)))
    for r in range(0, count, resample_block):
        size = min(resample_block, count - r)
        lanes = np.zeros((size, LANES, columns))
        for start in range(0, n, item_block):
            stop = min(n, start + item_block)
            gathered = rows[bootstrap_indices(n, key, first + r, size, start, stop)]
            pad = (-(stop - start)) % LANES  # zero rows: adding 0.0 changes no running sum
            if pad:
                gathered = np.concatenate([gathered, np.zeros((size, pad, columns))], axis=1)
            lanes = _sequential_sum(lanes, gathered.reshape(size, -1, LANES, columns))
        total = lanes[:, 0]
        for lane in range(1, LANES):
            total = total + lanes[:, lane]
        out[r:r + size] = total
    return out


def _subset_tables(gaps: np.ndarray, first_word: int, words: int) -> np.ndarray:
    """``(words * 8, 256, columns)``: per byte of items, the sums of each subset of its 8 items."""
    n, columns = gaps.shape
    start, stop = first_word * 64, min(n, (first_word + words) * 64)
    rows = np.zeros((words * 64, columns))
    rows[:stop - start] = gaps[start:stop]
    grouped = rows.reshape(words * 8, 8, columns)
    tables = np.zeros((words * 8, 1, columns))
    for k in range(8):
        tables = np.concatenate([tables, tables + grouped[:, k, None, :]], axis=1)
    return tables


def randomization_sums(gaps: np.ndarray, key: int, first: int, count: int) -> np.ndarray:
    """``(count, columns)``: the column sums of ``gaps`` over the items that randomization trials
    ``first .. first + count - 1`` swap (the module docstring's draws and order of additions)."""
    check_rows(gaps, "gaps", key, first, count, "words")
    n, columns = gaps.shape
    words = (n + 63) // 64
    out = np.zeros((count, columns))
    word_block = max(1, min(words, _BLOCK_BYTES // (8 * 256 * columns * 8)))
    shifts = np.arange(0, 64, 8, dtype=np.uint64)
    for w in range(0, words, word_block):
        size = min(word_block, words - w)
        tables = _subset_tables(gaps, w, size)
        trial_block = max(1, min(count, _BLOCK_BYTES // (size * 8 * (3 * columns * 8 + 16))))
        for t in range(0, count, trial_block):
            trials = min(trial_block, count - t)
            counters = (np.arange(first + t, first + t + trials, dtype=np.uint64)[:, None] * np.uint64(words)
                        + np.arange(w, w + size, dtype=np.uint64)[None, :])
            z = _draws(key, counters)
            entries = ((z[:, :, None] >> shifts) & np.uint64(0xFF)).astype(np.int64).reshape(trials, size * 8)
            picked = tables[np.arange(size * 8)[None, :], entries]  # (trials, size * 8, columns)
            out[t:t + trials] = _sequential_sum(out[t:t + trials], picked)
    return out
