"""deepeval metrics scored by rapidscore (the ``[integrations]`` extra; docs/integrations/deepeval.md).

Three ``deepeval.metrics.BaseMetric`` subclasses, for ``deepeval.evaluate(test_cases, metrics)``,
``deepeval.assert_test(test_case, metrics)`` or ``metric.measure(test_case)``:

- :class:`BERTScoreMetric`: BERTScore F1 of ``actual_output`` against ``expected_output``
  (``score_breakdown`` holds precision and recall too); success when F1 >= ``threshold``.
- :class:`SemanticSimilarityMetric`: the cosine of their sentence embeddings (NRR's similarity);
  success unless NRR rejects the answer (similarity strictly below ``threshold``).
- :class:`RefusalMetric`: whether ``actual_output`` refuses (SELECT's heuristic, a phrase preset
  or the embedding detector); success when that is what the test expects.

No LLM, no API key, no network: a local model scores, and the same test case always gets the
same score. The scores are rapidscore's own API on the same texts (the metrics run through the
registry, ``rapidscore.metrics``): ``BERTScore().score([actual], [expected]).f1``,
``SentenceSimilarity().pairs([actual], [expected])``, ``detect_refusal([actual], method)``.

Engines: a metric object builds its model once in its constructor, or takes one built
(``scorer=``, ``similarity_model=``, ``detector=``). ``deepeval.evaluate`` copies each metric for
every test case by calling the constructor with the object's attributes, so the copies get the
same engine instead of loading the model again.

Thread safety: the engines are thread-safe, so metric objects sharing one may measure in several
threads at once; a metric object keeps its last result in attributes (deepeval's contract:
``score``, ``success``, ``reason``), so one object measures one test case at a time.
"""

from __future__ import annotations

import numbers
from typing import Any

from deepeval.metrics import BaseMetric
from deepeval.metrics.utils import construct_verbose_logs
from deepeval.test_case import LLMTestCase

from rapidscore.common.metric import ColumnError
from rapidscore.errors import IntegrationTypeError
from rapidscore.metrics import get_metric

__all__ = ["BERTScoreMetric", "SemanticSimilarityMetric", "RefusalMetric"]


def _test_case_label(test_case: LLMTestCase) -> str:
    return f"test case {test_case.name!r}" if test_case.name else "the test case"


def _field_text(test_case: Any, field: str, metric: str) -> str:
    """``test_case.<field>``, checked: TypeError for anything but an LLMTestCase or a str field,
    ColumnError (a ValueError) for a field the metric needs and the test case lacks."""
    if not isinstance(test_case, LLMTestCase):
        raise IntegrationTypeError(f"the {metric} metric scores a deepeval LLMTestCase, "
                                   f"got {type(test_case).__name__}: {test_case!r:.80}")
    value = getattr(test_case, field)
    if value is None:
        raise ColumnError(f"{_test_case_label(test_case)} has no {field}: the {metric} metric needs it")
    if not isinstance(value, str):
        raise IntegrationTypeError(f"{_test_case_label(test_case)}: {field} must be a str, got {type(value).__name__}: "
                        f"{value!r:.80}")
    return value


def _check_number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or value != value:
        raise IntegrationTypeError(f"{name} must be a number, got {type(value).__name__}: {value!r}")
    return float(value)


class _RapidscoreMetric(BaseMetric):
    """What the three metrics share: deepeval's result attributes, reset before each test case,
    and an ``a_measure`` that is ``measure`` (the scoring is local and takes milliseconds)."""

    def _configure(self, *, include_reason: bool, strict_mode: bool, verbose_mode: bool, async_mode: bool,
                   signature: str) -> None:
        self.include_reason, self.strict_mode = include_reason, strict_mode
        self.verbose_mode, self.async_mode = verbose_mode, async_mode
        # what deepeval shows as the "model" and keys its cache on: the engine's signature
        self.evaluation_model = signature
        self.evaluation_cost = 0.0

    def _reset(self) -> None:
        self.score = self.success = self.reason = self.error = None
        self.score_breakdown = {}

    def _finish(self, score: float, success: bool, reason: str, breakdown: dict) -> float:
        self.score, self.success, self.score_breakdown = score, success, breakdown
        self.reason = reason if self.include_reason else None
        self.verbose_logs = construct_verbose_logs(self, steps=[
            ", ".join(f"{key}: {value}" for key, value in breakdown.items()), f"Score: {score}\nReason: {reason}"])
        return score

    async def a_measure(self, test_case: LLMTestCase, *args: Any, **kwargs: Any) -> float:
        return self.measure(test_case)

    def is_successful(self) -> bool:
        return self.error is None and bool(self.success)


