"""BERTScore over a stream of pairs, in chunks under a token budget (``BERTScore.score_iter``).

Each chunk runs the scorer's three phases (plan, encode, finish), so memory holds one chunk's
token embeddings whatever the length of the stream, and every pair scores as in one in-memory
call: the plan deduplicates within the chunk, an optional LRU cache keeps the embeddings of
recently seen texts across chunks (a fixed set of references, a repeated candidate), and idf
comes from one first pass over the stream's references (or from an idf file or dict), so that
streamed scores equal ``BERTScore.score`` over the same pairs with the same options.

bert-score's padding (``reference_batch_size`` B) does not follow the chunks: the reference
matches pair k of the whole input (each reference of a candidate is a pair) in batch k // B,
padded to that batch's longest candidate and reference. A chunk's floors are therefore computed
over the batches it overlaps: the longest of the batch it starts in is carried over from the
chunks before (or, for a resumed run, from ``PairsBefore``), and up to B - 1 pairs after it are
read ahead and tokenised (no model) for the batch it ends in.
"""

from __future__ import annotations

import itertools
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from rapidscore.bertscore.idf_pass import document_frequencies, resolve_idf
from rapidscore.bertscore.result import BERTScoreResult
from rapidscore.common.stream import MAX_CHUNK_CHARS, BoundedCache, held_items, item_chars, iter_pairs
from rapidscore.encoder.store import TokenStore, row_ranges
from rapidscore.errors import TruncationWarning, check_positive_int

if TYPE_CHECKING:
    from rapidscore.bertscore.scorer import BERTScore

__all__ = ["PairScore", "DEFAULT_MEMORY_BUDGET", "chunk_results", "document_frequencies", "resolve_idf",
           "tokens_for_budget", "PairsBefore", "ReadCounter", "read_ahead_limit", "ChunkProgress", "pair_scores"]

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


class _CachedText(NamedTuple):
    ids: np.ndarray
    embeddings: np.ndarray  # raw (not unit-scaled) rows: finish scales every chunk's rows itself


class PairsBefore(NamedTuple):
    """Where a stream starts in bert-score's batches: ``pairs`` scored before it (a candidate
    with k references is k pairs) and the ``recent`` items ``(candidate, [references])`` holding
    at least the last ``pairs % reference_batch_size`` of them (a resumed run's last rows)."""

    pairs: int
    recent: Sequence[tuple[str, Sequence[str]]]


class ReadCounter:
    """An iterator over ``(candidate, references, ...)`` items that counts the pairs read through
    it and keeps the items of the last ``batch_size - 1`` of them: ``before()`` is where a stream
    that goes on from here starts (a resumed run: the rows it skips shift the reference's
    batches). Items are kept until ``before()`` is asked, not after: the stream it starts holds
    its own (``chunk_results`` holds only what it reads of a long text). ``batch_size`` None
    keeps no items. Not thread-safe: one per stream."""

    def __init__(self, items: Iterable, batch_size: int | None):
        self._items = iter(items)
        self._keep = 0 if batch_size is None else batch_size - 1
        self._recent: deque = deque()
        self._recent_pairs = 0
        self.pairs = 0

    def __iter__(self) -> ReadCounter:
        return self

    def __next__(self) -> Any:
        item = next(self._items)
        refs = item[1]
        n = 1 if isinstance(refs, str) else len(refs)
        self.pairs += n
        if self._keep:
            self._recent.append((item[0], [refs] if isinstance(refs, str) else list(refs)))
            self._recent_pairs += n
            while self._recent and self._recent_pairs - len(self._recent[0][1]) >= self._keep:
                self._recent_pairs -= len(self._recent.popleft()[1])
        return item

    def before(self) -> PairsBefore:
        """Where a stream of the items after those read so far starts; no items are kept after."""
        before = PairsBefore(self.pairs, list(self._recent))
        self._keep = 0
        self._recent = deque()
        return before


def read_ahead_limit(chunk_size: int) -> int:
    """The largest ``reference_batch_size`` a stream with chunks of ``chunk_size`` pairs takes:
    it reads up to B - 1 pairs ahead of a chunk, at most a chunk's worth (16,384 at least)."""
    return max(chunk_size, DEFAULT_CHUNK_PAIRS)


