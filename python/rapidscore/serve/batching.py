"""Dynamic micro-batching: many callers, one encoder pass per batch.

A :class:`MicroBatcher` owns a bounded queue and one worker thread. Callers (threads, coroutines,
HTTP handlers) validate and tokenise their request in their own thread and queue it; the worker
takes the oldest request and every request queued behind it up to a token budget, runs one
encoder pass over the distinct sentences of the whole batch, and finishes each request from that
shared result. A request that arrives while the worker is idle runs at once (no waiting window:
batches form from what queued up during the previous pass, as TEI and Triton do by default).
A request larger than the budget is encoded in pieces (whole texts, each piece within what is
left of a batch's budget) and goes back to the end of the queue after each piece, so requests
that arrived meanwhile run between its pieces; its scores are computed once every piece is in,
exactly as a direct call's.

:class:`BatchingScorer` puts one scorer (BERTScore, SentenceSimilarity, a refusal detector) in
front of a batcher: ``submit(...) -> concurrent.futures.Future``, ``await ascore(...)`` and
``score(...)``, each returning exactly what the scorer's own call returns.
"""

from __future__ import annotations

import asyncio
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

from rapidscore.common.metric import Metric, PiecewiseTask, ServingTask
from rapidscore.errors import OverloadedError, RapidscoreError, check_positive_int

__all__ = ["MicroBatcher", "BatchingScorer", "BatchStats", "RequestTooLargeError"]