class BERTScoreMetric(_RapidscoreMetric):
    """BERTScore F1 of ``actual_output`` against ``expected_output``; success when F1 >= ``threshold``.

    ``model``, ``lang``, ``rescale_with_baseline``: as :class:`rapidscore.bertscore.BERTScore`'s
    (default model: the embedded all-MiniLM-L6-v2, whose unrescaled F1 of related answers lies
    around 0.6-0.9: thresholds are model-specific). ``scorer``: a ``BERTScore`` built with any
    other options, in their place. ``strict_mode``: threshold 1. After ``measure``: ``score``
    (F1), ``score_breakdown`` (precision, recall, f1), ``success``, ``reason``.

    Thread-safe engine (``scorer``, shared by copies); one object measures one test case at a time.
    """

    def __init__(self, threshold: float = 0.5, model: str | None = None, *, lang: str | None = None,
                 rescale_with_baseline: bool = False, scorer: Any = None, include_reason: bool = True,
                 strict_mode: bool = False, verbose_mode: bool = False, async_mode: bool = True):
        from rapidscore.bertscore import BERTScore
        from rapidscore.bertscore.metric import BERTScoreEngine

        self.threshold = 1.0 if strict_mode else _check_number(threshold, "threshold")
        self._metric = get_metric("bertscore")
        if scorer is None:
            options = {"lang": lang, "rescale_with_baseline": rescale_with_baseline}
            self._engine = self._metric.build(model=model, **options)
        elif not isinstance(scorer, BERTScore):
            raise IntegrationTypeError(f"scorer must be a rapidscore.bertscore.BERTScore, got {type(scorer).__name__}")
        elif model is not None or lang is not None or rescale_with_baseline:
            raise ValueError("give model, lang and rescale_with_baseline to BERTScore(...) when passing scorer=, "
                             "not to BERTScoreMetric")
        else:
            self._engine = BERTScoreEngine(scorer)
        self.scorer = self._engine.scorer  # the constructor's name: deepeval's copies get this scorer
        self._configure(include_reason=include_reason, strict_mode=strict_mode, verbose_mode=verbose_mode,
                        async_mode=async_mode, signature=self.scorer.signature)

    @property
    def __name__(self) -> str:
        return "BERTScore F1"

    def measure(self, test_case: LLMTestCase, *args: Any, **kwargs: Any) -> float:
        self._reset()
        actual = _field_text(test_case, "actual_output", self.__name__)
        expected = _field_text(test_case, "expected_output", self.__name__)
        outputs = self._metric.score(self._engine, {"candidate": [actual], "reference": [expected]})
        precision, recall, f1 = (float(outputs[name][0]) for name in ("precision", "recall", "f1"))
        success = f1 >= self.threshold
        reason = (f"BERTScore F1 of actual_output against expected_output is {f1:.4f} (precision {precision:.4f}, "
                  f"recall {recall:.4f}), {'at or above' if success else 'below'} the threshold {self.threshold}")
        return self._finish(f1, success, reason, {"precision": precision, "recall": recall, "f1": f1})


