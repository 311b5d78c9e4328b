"""Greedy cosine max-matching of BERTScore over a flat store of token embeddings.

All sentences live in one matrix: ``embeddings`` holds the token embeddings of every unique
sentence one after another, and sentence ``s`` owns rows ``offsets[s]:offsets[s + 1]``.
For a (candidate c, reference r) pair, with ``sim[i, j] = <E_c[i], E_r[j]>`` over *all* tokens
(special tokens included, as in bert-score)::

    p_i = max_j sim[i, j]            r_j = max_i sim[i, j]
    P = sum_i w_i p_i / sum_i w_i    R = sum_j w_j r_j / sum_j w_j    F = 2 P R / (P + R)

The maxima run over real tokens only. bert-score pads batches and lets padded positions
(similarity 0) take part in the max, so a token whose best similarity is negative scores 0
there; on real text (positive contextual cosines) both agree, see docs/matching.md.

If a side has no tokens or its weights sum to 0, P = R = F = 0 (bert-score's result for an
empty sentence; it returns NaN for a zero idf sum, rapidscore returns 0). F = 0 when P + R = 0.
No result is ever NaN.

Precision: dot products in float32 (like bert-score's ``torch.bmm``), weighted sums and the
divisions in float64. Results are float64 arrays; they agree with bert-score's float32
computation to about 1e-7.

Three implementations share this contract (``implementation=``):

- ``"native"``: the C++ kernel ``rapidscore._core.matching`` (threads, GIL released);
- ``"torch"``: :mod:`rapidscore.device.matching_torch`, for embeddings held as a
  ``torch.Tensor`` on any device;
- ``"reference"``: :mod:`rapidscore.kernels.matching_ref`, the plain numpy specification
  (slow; the pure-Python twin of the native kernel).

``"auto"`` (default) picks ``"torch"`` for a ``torch.Tensor``, otherwise ``"native"``, or
``"reference"`` where ``RAPIDSCORE_IMPLEMENTATION`` selects the Python twins or the extension
cannot be imported (:mod:`rapidscore.kernels._native`). An explicit ``"native"`` always runs
the C++ kernel (ImportError without it).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rapidscore.common.arrays import host_array, is_torch_tensor
from rapidscore.errors import check_positive_int
from rapidscore.kernels import _native, input_checks
from rapidscore.kernels.input_checks import Scores
from rapidscore.kernels.padding import padding_floors
from rapidscore.threads import check_num_threads, lease

__all__ = ["greedy_match", "pairwise_match", "flatten_sentences", "IMPLEMENTATIONS", "Scores"]


IMPLEMENTATIONS = ("auto", "native", "torch", "reference")


def _implementation(embeddings, implementation: str) -> str:
    if implementation not in IMPLEMENTATIONS:
        choices = ", ".join(map(repr, IMPLEMENTATIONS))
        raise ValueError(f"implementation must be one of {choices}, got {implementation!r}")
    if implementation == "auto":
        if is_torch_tensor(embeddings):
            return "torch"
        return "native" if _native.implementation() == "native" else "reference"
    return implementation



def _layers(embeddings) -> tuple[np.ndarray, bool]:
    """Returns the embeddings as an array and whether it carries a leading layer axis."""
    array = host_array(embeddings)
    if array.ndim == 3:
        return array, True
    if array.ndim != 2:
        raise ValueError(
            f"embeddings must have shape (T, D) or (L, T, D), got shape {array.shape}"
        )
    return array, False


def greedy_match(
    embeddings,
    offsets,
    weights,
    pairs,
    num_threads: int | None = None,
    bert_score_batch_size: int | None = None,
    *,
    floors=None,
    implementation: str = "auto",
) -> Scores:
    """BERTScore P, R, F of (candidate, reference) sentence pairs.

    Args:
        embeddings: float array (T, D) of L2-normalised token embeddings of all sentences
            (normalisation is the caller's job: the kernel uses plain dot products), or
            (L, T, D) to score L layers at once (bert-score's ``all_layers``).
            float16/float64 are converted to float32. NaN or inf raises ValueError, and so
            does a row whose L2 norm exceeds 9.22e18 (its float32 dot products would overflow).
            A ``torch.Tensor`` (cpu or cuda) is matched by torch where it lives.
        offsets: integer array (n + 1,), non-decreasing, within [0, T]: sentence ``s`` is
            rows ``offsets[s]:offsets[s + 1]`` (an empty range is an empty sentence).
        weights: float array (T,) of raw per-token weights (idf, or 1 with 0 for special
            tokens); they are normalised per sentence here. Must be finite.
        pairs: integer array (m, 2) of (candidate index, reference index) into the sentences.
            The same sentence may appear in many pairs and on both sides.
        num_threads: native kernel threads, at most 1024. None takes a lease on the process
            thread budget (:mod:`rapidscore.threads`): all of it, or what concurrent calls
            leave free (at least one). Results do not depend on it. The torch implementation
            uses torch's own threads.
        bert_score_batch_size: None (default) takes every maximum over real tokens only.
            An int B reproduces bert-score's padding artefact as if these pairs, in this
            order, were matched in batches of B (bert-score's ``batch_size``, 64 by default):
            a token's best similarity is raised to 0 when the other side of its pair was
            padded in that batch (shorter than the batch's longest sentence on that side).
            It matters only where token similarities are negative (e.g. the last layer of
            all-MiniLM-L6-v2 on unrelated sentences); it makes scores depend on batching.
        floors: None, or bert-score's padding given per pair instead of computed from a batch
            size: a numpy bool array (m, 2) like ``pairs``, ``floors[k, 0]`` raising pair k's
            candidate-token maxima (precision) to at least 0 (its reference was padded),
            ``floors[k, 1]`` its reference-token maxima (recall): what
            :func:`rapidscore.kernels.padding.padding_floors` computes. Not with
            ``bert_score_batch_size``.
        implementation: "auto", "native", "torch" or "reference" (see the module docstring).

    Returns:
        (P, R, F): float64 numpy arrays of shape (m,), or (L, m) for (L, T, D) embeddings.

    Raises:
        TypeError: non-numeric arrays, float indices.
        ValueError: wrong shapes, bad offsets, non-finite values.
        IndexError: a pair index outside [0, n).
    """
    num_threads = check_num_threads(num_threads)
    if floors is not None and bert_score_batch_size is not None:
        raise ValueError("give floors or bert_score_batch_size, not both (floors are the padding of a batch size)")
    if floors is not None:
        floors = host_array(floors)
    chosen = _implementation(embeddings, implementation)
    if chosen == "torch":
        from rapidscore.device import matching_torch

        return matching_torch.greedy_match(embeddings, offsets, weights, pairs, bert_score_batch_size,
                                           floors=floors)
    array, layered = _layers(embeddings)
    pairs = input_checks.as_pairs(host_array(pairs))
    offsets = host_array(offsets)
    weights = host_array(weights)
    if chosen == "reference":
        from rapidscore.kernels import matching_ref

        layers = input_checks.embeddings(array)
        offsets, weights, pairs = input_checks.pair_inputs(offsets, weights, pairs, layers.shape[1])
        if floors is not None:
            floors = input_checks.floors_array(floors, len(pairs))
        if bert_score_batch_size is not None:
            bert_score_batch_size = check_positive_int(bert_score_batch_size, "bert_score_batch_size")
        return matching_ref.greedy_match(layers if layered else layers[0], offsets, weights, pairs,
                                         bert_score_batch_size, floors=floors)

    core = _native.core()
    if bert_score_batch_size is not None:
        floors = padding_floors(offsets, pairs, bert_score_batch_size)
    return _native_per_layer(
        lambda layer, threads: core.matching.greedy_match(layer, offsets, weights, pairs, threads, floors),
        array, layered, num_threads, m_shape=(pairs.shape[0],) if pairs.ndim == 2 else (0,),
    )


def pairwise_match(
    embeddings,
    offsets,
    weights,
    candidates,
    references,
    num_threads: int | None = None,
    *,
    implementation: str = "auto",
) -> Scores:
    """BERTScore P, R, F of every candidate against every reference.

    Same inputs as :func:`greedy_match`, with two integer index lists instead of pairs.
    Each reference is packed once and each candidate's rows stay in cache while all
    references stream past, so this is faster than listing the nc * nr pairs
    (minimum-Bayes-risk selection, multi-reference scoring, similarity matrices).

    Returns:
        (P, R, F): float64 arrays of shape (len(candidates), len(references)), or
        (L, nc, nr) for (L, T, D) embeddings. ``P[a, b]`` scores candidate ``candidates[a]``
        against reference ``references[b]``.
    """
    num_threads = check_num_threads(num_threads)
    chosen = _implementation(embeddings, implementation)
    if chosen == "torch":
        from rapidscore.device import matching_torch

        return matching_torch.pairwise_match(embeddings, offsets, weights, candidates, references)
    array, layered = _layers(embeddings)
    candidates = input_checks.as_indices(host_array(candidates))
    references = input_checks.as_indices(host_array(references))
    offsets = host_array(offsets)
    weights = host_array(weights)
    if chosen == "reference":
        from rapidscore.kernels import matching_ref

        layers = input_checks.embeddings(array)
        offsets, weights, candidates, references = input_checks.pairwise_inputs(
            offsets, weights, candidates, references, layers.shape[1]
        )
        return matching_ref.pairwise_match(layers if layered else layers[0], offsets, weights, candidates,
                                           references)

    core = _native.core()
    return _native_per_layer(
        lambda layer, threads: core.matching.pairwise_match(layer, offsets, weights, candidates, references,
                                                            threads),
        array, layered, num_threads, m_shape=(candidates.shape[0], references.shape[0]),
    )


def _native_per_layer(match, array: np.ndarray, layered: bool, num_threads: int | None, m_shape) -> Scores:
    """Runs the native kernel ``match(layer, threads)`` on one layer, or on each of L stacked."""
    with lease(num_threads) as threads:
        if not layered:
            return match(array, threads)
        per_layer = [match(layer, threads) for layer in array]
    return _stack(per_layer, m_shape)


def _stack(per_layer, m_shape) -> Scores:
    if not per_layer:  # zero layers
        empty = np.zeros((0, *m_shape), dtype=np.float64)
        return empty, empty.copy(), empty.copy()
    P, R, F = (np.stack([scores[k] for scores in per_layer]) for k in range(3))
    return P, R, F


def flatten_sentences(
    token_embeddings: Sequence[np.ndarray],
    token_weights: Sequence[np.ndarray] | None = None,
    normalize: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Concatenates per-sentence token embeddings into the flat store the matchers take.

    Args:
        token_embeddings: one (n_tokens, D) array per sentence (n_tokens may be 0).
        token_weights: one (n_tokens,) array per sentence; default all ones.
        normalize: L2-normalise each row (a zero row stays zero).

    Returns:
        (embeddings float32 (T, D), offsets int64 (n + 1,), weights float32 (T,)).
    """
    if len(token_embeddings) == 0:
        raise ValueError("token_embeddings is empty: cannot infer the embedding dimension")
    arrays = [np.asarray(e, dtype=np.float32) for e in token_embeddings]
    dims = {a.shape[1] for a in arrays if a.ndim == 2}
    if any(a.ndim != 2 for a in arrays) or len(dims) != 1:
        shapes = [a.shape for a in arrays]
        raise ValueError(f"token_embeddings must all be (n_tokens, D) with one D, got shapes {shapes}")
    lengths = np.array([a.shape[0] for a in arrays], dtype=np.int64)
    offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    embeddings = np.concatenate(arrays, axis=0)
    if normalize:
        norms = np.linalg.norm(embeddings, axis=1, keepdims=True)
        np.divide(embeddings, norms, out=embeddings, where=norms > 0)
    if token_weights is None:
        weights = np.ones(int(offsets[-1]), dtype=np.float32)
    else:
        if len(token_weights) != len(arrays):
            raise ValueError(
                f"token_weights has {len(token_weights)} sentences, token_embeddings {len(arrays)}"
            )
        for s, (w, n) in enumerate(zip(token_weights, lengths)):
            if np.shape(w) != (n,):
                raise ValueError(f"token_weights[{s}] has shape {np.shape(w)}, expected ({n},)")
        weights = np.concatenate([np.asarray(w, dtype=np.float32) for w in token_weights])
    return embeddings, offsets, weights
