"""BERTScore greedy matching in plain torch, for embeddings held as a ``torch.Tensor``.

Same contract as the native kernel (see :mod:`rapidscore.kernels.matching` and the
specification :mod:`rapidscore.kernels.matching_ref`): the similarities are computed where the
tensor lives (cpu or cuda) in float32, the weighted sums and divisions in float64, the same zero
rules and bert-score padding floors apply, and the results come back as float64 numpy arrays
shaped like the native ones. Inputs are checked with the native kernel's messages.

One pair at a time, so simple rather than fast; the cost is one small matmul per pair.

TF32: if the process enables TF32 matmuls on CUDA (``torch.backends.cuda.matmul.allow_tf32``
or ``torch.set_float32_matmul_precision("high")``), the similarities lose precision (about
1e-3); this module does not change that process-wide setting.

torch is imported when a function here is called, never at import of rapidscore.
"""

from __future__ import annotations

import numpy as np

from rapidscore.common.arrays import host_array
from rapidscore.errors import check_positive_int
from rapidscore.kernels import _checks
from rapidscore.kernels._checks import Scores
from rapidscore.kernels.padding import padding_floors

__all__ = ["greedy_match", "pairwise_match"]


def _embedding_layers(embeddings):
    """Checked (L, T, D) float32 tensor on the embeddings' device, and whether L was given."""
    import torch

    tensor = embeddings if isinstance(embeddings, torch.Tensor) else torch.from_numpy(np.asarray(embeddings))
    if tensor.ndim not in (2, 3):
        raise ValueError(f"embeddings must have shape (T, D) or (L, T, D), got shape {tuple(tensor.shape)}")
    if not tensor.is_floating_point():
        raise TypeError(
            f"embeddings must be a floating-point array, got dtype {str(tensor.dtype).replace('torch.', '')}"
        )
    layered = tensor.ndim == 3
    layers = tensor.detach().to(torch.float32)
    if not layered:
        layers = layers.unsqueeze(0)
    # Per layer, like the native kernel (one call per layer): the index is within the layer.
    non_finite = ~torch.isfinite(layers.reshape(layers.shape[0], -1))
    if bool(non_finite.any()):
        first = non_finite.nonzero()[0]  # row-major order: lowest layer, then lowest index
        raise ValueError(f"embeddings contains a non-finite value (NaN or inf) at flat index {int(first[1])}")
    _checks.check_embedding_columns(layers.shape[2])
    return layers, layered


def _match(layers, offsets: np.ndarray, weights: np.ndarray, cands: np.ndarray, refs: np.ndarray,
           floors: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(L, m) P, R, F of the pairs (cands[k], refs[k]); floors as in the native kernel."""
    import torch

    n_layers, device = layers.shape[0], layers.device
    lengths = np.diff(offsets)
    # Weight sums on the host in float64 (from the float32 weights, as the native kernel sums them).
    weights64 = weights.astype(np.float64)
    weight_sums = np.array([weights64[offsets[s] : offsets[s + 1]].sum() for s in range(len(lengths))])
    device_weights = torch.from_numpy(weights64).to(device)

    P = torch.zeros((n_layers, len(cands)), dtype=torch.float64, device=device)
    R = torch.zeros_like(P)
    scored = (lengths[cands] > 0) & (lengths[refs] > 0) & (weight_sums[cands] != 0) & (weight_sums[refs] != 0)
    for k in np.flatnonzero(scored):
        c, r = int(cands[k]), int(refs[k])
        cand_rows, ref_rows = slice(offsets[c], offsets[c + 1]), slice(offsets[r], offsets[r + 1])
        sim = torch.matmul(layers[:, cand_rows], layers[:, ref_rows].transpose(1, 2))  # (L, n, m) float32
        best_for_cand_token = sim.amax(dim=2)
        best_for_ref_token = sim.amax(dim=1)
        if floors is not None and floors[k, 0]:
            best_for_cand_token = best_for_cand_token.clamp_min(0.0)
        if floors is not None and floors[k, 1]:
            best_for_ref_token = best_for_ref_token.clamp_min(0.0)
        P[:, k] = (best_for_cand_token.double() * device_weights[cand_rows]).sum(dim=1) / weight_sums[c]
        R[:, k] = (best_for_ref_token.double() * device_weights[ref_rows]).sum(dim=1) / weight_sums[r]
    P_host, R_host = P.cpu().numpy(), R.cpu().numpy()  # one transfer for all pairs
    denominator = P_host + R_host
    F = np.divide(2 * P_host * R_host, denominator, out=np.zeros_like(P_host), where=denominator != 0)
    return P_host, R_host, F


def greedy_match(embeddings, offsets, weights, pairs, bert_score_batch_size: int | None = None) -> Scores:
    """P, R, F of (candidate, reference) pairs: float64 numpy arrays (m,), or (L, m) for (L, T, D)
    embeddings. Arguments as in :func:`rapidscore.kernels.matching.greedy_match`."""
    layers, layered = _embedding_layers(embeddings)
    offsets, weights, pairs = _checks.pair_inputs(
        host_array(offsets), host_array(weights), _checks.as_pairs(host_array(pairs)), layers.shape[1]
    )
    floors = None
    if bert_score_batch_size is not None:
        floors = padding_floors(offsets, pairs, check_positive_int(bert_score_batch_size, "bert_score_batch_size"))
    P, R, F = _match(layers, offsets, weights, pairs[:, 0], pairs[:, 1], floors)
    return (P, R, F) if layered else (P[0], R[0], F[0])


def pairwise_match(embeddings, offsets, weights, candidates, references) -> Scores:
    """P, R, F of every candidate against every reference: (nc, nr), or (L, nc, nr).
    Arguments as in :func:`rapidscore.kernels.matching.pairwise_match`."""
    layers, layered = _embedding_layers(embeddings)
    offsets, weights, candidates, references = _checks.pairwise_inputs(
        host_array(offsets), host_array(weights), _checks.as_indices(host_array(candidates)),
        _checks.as_indices(host_array(references)), layers.shape[1],
    )
    grid_cands = np.repeat(candidates, len(references))
    grid_refs = np.tile(references, len(candidates))
    scores = _match(layers, offsets, weights, grid_cands, grid_refs, None)
    grid_shape = (layers.shape[0], len(candidates), len(references))
    P, R, F = (s.reshape(grid_shape) for s in scores)
    return (P, R, F) if layered else (P[0], R[0], F[0])
