"""BERTScore over a stream of pairs, in chunks under a token budget (``BERTScore.score_iter``).

Each chunk runs the scorer's three phases (plan, encode, finish), so memory holds one chunk's
token embeddings whatever the length of the stream, and every pair scores as in one in-memory
call: the plan deduplicates within the chunk, an optional LRU cache keeps the embeddings of
recently seen texts across chunks (a fixed set of references, a repeated candidate), and idf
comes from one first pass over the stream's references (or from an idf file or dict), so that
streamed scores equal ``BERTScore.score`` over the same pairs with the same options.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

import numpy as np

from rapidscore.bertscore.idf import DocumentFrequencies
from rapidscore.bertscore.result import BERTScoreResult
from rapidscore.common.stream import BoundedCache, chunks, is_one_shot, iter_pairs
from rapidscore.encoder.store import TokenStore
from rapidscore.errors import TruncationWarning, check_positive_int

# The scorer is passed in, not imported: scorer.py imports this module (no import cycle).
BERTScore = Any

__all__ = ["PairScore", "DEFAULT_MEMORY_BUDGET", "chunk_results", "document_frequencies", "resolve_idf",
           "tokens_for_budget"]

# Token embeddings held per chunk by default: 256 MiB (all-MiniLM-L6-v2: 174,762 tokens; a
# 1024-wide model 65,536; all_layers divides by the number of layers).
DEFAULT_MEMORY_BUDGET = 256 * 2**20
DEFAULT_CHUNK_PAIRS = 16384


class PairScore(NamedTuple):
    """BERTScore of one pair (floats; arrays over layers with ``all_layers``)."""

    precision: Any
    recall: Any
    f1: Any


def tokens_for_budget(scorer: BERTScore, memory_budget: int) -> int:
    """How many token embeddings of the scorer's model fit in ``memory_budget`` bytes."""
    layers = scorer.encoder.num_layers + 1 if scorer.all_layers else 1
    return max(1, int(memory_budget) // (4 * scorer.encoder.hidden_size * layers))


def _estimate_tokens(text: str, max_length: int) -> int:
    # English WordPiece / BPE average 4-5 characters per token; a third of the characters
    # overestimates, and the exact count after tokenising splits a chunk that is still too big.
    return min(max_length, len(text) // 3 + 2)


def document_frequencies(scorer: BERTScore, pairs: Iterable, *, chunk_size: int = 4096) -> DocumentFrequencies:
    """The first idf pass: document counts over the references of ``pairs`` (every reference of
    every pair is a document, duplicates counted, as ``BERTScore.score`` computes idf)."""
    counts = DocumentFrequencies(tokenizer=scorer.model_name)
    for chunk in chunks(iter_pairs(pairs), check_positive_int(chunk_size, "chunk_size")):
        counts.add(scorer.encoder.tokenizer.encode([r.strip() for _cand, refs in chunk for r in refs])[0])
    return counts


def resolve_idf(scorer: BERTScore, pairs: Iterable, idf) -> dict | None:
    """The idf weights a stream scores with: ``idf`` (a DocumentFrequencies, a dict token id ->
    weight, or the path of an idf file), else the scorer's own (a dict, ``idf_sents``), else,
    for ``idf=True``, a first pass over the stream's references (which needs a re-iterable
    input: a list, a tuple, a file reader that can start again)."""
    if scorer.idf is False:
        if idf is not None:
            raise ValueError("idf= was given but the scorer was created with idf=False")
        return None
    if idf is not None:
        if isinstance(idf, (str, os.PathLike)):
            idf = DocumentFrequencies.load(idf)
        if isinstance(idf, DocumentFrequencies):
            if idf.tokenizer and idf.tokenizer != scorer.model_name:
                raise ValueError(f"the idf counts were made with {idf.tokenizer!r}, the scorer uses "
                                 f"{scorer.model_name!r}")
            return idf.idf()
        if isinstance(idf, dict):
            return idf
        raise TypeError(f"idf must be a DocumentFrequencies, a dict or an idf file path, got {type(idf).__name__}")
    if scorer.idf_dict is not None:
        return scorer.idf_dict
    if is_one_shot(pairs):
        raise ValueError("idf=True over a one-shot iterator needs a first pass over the references: pass a "
                         "re-iterable input (a list, or a DocumentFrequencies / idf file from "
                         "rapidscore.bertscore.document_frequencies)")
    return document_frequencies(scorer, pairs).idf()


class _CachedText(NamedTuple):
    ids: np.ndarray
    embeddings: np.ndarray  # raw (not unit-scaled) rows: finish scales every chunk's rows itself


def chunk_results(scorer: BERTScore, pairs: Iterable, *, chunk_size: int = DEFAULT_CHUNK_PAIRS,
                  max_tokens: int | None = None, memory_budget: int | None = None, cache_tokens: int = 0,
                  idf=None, rescale: bool | None = None, reference_batch_size: int | None = None,
                  ) -> Iterator[tuple[list[tuple[str, list[str]]], BERTScoreResult]]:
    """``(items, result)`` per chunk: the validated ``(candidate, [references])`` items and their
    BERTScoreResult, in input order. See ``BERTScore.score_iter`` for the options."""
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    if memory_budget is not None:  # 0 or -1 used to mean a budget of one token
        memory_budget = check_positive_int(memory_budget, "memory_budget")
    if max_tokens is None:
        max_tokens = tokens_for_budget(scorer, DEFAULT_MEMORY_BUDGET if memory_budget is None else memory_budget)
    max_tokens = check_positive_int(max_tokens, "max_tokens")
    if isinstance(cache_tokens, bool) or not isinstance(cache_tokens, int) or cache_tokens < 0:
        raise ValueError(f"cache_tokens must be an int >= 0, got {cache_tokens!r}")
    if cache_tokens and scorer.encoder.returns_tensors:
        raise ValueError("cache_tokens needs host embeddings; the encoder keeps them on its device")
    weights = resolve_idf(scorer, pairs, idf)
    cache = BoundedCache(cache_tokens, lambda entry: len(entry.ids)) if cache_tokens else None
    max_length = scorer.encoder.max_length
    # With windows a text keeps all its tokens: its estimate is not capped at the maximum length.
    cap = max_length if scorer.long_texts == "truncate" else 2**62

    def cost(item: tuple[str, list[str]]) -> int:
        return _estimate_tokens(item[0], cap) + sum(_estimate_tokens(r, cap) for r in item[1])

    warned = False
    for first_chunk in chunks(iter_pairs(pairs), chunk_size, cost, max_tokens):
        todo = [first_chunk]
        while todo:
            chunk = todo.pop()
            cands = [cand for cand, _refs in chunk]
            groups = [refs for _cand, refs in chunk]
            plan = scorer.plan(cands, groups)
            encoded = _encode(scorer, plan.texts, cache, max_tokens if len(chunk) > 1 else None)
            if encoded is None:  # the estimate was short: halve and retry, before any model runs
                half = len(chunk) // 2
                todo += [chunk[half:], chunk[:half]]
                continue
            store, truncated = encoded
            if truncated and not warned:
                warned = True
                warnings.warn(f"texts longer than {max_length} tokens were truncated ({truncated} in the "
                              "first chunk that had any)", TruncationWarning, stacklevel=3)
            result = scorer.finish(plan, store, rescale=rescale, reference_batch_size=reference_batch_size,
                                   idf_weights=weights)
            yield chunk, result


def _encode(scorer: BERTScore, texts: list[str], cache: BoundedCache | None,
            max_tokens: int | None) -> tuple[TokenStore, int] | None:
    """The chunk's store (texts in the plan's order) and its truncated count; None, before the
    model runs, when its tokens exceed ``max_tokens``."""
    encoder = scorer.encoder
    hits = [cache.get(text) for text in texts] if cache is not None else [None] * len(texts)
    new_texts = [text for text, hit in zip(texts, hits) if hit is None]
    ids, truncated = encoder.tokenizer.encode(new_texts)
    cached = [hit for hit in hits if hit is not None]
    n_tokens = sum(len(i) for i in ids) + sum(len(c.ids) for c in cached)
    if max_tokens is not None and n_tokens > max_tokens:
        return None
    fresh = encoder.embed_ids(ids, truncated=truncated, progress=False)
    if cache is None:
        return fresh, truncated
    # stored sentences: the fresh ones, then the cached ones; order maps text k to its sentence
    order = np.empty(len(texts), dtype=np.int64)
    fresh_k, cached_k = 0, len(new_texts)
    for k, hit in enumerate(hits):
        if hit is None:
            order[k], fresh_k = fresh_k, fresh_k + 1
        else:
            order[k], cached_k = cached_k, cached_k + 1
    lengths = np.concatenate([fresh.lengths(), np.array([len(c.ids) for c in cached], dtype=np.int64)])
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    for k, text in enumerate(new_texts):  # raw rows, copied before finish scales the store in place
        rows = slice(fresh.offsets[k], fresh.offsets[k + 1])
        cache.put(text, _CachedText(fresh.ids[rows].copy(), fresh.embeddings[..., rows, :].copy()))
    if cached:
        ids_all = np.concatenate([fresh.ids, *(c.ids for c in cached)])
        embeddings = np.concatenate([fresh.embeddings, *(c.embeddings for c in cached)], axis=-2)
    else:
        ids_all, embeddings = fresh.ids, fresh.embeddings
    return TokenStore(ids=ids_all, offsets=offsets, embeddings=embeddings, order=order, truncated=truncated), truncated


def flatten(results: Iterator[tuple[list, BERTScoreResult]]) -> Iterator[PairScore]:
    """One PairScore per pair, from chunk results."""
    for _chunk, result in results:
        precision, recall, f1 = result.precision, result.recall, result.f1
        if f1.ndim == 1:
            yield from map(PairScore._make, zip(precision.tolist(), recall.tolist(), f1.tolist()))
        else:  # all_layers: (layers + 1, N) -> one array per pair
            for j in range(f1.shape[-1]):
                yield PairScore(precision[:, j], recall[:, j], f1[:, j])
