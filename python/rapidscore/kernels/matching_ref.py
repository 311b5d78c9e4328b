"""Plain numpy reference of BERTScore greedy matching: the readable specification.

The native kernel (``rapidscore._core.matching``) and the torch implementation
(:mod:`rapidscore.device.matching_torch`) are tested against this module. It favours clarity
over speed: one pair at a time, the full similarity matrix, float64 throughout.

The flat store: sentence ``s`` owns rows ``offsets[s]:offsets[s + 1]`` of ``embeddings`` (T, D),
or of every layer of ``embeddings`` (L, T, D), and one weight per row. For a pair
(candidate c, reference r), over *all* tokens of both sentences::

    sim[i, j] = <E_c[i], E_r[j]>
    p_i = max_j sim[i, j]            r_j = max_i sim[i, j]
    P = sum_i w_i p_i / sum_i w_i    R = sum_j w_j r_j / sum_j w_j    F = 2 P R / (P + R)

Zero rules: a side with no tokens or with weights summing to 0 gives P = R = F = 0, and
P + R = 0 gives F = 0; nothing is ever NaN.

Padding mode (``bert_score_batch_size=B``): bert-score scores the pairs in batches of B, in
order, padding every candidate to the longest candidate of its batch and every reference to the
longest reference with zero vectors. A zero vector has similarity 0 with everything, so it takes
part in the maxima: a token whose best real similarity is negative scores 0 when the other side
of its pair was padded. This module reproduces that literally, by appending the zero rows
(one row where the padding is given per pair as ``floors``).

This module is also the pure-Python twin of the native kernel: ``greedy_match`` and
``pairwise_match`` of :mod:`rapidscore.kernels.matching` run it when ``RAPIDSCORE_IMPLEMENTATION``
selects the Python twins or the extension cannot be imported.

Precision: inputs are rounded to float32 first (every implementation receives float32 data),
then everything is computed in float64. The implementations compute dot products in float32 and
so differ from this module by float32 rounding of length-D sums (about 1e-7 for unit vectors).

Inputs are assumed valid; :mod:`rapidscore.kernels.matching` checks them before calling here.
"""

from __future__ import annotations

import numpy as np

from rapidscore.kernels.input_checks import Scores

__all__ = ["greedy_match", "pairwise_match"]



def _layers_float64(embeddings) -> tuple[np.ndarray, bool]:
    """(L, T, D) float64 view of float32-rounded embeddings, and whether a layer axis was given."""
    array = np.asarray(embeddings, dtype=np.float32).astype(np.float64)
    if array.ndim == 2:
        return array[np.newaxis], False
    return array, True


def _score_pair(
    cand: np.ndarray, ref: np.ndarray, cand_weights: np.ndarray, ref_weights: np.ndarray,
    cand_padding: int = 0, ref_padding: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """P, R, F of one pair for every layer: ``cand`` (L, n, D), ``ref`` (L, m, D).

    ``cand_padding`` / ``ref_padding`` zero rows are appended to each side (bert-score's padding);
    they carry weight 0, so they only act through the maxima.
    """
    n_layers = cand.shape[0]
    zeros = np.zeros(n_layers)
    if len(cand_weights) == 0 or len(ref_weights) == 0 or cand_weights.sum() == 0 or ref_weights.sum() == 0:
        return zeros, zeros.copy(), zeros.copy()
    dim = cand.shape[2]
    cand = np.concatenate([cand, np.zeros((n_layers, cand_padding, dim))], axis=1)
    ref = np.concatenate([ref, np.zeros((n_layers, ref_padding, dim))], axis=1)
    cand_weights = np.concatenate([cand_weights, np.zeros(cand_padding)])
    ref_weights = np.concatenate([ref_weights, np.zeros(ref_padding)])

    sim = cand @ ref.transpose(0, 2, 1)  # (L, n + pad, m + pad)
    best_for_cand_token = sim.max(axis=2)  # p_i
    best_for_ref_token = sim.max(axis=1)  # r_j
    P = (best_for_cand_token * cand_weights).sum(axis=1) / cand_weights.sum()
    R = (best_for_ref_token * ref_weights).sum(axis=1) / ref_weights.sum()
    denominator = P + R
    F = np.divide(2 * P * R, denominator, out=np.zeros(n_layers), where=denominator != 0)
    return P, R, F


def greedy_match(
    embeddings, offsets, weights, pairs, bert_score_batch_size: int | None = None, *, floors=None
) -> Scores:
    """P, R, F of each (candidate, reference) pair: float64 arrays (m,), or (L, m) for (L, T, D).

    ``floors``: bert-score's padding given per pair ((m, 2) bool, as
    :func:`rapidscore.kernels.padding.padding_floors` computes it) instead of from a batch size:
    ``floors[k, 0]`` pads pair k's reference with one zero row, ``floors[k, 1]`` its candidate."""
    layers, layered = _layers_float64(embeddings)
    offsets = np.asarray(offsets, dtype=np.int64)
    weights = np.asarray(weights, dtype=np.float32).astype(np.float64)
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    lengths = np.diff(offsets)

    out = np.zeros((3, layers.shape[0], len(pairs)))
    for k, (c, r) in enumerate(pairs):
        cand_padding = ref_padding = 0
        if floors is not None:
            ref_padding, cand_padding = int(floors[k, 0]), int(floors[k, 1])
        elif bert_score_batch_size is not None:
            first = k - k % bert_score_batch_size  # the pairs are batched in order
            batch = pairs[first : first + bert_score_batch_size]
            cand_padding = lengths[batch[:, 0]].max() - lengths[c]
            ref_padding = lengths[batch[:, 1]].max() - lengths[r]
        out[:, :, k] = _score_pair(
            layers[:, offsets[c] : offsets[c + 1]], layers[:, offsets[r] : offsets[r + 1]],
            weights[offsets[c] : offsets[c + 1]], weights[offsets[r] : offsets[r + 1]],
            cand_padding, ref_padding,
        )
    return _shape(out, layered)


def pairwise_match(embeddings, offsets, weights, candidates, references) -> Scores:
    """P, R, F of every candidate against every reference: (nc, nr), or (L, nc, nr)."""
    candidates = np.asarray(candidates, dtype=np.int64).reshape(-1)
    references = np.asarray(references, dtype=np.int64).reshape(-1)
    grid = np.stack(np.meshgrid(candidates, references, indexing="ij"), axis=-1).reshape(-1, 2)
    P, R, F = greedy_match(embeddings, offsets, weights, grid)
    grid_shape = (*P.shape[:-1], len(candidates), len(references))
    return P.reshape(grid_shape), R.reshape(grid_shape), F.reshape(grid_shape)


def _shape(out: np.ndarray, layered: bool) -> Scores:
    P, R, F = out if layered else out[:, 0]
    return P, R, F