def check_stream_batch_size(batch_size: int, chunk_size: int) -> int:
    """``batch_size`` (``reference_batch_size``) if a stream of ``chunk_size``-pair chunks can
    reproduce bert-score's batches of that size; ValueError naming the limit otherwise."""
    batch_size = check_positive_int(batch_size, "reference_batch_size")
    limit = read_ahead_limit(chunk_size)
    if batch_size > limit:
        raise ValueError(f"reference_batch_size={batch_size} over a stream: bert-score pads each batch to its "
                         f"longest pair, so a stream reads up to reference_batch_size - 1 pairs ahead of each "
                         f"chunk, at most max(chunk_size, {DEFAULT_CHUNK_PAIRS}) = {limit}; use a smaller "
                         "reference_batch_size, a larger chunk_size, or score in memory (BERTScore.score)")
    return batch_size


class _PaddingBatches:
    """bert-score's batches along a stream: it matches pair k (counting every reference of a
    candidate) in batch k // B, padded to the batch's longest candidate and reference. Holds the
    position (pairs scored so far) and the longest candidate and reference of the batch it is
    in, over the pairs scored so far."""

    def __init__(self, batch_size: int, position: int = 0):
        self.batch_size = batch_size
        self.position = position
        self.longest = np.zeros(2, dtype=np.int64)  # (candidate, reference) tokens

    def after(self, m: int) -> int:
        """How many pairs after the next ``m`` share a batch with them."""
        rest = (self.position + m) % self.batch_size
        return 0 if rest == 0 else self.batch_size - rest

    def _batch_of(self, m: int) -> np.ndarray:
        """The batch of each of the next ``m`` pairs, 0 for the open one."""
        offset = self.position % self.batch_size
        if offset + m <= self.batch_size:  # Python ints: any batch size (10**20 is one batch)
            return np.zeros(m, dtype=np.int64)
        return (offset + np.arange(m, dtype=np.int64)) // self.batch_size

    def floors(self, lengths: np.ndarray, following: np.ndarray) -> np.ndarray:
        """``padding_floors`` of the next pairs, as over the whole stream. ``lengths`` (m, 2):
        their candidate and reference tokens; ``following`` (k, 2): the same of the pairs after
        them in their last batch (fewer than the batch's rest at the end of the stream)."""
        batch = self._batch_of(len(lengths))
        longest = np.zeros((int(batch[-1]) + 1, 2), dtype=np.int64)
        np.maximum.at(longest, batch, lengths)
        longest[0] = np.maximum(longest[0], self.longest)
        if len(following):
            longest[-1] = np.maximum(longest[-1], following.max(axis=0))
        floors = np.empty(lengths.shape, dtype=bool)
        floors[:, 0] = lengths[:, 1] < longest[batch, 1]  # the reference was padded
        floors[:, 1] = lengths[:, 0] < longest[batch, 0]  # the candidate was padded
        return floors

    def advance(self, lengths: np.ndarray) -> None:
        """The next pairs are scored: move past them."""
        m = len(lengths)
        if m == 0:
            return
        if (self.position + m) % self.batch_size == 0:
            self.longest = np.zeros(2, dtype=np.int64)
        else:
            batch = self._batch_of(m)
            in_last = lengths[batch == batch[-1]].max(axis=0)
            self.longest = np.maximum(self.longest, in_last) if batch[-1] == 0 else in_last
        self.position += m


def _pair_lengths(scorer: BERTScore, items: Iterable[tuple[str, Sequence[str]]], n: int) -> np.ndarray:
    """(k, 2) candidate and reference tokens of the first ``n`` pairs of ``items`` (k < n when
    they run out), as the encoder stores them: stripped and tokenised, no model."""
    if n <= 0:  # nothing to read: a chunk that ends a batch must not wait for more input (a pipe)
        return np.zeros((0, 2), dtype=np.int64)
    cands: list[str] = []
    refs: list[str] = []
    for cand, group in items:
        for ref in group[:n - len(refs)]:
            cands.append(cand.strip())
            refs.append(ref.strip())
        if len(refs) >= n:
            break
    if not refs:  # the stream ended
        return np.zeros((0, 2), dtype=np.int64)
    texts = list(dict.fromkeys(cands + refs))
    ids, _truncated = scorer.encoder.tokenizer.encode(texts)
    tokens = {text: len(i) for text, i in zip(texts, ids)}
    return np.array([[tokens[c], tokens[r]] for c, r in zip(cands, refs)], dtype=np.int64)


