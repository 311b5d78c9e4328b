"""Chunks of token id sequences embedded with the host's work overlapped with the model's
(``embed_chunks``): the path of the device engines (BERTScore's ``device_engine``).

Three stages, joined by bounded queues:

- prepare (a background thread): the caller's chunks (an iterator, which may wait for a
  tokeniser thread), each cut into batches under the token budget, padded, with the rows each
  batch's real tokens go to (index tensors on the model's device: small non-blocking copies);
- model (the calling thread): the runner over the prepared batches, back to back;
- finish (a background thread): each batch's real tokens put into its chunk's store, and when a
  chunk's last batch is in, ``finish(key, store)`` (the caller's matching or pooling, and the
  one copy of its results to the host, which waits for the device).

While the model runs batch k, batch k + 1 is ready and batch k - 1 is being put away, so the
model waits for the host only before the first batch and after the last chunk. On a GPU a
model call returns once its kernels are queued; the threads keep padding, index building and
each chunk's synchronising copy from ever sitting between two of the model's batches.

Memory is bounded by the caller's chunk size, not by the input: at most ``PREPARED_AHEAD``
prepared batches, ``FINISH_BEHIND`` batches of hidden states waiting to be put away, and two
chunk stores (one filling, one finishing).

``overlap=False`` runs the same stages one after the other in the calling thread: calls too
small for threads to pay (one batch: the latency path), and the baseline that
bench/bench_pipeline.py measures the overlap against. An exception in any stage stops the
others and is raised in the caller.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from rapidscore.encoder.batching import pad_batch
from rapidscore.encoder.forward import Placement, empty_rows, place_batch, put_rows
from rapidscore.encoder.store import TokenStore

__all__ = ["FINISH_BEHIND", "PREPARED_AHEAD", "PaddedBatch", "embed_chunks", "run_overlapped"]

# Batches prepared ahead of the model: two keep it fed across a slow chunk start (np.unique,
# the batch plan); more would only hold memory.
PREPARED_AHEAD = 4
# Batches of hidden states waiting to be put away: bounds the device memory the model may run
# ahead by (4 batches of 16,384 tokens x 1,024 floats: 256 MiB).
FINISH_BEHIND = 4

Finish = Callable[[Any, TokenStore], None]


@dataclass
class _Chunk:  # (no input_ids: the model stage passes it on as it is)
    """One chunk of the caller's: its key, its sentences' ids and where each sentence's rows are."""

    key: Any
    ids: list[np.ndarray]
    lengths: np.ndarray
    offsets: np.ndarray
    batches: int = 0
    out: Any = None

    def store(self) -> TokenStore:
        flat = np.concatenate(self.ids) if self.ids else np.zeros(0, dtype=np.int64)
        return TokenStore(ids=flat, offsets=self.offsets, embeddings=self.out,
                          order=np.arange(len(self.ids), dtype=np.int64))


@dataclass
class _Batch:
    chunk: _Chunk
    input_ids: np.ndarray
    attention_mask: np.ndarray
    placement: Placement
    last: bool


class PaddedBatch(NamedTuple):
    """A padded batch for ``run_overlapped`` and what its consumer needs of it (``rows``)."""

    input_ids: np.ndarray
    attention_mask: np.ndarray
    rows: Any


class _Stopped(Exception):
    """Another stage failed: this one stops."""


class _Handoff:
    """A bounded queue between two stages that gives up once the run is stopped."""

    def __init__(self, size: int, stop: threading.Event):
        self._queue: queue.Queue = queue.Queue(size)
        self._stop = stop

    def put(self, item) -> None:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return
            except queue.Full:
                continue
        raise _Stopped

    def get(self):
        while True:
            try:
                return self._queue.get(timeout=0.05)
            except queue.Empty:
                if self._stop.is_set():
                    raise _Stopped from None


_END = object()


