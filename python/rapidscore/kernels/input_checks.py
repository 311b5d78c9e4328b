"""Input checks of the matching contract for the Python implementations (torch, reference).

The native kernel checks its inputs in C++ (csrc/bindings/arrays.hpp, register_matching.cpp);
these functions raise the same exception types with the same messages, so that every
implementation refuses the same inputs in the same words. They work on host numpy arrays:
offsets, weights and indices are small next to the embeddings and are needed on the host anyway.
"""

from __future__ import annotations

import numpy as np

INT64_MAX = np.iinfo(np.int64).max

# What every implementation returns: (P, R, F) float64 arrays.
Scores = tuple[np.ndarray, np.ndarray, np.ndarray]


def _require_array(value, name: str) -> np.ndarray:
    if not isinstance(value, np.ndarray):
        raise TypeError(f"{name} must be a numpy array, got {type(value)}")
    return value


def _require_ndim(array: np.ndarray, name: str, ndim: int) -> None:
    if array.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape with {array.ndim}")


def float_array(value, name: str, ndim: int) -> np.ndarray:
    """A finite floating array as float32 (the precision every implementation computes in)."""
    array = _require_array(value, name)
    if array.dtype.kind != "f":
        raise TypeError(f"{name} must be a floating-point array, got dtype {array.dtype}")
    _require_ndim(array, name, ndim)
    array = np.ascontiguousarray(array, dtype=np.float32)
    check_finite(array, name)
    return array


def check_finite(array: np.ndarray, name: str) -> None:
    bad = np.flatnonzero(~np.isfinite(array.ravel()))
    if bad.size:
        raise ValueError(f"{name} contains a non-finite value (NaN or inf) at flat index {bad[0]}")


# The largest squared L2 norm of an embedding row whose float32 dot products stay finite (with
# room for rounding): csrc/core/finite.hpp's kMaxRowSquaredNorm. Unit rows are far below it.
MAX_ROW_SQUARED_NORM = float(np.finfo(np.float32).max) / 4


def oversized_row_error(row: int, squared_norm: float) -> ValueError:
    return ValueError(f"embeddings row {row} has L2 norm {np.sqrt(squared_norm):.3g}: its dot products overflow "
                      "float32 (the rows must be L2-normalised token embeddings, norm 1; the largest norm accepted "
                      f"is {np.sqrt(MAX_ROW_SQUARED_NORM):.3g})")


def check_row_norms(layer: np.ndarray) -> None:
    """ValueError for the first row of a finite float32 (T, D) layer whose dot products could
    overflow to inf (and then make F NaN), as the native kernel refuses it."""
    largest = float(np.abs(layer).max()) if layer.size else 0.0
    if layer.shape[1] * largest * largest <= MAX_ROW_SQUARED_NORM:
        return
    squared = np.einsum("ij,ij->i", layer.astype(np.float64), layer.astype(np.float64))
    bad = np.flatnonzero(squared > MAX_ROW_SQUARED_NORM)
    if bad.size:
        raise oversized_row_error(int(bad[0]), float(squared[bad[0]]))


def index_array(value, name: str, ndim: int) -> np.ndarray:
    """An integer array as int64; float arrays are refused rather than truncated."""
    array = _require_array(value, name)
    if array.dtype.kind not in "iu":
        raise TypeError(f"{name} must be an integer array, got dtype {array.dtype}")
    _require_ndim(array, name, ndim)
    if array.dtype == np.uint64 and array.size:
        too_large = array[array > INT64_MAX]
        if too_large.size:
            raise IndexError(f"{name} value {too_large[0]} is out of range")
    return np.ascontiguousarray(array, dtype=np.int64)


def check_embedding_columns(dim: int) -> None:
    if dim < 1:
        raise ValueError("embeddings must have at least one column (shape (T, D), D >= 1)")