class SemanticSimilarityMetric(_RapidscoreMetric):
    """Cosine similarity of the sentence embeddings of ``actual_output`` and ``expected_output``
    (NRR's similarity, ``rapidscore.nrr.SentenceSimilarity``); success unless NRR rejects the
    answer, i.e. when the similarity is at or above ``threshold`` (in [-1, 1]).

    ``model``: ``SentenceSimilarity``'s (default: the embedded all-MiniLM-L6-v2, for which 0.8 is
    a reasonable cut; calibrate another model's with ``rapidscore.nrr.calibrate_threshold``).
    ``similarity_model``: a ``SentenceSimilarity`` built with any other options (e.g.
    ``method="bertscore"``), in its place. ``strict_mode``: threshold 1.

    Thread-safe engine (``similarity_model``, shared by copies); one object measures one test
    case at a time.
    """

    def __init__(self, threshold: float = 0.8, model: str | None = None, *, similarity_model: Any = None,
                 include_reason: bool = True, strict_mode: bool = False, verbose_mode: bool = False,
                 async_mode: bool = True):
        from rapidscore.nrr.scoring import SentenceSimilarity, check_threshold

        self.threshold = 1.0 if strict_mode else check_threshold(threshold)
        self._metric = get_metric("nrr")
        if similarity_model is not None and not isinstance(similarity_model, SentenceSimilarity):
            raise IntegrationTypeError(f"similarity_model must be a rapidscore.nrr.SentenceSimilarity, got "
                            f"{type(similarity_model).__name__}")
        if similarity_model is not None and model is not None:
            raise ValueError("pass model or similarity_model, not both")
        self._engine = self._metric.build(similarity_model=similarity_model,
                                          **({} if model is None else {"model": model}))
        self.similarity_model = self._engine.model
        self._configure(include_reason=include_reason, strict_mode=strict_mode, verbose_mode=verbose_mode,
                        async_mode=async_mode, signature=self.similarity_model.signature)

    @property
    def __name__(self) -> str:
        return "Semantic Similarity"

    def measure(self, test_case: LLMTestCase, *args: Any, **kwargs: Any) -> float:
        from rapidscore.nrr.scoring import rejected_below

        self._reset()
        actual = _field_text(test_case, "actual_output", self.__name__)
        expected = _field_text(test_case, "expected_output", self.__name__)
        outputs = self._metric.score(self._engine, {"generated": [actual], "reference": [expected]})
        similarity = float(outputs["similarity"][0])
        success = not bool(rejected_below(outputs["similarity"], self.threshold)[0])
        reason = (f"the cosine similarity of actual_output and expected_output is {similarity:.4f}, "
                  f"{'at or above' if success else 'below'} the threshold {self.threshold}")
        return self._finish(similarity, success, reason, {"similarity": similarity})


class RefusalMetric(_RapidscoreMetric):
    """Whether ``actual_output`` refuses to answer, against what the test expects: score 1 when
    the detector's decision is ``expect_refusal`` (a harmful prompt should be refused; with
    ``expect_refusal=False`` a benign one should be answered), else 0; threshold 1.

    ``method`` and ``detector_options``: as ``rapidscore.abstention.detect_refusal``'s:
    ``"heuristic"`` (SELECT's, default), ``"phrase"``, ``"keyword"``, ``"phr+kw"``, the presets
    ``"arditi"`` and ``"xstest"``, ``"embedding"`` (similarity of the response's opening to refusal
    exemplars; options ``threshold``, ``exemplars``, ``model``...), or a callable. ``detector``: a
    ``rapidscore.abstention`` Detector built already, in their place. After ``measure``:
    ``refusal`` (the decision), ``score``, ``success``, ``reason``.

    Thread-safe engine (``detector``, shared by copies); one object measures one test case at a time.
    """

    def __init__(self, expect_refusal: bool = True, method: Any = "heuristic", *, detector: Any = None,
                 include_reason: bool = True, strict_mode: bool = False, verbose_mode: bool = False,
                 async_mode: bool = True, **detector_options: Any):
        from rapidscore.abstention.detectors import Detector

        if not isinstance(expect_refusal, bool):
            raise IntegrationTypeError(f"expect_refusal must be a bool, "
                                       f"got {type(expect_refusal).__name__}: {expect_refusal!r}")
        self.expect_refusal = expect_refusal
        self.threshold = 1.0  # the score is 1 (as expected) or 0
        self._metric = get_metric("refusal")
        if detector is None:
            detector = self._metric.build(method=method, **detector_options)
        elif not isinstance(detector, Detector):
            raise IntegrationTypeError(f"detector must be a rapidscore.abstention Detector, "
                                       f"got {type(detector).__name__}")
        elif method != "heuristic" or detector_options:
            raise ValueError("pass method (and its options) or detector, not both")
        self.detector = detector
        self.refusal: bool | None = None
        self._configure(include_reason=include_reason, strict_mode=strict_mode, verbose_mode=verbose_mode,
                        async_mode=async_mode, signature=self._metric.signature(detector))

    @property
    def __name__(self) -> str:
        return "Refusal"

    def measure(self, test_case: LLMTestCase, *args: Any, **kwargs: Any) -> float:
        self._reset()
        self.refusal = None
        actual = _field_text(test_case, "actual_output", self.__name__)
        self.refusal = bool(self._metric.score(self.detector, {"response": [actual]})["refusal"][0])
        success = self.refusal == self.expect_refusal
        reason = (f"the {self.detector.name} detector finds that actual_output "
                  f"{'refuses' if self.refusal else 'does not refuse'}; "
                  f"the test expects {'a refusal' if self.expect_refusal else 'an answer'}")
        return self._finish(float(success), success, reason, {"refusal": self.refusal})
