"""Dynamic micro-batching: many callers, one encoder pass per batch.

A :class:`MicroBatcher` owns a bounded queue and one worker thread. Callers (threads, coroutines,
HTTP handlers) validate and tokenise their request in their own thread and queue it; the worker
takes the oldest request and every request queued behind it up to a token budget, runs one
encoder pass over the distinct sentences of the whole batch, and finishes each request from that
shared result. A request that arrives while the worker is idle runs at once (no waiting window:
batches form from what queued up during the previous pass, as TEI and Triton do by default).

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
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rapidscore.errors import OverloadedError, check_positive_int

__all__ = ["MicroBatcher", "BatchingScorer", "BatchStats"]


@dataclass
class Job:
    """One queued request: what its task needs to run it, its token count, and its future."""

    task: Any  # the _Task that prepared it and runs it
    payload: Any
    tokens: int
    future: Future = field(default_factory=Future)
    queued_at: float = field(default_factory=time.perf_counter)


@dataclass
class BatchStats:
    """What the worker has done, for monitoring (a snapshot; ``MicroBatcher.stats()``)."""

    batches: int = 0
    requests: int = 0
    tokens: int = 0
    rejected: int = 0
    failed: int = 0
    queue_depth: int = 0
    busy_seconds: float = 0.0


class MicroBatcher:
    """A bounded request queue and the worker thread that batches it.

    ``batch_tokens``: the most tokens (sum over a batch's requests, special tokens included) one
    batch takes; a single request larger than that still runs, alone. ``max_batch_requests``: the
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
                 name: str = "rapidscore-batcher"):
        self.batch_tokens = check_positive_int(batch_tokens, "batch_tokens")
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
                    if job.future.set_running_or_notify_cancel():
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
        worker is running a batch (None: closed and empty)."""
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
                if batch and tokens + job.tokens > self.batch_tokens:
                    break
                self._queue.popleft()
                self._queued_tokens -= job.tokens
                if not job.future.set_running_or_notify_cancel():
                    continue  # its caller cancelled it while it waited
                batch.append(job)
                tokens += job.tokens
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
            outcomes = [outcome for task, jobs in _group_by_task(batch) for outcome in _run_group(task, jobs, alone)]
            seconds = time.perf_counter() - started
            tokens = sum(job.tokens for job in batch)
            # Counted before the answers go out, so a caller that got its answer sees its batch counted.
            with self._cond:
                stats = self._stats
                stats.batches += 1
                stats.requests += len(batch)
                stats.tokens += tokens
                stats.failed += sum(1 for _, failed, _ in outcomes if failed)
                stats.busy_seconds += seconds
                rate = tokens / seconds if seconds > 0 else 0.0
                self._tokens_per_second = rate if self._tokens_per_second == 0 else \
                    0.8 * self._tokens_per_second + 0.2 * rate
            if self.on_batch is not None:
                with contextlib.suppress(Exception):  # a metrics hook must never stop the worker
                    self.on_batch(len(batch), tokens, seconds)
            for job, failed, value in outcomes:
                if failed:
                    job.future.set_exception(value)
                else:
                    job.future.set_result(value)
            with self._cond:
                # Busy until its answers are out: a worker taking a batch meanwhile is not alone.
                self._running -= 1
                self._running_requests -= len(batch)


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


class _CallTask:
    """``MicroBatcher.call``: a function run alone in the worker."""

    def run(self, payloads: list, alone: bool) -> list:
        return [function(*args, **kwargs) for function, args, kwargs in payloads]


_CALL = _CallTask()


# -- tasks: how a scorer's requests are prepared, merged and finished ---------------------------


class _BERTScoreTask:
    """BERTScore: plan + tokenise per request; one encoder pass over the batch's distinct
    sentences; one matching pass over every request's pairs when the token weights do not
    depend on the call (``finish_plans``), else each request finished from its own rows (idf
    from its own references). Either way exactly what ``scorer.score`` gives.
    ``solo``: the same scorer with more runtime threads, for batches that run alone."""

    def __init__(self, scorer: Any, solo: Any = None):
        self.scorer = scorer
        self.solo = solo
        self.encoder = scorer.encoder

    def prepare(self, cands: Sequence[str], refs: Any) -> tuple[Any, int]:
        plan = self.scorer.plan(cands, refs)
        ids, truncated = self.encoder.tokenizer.encode(plan.texts)
        return (plan, ids, truncated), sum(len(i) for i in ids)

    def run(self, payloads: list, alone: bool) -> list:
        from rapidscore.encoder.store import TokenStore, row_ranges

        scorer = self.solo if alone and self.solo is not None else self.scorer
        union: dict[str, int] = {}
        union_ids: list[np.ndarray] = []
        positions = []
        for plan, ids, _ in payloads:
            index = np.empty(len(plan.texts), dtype=np.int64)
            for k, text in enumerate(plan.texts):
                slot = union.setdefault(text, len(union))
                if slot == len(union_ids):
                    union_ids.append(ids[k])
                index[k] = slot
            positions.append(index)
        # Unpadded where the encoder has that graph: the batch's sentences of every length in one
        # call, no padding (bit-identical to the padded graph a direct call runs).
        store = scorer.encoder.embed_ids(union_ids, unpadded=True)
        if scorer.weights_fixed:
            return scorer.finish_plans([plan for plan, _, _ in payloads], store, positions,
                                       [truncated for _, _, truncated in payloads])
        results = []
        for (plan, _, truncated), index in zip(payloads, positions):
            # The request's own sentences, in its plan's order: a store like a direct call's.
            lengths = store.lengths()[index]
            offsets = np.zeros(len(index) + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
            rows = row_ranges(store.offsets[index], lengths)
            own = TokenStore(ids=store.ids[rows], offsets=offsets, embeddings=store.embeddings[..., rows, :],
                             order=np.arange(len(index), dtype=np.int64), truncated=truncated)
            results.append(scorer.finish(plan, own))
        return results


class _SimilarityTask:
    """Sentence similarity / NRR (embedding method): one sentence-embedding pass over the batch's
    distinct texts; each request's similarities from those vectors. ``solo``: as for BERTScore."""

    def __init__(self, model: Any, solo: Any = None):
        self.model = model
        self.solo = solo
        self.encoder = model.encoder

    def prepare(self, generated: Any, references: Any, threshold: float = 0.8) -> tuple[Any, int]:
        from rapidscore.nrr.scoring import check_items, check_threshold

        threshold = check_threshold(threshold)
        generated, groups = check_items(generated, references)
        texts = list(dict.fromkeys(generated + [r for group in groups for r in group]))
        tokens = sum(len(ids) for ids in self.encoder.tokenize(texts))
        return (generated, groups, threshold, texts), tokens

    def run(self, payloads: list, alone: bool) -> list:
        model = self.solo if alone and self.solo is not None else self.model
        union = list(dict.fromkeys(text for payload in payloads for text in payload[3]))
        embed: Callable[[list[str]], np.ndarray] | None = None  # method="bertscore": each request alone
        if model.method == "embedding":
            # as the direct call embeds (the model's own pipeline and prompt); union: distinct texts
            vectors = model.sentence_vectors(union, unpadded=True)
            row = {text: k for k, text in enumerate(union)}

            def embed(texts: list[str]) -> np.ndarray:
                return vectors[[row[t] for t in texts]]
        return [model.rejection(generated, groups, threshold, embed=embed)
                for generated, groups, threshold, _ in payloads]


