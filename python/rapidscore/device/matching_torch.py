"""BERTScore greedy matching in plain torch, for embeddings held as a ``torch.Tensor``.

Same contract as the native kernel (see :mod:`rapidscore.kernels.matching` and the
specification :mod:`rapidscore.kernels.matching_ref`): the similarities are computed where the
tensor lives (cpu or cuda) in float32, the weighted sums and divisions in float64, the same zero
rules and bert-score padding floors apply, and the results come back as float64 numpy arrays
shaped like the native ones. Inputs are checked with the native kernel's messages.

Pairs are grouped by length into padded batches matched by one batched matrix product each
(:func:`match_rows`), so a GPU runs a few large kernels rather than one small one per pair.

TF32: if the process enables TF32 matmuls on CUDA (``torch.backends.cuda.matmul.allow_tf32``
or ``torch.set_float32_matmul_precision("high")``), the similarities lose precision (about
1e-3); this module does not change that process-wide setting.

torch is imported when a function here is called, never at import of rapidscore.
"""

from __future__ import annotations

import numpy as np

from rapidscore.common.arrays import host_array
from rapidscore.errors import check_positive_int
from rapidscore.kernels import input_checks
from rapidscore.kernels.input_checks import Scores
from rapidscore.kernels.padding import padding_floors

__all__ = ["greedy_match", "pairwise_match", "match_rows", "DEFAULT_BLOCK_ELEMENTS"]


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
    # finite rows whose dot products overflow float32 (P = inf, F = NaN): refused as natively
    largest = float(layers.abs().amax()) if layers.numel() else 0.0
    if layers.shape[2] * largest * largest > input_checks.MAX_ROW_SQUARED_NORM:
        squared = layers.double().square().sum(-1)  # (L, T)
        for layer_squared in squared:
            bad = (layer_squared > input_checks.MAX_ROW_SQUARED_NORM).nonzero()
            if len(bad):
                row = int(bad[0, 0])
                raise input_checks.oversized_row_error(row, float(layer_squared[row]))
    input_checks.check_embedding_columns(layers.shape[2])
    return layers, layered