def _prepared(encoder, chunks: Iterable[tuple[Any, list[np.ndarray]]]) -> Iterator[_Batch | _Chunk]:
    """Each chunk's batches, padded and placed (a chunk with no sentence: the chunk itself)."""
    to_device = encoder.to_device if encoder.runs_torch else None
    for key, ids in chunks:
        lengths = np.fromiter((len(i) for i in ids), dtype=np.int64, count=len(ids))
        offsets = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        chunk = _Chunk(key, ids, lengths, offsets)
        inputs, input_lengths, destinations = encoder.model_inputs(ids, lengths, offsets)
        batches = encoder.batch_plan(input_lengths) if len(inputs) else []
        chunk.batches = len(batches)
        if not batches:
            yield chunk
        for number, batch in enumerate(batches):
            input_ids, attention_mask = pad_batch([inputs[k] for k in batch], encoder.spec.pad_id)
            placement = place_batch(offsets, lengths, destinations, batch, attention_mask, to_device)
            yield _Batch(chunk, input_ids, attention_mask, placement, number == len(batches) - 1)


def _put_away(encoder, item: _Batch | _Chunk, hidden, finish: Finish) -> None:
    """A batch's vectors into its chunk's store; the chunk finished after its last batch."""
    if isinstance(item, _Chunk):  # no sentence to embed
        chunk = item
        chunk.out = _no_rows(encoder)
    else:
        chunk = item.chunk
        if chunk.out is None:
            chunk.out = empty_rows(hidden, int(chunk.offsets[-1]))
        put_rows(chunk.out, hidden, item.attention_mask, item.placement)
        if not item.last:
            return
    store = chunk.store()
    chunk.out = None  # the store holds the rows; the chunk's own reference goes
    finish(chunk.key, store)


def _no_rows(encoder):
    out = np.zeros((0, encoder.hidden_size), dtype=np.float32)
    if not encoder.runs_torch:
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
    run_overlapped(encoder, _prepared(encoder, chunks),
                   lambda item, hidden: _put_away(encoder, item, hidden, finish), overlap=overlap)


def run_overlapped(encoder, prepared: Iterable[Any], consume: Callable[[Any, Any], None], *,
                   overlap: bool = True) -> None:
    """The three stages over ``prepared`` (an iterator of items with ``input_ids`` and
    ``attention_mask``, padded: the prepare stage), ``encoder.run_model`` (the model stage) and
    ``consume(item, hidden)`` (the finish stage; hidden None for an item without those
    attributes), as the module says. Items are consumed in order, one at a time."""
    inference = _inference_mode(encoder)

    def model(item):
        if getattr(item, "input_ids", None) is None:
            return None
        return encoder.run_model(item.input_ids, item.attention_mask)

    if not overlap:
        with inference():
            for item in prepared:
                consume(item, model(item))
        return

    stop = threading.Event()
    errors: list[BaseException] = []
    to_model = _Handoff(PREPARED_AHEAD, stop)
    to_finish = _Handoff(FINISH_BEHIND, stop)

    def stage(work: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                work()
            except _Stopped:
                pass
            except BaseException as exc:  # handed to the caller
                errors.append(exc)
                stop.set()
        return run

    def prepare() -> None:
        for item in prepared:
            to_model.put(item)
        to_model.put(_END)

    def finish() -> None:
        with inference():
            while (entry := to_finish.get()) is not _END:
                consume(*entry)

    threads = [threading.Thread(target=stage(prepare), name="rapidscore-prepare", daemon=True),
               threading.Thread(target=stage(finish), name="rapidscore-finish", daemon=True)]
    for thread in threads:
        thread.start()

    def run_model() -> None:
        while (item := to_model.get()) is not _END:
            to_finish.put((item, model(item)))
        to_finish.put(_END)

    try:
        stage(run_model)()
    finally:
        if errors:
            stop.set()
        for thread in threads:
            thread.join()
    if errors:
        raise errors[0]


def _inference_mode(encoder) -> Callable[[], Any]:
    """torch's inference mode for torch runners (thread-local: each stage enters it), else nothing."""
    if not encoder.runs_torch:
        import contextlib

        return contextlib.nullcontext
    import torch

    return torch.inference_mode