class _DetectorTask:
    """A refusal detector: requests run one by one in the worker (no merged encoder pass)."""

    def __init__(self, detector: Any):
        self.detector = detector

    def prepare(self, responses: Any) -> tuple[Any, int]:
        from rapidscore.abstention.detectors import response_texts

        texts = response_texts(responses)
        return texts, max(1, sum(len(t) for t in texts) // 4)  # characters / 4 ~ tokens; not merged

    def run(self, payloads: list, alone: bool) -> list:
        return [self.detector.detect(texts) for texts in payloads]


def _task_for(scorer: Any, solo: Any = None) -> Any:
    from rapidscore.abstention.detectors import Detector
    from rapidscore.bertscore import BERTScore
    from rapidscore.nrr.scoring import SentenceSimilarity

    if solo is not None:
        if not isinstance(scorer, (BERTScore, SentenceSimilarity)):
            raise ValueError(f"solo applies to BERTScore and SentenceSimilarity, not {type(scorer).__name__}")
        if type(solo) is not type(scorer) or getattr(solo, "signature", None) != scorer.signature:
            raise ValueError(f"solo must be a scorer of the same kind and options as scorer (signature "
                             f"{scorer.signature!r}), got {type(solo).__name__} with signature "
                             f"{getattr(solo, 'signature', None)!r}")
    if isinstance(scorer, BERTScore):
        return _BERTScoreTask(scorer, solo)
    if isinstance(scorer, SentenceSimilarity):
        return _SimilarityTask(scorer, solo)
    if isinstance(scorer, Detector):
        return _DetectorTask(scorer)
    raise TypeError(f"BatchingScorer takes a BERTScore, SentenceSimilarity or refusal Detector, "
                    f"got {type(scorer).__name__}")


class BatchingScorer:
    """One scorer behind a micro-batching queue.

    ``scorer``: a :class:`~rapidscore.bertscore.BERTScore` (``submit(cands, refs)`` ->
    ``BERTScoreResult``), a :class:`~rapidscore.nrr.SentenceSimilarity` (``submit(generated,
    references, threshold=0.8)`` -> ``NRRResult``, as ``negative_rejection``) or a refusal
    detector (``submit(responses)`` -> bool array). Results equal the direct call's exactly.

    ``batcher``: share one :class:`MicroBatcher` (one queue, one worker) between scorers;
    otherwise one is made from ``batcher_options`` (``batch_tokens``, ``max_batch_requests``,
    ``max_queue``, ``workers``, ``on_batch``) and closed by :meth:`close`.

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
                 **batcher_options: Any):
        self.scorer = scorer
        self._task = _task_for(scorer, solo)
        self._owns_batcher = batcher is None
        self.batcher = batcher if batcher is not None else MicroBatcher(**batcher_options)

    def prepare(self, *args: Any, **kwargs: Any) -> Job:
        """Validate and tokenise a request (in the caller's thread) without queueing it."""
        payload, tokens = self._task.prepare(*args, **kwargs)
        return Job(task=self._task, payload=payload, tokens=tokens)

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
