"""BERTScore's finishing step, once: from token embeddings to a :class:`BERTScoreResult`.

Token weights (idf, with the uniform fallback), greedy matching of a host or device store,
empty pairs, the best of several references, baseline rescaling and the result object. Plain
functions over explicit arguments (the plan, the token store, the weights, a
:class:`FinishingOptions`), called by the three ways a call is finished:
``BERTScore.finish`` (one plan, one store), ``BERTScore.finish_plans`` (a micro-batch of plans
over one shared store) and ``device.engine.score_on_device`` (chunk by chunk on the model's
device, with its own matching).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rapidscore.bertscore import baselines
from rapidscore.bertscore.idf import idf_from_ids, token_weights
from rapidscore.bertscore.result import BERTScoreResult
from rapidscore.common.arrays import is_torch_tensor
from rapidscore.encoder.store import TokenStore
from rapidscore.errors import RapidscoreWarning

__all__ = ["FinishingOptions", "best_of_references", "call_idf", "empty_pairs", "finish_result", "match_store",
           "store_weights", "unit_rows", "warn_uniform"]


@dataclass(frozen=True)
class FinishingOptions:
    """A scorer's settings, as the finishing step of one call reads them
    (``BERTScore.finishing_options()`` takes them when a call starts).

    ``idf``: whether tokens are weighted by idf (the scorer's ``IdfSource``, or a call's);
    ``idf_weights``: the fixed weights (a dict, an idf file's, idf_sents'; None: none, or idf
    from each call's references). ``special_ids``: token ids
    weighted 0 ([CLS], [SEP]). ``framing_length``: tokens of an empty text. ``window_length``:
    the encoder's maximum length under ``long_texts="window"`` (None otherwise), and
    ``window_framing`` the tokens that frame each window. ``baseline``: the loaded baseline
    (a row per layer with ``all_layers``), or None.
    """

    idf: bool
    idf_weights: dict | None
    special_ids: tuple[int, ...]
    framing_length: int
    reference_empty_rule: bool
    all_layers: bool
    num_threads: int | None
    rescale_with_baseline: bool
    baseline: np.ndarray | None
    signature: str
    window_length: int | None = None
    window_framing: int = 0
    #: the hidden states scored: the model's layers and its embedding output with all_layers, else 1
    hidden_states: int = 1
    #: the signature of a call in which sentences fell back to uniform weights (``idf:...+uniform``)
    uniform_signature: str = ""


def call_idf(options: FinishingOptions, call_weights: dict | None,
             reference_ids: Callable[[], list]) -> dict | None:
    """The idf weights a call scores with: a stream's (``call_weights``), the scorer's, or, like
    the reference's score(), idf from this call's references (``reference_ids()``, duplicates
    counted); None without idf."""
    if options.idf is False:
        return None
    idf_dict = options.idf_weights if call_weights is None else call_weights
    if options.idf is True and idf_dict is None:
        idf_dict = idf_from_ids(reference_ids())
    return idf_dict


def store_weights(store: TokenStore, idf_dict: dict | None, options: FinishingOptions,
                  fallback_rows: list | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """Token weights of the store's rows, the real (non-special) tokens per stored sentence,
    and how many sentences fell back to uniform weights (the caller warns: ``warn_uniform``, and
    passes the count to ``finish_result``: the signature says so). ``fallback_rows``: a list
    extended with those sentences' indices in the store (a micro-batch tells its plans apart)."""
    weights = token_weights(store.ids, idf_dict, options.special_ids)
    real_tokens = _real_token_counts(store, options)
    degenerate = _uniform_fallback(weights, store, real_tokens, options.special_ids)
    if fallback_rows is not None:
        fallback_rows.extend(degenerate.tolist())
    return weights, real_tokens, len(degenerate)


def warn_uniform(count: int, stacklevel: int) -> None:
    """The warning for ``count`` sentences that ``store_weights`` gave uniform weights;
    ``stacklevel`` as ``warnings.warn`` counts it, from the caller of this function."""
    warnings.warn(
        f"idf weights of {count} sentence(s) sum to 0 (idf from a single or identical "
        "references); they use uniform weights instead of giving NaN", RapidscoreWarning, stacklevel=stacklevel + 1)


def _real_token_counts(store: TokenStore, options: FinishingOptions) -> np.ndarray:
    """Tokens besides the framing ones, per stored sentence (0: an empty sentence; with
    ``reference_empty_rule``, bert-score's test: exactly two tokens)."""
    if options.reference_empty_rule:
        lengths = store.lengths()
        return np.where(lengths == 2, 0, lengths)
    return np.maximum(store.lengths() - options.framing_length, 0)


def _uniform_fallback(weights: np.ndarray, store: TokenStore, real_tokens: np.ndarray,
                      special_ids: tuple[int, ...]) -> np.ndarray:
    """Sentences whose weights sum to 0 despite real tokens (idf of one or identical
    references) get uniform weights instead of the reference's NaN; returns their indices."""
    sums = np.add.reduceat(weights.astype(np.float64), store.offsets[:-1]) if len(weights) else np.zeros(0)
    lengths = store.lengths()
    degenerate = np.flatnonzero((sums == 0) & (real_tokens > 0) & (lengths > 0))
    for k in degenerate:
        start, end = store.offsets[k], store.offsets[k + 1]
        weights[start:end] = token_weights(store.ids[start:end], None, special_ids)
    return degenerate


def match_store(store: TokenStore, weights: np.ndarray, pairs: np.ndarray, options: FinishingOptions, *,
                reference_batch_size: int | None = None,
                padding_floors: np.ndarray | None = None) -> np.ndarray:
    """P, R, F of ``pairs`` (stored sentence of each side) as (layers?, pairs, 3) float64: the
    C++ kernel on a host store, torch where a device store lives (without TF32). Scales the
    store's rows to unit length in place first (once per store)."""
    from rapidscore.kernels.matching import greedy_match

    if not store.unit_rows:
        _scale_to_unit_rows(store.embeddings)
        store.unit_rows = True

    def one_layer(embeddings):
        if padding_floors is not None:
            p, r, f = _match_with_floors(embeddings, store.offsets, weights, pairs, padding_floors,
                                         options.num_threads)
        else:
            p, r, f = greedy_match(embeddings, store.offsets, weights, pairs,
                                   num_threads=options.num_threads, bert_score_batch_size=reference_batch_size)
        return np.stack([p, r, f], axis=-1).astype(np.float64)

    def all_of_them():
        if options.all_layers:
            if store.embeddings.ndim == 2:  # a call without sentences: its empty store has no layer axis
                return np.zeros((options.hidden_states, len(pairs), 3))
            return np.stack([one_layer(layer) for layer in store.embeddings])
        return one_layer(store.embeddings)

    if not store.on_host:
        from rapidscore.device.tf32 import exact_fp32

        with exact_fp32(store.device):
            return all_of_them()
    return all_of_them()


def _match_with_floors(embeddings, offsets: np.ndarray, weights: np.ndarray, pairs: np.ndarray,
                       floors: np.ndarray, num_threads: int | None):
    """``greedy_match`` of one layer with bert-score's padding given per pair (the kernels' own
    ``floors``) instead of computed from a batch size over these pairs alone."""
    if is_torch_tensor(embeddings):  # the store's rows, trusted: no checks that sync the device
        from rapidscore.device.matching_torch import match_rows

        P, R, F = match_rows(embeddings.unsqueeze(0), offsets, weights, pairs[:, 0], pairs[:, 1], floors)
        return P[0], R[0], F[0]
    from rapidscore.kernels.matching import greedy_match

    return greedy_match(embeddings, offsets, weights, pairs, num_threads=num_threads, floors=floors)


def _scale_to_unit_rows(embeddings) -> None:
    """Scale the store's rows to unit L2 norm in place (zero rows stay zero), where they live.

    In place and without temporaries: np.linalg.norm and a division into a new array cost as much
    as 5% of a W1-sized call in page faults on fresh 100+ MB buffers."""
    if is_torch_tensor(embeddings):
        unit_rows(embeddings)
        return
    for layer in embeddings if embeddings.ndim == 3 else (embeddings,):
        norms = np.sqrt(np.einsum("td,td->t", layer, layer))
        norms[norms == 0] = 1
        layer /= norms[:, None]


def unit_rows(embeddings) -> None:
    """Scale the rows of a torch tensor to unit L2 norm in place (zero rows stay zero)."""
    import torch

    norms = torch.linalg.vector_norm(embeddings, dim=-1, keepdim=True)
    embeddings.div_(torch.where(norms == 0, torch.ones_like(norms), norms))


def empty_pairs(real_tokens: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Pairs (sentence indices into ``real_tokens``) with an empty side."""
    return (real_tokens[pairs[:, 0]] == 0) | (real_tokens[pairs[:, 1]] == 0)


def best_of_references(scores: np.ndarray, owners: np.ndarray, n_candidates: int) -> np.ndarray:
    """Max over each candidate's references, separately for P, R and F (last axis).

    ``owners`` is sorted and every candidate has at least one reference."""
    if len(owners) == n_candidates:  # one reference each
        return scores
    starts = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]])
    return np.maximum.reduceat(scores, starts, axis=-2)


def finish_result(plan, scores: np.ndarray, empty: np.ndarray, options: FinishingOptions, *,
                  rescale: bool | None, truncated: int, lengths: np.ndarray, uniform: int = 0) -> BERTScoreResult:
    """Empty pairs to 0, the best reference per candidate, rescaling: the result of a
    ``ScoringPlan`` from the (layers?, pairs, 3) scores of its pairs (changed in place).
    ``rescale``: None follows the scorer. ``lengths``: tokens of each of the plan's texts (the
    windowed ones are counted from them). ``uniform``: how many of the plan's sentences fell back
    to uniform weights (``store_weights``): the signature then says ``+uniform``."""
    # bert-score zeroes P and R of an empty pair but F only where it is NaN (no weight at
    # all); with one framing token its "empty" one-token texts keep their F.
    scores[..., empty, :2 if options.reference_empty_rule else 3] = 0.0
    best = best_of_references(scores, plan.owners, plan.n_candidates)
    if options.rescale_with_baseline if rescale is None else rescale:
        if options.baseline is None:
            raise ValueError("no baseline loaded: create the scorer with rescale_with_baseline=True")
        baseline = options.baseline[:, None, :] if options.all_layers else options.baseline
        best = baselines.rescale(best, baseline)
    best = best.astype(np.float32)
    windowed, windows = _window_counts(lengths, options)
    return BERTScoreResult(precision=best[..., 0], recall=best[..., 1], f1=best[..., 2],
                           signature=options.uniform_signature or options.signature if uniform
                           else options.signature,
                           details={"truncated": truncated, "windowed": windowed, "windows": windows,
                                    "empty_pairs": int(empty.sum()), "unique_sentences": len(plan.texts)})


def _window_counts(lengths: np.ndarray, options: FinishingOptions) -> tuple[int, int]:
    """Texts longer than the maximum length (embedded in windows) and their windows."""
    if options.window_length is None:
        return 0, 0
    from rapidscore.encoder.tokens.windows import count_windows

    long = np.asarray(lengths)[np.asarray(lengths) > options.window_length]
    if not len(long):
        return 0, 0
    return len(long), int(count_windows(long, options.window_length, options.window_framing).sum())
