"""BERTScore with the token embeddings kept on the model's device (the torch backend).

From the model's output to P, R and F the embeddings stay torch tensors where the model runs
(a GPU, or the CPU for tests and CPU users who ask for it): rows are scaled to unit length, the
pairs matched in length-bucketed batched matrix products with masks
(:func:`rapidscore.device.matching_torch.match_rows`: similarities in float32, weighted sums in
float64), and only P, R and F cross to the host.

Memory is bounded by a token budget, never by the corpus: the plan's pairs are cut into chunks of
whole candidates (with all their references) whose distinct sentences hold at most
``chunk_tokens`` tokens; each chunk is encoded, matched and dropped before the next. A sentence
used by two chunks is encoded twice.

The host's work overlaps the model's: a background thread tokenises the plan's sentences slice
by slice (the Rust tokenizer on all cores), and the chunks whose sentences are ready run through
``rapidscore.device.chunk_pipeline``: batches padded and placed in one thread, the model in the
caller's, each chunk's matching and its copy to the host in a third, so the model never waits
for them (bench/bench_pipeline.py measures it with a simulated device).

bert-score's padding artefact (``reference_batch_size``) depends on the pairs' global positions:
a chunk's floors are computed from the lengths of every pair of the reference's batches that
overlap it, so chunking never changes a score.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from rapidscore.bertscore.finishing import call_idf, empty_pairs, finish_result, store_weights, unit_rows, warn_uniform
from rapidscore.bertscore.result import BERTScoreResult
from rapidscore.device.chunk_pipeline import embed_chunks
from rapidscore.errors import TruncationWarning
from rapidscore.kernels.padding import padding_floors

if TYPE_CHECKING:  # for annotations only: bertscore/scorer.py imports this module when it runs
    from rapidscore.bertscore.scorer import BERTScore

__all__ = ["DEFAULT_CHUNK_TOKENS", "TOKENIZE_SLICE", "score_on_device"]

# Token embeddings of one chunk: 2**18 tokens = 384 MiB of float32 for a 384-wide model, 1 GiB
# for a 1024-wide one (CUDA), a quarter of that on the CPU (where 2**16 tokens of MiniLM are
# 96 MiB). Large enough that a chunk keeps a GPU busy for many batches.
DEFAULT_CHUNK_TOKENS = {"cuda": 2**18, "cpu": 2**16}
# float32 elements of one batch of matched pairs (similarities and gathered embeddings).
BLOCK_ELEMENTS = {"cuda": 2**26, "cpu": 2**24}
# Sentences per tokeniser call of the background thread: large enough for the Rust tokenizer's
# thread pool, small enough that the first chunk starts early (the first slice is an eighth of
# it: the model starts after 256 texts, not 2,048).
TOKENIZE_SLICE = 2048
# With the overlap on, chunks are shaped so that the model waits little at either end: the first
# is 1/64 of the pairs and each next at most twice the one before, none over 1/8 of the pairs,
# and at most half of what remains (the last chunk, whose finishing nothing overlaps, is small);
# never under MIN_CHUNK_BATCHES batches of tokens (the budget still caps them).
MAX_CHUNK_SHARE = 8
FIRST_CHUNK_SHARE = 64
MIN_CHUNK_BATCHES = 2


_NOT_YET = np.zeros(0, dtype=np.int64)  # a text's ids before its slice is tokenised


def first_use_rank(pairs: np.ndarray, n_texts: int) -> np.ndarray:
    """Each text's place in the order the pairs first use it (candidate, reference, next pair):
    the order in which chunks of pairs need their texts tokenised."""
    texts, first = np.unique(pairs.ravel(), return_index=True)
    rank = np.empty(n_texts, dtype=np.int64)
    rank[texts[np.argsort(first, kind="stable")]] = np.arange(len(texts))
    unused = np.setdiff1d(np.arange(n_texts), texts, assume_unique=True)
    rank[unused] = np.arange(len(texts), n_texts)
    return rank


class _BackgroundTokens:
    """Token ids of ``texts``, produced slice by slice by a background thread (in the caller's
    thread when they fit one slice), in the order ``rank`` gives them (rank[k]: text k's place;
    default: the texts' own order): the order the chunks need them in.

    ``wait(n)`` blocks until the first ``n`` texts in that order are tokenised (an exception of
    the thread is raised there). The thread stops early when ``close`` is called.
    """

    def __init__(self, tokenizer, texts: list[str], slice_size: int | None = None, rank: np.ndarray | None = None):
        slice_size = TOKENIZE_SLICE if slice_size is None else slice_size
        self.ids: list[np.ndarray] = [_NOT_YET] * len(texts)
        self.lengths = np.zeros(len(texts), dtype=np.int64)
        self.truncated = 0
        self.rank = np.arange(len(texts), dtype=np.int64) if rank is None else rank
        self._order = np.argsort(self.rank, kind="stable")
        self._texts, self._tokenizer, self._slice = texts, tokenizer, slice_size
        self._done = 0
        self._error: BaseException | None = None
        self._closed = False
        self._ready = threading.Condition()
        self._thread: threading.Thread | None = None
        if len(texts) <= slice_size:  # one slice (a few pairs: the latency path): no thread
            self._run()
        else:
            self._thread = threading.Thread(target=self._run, name="rapidscore-tokenize", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        try:
            start, size = 0, max(1, self._slice // 8)
            while start < len(self._texts):
                if self._closed:
                    return
                which = self._order[start:start + size]
                ids, truncated = self._tokenizer.encode([self._texts[k] for k in which])
                with self._ready:
                    for k, sequence in zip(which.tolist(), ids):
                        self.ids[k] = sequence
                    self.lengths[which] = [len(i) for i in ids]
                    self.truncated += truncated
                    self._done = start + len(ids)
                    self._ready.notify_all()
                start, size = start + len(ids), min(self._slice, 2 * size)
        except BaseException as exc:  # handed to the waiting thread
            with self._ready:
                self._error = exc
                self._ready.notify_all()

    def wait(self, n: int) -> None:
        with self._ready:
            while self._done < n and self._error is None:
                self._ready.wait()
            if self._error is not None:
                raise self._error

    @property
    def done(self) -> int:
        with self._ready:
            return self._done

    def close(self) -> None:
        self._closed = True
        if self._thread is not None:
            self._thread.join()


def _chunks(plan, tokens: _BackgroundTokens, chunk_tokens: int,
            shaped_from: int | None = None) -> Iterator[tuple[int, int]]:
    """Pair ranges [a, b) of whole candidates whose sentences hold at most ``chunk_tokens``
    tokens (counted per pair side, an overestimate where sentences repeat; one candidate with
    more still gets a chunk of its own), as soon as their sentences are tokenised.

    ``shaped_from``: a token count; chunks of at least that many tokens are also cut by pairs,
    small at the start and the end (``MAX_CHUNK_SHARE``), for the overlapped pipeline."""
    pairs, owners = plan.pairs, plan.owners
    m = len(pairs)
    largest, size = -(-m // MAX_CHUNK_SHARE), -(-m // FIRST_CHUNK_SHARE)
    # Texts are tokenised in order of first use along the pairs: the texts of pairs [0, k) are
    # all tokenised once the first reach[k - 1] + 1 texts in that order are.
    reach = np.maximum.accumulate(tokens.rank[pairs].max(axis=1)) if m else np.zeros(0, np.int64)
    group_start = np.r_[True, owners[1:] != owners[:-1]] if m else np.zeros(0, bool)
    start, ready = 0, 0
    while start < m:
        used, end, boundary = 0, start, start  # boundary: the last candidate start seen
        max_pairs = m if shaped_from is None else min(size, largest, -(-(m - start) // 2))
        while end < m:
            if reach[end] >= ready:
                tokens.wait(int(reach[end]) + 1)
                ready = tokens.done
            cost = int(tokens.lengths[pairs[end, 1]]) + (int(tokens.lengths[pairs[end, 0]]) if group_start[end] else 0)
            if group_start[end]:
                boundary = end
            if boundary > start and (used + cost > chunk_tokens or (
                    shaped_from is not None and end - start >= max_pairs and used >= shaped_from)):
                break
            used += cost
            end += 1
        end = boundary if end < m and boundary > start else end
        yield start, end
        start, size = end, 2 * size


def _chunk_floors(plan, lengths: np.ndarray, tokens: _BackgroundTokens, a: int, b: int,
                  batch_size: int) -> np.ndarray | None:
    """bert-score's padding floors of pairs [a, b): computed over the reference's whole batches
    that overlap the range (their sentences are tokenised first)."""
    m = len(plan.pairs)
    lo, hi = (a // batch_size) * batch_size, min(m, -(-b // batch_size) * batch_size)
    if hi > 0:
        tokens.wait(int(tokens.rank[plan.pairs[lo:hi]].max()) + 1)
    pseudo_offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=pseudo_offsets[1:])
    floors = padding_floors(pseudo_offsets, plan.pairs[lo:hi], batch_size)
    return None if floors is None else floors[a - lo:b - lo]


def score_on_device(scorer: BERTScore, plan, *, rescale: bool | None = None,
                    reference_batch_size: int | None = None, idf_weights: dict | None = None,
                    chunk_tokens: int | None = None, overlap: bool | None = None) -> BERTScoreResult:
    """``BERTScore.finish(plan, encode(plan))`` computed on the model's device, chunk by chunk.

    ``overlap``: run the host's work beside the model's (``device.chunk_pipeline``); None: when
    the plan has more texts than one batch holds rows (smaller calls, the latency path, start
    no thread)."""
    import torch

    from rapidscore.device.matching_torch import match_rows
    from rapidscore.device.tf32 import exact_fp32

    encoder = scorer.encoder
    options = scorer.finishing_options()
    where = "cuda" if encoder.device == "cuda" else "cpu"
    layers_count = options.hidden_states
    if chunk_tokens is None:  # all_layers stores every hidden state: the budget is in embeddings
        chunk_tokens = max(1, DEFAULT_CHUNK_TOKENS[where] // layers_count)
    if overlap is None:
        overlap = len(plan.texts) > encoder.max_batch_size
    m = len(plan.pairs)
    scores = np.zeros((layers_count, m, 3), dtype=np.float64)
    empty = np.zeros(m, dtype=bool)
    tokens = _BackgroundTokens(encoder.tokenizer, plan.texts, rank=first_use_rank(plan.pairs, len(plan.texts)))
    degenerate = [0]
    try:
        def reference_ids():  # idf from this call's references: every text tokenised first
            tokens.wait(len(plan.texts))
            return [tokens.ids[k] for k in plan.pairs[:, 1]]

        idf_dict = call_idf(options, idf_weights, reference_ids)

        def chunks():  # runs in the pipeline's prepare stage
            shaped_from = MIN_CHUNK_BATCHES * encoder.batch_tokens
            for a, b in _chunks(plan, tokens, chunk_tokens, shaped_from):
                chunk_pairs = plan.pairs[a:b]
                texts, local = np.unique(chunk_pairs, return_inverse=True)
                floors = None
                if reference_batch_size is not None:
                    floors = _chunk_floors(plan, tokens.lengths, tokens, a, b, reference_batch_size)
                yield (a, b, local.reshape(chunk_pairs.shape), floors), [tokens.ids[t] for t in texts]

        def finish(key, store) -> None:  # runs in the pipeline's finish stage
            a, b, local, floors = key
            weights, real_tokens, bad = store_weights(store, idf_dict, options)
            degenerate[0] += bad
            embeddings = store.embeddings if options.all_layers else store.embeddings.unsqueeze(0)
            with torch.inference_mode(), exact_fp32(embeddings.device):
                unit_rows(embeddings)
                P, R, F = match_rows(embeddings, store.offsets, weights, local[:, 0], local[:, 1], floors,
                                     block_elements=BLOCK_ELEMENTS[where])
            scores[:, a:b] = np.stack([P, R, F], axis=-1)
            empty[a:b] = empty_pairs(real_tokens, local)

        embed_chunks(encoder, chunks(), finish, overlap=overlap)
    finally:
        tokens.close()
    if tokens.truncated:
        warnings.warn(f"{tokens.truncated} of {len(plan.texts)} distinct texts were longer than "
                      f"{encoder.max_length} tokens and were truncated", TruncationWarning, stacklevel=4)
    if degenerate[0]:
        warn_uniform(degenerate[0], stacklevel=4)  # the caller of BERTScore.score
    return finish_result(plan, scores if options.all_layers else scores[0], empty, options, rescale=rescale,
                         truncated=tokens.truncated, lengths=tokens.lengths, uniform=degenerate[0])
