"""Chunks of token id sequences embedded with the host's work overlapped with the model's
(``embed_chunks``): the path of the device engines (BERTScore's ``device.engine``, and, through
``run_overlapped``, sentence vectors on the device).

Four stages, joined by bounded queues:

- prepare (a background thread): the caller's chunks (an iterator, which may wait for a
  tokeniser thread), each cut into batches under the token budget, padded, with the rows each
  batch's real tokens go to (index tensors on the model's device: small non-blocking copies);
- model (the calling thread): the runner over the prepared batches, back to back;
- put away (a background thread): each batch's real tokens into its chunk's store;
- finish (a background thread): when a chunk's last batch is in, ``finish(key, store)`` (the
  caller's matching, and the one copy of its results to the host, which waits for the device).

While the model runs batch k, batch k + 1 is ready and batch k - 1 is being put away, and a
chunk is matched while the next chunk's batches run, so the model waits for the host only
before the first batch and after the last chunk. On a GPU a model call returns once its kernels
are queued; the threads keep padding, index building and each chunk's synchronising copy from
ever sitting between two of the model's batches. (With finishing in the put-away thread, a
chunk's matching held the model up once the hidden-state queue was full: 0.26 s of idle
device between batches in bench/bench_pipeline.py at 10,000 pairs.)

Memory is bounded by the caller's chunk size, not by the input: at most ``PREPARED_AHEAD``
prepared batches, ``FINISH_BEHIND`` batches of hidden states waiting to be put away, and three
chunk stores (one filling, ``FINISH_WAITING`` waiting, one being finished).

``overlap=False`` runs the same stages one after the other in the calling thread: calls too
small for threads to pay (one batch: the latency path), and the baseline that
bench/bench_pipeline.py measures the overlap against. An exception in any stage stops the
others and is raised in the caller.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from rapidscore.encoder.forward import Placement, empty_rows, place_batch, place_tokens, put_rows
from rapidscore.encoder.store import TokenStore
from rapidscore.encoder.tokens.batching import packed_batches, pad_batch

__all__ = ["FINISH_BEHIND", "FINISH_WAITING", "PREPARED_AHEAD", "PaddedBatch", "embed_chunks", "run_overlapped"]

# Batches prepared ahead of the model: two keep it fed across a slow chunk start (np.unique,
# the batch plan); more would only hold memory.
PREPARED_AHEAD = 4
# Batches of hidden states waiting to be put away: bounds the device memory the model may run
# ahead by (4 batches of 16,384 tokens x 1,024 floats: 256 MiB). Putting away is quick (one
# gather and scatter per batch); the slow finishing work has its own stage.
FINISH_BEHIND = 4
# Finished groups (chunk stores) waiting for the finish stage: one, so a chunk's matching
# overlaps the next chunk's model batches, and at most three chunk stores exist at once (one
# filling, one waiting, one being matched).
FINISH_WAITING = 1

Finish = Callable[[Any, TokenStore], None]


@dataclass
class _Chunk:  # (no input_ids: the model stage passes it on as it is)
    """One chunk of the caller's: its key, its sentences' ids and where each sentence's rows are."""

    key: Any
    ids: list[np.ndarray]
    lengths: np.ndarray
    offsets: np.ndarray
    out: Any = None

    def store(self) -> TokenStore:
        flat = np.concatenate(self.ids) if self.ids else np.zeros(0, dtype=np.int64)
        return TokenStore(ids=flat, offsets=self.offsets, embeddings=self.out,
                          order=np.arange(len(self.ids), dtype=np.int64))


@dataclass
class _Batch:
    chunk: _Chunk
    input_ids: np.ndarray | None  # None: a packed batch (``packed_ids``)
    attention_mask: np.ndarray | None  # None: a packed batch
    placement: Placement
    last: bool
    packed_ids: list[np.ndarray] | None = None


class PaddedBatch(NamedTuple):
    """A padded batch for ``run_overlapped`` and what its consumer needs of it (``rows``)."""

    input_ids: np.ndarray
    attention_mask: np.ndarray
    rows: Any


class _Handoff:
    """A bounded queue between two stages. Once the run is stopped (another stage failed), ``put``
    returns False and ``get`` returns the end marker, so every stage winds down."""

    def __init__(self, size: int, stop: threading.Event):
        self._queue: queue.Queue = queue.Queue(size)
        self._stop = stop

    def put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def get(self):
        while True:
            try:
                return self._queue.get(timeout=0.05)
            except queue.Empty:
                if self._stop.is_set():
                    return _END


_END = object()


def _prepared(encoder, chunks: Iterable[tuple[Any, list[np.ndarray]]]) -> Iterator[_Batch | _Chunk]:
    """Each chunk's batches, padded and placed (a chunk with no sentence: the chunk itself)."""
    runtime = encoder.runtime
    to_device = runtime.to_device if runtime.runs_torch else None
    packed = encoder.unpadded and runtime.packed_available
    for key, ids in chunks:
        lengths = np.fromiter((len(i) for i in ids), dtype=np.int64, count=len(ids))
        offsets = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        chunk = _Chunk(key, ids, lengths, offsets)
        inputs, input_lengths, destinations = encoder.tokenizer.model_inputs(ids, lengths, offsets)
        plan = packed_batches if packed and len(inputs) and input_lengths.min() > 0 else runtime.batch_plan
        batches = plan(input_lengths, encoder.batch_tokens, encoder.max_batch_size) if len(inputs) else []
        if not batches:
            yield chunk
        for number, batch in enumerate(batches):
            last = number == len(batches) - 1
            sequences = [inputs[k] for k in batch]
            if packed and input_lengths[batch].min() > 0:  # the packed forward: tokens in a row
                placement = place_tokens(offsets, lengths, destinations, batch, to_device)
                yield _Batch(chunk, None, None, placement, last, sequences)
                continue
            input_ids, attention_mask = pad_batch(sequences, encoder.spec.pad_id)
            placement = place_batch(offsets, lengths, destinations, batch, attention_mask, to_device)
            yield _Batch(chunk, input_ids, attention_mask, placement, last)


