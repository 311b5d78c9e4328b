"""Refusal detection as a registered metric (``rapidscore.metrics``): a response column ->
``refusal`` (True = the response refuses), with any detector of ``rapidscore.abstention``; the
totals are the refusal rate. (The SELECT pipeline over a taxonomy is ``rapidscore abstention``.)"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rapidscore.abstention.methods import METHODS
from rapidscore.common.engine_options import ENGINE_OPTIONS
from rapidscore.common.metric import (
    Column,
    FrontEnds,
    Metric,
    Option,
    RequestOption,
    RowNames,
    ServerSetting,
    ServingTask,
    Settings,
    Totals,
    relabel,
)

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
    inputs = (Column("response", "response", "a response, or a chain-of-thought {complete, answer} record",
                     request_field="responses"),)
    front_ends = FrontEnds(
        summary="refusal detection (True = the response refuses)",
        batch_class_names=("RefusalBatch",),
        response_fields={"refusal": list[bool], "method": str},
        example=("I'm sorry, I can't help with that.",),
        engine_types=("rapidscore.abstention.detector_base:Detector",),
    )
    options = (
        RequestOption("method", str, None, "The detector (default: heuristic; over HTTP the server's "
                      "`refusal_method`); `embedding` runs on the server's default model, `classifier` on the "
                      "server's `refusal_model` (in Python and on the command line: `model=`).", choices=METHODS,
                      server="refusal_method"),
        ServerSetting("refusal_method", str, "heuristic", "detector of /v1/refusal", choices=METHODS),
        ServerSetting("refusal_model", str, None, "the sequence classifier (a directory, or a downloaded hub id) of "
                      "/v1/refusal's `classifier` method, loaded at start when `refusal_method` is classifier"),
        Option("model", str, None, "the embedding detector's model", server="model"),
        *ENGINE_OPTIONS,
    )
    outputs = ("refusal",)

    def settings(self, *, method: Any = None, model: str | None = None, refusal_model: str | None = None,
                 **engine: Any) -> Settings:
        """The detector's settings: ``method`` (default heuristic); ``classifier`` runs
        ``refusal_model`` (a server's ``--refusal-model``), ``embedding`` runs ``model`` through the
        unpadded graph, which the batched scorers run too (no second copy of the weights); the
        engine keywords go to the detectors that run a model."""
        super().settings(method=method, model=model, refusal_model=refusal_model, **engine)
        method = method or "heuristic"
        if method == "classifier":
            if refusal_model is None:
                raise ValueError("method 'classifier' needs a classifier loaded by the server, and this one has none "
                                 "(rapidscore serve --refusal-model DIR, ServeConfig(refusal_model=...))")
            kept = {k: v for k, v in engine.items() if k in ("backend", "device", "num_threads", "cache_dir")}
            return Settings(kept, method=method, model=refusal_model)
        if method == "embedding":
            return Settings(engine, method=method, model=model, unpadded=True)
        return Settings(method=method)

    def build(self, *, method: Any = "heuristic", **options: Any) -> Any:
        """``method`` and ``options`` as ``rapidscore.abstention.detect_refusal``: the detector
        (and its model) is built once."""
        from rapidscore.abstention.detectors import EmbeddingDetector, get_detector

        detector = get_detector(method, **options)
        if isinstance(detector, EmbeddingDetector):
            detector.load()  # its encoder loads here, once, not at the first response
        return detector

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
        model = f"|model:{engine.model_name}" if engine.name == "classifier" else ""
        return f"refusal|method:{engine.name}{model}|rapidscore"

    def totals(self) -> RefusalTotals:
        return RefusalTotals()

    def task(self, engine: Any, solo: Any = None) -> ServingTask:
        from rapidscore.abstention.serving import DetectorTask

        return DetectorTask(engine)


METRIC = RefusalMetric()