class _Source:
    """A stream's validated items, read lazily, with items read ahead kept until taken."""

    def __init__(self, items: Iterator):
        self._items = items
        self._ahead: list = []

    def take(self, max_items: int, cost, max_cost: int, max_chars: int) -> list:
        """The next chunk: at most ``max_items`` items whose ``cost`` sums within ``max_cost``
        and whose characters within ``max_chars`` (an item over a budget alone is a chunk of
        its own)."""
        chunk: list = []
        spent = chars = 0
        for item in self.peek():
            item_cost, held = cost(item), item_chars(item)
            if chunk and (spent + item_cost > max_cost or chars + held > max_chars):
                break
            chunk.append(item)
            spent += item_cost
            chars += held
            if len(chunk) >= max_items:
                break
        del self._ahead[:len(chunk)]
        return chunk

    def peek(self) -> Iterator:
        """The items after those taken, read ahead as far as the caller iterates."""
        k = 0
        while True:
            if k < len(self._ahead):
                yield self._ahead[k]
                k += 1
                continue
            for item in self._items:  # one item
                self._ahead.append(item)
                break
            else:
                return


def chunk_results(scorer: BERTScore, pairs: Iterable, *, chunk_size: int = DEFAULT_CHUNK_PAIRS,
                  max_tokens: int | None = None, memory_budget: int | None = None, cache_tokens: int = 0,
                  idf=None, rescale: bool | None = None, reference_batch_size: int | None = None,
                  before: PairsBefore | None = None, progress: Callable[[int], None] | None = None,
                  ) -> Iterator[tuple[list[tuple[str, list[str]]], BERTScoreResult]]:
    """``(items, result)`` per chunk: the validated ``(candidate, [references])`` items and their
    BERTScoreResult, in input order. See ``BERTScore.score_iter`` for the options.

    ``reference_batch_size`` B: the scores of ``score(..., reference_batch_size=B)`` over the whole
    stream, whatever the chunks: each chunk's padding is computed over the reference's batches it
    overlaps (the tokens of up to B - 1 pairs after it are read ahead; B at most
    ``read_ahead_limit(chunk_size)``, else ValueError). ``before``: where the stream starts in
    those batches (a resumed run; see :class:`ReadCounter`). ``progress``: called with the pairs
    of the current chunk done so far as its encoder batches finish (the chunk's yield completes
    it; on the host only, a device store reports at the end of its encoding)."""
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    if memory_budget is not None:  # 0 or -1 used to mean a budget of one token
        memory_budget = check_positive_int(memory_budget, "memory_budget")
    if max_tokens is None:
        max_tokens = tokens_for_budget(scorer, DEFAULT_MEMORY_BUDGET if memory_budget is None else memory_budget)
    max_tokens = check_positive_int(max_tokens, "max_tokens")
    if isinstance(cache_tokens, bool) or not isinstance(cache_tokens, int) or cache_tokens < 0:
        raise ValueError(f"cache_tokens must be an int >= 0, got {cache_tokens!r}")
    if cache_tokens and scorer.encoder.runtime.returns_tensors:
        raise ValueError("cache_tokens needs host embeddings; the encoder keeps them on its device")
    batches = _padding_batches(scorer, reference_batch_size, chunk_size, before)
    idf_source, weights = resolve_idf(scorer, pairs, idf)
    cache = BoundedCache(cache_tokens, lambda entry: len(entry.ids)) if cache_tokens else None
    max_length = scorer.encoder.max_length
    # With windows a text keeps all its tokens: its estimate is not capped at the maximum length.
    cap = max_length if scorer.long_texts == "truncate" else 2**62

    def cost(item: tuple[str, list[str]]) -> int:
        return _estimate_tokens(item[0], cap) + sum(_estimate_tokens(r, cap) for r in item[1])

    items = iter_pairs(pairs)
    tokenizer = scorer.encoder.tokenizer
    if scorer.long_texts == "truncate" and hasattr(tokenizer, "held_text"):
        # a long text is held as the part truncation reads (the chunk, the rows read ahead for
        # the padding batches): memory bounded by max_length, not by the input's rows
        items = held_items(items, lambda text: tokenizer.held_text(text.strip()), tokenizer.piece_chars)
    source = _Source(items)
    todo: list[list] = []  # halves of a chunk over the budget; the next chunk is todo[-1]
    warned = False
    while True:
        chunk = todo.pop() if todo else source.take(chunk_size, cost, max_tokens, MAX_CHUNK_CHARS)
        if not chunk:
            return
        cands = [cand for cand, _refs in chunk]
        groups = [refs for _cand, refs in chunk]
        plan = scorer.plan(cands, groups)
        report = None if progress is None else _share_of(len(chunk), progress)
        encoded = _encode(scorer, plan.texts, cache, max_tokens if len(chunk) > 1 else None, report)
        if encoded is None:  # the estimate was short: halve and retry, before any model runs
            half = len(chunk) // 2
            todo += [chunk[half:], chunk[:half]]
            continue
        store, truncated = encoded
        if truncated and not warned:
            warned = True
            warnings.warn(f"texts longer than {max_length} tokens were truncated ({truncated} in the "
                          "first chunk that had any)", TruncationWarning, stacklevel=3)
        floors = None
        if batches is not None:
            lengths = store.lengths()[store.order[plan.pairs]]  # (pairs, 2) tokens of each side
            pending = itertools.chain.from_iterable([*reversed(todo), source.peek()])
            floors = batches.floors(lengths, _pair_lengths(scorer, pending, batches.after(len(lengths))))
            batches.advance(lengths)
        result = scorer.finish(plan, store, rescale=rescale, idf_weights=weights, padding_floors=floors,
                               idf_source=idf_source)
        yield chunk, result