class RequestTooLargeError(RapidscoreError, ValueError):
    """A request over a per-request limit (texts or tokens): refused before it is queued.

    ``limit``: the setting's name (``max_texts``, ``max_tokens``), ``value``: the request's
    count, ``maximum``: the limit, ``field``: the request's argument that carries the texts (the
    HTTP server answers 413 naming it)."""

    def __init__(self, message: str, *, limit: str, value: int, maximum: int, field: str):
        super().__init__(message)
        self.limit, self.value, self.maximum, self.field = limit, value, maximum, field


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
    ``on_batch(n_requests, n_tokens, seconds)``: called by the worker after each batch (metrics).

    Thread-safe: any number of threads and event loops may submit at once. ``close`` drains the
    queue (every accepted request is answered) unless ``drain=False``.
    """

    def __init__(self, *, batch_tokens: int = 8192, max_batch_requests: int = 256, max_queue: int = 1024,
                 workers: int = 1, on_batch: Callable[[int, int, float], None] | None = None,
                 piece_tokens: int | None = None, name: str = "rapidscore-batcher"):
        self.batch_tokens = check_positive_int(batch_tokens, "batch_tokens")
        # A quarter of a batch per piece: a batch that holds a piece has room for other requests,
        # and a request that arrives during a piece waits for a quarter of a full batch's time.
        self.piece_tokens = max(1, self.batch_tokens // 4) if piece_tokens is None else \
            check_positive_int(piece_tokens, "piece_tokens")
        self.max_batch_requests = check_positive_int(max_batch_requests, "max_batch_requests")
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
            while not self._queue:
                if self._closing:
                    return None
                self._cond.wait()
            batch: list[Job] = []
            tokens = 0
            limit = self.max_batch_requests
            if self._running:
                # Other workers are busy: take a fair share of what is queued and running, so that
                # batches stay alike in size. Taking everything let one worker's batch grow while
                # the other's shrank (32 clients on 2 workers: 4 to 24 requests, p99 171 ms).
                limit = min(limit, -(-(len(self._queue) + self._running_requests) // self.workers))
            while self._queue and len(batch) < limit:
                job = self._queue[0]
                need = job.remaining_tokens
                piece = None
                if job.units is not None and (job.done or tokens + need > self.batch_tokens):
                    # in pieces: the texts that fit what is left of the budget
                    room = min(self.batch_tokens - tokens, self.piece_tokens)
                    stop = job.done + int(np.searchsorted(np.cumsum(job.units[job.done:]), room, side="right"))
                    if stop == job.done:
                        if batch:
                            break
                        stop = job.done + 1
                    piece = (job.done, stop)
                    size = int(job.units[job.done:stop].sum())
                elif batch and tokens + need > self.batch_tokens:
                    break
                else:
                    size = need
                self._queue.popleft()
                self._queued_tokens -= need
                if job.done == 0:
                    if not job.future.set_running_or_notify_cancel():
                        self._stats.dropped += 1
                        continue  # its caller cancelled it while it waited
                elif job.abandoned:  # its caller went away between two pieces
                    self._stats.dropped += 1
                    job.partials.clear()
                    job.future.set_exception(CancelledError())
                    continue
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

    @staticmethod
    def _answer(outcomes: list) -> None:
        for job, failed, value in outcomes:
            job.partials.clear()
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


# -- tasks: how a scorer's requests are prepared, merged and finished: each metric's own
# ServingTask (common/metric.py; a PiecewiseTask encodes a request in pieces), made by its
# Metric.serving_task in the metric's package --------------------------------------------------


@dataclass(frozen=True)
class _Limits:
    """Per-request limits of a BatchingScorer (None: none): checked while preparing."""

    max_texts: int | None = None
    max_tokens: int | None = None

    def check_texts(self, count: int, field: str, what: str) -> None:
        self._check("max_texts", self.max_texts, count, "texts", field, what)

    def check_tokens(self, count: int, field: str, how: str) -> None:
        self._check("max_tokens", self.max_tokens, count, "tokens", field, how)

    @staticmethod
    def _check(limit: str, maximum: int | None, count: int, unit: str, field: str, detail: str) -> None:
        if maximum is not None and count > maximum:
            raise RequestTooLargeError(
                f"{field}: the request holds {count} {unit} ({detail}), over the limit of {maximum} "
                f"per request ({limit}); split it into smaller requests",
                limit=limit, value=count, maximum=maximum, field=field)


def _task_for(scorer: Any, solo: Any = None, metric_name: Any = None) -> tuple[Any, Any]:
    """The registered metric ``metric_name``, or the one that serves ``scorer`` (its engine),
    and its batching task."""
    from rapidscore.metrics import all_metrics, get_metric

    metric: Metric | None = get_metric(metric_name) if metric_name is not None else \
        next((m for m in all_metrics() if m.serves(scorer)), None)
    if metric is None:
        raise TypeError(f"BatchingScorer takes the engine of a registered metric (a BERTScore, "
                        f"SentenceSimilarity or refusal Detector, ...), got {type(scorer).__name__}")
    if solo is not None:
        if not metric.takes_solo:
            raise ValueError(f"solo applies to BERTScore and SentenceSimilarity (metrics that batch encoder passes), "
                             f"not {metric.name}")
        if type(solo) is not type(scorer) or getattr(solo, "signature", None) != getattr(scorer, "signature", None):
            raise ValueError(f"solo must be a scorer of the same kind and options as scorer (signature "
                             f"{getattr(scorer, 'signature', None)!r}), got {type(solo).__name__} with signature "
                             f"{getattr(solo, 'signature', None)!r}")
    return metric, metric.serving_task(scorer, solo)


class BatchingScorer:
    """One scorer behind a micro-batching queue.

    ``scorer``: a :class:`~rapidscore.bertscore.BERTScore` (``submit(cands, refs)`` ->
    ``BERTScoreResult``), a :class:`~rapidscore.nrr.SentenceSimilarity` (``submit(generated,
    references, threshold=0.8)`` -> ``NRRResult``, as ``negative_rejection``) or a refusal
    detector (``submit(responses)`` -> bool array). Results equal the direct call's exactly.

    ``batcher``: share one :class:`MicroBatcher` (one queue, one worker) between scorers;
    otherwise one is made from ``batcher_options`` (``batch_tokens``, ``max_batch_requests``,
    ``max_queue``, ``workers``, ``on_batch``) and closed by :meth:`close`.

    ``max_request_texts``, ``max_request_tokens``: per-request limits (None: none) on the texts
    sent (candidates and every reference; answers and references; responses) and on the tokens
    of its distinct texts (special tokens included; a detector's responses: characters / 4).
    Over either, ``submit`` raises :class:`RequestTooLargeError` (a ValueError) naming the
    limit and the count.

    ``metric``: the registered metric (name) whose engine ``scorer`` is, for an engine of another
    metric than these (``rapidscore.metrics``; a request is then a dict of its input columns and
    the result its output columns); by default the metric that serves ``scorer``.

    ``solo``: the same scorer built with more runtime threads (``num_threads``), used for a batch
    that runs while no other worker is busy. With several workers on a CPU, each worker's scorer
    runs on ``cores / workers`` threads, which is best under load; a lone request then gets
    every core, as a direct call would. Costs a second copy of the model's session. Must have
    the scorer's type and signature (ValueError otherwise); results are the same either way.

    Inputs are validated and tokenised in the caller's thread: a bad request raises there
    (ValueError / TypeError naming the argument), before it is queued. A full queue raises
    :class:`~rapidscore.errors.OverloadedError` at once.

    Thread-safe: many threads and event loops may submit at once.
    """

    def __init__(self, scorer: Any, *, solo: Any = None, batcher: MicroBatcher | None = None,
                 max_request_texts: int | None = None, max_request_tokens: int | None = None,
                 metric: Any = None, **batcher_options: Any):
        self.scorer = scorer
        # the metric whose requests this scorer takes (the service's generic route reads it)
        self.metric, self._task = _task_for(scorer, solo, metric)
        # asked once: a runtime Protocol check costs microseconds, and prepare runs per request
        self._piecewise = isinstance(self._task, PiecewiseTask)
        self._limits = _Limits(
            None if max_request_texts is None else check_positive_int(max_request_texts, "max_request_texts"),
            None if max_request_tokens is None else check_positive_int(max_request_tokens, "max_request_tokens"))
        self._owns_batcher = batcher is None
        self.batcher = batcher if batcher is not None else MicroBatcher(**batcher_options)

    def prepare(self, *args: Any, **kwargs: Any) -> Job:
        """Validate and tokenise a request (in the caller's thread) without queueing it; a request
        over ``max_request_texts`` or ``max_request_tokens`` raises RequestTooLargeError (the
        texts are counted before tokenising)."""
        payload, tokens = self._task.prepare(*args, limits=self._limits, **kwargs)
        units = np.asarray(self._task.units(payload), dtype=np.int64) if self._piecewise else None
        return Job(task=self._task, payload=payload, tokens=tokens, units=units)

    def submit(self, *args: Any, **kwargs: Any) -> Future:
        """Queue a request; a future of the scorer's result."""
        return self.batcher.put(self.prepare(*args, **kwargs))

    async def ascore(self, *args: Any, **kwargs: Any) -> Any:
        """``await`` the result without blocking the event loop (cancelling the awaiting task
        drops the request if it has not started)."""
        return await asyncio.wrap_future(self.submit(*args, **kwargs))

    def score(self, *args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        """Submit and wait (batched with whatever other callers submit meanwhile)."""
        return self.submit(*args, **kwargs).result(timeout)

    def warm_up(self, *args: Any, repeats: int = 3, **kwargs: Any) -> None:
        """Run one request ``repeats`` times through each scorer a batch may use (the solo one
        and the workers'), in the calling thread, not through the queue: their runtime sessions
        are made and their buffers allocated before the first real requests, which would
        otherwise wait for that when a busy moment first sends a batch to the workers' scorer."""
        job = self.prepare(*args, **kwargs)
        for _ in range(check_positive_int(repeats, "repeats")):
            for alone in (True, False):
                self._task.run([job.payload], alone)

    def close(self, *, drain: bool = True, timeout: float | None = None) -> None:
        """Close the batcher if this scorer made it (a shared one is closed by its owner)."""
        if self._owns_batcher:
            self.batcher.close(drain=drain, timeout=timeout)

    def __enter__(self) -> BatchingScorer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
