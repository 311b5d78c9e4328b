"""ragas metrics scored by rapidscore (the ``[integrations]`` extra; docs/integrations/ragas.md).

Two ``SingleTurnMetric`` s for ``ragas.evaluate(dataset, metrics=[...])`` on an
``EvaluationDataset`` of ``SingleTurnSample`` rows (or a Hugging Face ``Dataset`` ragas converts),
each comparing ``response`` with ``reference``:

- :class:`AnswerSimilarity` (result column ``answer_similarity``): the cosine of their sentence
  embeddings (NRR's similarity, ``rapidscore.nrr.SentenceSimilarity``); with ``threshold``, 1.0
  when NRR keeps the answer (similarity at or above it), else 0.0.
- :class:`BERTScoreF1` (``bertscore_f1``): BERTScore F1 (``rapidscore.bertscore.BERTScore``).

No LLM, no embeddings object, no API key: they are neither ``MetricWithLLM`` nor
``MetricWithEmbeddings``, so ``evaluate`` does not build its default OpenAI LLM or embeddings
for them. They are deterministic: a row's score is rapidscore's own API on its texts (the
metrics run through the registry, ``rapidscore.metrics``), whatever rows it is batched with.

Batching: ragas scores a dataset as one coroutine per row and metric, up to
``RunConfig.max_workers`` (default 16) at once. The rows of one metric that wait at the same time
are scored in one call of the engine (one encoder pass), so a larger ``max_workers`` gives larger
batches.

Thread safety: a metric object holds its engine (built once, in the constructor, or given:
``similarity_model=``, ``scorer=``) and no per-row state; the engines are thread-safe, so one
object may score from several threads and event loops at once.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ragas.dataset_schema import SingleTurnSample
from ragas.metrics.base import MetricType, SingleTurnMetric
from ragas.run_config import RunConfig

from rapidscore.common.metric import ColumnError
from rapidscore.errors import IntegrationTypeError
from rapidscore.metrics import get_metric

__all__ = ["AnswerSimilarity", "BERTScoreF1"]

Pair = tuple[str, str]
_Waiting = list[tuple[Pair, "asyncio.Future[float]"]]


class _RowBatcher:
    """Scores ``(response, reference)`` pairs awaited on one event loop together: the first pair
    of a batch schedules the batch's scoring for the loop's next turn, when every row coroutine
    that was ready has added its pair. A batch that fails is scored again row by row, so a bad row
    fails alone."""

    def __init__(self, score_pairs: Callable[[list[Pair]], list[float]]):
        self._score_pairs = score_pairs
        self._lock = threading.Lock()  # one metric object may serve several event loops (threads)
        self._waiting: dict[asyncio.AbstractEventLoop, _Waiting] = {}

    async def score(self, pair: Pair) -> float:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[float] = loop.create_future()
        with self._lock:
            waiting = self._waiting.setdefault(loop, [])
            if not waiting:
                loop.call_soon(self._run, loop)
            waiting.append((pair, future))
        return await future

    def _run(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            rows = [(pair, future) for pair, future in self._waiting.pop(loop, []) if not future.done()]
        if rows:  # else every row timed out or was cancelled
            self._score_into(rows)

    def _score_into(self, rows: _Waiting) -> None:
        try:
            values = self._score_pairs([pair for pair, _future in rows])
        except Exception as exc:
            if len(rows) > 1:  # again row by row: a bad row fails alone
                for row in rows:
                    self._score_into([row])
            elif not rows[0][1].done():
                rows[0][1].set_exception(exc)
            return
        for (_pair, future), value in zip(rows, values):
            if not future.done():
                future.set_result(value)


def _row_label(sample: SingleTurnSample) -> str:
    question = sample.user_input
    return f"the sample with user_input {question!r:.80}" if question else "a sample"


def _sample_pair(sample: Any, metric: str) -> Pair:
    """``(response, reference)`` of a sample: TypeError for anything but a SingleTurnSample,
    ColumnError (a ValueError) naming the field a sample lacks."""
    if not isinstance(sample, SingleTurnSample):
        raise IntegrationTypeError(f"{metric} scores a ragas SingleTurnSample, "
                                   f"got {type(sample).__name__}: {sample!r:.80}")
    for name in ("response", "reference"):
        if getattr(sample, name) is None:
            raise ColumnError(f"{_row_label(sample)} has no {name}: {metric} compares response with reference")
    return sample.response, sample.reference  # type: ignore[return-value]  # both checked above


def _response_reference_columns() -> dict[MetricType, set[str]]:
    # user_input is kept (optional) only to name a bad row in errors
    return {MetricType.SINGLE_TURN: {"response", "reference", "user_input:optional"}}


class _RapidscoreRowMetric(SingleTurnMetric):
    """What the two metrics share: no LLM or embeddings to set up, samples checked and batched."""

    _batcher: _RowBatcher

    def init(self, run_config: RunConfig) -> None:
        """Nothing to set up: the engine was built with the metric, and no LLM is used."""

    def _start_batching(self) -> None:
        self._batcher = _RowBatcher(self._score_pairs)

    def _score_pairs(self, pairs: list[Pair]) -> list[float]:
        raise NotImplementedError

    def single_turn_score(self, sample: SingleTurnSample, callbacks: Any = None) -> float:
        _sample_pair(sample, self.name)  # a wrong object named here, not deep inside ragas
        return super().single_turn_score(sample, callbacks)

    async def single_turn_ascore(self, sample: SingleTurnSample, callbacks: Any = None,
                                 timeout: float | None = None) -> float:
        _sample_pair(sample, self.name)
        return await super().single_turn_ascore(sample, callbacks, timeout)

    async def _single_turn_ascore(self, sample: SingleTurnSample, callbacks: Any) -> float:
        return await self._batcher.score(_sample_pair(sample, self.name))


@dataclass
class AnswerSimilarity(_RapidscoreRowMetric):
    """Cosine similarity of the sentence embeddings of ``response`` and ``reference`` (NRR's
    similarity, in [-1, 1]); with ``threshold``, 1.0 when the similarity is at or above it (NRR
    keeps the answer) and 0.0 when NRR rejects it.

    ``model``: ``SentenceSimilarity``'s (default: the embedded all-MiniLM-L6-v2, for which 0.8 is a
    reasonable cut; thresholds are model-specific). ``similarity_model``: a ``SentenceSimilarity``
    built with any other options (e.g. ``method="bertscore"``), in its place.

    Thread-safe: the engine is built once and shared by every row, thread and event loop.
    """

    name: str = "answer_similarity"
    _required_columns: dict[MetricType, set[str]] = field(default_factory=_response_reference_columns)
    model: str | os.PathLike | None = None
    threshold: float | None = None
    similarity_model: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        from rapidscore.nrr.scoring import SentenceSimilarity, check_threshold

        super().__post_init__()
        if self.threshold is not None:
            self.threshold = check_threshold(self.threshold)
        if self.similarity_model is not None and not isinstance(self.similarity_model, SentenceSimilarity):
            raise IntegrationTypeError(f"similarity_model must be a rapidscore.nrr.SentenceSimilarity, got "
                            f"{type(self.similarity_model).__name__}")
        if self.similarity_model is not None and self.model is not None:
            raise ValueError("pass model or similarity_model, not both")
        self._metric = get_metric("nrr")
        self._engine = self._metric.build(similarity_model=self.similarity_model,
                                          **({} if self.model is None else {"model": self.model}))
        self.similarity_model = self._engine.model
        self._start_batching()

    def _score_pairs(self, pairs: list[Pair]) -> list[float]:
        from rapidscore.nrr.scoring import rejected_below

        outputs = self._metric.score(self._engine, {"generated": [response for response, _ in pairs],
                                                    "reference": [reference for _, reference in pairs]})
        if self.threshold is None:
            return [float(value) for value in outputs["similarity"]]
        return [0.0 if rejected else 1.0 for rejected in rejected_below(outputs["similarity"], self.threshold)]


@dataclass
class BERTScoreF1(_RapidscoreRowMetric):
    """BERTScore F1 of ``response`` against ``reference``.

    ``model``, ``lang``, ``rescale_with_baseline``: as :class:`rapidscore.bertscore.BERTScore`'s
    (default model: the embedded all-MiniLM-L6-v2). ``scorer``: a ``BERTScore`` built with any
    other options, in their place.

    Thread-safe: the engine is built once and shared by every row, thread and event loop.
    """

    name: str = "bertscore_f1"
    _required_columns: dict[MetricType, set[str]] = field(default_factory=_response_reference_columns)
    model: str | os.PathLike | None = None
    lang: str | None = None
    rescale_with_baseline: bool = False
    scorer: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        from rapidscore.bertscore import BERTScore
        from rapidscore.bertscore.metric import BERTScoreEngine

        super().__post_init__()
        self._metric = get_metric("bertscore")
        if self.scorer is None:
            self._engine = self._metric.build(model=self.model, lang=self.lang,
                                              rescale_with_baseline=self.rescale_with_baseline)
        elif not isinstance(self.scorer, BERTScore):
            raise IntegrationTypeError(f"scorer must be a rapidscore.bertscore.BERTScore, "
                                       f"got {type(self.scorer).__name__}")
        elif self.model is not None or self.lang is not None or self.rescale_with_baseline:
            raise ValueError("give model, lang and rescale_with_baseline to BERTScore(...) when passing scorer=, "
                             "not to BERTScoreF1")
        else:
            self._engine = BERTScoreEngine(self.scorer)
        self.scorer = self._engine.scorer
        self._start_batching()

    def _score_pairs(self, pairs: Sequence[Pair]) -> list[float]:
        outputs = self._metric.score(self._engine, {"candidate": [response for response, _ in pairs],
                                                    "reference": [reference for _, reference in pairs]})
        return [float(value) for value in outputs["f1"]]
