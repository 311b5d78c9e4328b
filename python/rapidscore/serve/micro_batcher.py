"""The micro-batching queue (``rapidscore.serve.batching``): a :class:`MicroBatcher` owns a
bounded queue and its worker threads. Callers queue prepared requests (:class:`Job`); a worker
takes the oldest request and every request queued behind it up to a token budget and runs each
task's requests of the batch together (one encoder pass where the task can share one); a request
larger than the budget runs in pieces between other requests' batches. A request that arrives
while a worker is idle runs at once (no waiting window: batches form from what queued up during
the previous pass, as TEI and Triton do by default).
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import CancelledError, Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rapidscore.common.metric import PiecewiseTask, ServingTask
from rapidscore.errors import OverloadedError, check_positive_int

__all__ = ["MicroBatcher", "Job", "JobFuture", "BatchStats"]

class JobFuture(Future):
    """A job's future. ``cancel()`` on a job that already started (a request encoded in pieces)
    returns False, as for any running future, but marks it ``abandoned``: the worker drops its
    remaining pieces and fails it with ``CancelledError`` (nobody waits for it: an HTTP client
    that went away)."""

    abandoned = False

    def cancel(self) -> bool:
        self.abandoned = True
        return super().cancel()


@dataclass
class Job:
    """One queued request: what its task needs to run it, its token count, and its future.

    ``units``: tokens of each text when the task can encode the request in pieces (None: it runs
    whole); ``done`` of them are encoded, their partial results in ``partials``; ``piece``: the
    texts the current batch encodes (None: the whole job, run with other requests' payloads)."""

    task: ServingTask  # what prepared it and runs it
    payload: Any
    tokens: int
    future: Future = field(default_factory=JobFuture)
    queued_at: float = field(default_factory=time.perf_counter)
    units: np.ndarray | None = None
    done: int = 0
    partials: list = field(default_factory=list)
    #: tokens this job reserves of the batcher's ``held_tokens`` while in pieces (all of its
    #: tokens: what its partial results hold once its last piece is in)
    held: int = 0
    piece: tuple[int, int] | None = None

    @property
    def remaining_tokens(self) -> int:
        """Tokens still to encode (all of them before the first piece)."""
        if self.units is None or self.done == 0:
            return self.tokens
        return int(self.units[self.done:].sum())

    @property
    def abandoned(self) -> bool:
        return bool(getattr(self.future, "abandoned", False)) or self.future.cancelled()


@dataclass
class BatchStats:
    """What the worker has done, for monitoring (a snapshot; ``MicroBatcher.stats()``)."""

    batches: int = 0
    requests: int = 0
    tokens: int = 0
    rejected: int = 0
    failed: int = 0
    dropped: int = 0  # cancelled (the caller went away) before or between their pieces: never finished
    pieces: int = 0  # pieces of requests encoded in parts
    queue_depth: int = 0
    busy_seconds: float = 0.0


class MicroBatcher:
    """A bounded request queue and the worker thread that batches it.

    ``batch_tokens``: the most tokens (sum over a batch's requests, special tokens included) one
    batch takes. A request larger than that runs in pieces when its task can encode it in parts
    (BERTScore, similarity, refusal detectors: whole texts per piece, each within ``piece_tokens``,
    default a quarter of ``batch_tokens``, and the budget left in the batch), going back to the
    end of the queue after each piece, so one large request cannot hold the workers while others
    wait; one that cannot (``call``) runs alone. ``max_batch_requests``: the
    most requests per batch. ``max_queue``: requests waiting (not counting the running batch);
    a submit beyond it raises :class:`~rapidscore.errors.OverloadedError` at once.
    ``workers``: worker threads (default 1). With 2 or more, a batch is formed and encoded while
    another one runs: more throughput where one encoder call does not fill the cores (small
    batches on CPUs), at the cost of smaller batches. While other workers are busy, a worker
    takes a fair share of the queued and running requests (alike batch sizes, a shorter tail).
    ``held_tokens``: the most tokens of partial results that requests in pieces may hold at once
    (default four batches): a request starting in pieces reserves all its tokens, and one that
    would go over the budget waits (requests that run whole, and the next pieces of started ones,
    still run; a request larger than the budget runs when no other is in pieces). So partial
    results hold at most max(``held_tokens``, one request's tokens), however many large requests
    are queued.
    ``on_batch(n_requests, n_tokens, seconds)``: called by the worker after each batch (metrics).

    Thread-safe: any number of threads and event loops may submit at once. ``close`` drains the
    queue (every accepted request is answered) unless ``drain=False``.
    """

    def __init__(self, *, batch_tokens: int = 8192, max_batch_requests: int = 256, max_queue: int = 1024,
                 workers: int = 1, on_batch: Callable[[int, int, float], None] | None = None,
                 piece_tokens: int | None = None, held_tokens: int | None = None, name: str = "rapidscore-batcher"):
        self.batch_tokens = check_positive_int(batch_tokens, "batch_tokens")
        # A quarter of a batch per piece: a batch that holds a piece has room for other requests,
        # and a request that arrives during a piece waits for a quarter of a full batch's time.
        self.piece_tokens = max(1, self.batch_tokens // 4) if piece_tokens is None else \
            check_positive_int(piece_tokens, "piece_tokens")
        self.max_batch_requests = check_positive_int(max_batch_requests, "max_batch_requests")
        self.held_tokens = 4 * self.batch_tokens if held_tokens is None else \
            check_positive_int(held_tokens, "held_tokens")
        self._held = 0  # tokens reserved by requests in pieces (``Job.held``)
        self.max_queue = check_positive_int(max_queue, "max_queue")
        self.on_batch = on_batch
        self._queue: deque[Job] = deque()
        self._queued_tokens = 0
        self._cond = threading.Condition()
        self._closing = False
        self._stats = BatchStats()
        self._tokens_per_second = 0.0  # moving average, for Retry-After
        self._running = 0  # workers running a batch
        self._running_requests = 0  # requests in those batches
        self.workers = check_positive_int(workers, "workers")
        self._workers = [threading.Thread(target=self._run, name=f"{name}-{k}", daemon=True) for k in range(workers)]
        for worker in self._workers:
            worker.start()

    # -- callers ------------------------------------------------------------------------------

    def put(self, job: Job) -> Future:
        """Queue a prepared job; raises OverloadedError when the queue is full or closing."""
        with self._cond:
            if self._closing:
                self._stats.rejected += 1
                raise OverloadedError("the scorer is shutting down and takes no new requests", retry_after=1.0)
            if len(self._queue) >= self.max_queue:
                self._stats.rejected += 1
                raise OverloadedError(
                    f"the scorer's queue is full ({self.max_queue} requests waiting); retry later",
                    retry_after=self._retry_after())
            self._queue.append(job)
            self._queued_tokens += job.tokens
            self._cond.notify()
        return job.future

    def call(self, function: Callable[..., Any], *args: Any, tokens: int = 1, **kwargs: Any) -> Future:
        """Run ``function(*args, **kwargs)`` in the worker, alone (not merged), in queue order."""
        return self.put(Job(task=_CALL, payload=(function, args, kwargs), tokens=tokens))

    def _retry_after(self) -> float:
        """Seconds until the queue has room, from the recent throughput (at least 1)."""
        if self._tokens_per_second <= 0:
            return 1.0
        return float(max(1, math.ceil(self._queued_tokens / self._tokens_per_second)))

    @property
    def queue_depth(self) -> int:
        return len(self._queue)

    def stats(self) -> BatchStats:
        with self._cond:
            snapshot = BatchStats(**vars(self._stats))
            snapshot.queue_depth = len(self._queue)
        return snapshot

    @property
    def closed(self) -> bool:
        return self._closing

    def close(self, *, drain: bool = True, timeout: float | None = None) -> None:
        """Stop taking requests; answer the queued ones (``drain=True``) or fail them with
        OverloadedError; wait for the worker (at most ``timeout`` seconds)."""
        with self._cond:
            self._closing = True
            if not drain:
                while self._queue:
                    job = self._queue.popleft()
                    # a job between its pieces is running already
                    if job.done or job.future.set_running_or_notify_cancel():
                        job.future.set_exception(OverloadedError("the scorer shut down before this request ran"))
                    self._release(job)
                self._queued_tokens = 0
            self._cond.notify_all()
        deadline = None if timeout is None else time.monotonic() + timeout
        for worker in self._workers:
            if worker is not threading.current_thread():
                worker.join(None if deadline is None else max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> MicroBatcher:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- the worker ---------------------------------------------------------------------------

    def _take_batch(self) -> tuple[list[Job], bool] | None:
        """The oldest job and those queued behind it within the budgets, and whether no other
        worker is running a batch (None: closed and empty). A job that can run in pieces and
        does not fit what is left of the budget gets a piece that does (``job.piece``; at least
        one text when the batch is empty)."""
        with self._cond:
            while True:
                while not self._queue:
                    if self._closing:
                        return None
                    self._cond.wait()
                taken = self._take_locked()
                if taken[0] or self._closing:
                    return taken
                # every queued job waits for held partial results to be released (a running
                # batch finishes its pieces and notifies)
                self._cond.wait()

    def _take_locked(self) -> tuple[list[Job], bool]:
        """One batch under the lock; empty when every queued job would start in pieces while
        the held budget is spent."""
        batch: list[Job] = []
        tokens = 0
        limit = self.max_batch_requests
        if self._running:
            # Other workers are busy: take a fair share of what is queued and running, so that
            # batches stay alike in size. Taking everything let one worker's batch grow while
            # the other's shrank (32 clients on 2 workers: 4 to 24 requests, p99 171 ms).
            limit = min(limit, -(-(len(self._queue) + self._running_requests) // self.workers))
        starting = 0  # tokens of the requests this batch starts in pieces
        waiting = False  # a request waits for the held budget: none queued behind it starts in pieces
        position = 0
        while position < len(self._queue) and len(batch) < limit:
            job = self._queue[position]
            need = job.remaining_tokens
            piece = None
            if job.units is not None and (job.done or tokens + need > self.batch_tokens):
                if not job.done and not self._closing and (waiting or (
                        self._held + starting > 0 and self._held + starting + job.tokens > self.held_tokens)):
                    # its partial results would go over the budget: it waits, and so does every
                    # request behind it that would start in pieces (the oldest starts first)
                    waiting = True
                    position += 1
                    continue
                # in pieces: the texts that fit what is left of the budget
                room = min(self.batch_tokens - tokens, self.piece_tokens)
                stop = job.done + int(np.searchsorted(np.cumsum(job.units[job.done:]), room, side="right"))
                if stop == job.done:
                    if batch:
                        break
                    stop = job.done + 1
                piece = (job.done, stop)
                size = int(job.units[job.done:stop].sum())
                if not job.done:
                    starting += job.tokens
            elif batch and tokens + need > self.batch_tokens:
                break
            else:
                size = need
            del self._queue[position]
            self._queued_tokens -= need
            if job.done == 0:
                if not job.future.set_running_or_notify_cancel():
                    self._stats.dropped += 1
                    continue  # its caller cancelled it while it waited
            elif job.abandoned:  # its caller went away between two pieces
                self._stats.dropped += 1
                self._release(job)
                job.future.set_exception(CancelledError())
                continue
            if piece is not None and not job.done:  # starts in pieces: reserves its tokens
                job.held = job.tokens
                self._held += job.held
            job.piece = piece
            batch.append(job)
            tokens += size
        if batch:
            self._running += 1
            self._running_requests += len(batch)
        if self._queue:
            self._cond.notify()  # what this batch left is for another idle worker
        return batch, self._running == 1

    def _run(self) -> None:
        while True:
            taken = self._take_batch()
            if taken is None:
                return
            batch, alone = taken
            if not batch:
                continue
            started = time.perf_counter()
            whole = [job for job in batch if job.piece is None]
            pieces = [job for job in batch if job.piece is not None]
            outcomes = [outcome for task, jobs in _group_by_task(whole) for outcome in _run_group(task, jobs, alone)]
            whole_tokens = sum(job.tokens for job in whole)
            if pieces and outcomes:
                # The whole requests are answered before the pieces run: they do not wait for them.
                self._count(outcomes, whole_tokens)
                self._answer(outcomes)
                outcomes = []
            unfinished = []
            piece_tokens = 0
            for job in pieces:
                assert job.units is not None and job.piece is not None
                piece_tokens += int(job.units[job.piece[0]:job.piece[1]].sum())
                outcome = _run_piece(job, alone)
                if outcome is None:
                    unfinished.append(job)
                else:
                    outcomes.append(outcome)
            seconds = time.perf_counter() - started
            tokens = whole_tokens + piece_tokens
            # Counted before the answers go out, so a caller that got its answer sees its batch counted.
            self._count(outcomes, piece_tokens if pieces else tokens, batch_tokens=tokens, pieces=len(pieces),
                        seconds=seconds)
            if self.on_batch is not None:
                with contextlib.suppress(Exception):  # a metrics hook must never stop the worker
                    self.on_batch(len(batch), tokens, seconds)
            self._answer(outcomes)
            with self._cond:
                # Back to the end of the queue: requests that came meanwhile run before its next piece.
                for job in unfinished:
                    self._queue.append(job)
                    self._queued_tokens += job.remaining_tokens
                if unfinished:
                    self._cond.notify()
                # Busy until its answers are out: a worker taking a batch meanwhile is not alone.
                self._running -= 1
                self._running_requests -= len(batch)

    def _count(self, outcomes: list, tokens: int, *, batch_tokens: int | None = None, pieces: int = 0,
               seconds: float = 0.0) -> None:
        """Stats of finished requests (``outcomes``) and of ``tokens`` encoded; with
        ``batch_tokens``, of the batch itself (its pieces, time, the throughput for Retry-After)."""
        with self._cond:
            stats = self._stats
            stats.requests += len(outcomes)
            stats.failed += sum(1 for _, failed, _ in outcomes if failed)
            stats.tokens += tokens
            if batch_tokens is not None:
                stats.batches += 1
                stats.pieces += pieces
                stats.busy_seconds += seconds
                rate = batch_tokens / seconds if seconds > 0 else 0.0
                self._tokens_per_second = rate if self._tokens_per_second == 0 else \
                    0.8 * self._tokens_per_second + 0.2 * rate

    def _release(self, job: Job) -> None:
        """Drop the partial results ``job`` holds (under the lock); waiting workers may start
        other requests in pieces again."""
        job.partials.clear()
        if job.held:
            self._held -= job.held
            job.held = 0
            self._cond.notify_all()

    def _answer(self, outcomes: list) -> None:
        with self._cond:
            for job, _, _ in outcomes:
                self._release(job)
        for job, failed, value in outcomes:
            if failed:
                job.future.set_exception(value)
            else:
                job.future.set_result(value)


def _group_by_task(batch: list[Job]) -> list[tuple[Any, list[Job]]]:
    """Jobs grouped by the task that runs them, groups in order of first arrival."""
    groups: dict[int, tuple[Any, list[Job]]] = {}
    for job in batch:
        groups.setdefault(id(job.task), (job.task, []))[1].append(job)
    return list(groups.values())


def _run_group(task: Any, jobs: list[Job], alone: bool) -> list[tuple[Job, bool, Any]]:
    """Run one task's jobs together: (job, failed, result or exception) each. If the merged run
    fails, the jobs run one by one, so that one bad request fails alone. ``alone``: no other
    worker is running a batch (the task may use its solo scorer, with every core)."""
    try:
        results = task.run([job.payload for job in jobs], alone)
    except BaseException as exc:  # handed to the callers' futures
        if len(jobs) == 1:
            return [(jobs[0], True, exc)]
        return [outcome for job in jobs for outcome in _run_group(task, [job], alone)]
    return [(job, False, result) for job, result in zip(jobs, results)]


def _run_piece(job: Job, alone: bool) -> tuple[Job, bool, Any] | None:
    """Encode the job's current piece; once every piece is in, its result (job, failed, result
    or exception); None while pieces remain."""
    assert job.piece is not None
    start, stop = job.piece
    units = job.units
    task = job.task
    assert units is not None and isinstance(task, PiecewiseTask)  # only such jobs are given units
    try:
        job.partials.append(task.run_piece(job.payload, start, stop, alone))
        job.done = stop
        if stop < len(units):
            return None
        return job, False, task.finish_pieces(job.payload, job.partials, alone)
    except BaseException as exc:  # handed to the caller's future
        return job, True, exc


class _CallTask:
    """``MicroBatcher.call``: a function run alone in the worker."""

    def prepare(self, function: Callable[..., Any], *args: Any, limits: Any = None, **kwargs: Any) -> tuple[Any, int]:
        return (function, args, kwargs), 1

    def run(self, payloads: list, alone: bool) -> list:
        return [function(*args, **kwargs) for function, args, kwargs in payloads]


_CALL = _CallTask()