def store(offsets, weights, n_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """Checked (offsets int64 (n + 1,), weights float32 (T,)) of a flat store of T token rows."""
    offsets = index_array(offsets, "offsets", 1)
    if offsets.size < 1:
        raise ValueError("offsets must hold n_sentences + 1 values (at least one, e.g. [0])")
    if offsets[0] < 0:
        raise ValueError(f"offsets[0] = {offsets[0]} is negative")
    decreasing = np.flatnonzero(offsets[1:] < offsets[:-1])
    if decreasing.size:
        i = int(decreasing[0])
        raise ValueError(
            f"offsets must be non-decreasing: offsets[{i + 1}] = {offsets[i + 1]} < offsets[{i}] = {offsets[i]}"
        )
    if offsets[-1] > n_tokens:
        raise ValueError(f"offsets[-1] = {offsets[-1]} exceeds the number of embedding rows {n_tokens}")
    weights = float_array(weights, "weights", 1)
    if weights.size != n_tokens:
        raise ValueError(f"weights has {weights.size} values but embeddings has {n_tokens} rows")
    return offsets, weights


def check_indices(indices: np.ndarray, n_sentences: int, name: str) -> None:
    """Every entry a sentence index in [0, n); ``pairs`` entries are named by row and column."""
    bad = np.flatnonzero((indices.ravel() < 0) | (indices.ravel() >= n_sentences))
    if not bad.size:
        return
    k = int(bad[0])
    value = indices.ravel()[k]
    where = f"entry {k // 2}, column {k % 2}" if indices.ndim == 2 else f"entry {k}"
    raise IndexError(f"{name} {where} = {value} is not a sentence index in [0, {n_sentences})")


def pairs_array(pairs) -> np.ndarray:
    pairs = index_array(pairs, "pairs", 2)
    if pairs.shape[1] != 2:
        raise ValueError(
            "pairs must have shape (m, 2) of (candidate, reference) indices, got second dimension "
            f"{pairs.shape[1]}"
        )
    return pairs


def embeddings(array: np.ndarray) -> np.ndarray:
    """Checked (L, T, D) float32 embeddings ((T, D) gets a layer axis). Layers are checked one by
    one, as the native kernel (one call per layer) checks them, so a non-finite value is reported
    by its flat index within its layer."""
    layers = array if array.ndim == 3 else array[np.newaxis]
    checked: np.ndarray = np.empty(layers.shape, dtype=np.float32)
    for k, layer in enumerate(layers):
        checked[k] = float_array(layer, "embeddings", 2)
        check_row_norms(checked[k])
    check_embedding_columns(checked.shape[2])
    return checked


def as_pairs(pairs: np.ndarray) -> np.ndarray:
    """An empty list of pairs as (0, 2) int64; anything else unchanged (checked later)."""
    if pairs.size == 0 and pairs.ndim < 2:
        return pairs.reshape(0, 2).astype(np.int64)
    return pairs


def as_indices(indices: np.ndarray) -> np.ndarray:
    """An empty index list as (0,) int64; anything else unchanged (checked later)."""
    if indices.size == 0:
        return indices.reshape(0).astype(np.int64)
    return indices


def floors_array(floors, m: int) -> np.ndarray:
    """Checked ``floors`` of ``greedy_match``: a bool array shaped (m, 2) like the m pairs."""
    array = _require_array(floors, "floors")
    if array.dtype.kind != "b":
        raise TypeError(f"floors must be a boolean array, got dtype {array.dtype}")
    if array.shape != (m, 2):
        raise ValueError("floors must have shape (m, 2) like pairs")
    return np.ascontiguousarray(array)


def pair_inputs(offsets, weights, pairs, n_tokens: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Checked (offsets, weights, pairs) of ``greedy_match``."""
    offsets, weights = store(offsets, weights, n_tokens)
    pairs = pairs_array(pairs)
    check_indices(pairs, len(offsets) - 1, "pairs")
    return offsets, weights, pairs


def pairwise_inputs(offsets, weights, candidates, references, n_tokens: int) -> tuple:
    """Checked (offsets, weights, candidates, references) of ``pairwise_match``."""
    offsets, weights = store(offsets, weights, n_tokens)
    candidates = index_array(candidates, "candidates", 1)
    references = index_array(references, "references", 1)
    check_indices(candidates, len(offsets) - 1, "candidates")
    check_indices(references, len(offsets) - 1, "references")
    return offsets, weights, candidates, references
