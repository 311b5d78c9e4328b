"""Dynamic micro-batching: many callers, one encoder pass per batch.

A :class:`MicroBatcher` (``rapidscore.serve.micro_batcher``) owns a bounded queue and its worker
threads. Callers (threads, coroutines,
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
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np

from rapidscore.common.metric import Metric, PiecewiseTask, WarmingTask, engine_metric
from rapidscore.errors import RequestTooLargeError, check_positive_int
from rapidscore.serve.micro_batcher import BatchStats, Job, MicroBatcher

__all__ = ["MicroBatcher", "BatchingScorer", "BatchStats", "RequestTooLargeError"]


# -- tasks: how a scorer's requests are prepared, merged and finished: each metric's own
# ServingTask (common/metric.py; a PiecewiseTask encodes a request in pieces), made by its
# Metric.task in the metric's package ----------------------------------------------------------


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
        engine_metric(scorer, all_metrics())
    if metric is None:
        raise TypeError(f"BatchingScorer takes the engine of a registered metric (a BERTScore, "
                        f"SentenceSimilarity or refusal Detector, ...), got {type(scorer).__name__}")
    if solo is not None:
        if not metric.front_ends.takes_solo:
            raise ValueError(f"solo applies to BERTScore and SentenceSimilarity (metrics that batch encoder passes), "
                             f"not {metric.name}")
        if type(solo) is not type(scorer) or getattr(solo, "signature", None) != getattr(scorer, "signature", None):
            raise ValueError(f"solo must be a scorer of the same kind and options as scorer (signature "
                             f"{getattr(scorer, 'signature', None)!r}), got {type(solo).__name__} with signature "
                             f"{getattr(solo, 'signature', None)!r}")
    return metric, metric.task(scorer, solo)


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
        if isinstance(self._task, WarmingTask):  # the engine's own warm-up (CUDA graphs of small batches)
            self._task.warm_up()
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