def _weight_sums(offsets: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per-sentence sums of the float32 weights, in float64 (as the native kernel sums them)."""
    cumulative = np.zeros(len(weights) + 1, dtype=np.float64)
    np.cumsum(weights, dtype=np.float64, out=cumulative[1:])
    return cumulative[offsets[1:]] - cumulative[offsets[:-1]]


def _buckets(cand_len: np.ndarray, ref_len: np.ndarray, n_layers: int, dim: int, budget: int) -> list[np.ndarray]:
    """Pair numbers grouped into batches of similar lengths whose padded blocks stay within
    ``budget`` elements: the similarities (layers x batch x longest candidate x longest
    reference) plus both sides' gathered embeddings (layers x batch x longest x dim). A single
    over-long pair still gets a batch of its own."""
    # Candidate length in steps of 8, then reference length: neighbours pad little on either side.
    order = np.lexsort((ref_len, cand_len // 8))
    batches = []
    start, n = 0, len(order)
    while start < n:
        end = start + 1
        longest_c, longest_r = int(cand_len[order[start]]), int(ref_len[order[start]])
        # grow while the padded block fits; lengths grow along the sort, so check as we go
        step = 64
        while end < n:
            stop = min(n, end + step)
            block_c = max(longest_c, int(cand_len[order[end:stop]].max()))
            block_r = max(longest_r, int(ref_len[order[end:stop]].max()))
            if n_layers * (stop - start) * (block_c * block_r + (block_c + block_r) * dim) > budget:
                if step == 1:
                    break
                step //= 2
                continue
            longest_c, longest_r, end = block_c, block_r, stop
        batches.append(order[start:end])
        start = end
    return batches


# float32 elements of one padded batch of pairs (similarities plus gathered embeddings):
# 2**24 = 64 MiB (all-MiniLM-L6-v2, 45-token sentences: about 450 pairs a batch). The device
# engine passes 2**26 on CUDA, where larger products keep the GPU busy.
DEFAULT_BLOCK_ELEMENTS = 2**24


def match_rows(layers, offsets: np.ndarray, weights: np.ndarray, cands: np.ndarray, refs: np.ndarray,
               floors: np.ndarray | None, *, block_elements: int = DEFAULT_BLOCK_ELEMENTS,
               device_weights=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(L, m) P, R, F of the pairs (cands[k], refs[k]) over unit-norm rows ``layers`` (L, T, D), a
    tensor on any device; floors as in the native kernel. Inputs are trusted (checked by the
    callers). ``device_weights``: the weights as a float64 tensor on the device, if the caller
    has them there already.

    Pairs are grouped by length into padded batches: one gather of each side's rows into
    (L, B, n, D) blocks, one batched matrix product (float32 similarities, TF32 as the process
    has it: the scorer's fp32 mode turns it off), masked maxima, and float64 weighted sums on
    the device; one copy of P and R to the host at the end."""
    import torch

    n_layers, device = layers.shape[0], layers.device
    lengths = np.diff(offsets)
    weight_sums = _weight_sums(offsets, weights)
    m = len(cands)
    # Weighted sums of the maxima on the device; the divisions by the weight sums on the host.
    P = torch.zeros((n_layers, m), dtype=torch.float64, device=device)
    R = torch.zeros_like(P)
    scored = np.flatnonzero((lengths[cands] > 0) & (lengths[refs] > 0)
                            & (weight_sums[cands] != 0) & (weight_sums[refs] != 0))
    if len(scored):
        if device_weights is None:
            device_weights = _upload(weights.astype(np.float64), device)
        c, r = cands[scored], refs[scored]
        # Per pair: its number, each side's first row and length, the two floors. One array, so
        # each batch costs one small host-to-device copy (latency of one-pair calls on a GPU).
        table = np.stack([scored, offsets[c], lengths[c], offsets[r], lengths[r],
                          np.zeros(len(scored), np.int64) if floors is None else floors[scored, 0],
                          np.zeros(len(scored), np.int64) if floors is None else floors[scored, 1]]).astype(np.int64)
        for batch in _buckets(table[2], table[4], n_layers, layers.shape[-1], block_elements):
            rows = _upload(np.ascontiguousarray(table[:, batch]), device)
            pair_t = rows[0]
            cand_rows, cand_valid = _padded_rows(rows[1], rows[2], int(table[2, batch].max()))
            ref_rows, ref_valid = _padded_rows(rows[3], rows[4], int(table[4, batch].max()))
            sim = torch.matmul(layers[:, cand_rows], layers[:, ref_rows].transpose(-1, -2))  # (L, B, n, k)
            # In place, one after the other: masking padded reference columns leaves the maxima of
            # real candidate rows unchanged, then padded candidate rows are masked for the columns.
            best_for_cand = sim.masked_fill_(~ref_valid[None, :, None, :], -torch.inf).amax(dim=-1)
            best_for_ref = sim.masked_fill_(~cand_valid[None, :, :, None], -torch.inf).amax(dim=-2)
            if floors is not None:
                best_for_cand = torch.where(rows[5, None, :, None] != 0, best_for_cand.clamp_min(0.0), best_for_cand)
                best_for_ref = torch.where(rows[6, None, :, None] != 0, best_for_ref.clamp_min(0.0), best_for_ref)
            cand_w = torch.where(cand_valid, device_weights[cand_rows], 0.0)
            ref_w = torch.where(ref_valid, device_weights[ref_rows], 0.0)
            best_for_cand = torch.where(cand_valid[None], best_for_cand, 0.0)
            best_for_ref = torch.where(ref_valid[None], best_for_ref, 0.0)
            P[:, pair_t] = (best_for_cand.double() * cand_w).sum(dim=-1)
            R[:, pair_t] = (best_for_ref.double() * ref_w).sum(dim=-1)
    P_host, R_host = P.cpu().numpy(), R.cpu().numpy()  # one transfer for all pairs
    if len(scored):
        P_host[:, scored] /= weight_sums[cands[scored]]
        R_host[:, scored] /= weight_sums[refs[scored]]
    denominator = P_host + R_host
    F = np.divide(2 * P_host * R_host, denominator, out=np.zeros_like(P_host), where=denominator != 0)
    return P_host, R_host, F


def _upload(array: np.ndarray, device):
    """A host array on ``device``: through pinned memory with a non-blocking copy on CUDA (the
    host does not wait for the device), a zero-copy view on the CPU."""
    import torch

    tensor = torch.from_numpy(array)
    if device.type != "cuda":
        return tensor
    return tensor.pin_memory().to(device, non_blocking=True)


def _padded_rows(starts, lengths, longest: int):
    """(B, longest) row numbers of B sentences padded to ``longest`` (padding points at the
    sentence's first row, masked) and the validity mask."""
    import torch

    position = torch.arange(longest, device=starts.device)
    valid = position[None, :] < lengths[:, None]
    rows = starts[:, None] + torch.where(valid, position[None, :], 0)
    return rows, valid


def greedy_match(embeddings, offsets, weights, pairs, bert_score_batch_size: int | None = None, *,
                 floors=None) -> Scores:
    """P, R, F of (candidate, reference) pairs: float64 numpy arrays (m,), or (L, m) for (L, T, D)
    embeddings. Arguments as in :func:`rapidscore.kernels.matching.greedy_match`."""
    layers, layered = _embedding_layers(embeddings)
    offsets, weights, pairs = input_checks.pair_inputs(
        host_array(offsets), host_array(weights), input_checks.as_pairs(host_array(pairs)), layers.shape[1]
    )
    if floors is not None:
        floors = input_checks.floors_array(host_array(floors), len(pairs))
    elif bert_score_batch_size is not None:
        floors = padding_floors(offsets, pairs, check_positive_int(bert_score_batch_size, "bert_score_batch_size"))
    P, R, F = match_rows(layers, offsets, weights, pairs[:, 0], pairs[:, 1], floors)
    return (P, R, F) if layered else (P[0], R[0], F[0])


def pairwise_match(embeddings, offsets, weights, candidates, references) -> Scores:
    """P, R, F of every candidate against every reference: (nc, nr), or (L, nc, nr).
    Arguments as in :func:`rapidscore.kernels.matching.pairwise_match`."""
    layers, layered = _embedding_layers(embeddings)
    offsets, weights, candidates, references = input_checks.pairwise_inputs(
        host_array(offsets), host_array(weights), input_checks.as_indices(host_array(candidates)),
        input_checks.as_indices(host_array(references)), layers.shape[1],
    )
    grid_cands = np.repeat(candidates, len(references))
    grid_refs = np.tile(references, len(candidates))
    scores = match_rows(layers, offsets, weights, grid_cands, grid_refs, None)
    grid_shape = (layers.shape[0], len(candidates), len(references))
    P, R, F = (s.reshape(grid_shape) for s in scores)
    return (P, R, F) if layered else (P[0], R[0], F[0])