def _put_away(item: _Batch | _Chunk, hidden, encoder) -> tuple[Any, TokenStore] | None:
    """A batch's vectors into its chunk's store; after the chunk's last batch, (key, store)."""
    if isinstance(item, _Chunk):  # no sentence to embed
        chunk = item
        chunk.out = _no_rows(encoder)
    else:
        chunk = item.chunk
        if chunk.out is None:
            chunk.out = empty_rows(hidden, int(chunk.offsets[-1]))
        put_rows(chunk.out, hidden, item.attention_mask, item.placement)
        if not item.last:
            return None
    store = chunk.store()
    chunk.out = None  # the store holds the rows; the chunk's own reference goes
    return chunk.key, store


def _no_rows(encoder):
    out = np.zeros((0, encoder.hidden_size), dtype=np.float32)
    if not encoder.runtime.runs_torch:
        return out
    import torch

    return torch.from_numpy(out).to(encoder.device)


def embed_chunks(encoder, chunks: Iterable[tuple[Any, list[np.ndarray]]], finish: Finish, *,
                 overlap: bool = True) -> None:
    """Embed each chunk ``(key, ids)`` of ``chunks`` (its sentences' token ids) with ``encoder``
    and call ``finish(key, store)`` with its TokenStore (sentence k of the chunk is stored
    sentence k; embeddings on the model's device for torch runners), chunk after chunk in order.

    ``finish`` runs in a background thread when ``overlap`` (one at a time, in chunk order).
    ``chunks`` is iterated in a background thread too: it may block (waiting for tokens)."""
    run_overlapped(encoder, _prepared(encoder, chunks), lambda item, hidden: _put_away(item, hidden, encoder),
                   overlap=overlap, then=lambda finished: finish(*finished))


def run_overlapped(encoder, prepared: Iterable[Any], consume: Callable[[Any, Any], Any], *,
                   overlap: bool = True, then: Callable[[Any], None] | None = None) -> None:
    """The stages over ``prepared`` (an iterator of items with ``input_ids`` and
    ``attention_mask``, padded, or ``packed_ids``: the prepare stage), the model (the caller's
    thread), ``consume(item, hidden)`` (the put-away stage; hidden None for an item without
    inputs) and, where given, ``then(value)`` for each value other than None that ``consume``
    returns (the finish stage: a group's slow work, a chunk's matching, which then never holds
    up the put-away stage and so never the model). Each stage handles its items in order, one
    at a time; ``then`` has at most ``FINISH_WAITING`` values waiting."""
    inference = _inference_mode(encoder)

    def model(item):
        if getattr(item, "packed_ids", None) is not None:
            return encoder.runtime.run_packed(item.packed_ids)
        if getattr(item, "input_ids", None) is None:
            return None
        return encoder.runtime.run_model(item.input_ids, item.attention_mask)

    if not overlap:
        with inference():
            for item in prepared:
                value = consume(item, model(item))
                if then is not None and value is not None:
                    then(value)
        return

    stop = threading.Event()
    errors: list[BaseException] = []
    to_model = _Handoff(PREPARED_AHEAD, stop)
    to_put_away = _Handoff(FINISH_BEHIND, stop)
    to_finish = _Handoff(FINISH_WAITING, stop)

    def stage(work: Callable[[], None], background: bool = True) -> Callable[[], None]:
        def run() -> None:
            try:
                if background:
                    _yield_to_the_model()
                work()
            except BaseException as exc:  # handed to the caller
                errors.append(exc)
                stop.set()
        return run

    def prepare() -> None:
        for item in prepared:
            if not to_model.put(item):
                return
        to_model.put(_END)

    def put_away() -> None:
        with inference():
            while (entry := to_put_away.get()) is not _END:
                value = consume(*entry)
                if then is not None and value is not None and not to_finish.put(value):
                    return
            to_finish.put(_END)

    def finish() -> None:
        assert then is not None
        with inference():
            while (value := to_finish.get()) is not _END:
                then(value)

    work = [prepare, put_away] + ([finish] if then is not None else [])
    names = ["rapidscore-prepare", "rapidscore-put-away", "rapidscore-finish"]
    threads = [threading.Thread(target=stage(job), name=name, daemon=True) for job, name in zip(work, names)]
    for thread in threads:
        thread.start()

    def run_model() -> None:
        while (item := to_model.get()) is not _END:
            if not to_put_away.put((item, model(item))):
                return
        to_put_away.put(_END)

    try:
        stage(run_model, background=False)()
    finally:
        if errors:
            stop.set()
        for thread in threads:
            thread.join()
    if errors:
        raise errors[0]


# Niceness added to the background stages' threads (Linux: per thread): when a core frees up,
# the thread that drives the model gets it first. On 2 cores with the host's work equal to the
# device's, the model thread otherwise woke up to a busy core after many of its batches.
BACKGROUND_NICENESS = 5


def _yield_to_the_model() -> None:
    # Not Linux, or not permitted: the same work, unprioritised.
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BACKGROUND_NICENESS)


def _inference_mode(encoder) -> Callable[[], Any]:
    """torch's inference mode for torch runners (thread-local: each stage enters it), else nothing."""
    if not encoder.runtime.runs_torch:
        return contextlib.nullcontext
    import torch

    return torch.inference_mode
