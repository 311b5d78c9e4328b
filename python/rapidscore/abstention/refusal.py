"""Refusal detection as a registered metric (``rapidscore.metrics``): a response column ->
``refusal`` (True = the response refuses), with any detector of ``rapidscore.abstention``; the
totals are the refusal rate. (The SELECT pipeline over a taxonomy is ``rapidscore abstention``.)"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rapidscore.common.metric import Column, Metric, RowNames, ServingTask, Totals, relabel

__all__ = ["RefusalMetric", "RefusalTotals", "METRIC"]


class RefusalTotals(Totals):
    """How many responses refuse, of how many. Not thread-safe: one per stream."""

    def __init__(self) -> None:
        self.n_responses = self.n_refusals = 0

    def update(self, outputs: Mapping[str, Sequence]) -> None:
        import numpy as np

        self.n_responses += len(outputs["refusal"])
        self.n_refusals += int(np.count_nonzero(outputs["refusal"]))

    def summary(self) -> dict:
        rate = self.n_refusals / self.n_responses if self.n_responses else 0.0
        return {"n_responses": self.n_responses, "n_refusals": self.n_refusals, "refusal_rate": rate}


class RefusalMetric(Metric):
    name = "refusal"
    summary = "refusal detection (True = the response refuses)"
    inputs = (Column("response", "response", "a response, or a chain-of-thought {complete, answer} record"),)
    outputs = ("refusal",)
    options = ("num_threads",)  # the generic command's --threads: the SELECT matcher's or the encoder's

    def build(self, *, method: Any = "heuristic", **options: Any) -> Any:
        """``method`` and ``options`` as ``rapidscore.abstention.detect_refusal``: the detector
        (and its model) is built once."""
        from rapidscore.abstention.detectors import get_detector

        return get_detector(method, **options)

    def score(self, engine: Any, columns: Mapping[str, Sequence], names: RowNames | None = None) -> dict[str, Any]:
        import numpy as np

        from rapidscore.abstention.detectors import response_text

        names = names or RowNames()
        texts = []
        for row, response in enumerate(columns["response"]):
            try:
                texts.append(response_text(response, names.offset + row))
            except TypeError as exc:
                raise relabel(exc, "", names.row(row)) from None
        decisions = engine.detect(texts) if texts else np.zeros(0, bool)
        return {"refusal": np.asarray(decisions, dtype=bool)}

    def signature(self, engine: Any) -> str:
        return f"refusal|method:{engine.name}|rapidscore"

    def totals(self) -> RefusalTotals:
        return RefusalTotals()

    def serving_task(self, engine: Any, solo: Any = None) -> ServingTask:
        from rapidscore.abstention.serving import DetectorTask

        return DetectorTask(engine)

    def serves(self, engine: Any) -> bool:
        from rapidscore.abstention.detectors import Detector

        return isinstance(engine, Detector)


METRIC = RefusalMetric()