def _padding_batches(scorer: BERTScore, batch_size: int | None, chunk_size: int,
                     before: PairsBefore | None) -> _PaddingBatches | None:
    """The stream's padding batches (None without ``reference_batch_size``), placed after
    ``before``."""
    if batch_size is None:
        return None
    batch_size = check_stream_batch_size(batch_size, chunk_size)
    batches = _PaddingBatches(batch_size)
    if before is None:
        return batches
    if isinstance(before.pairs, bool) or not isinstance(before.pairs, int) or before.pairs < 0:
        raise TypeError(f"before.pairs must be an int >= 0, got {before.pairs!r}")
    open_pairs = before.pairs % batch_size
    recent = list(iter_pairs(before.recent))
    held = sum(len(refs) for _cand, refs in recent)
    if held < open_pairs or held > before.pairs:
        raise ValueError(f"before.recent holds {held} pairs; the {before.pairs} pairs before the stream end "
                         f"{open_pairs} pairs into a batch of {batch_size}")
    flat = [(cand, [ref]) for cand, refs in recent for ref in refs][held - open_pairs:]
    batches.position = before.pairs - open_pairs
    batches.advance(_pair_lengths(scorer, flat, open_pairs))
    return batches


def _share_of(pairs: int, progress: Callable[[int], None]) -> Callable[[int, int], None]:
    """A chunk's report of (tokens embedded, tokens in all) as ``progress(pairs done)``."""
    def report(done: int, total: int) -> None:
        progress(pairs * done // total if total else pairs)

    return report


# Encoder calls per chunk when a progress bar follows the chunk as it is embedded: its texts,
# longest first, in about this many slices (each a few of the encoder's own batches).
PROGRESS_SLICES = 32


def _encode(scorer: BERTScore, texts: list[str], cache: BoundedCache | None,
            max_tokens: int | None, report: Callable[[int, int], None] | None = None,
            ) -> tuple[TokenStore, int] | None:
    """The chunk's store (texts in the plan's order) and its truncated count; None, before the
    model runs, when its tokens exceed ``max_tokens``. ``report(done, total)``: tokens embedded."""
    encoder = scorer.encoder
    hits = [cache.get(text) for text in texts] if cache is not None else [None] * len(texts)
    new_texts = [text for text, hit in zip(texts, hits) if hit is None]
    ids, truncated = encoder.tokenizer.encode(new_texts)
    cached = [hit for hit in hits if hit is not None]
    n_tokens = sum(len(i) for i in ids) + sum(len(c.ids) for c in cached)
    if max_tokens is not None and n_tokens > max_tokens:
        return None
    fresh = _embed(encoder, ids, truncated, report)
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


def _embed(encoder, ids: list[np.ndarray], truncated: int, report: Callable[[int, int], None] | None) -> TokenStore:
    """``encoder.embed_ids(ids)``; with ``report``, in slices of the texts sorted longest first
    (the encoder's own batches are cut from such runs; a text's embeddings do not depend on the
    texts it is batched with), copied into one store, ``report`` called after each slice."""
    lengths = np.fromiter((len(i) for i in ids), dtype=np.int64, count=len(ids))
    total = int(lengths.sum())
    if report is None or encoder.runtime.returns_tensors or len(ids) < 2:
        store = encoder.embed_ids(ids, truncated=truncated, progress=False)
        if report is not None:
            report(total, total)
        return store
    offsets = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    order = np.argsort(-lengths, kind="stable")
    slice_tokens = max(encoder.batch_tokens, -(-total // PROGRESS_SLICES))
    embeddings: Any = None
    start, done = 0, 0
    while start < len(order):
        end, tokens = start + 1, int(lengths[order[start]])
        while end < len(order) and tokens + int(lengths[order[end]]) <= slice_tokens:
            tokens += int(lengths[order[end]])
            end += 1
        part = order[start:end]
        piece = encoder.embed_ids([ids[k] for k in part], progress=False).embeddings
        if embeddings is None:
            embeddings = np.empty((*piece.shape[:-2], total, piece.shape[-1]), dtype=piece.dtype)
        embeddings[..., row_ranges(offsets[part], lengths[part]), :] = piece
        done += tokens
        report(done, total)
        start = end
    flat_ids = np.concatenate(ids) if len(ids) else np.zeros(0, dtype=np.int64)
    return TokenStore(ids=flat_ids, offsets=offsets, embeddings=embeddings,
                      order=np.arange(len(ids), dtype=np.int64), truncated=truncated)


class ChunkProgress:
    """A progress bar (any object with ``update(n)``) in pairs: moved within a chunk as its
    batches finish (``within``), completed when the chunk's scores are out (``done``)."""

    def __init__(self, bar) -> None:
        self.bar = bar
        self.shown = 0  # pairs of the current chunk on the bar

    def within(self, pairs: int) -> None:
        if pairs > self.shown:
            self.bar.update(pairs - self.shown)
            self.shown = pairs

    def done(self, pairs: int) -> None:
        if pairs > self.shown:
            self.bar.update(pairs - self.shown)
        self.shown = 0


def flatten(results: Iterator[tuple[list, BERTScoreResult]], progress: ChunkProgress | None = None,
            ) -> Iterator[PairScore]:
    """One PairScore per pair, from chunk results."""
    for chunk, result in results:
        if progress is not None:
            progress.done(len(chunk))
        precision, recall, f1 = result.precision, result.recall, result.f1
        if f1.ndim == 1:
            yield from map(PairScore._make, zip(precision.tolist(), recall.tolist(), f1.tolist()))
        else:  # all_layers: (layers + 1, N) -> one array per pair
            for j in range(f1.shape[-1]):
                yield PairScore(precision[:, j], recall[:, j], f1[:, j])


def pair_scores(scorer: BERTScore, pairs: Iterable, *, progress: bool = False, **options) -> Iterator[PairScore]:
    """``BERTScore.score_iter``: the PairScores of :func:`chunk_results`; ``progress`` shows a bar
    in pairs (tqdm, on stderr) that moves as each chunk's batches finish, with rate and ETA when
    ``pairs`` has a length."""
    if not progress:
        yield from flatten(chunk_results(scorer, pairs, **options))
        return
    from rapidscore.common.progress import progress_bar

    bar = progress_bar(total=len(pairs) if isinstance(pairs, Sized) else None, unit="pair", desc="BERTScore")
    moved = ChunkProgress(bar)
    try:
        yield from flatten(chunk_results(scorer, pairs, progress=moved.within, **options), moved)
    finally:
        bar.close()
