"""Refusal detection as a registered metric (``rapidscore.metrics``): a response column ->
``refusal`` (True = the response refuses), with any detector of ``rapidscore.abstention``; the
totals are the refusal rate. (The SELECT pipeline over a taxonomy is ``rapidscore abstention``.)"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from rapidscore.abstention.methods import METHODS
from rapidscore.common.metric import (
    Column,
    Metric,
    RequestOption,
    RowNames,
    ServerContext,
    ServerSetting,
    ServingTask,
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
    summary = "refusal detection (True = the response refuses)"
    inputs = (Column("response", "response", "a response, or a chain-of-thought {complete, answer} record",
                     request_field="responses"),)
    batch_class_names = ("RefusalBatch",)
    request_options = (
        RequestOption("method", str, None, "The detector (default: heuristic; over HTTP the server's "
                      "`refusal_method`); `embedding` runs on the server's default model, `classifier` on the "
                      "server's `refusal_model` (in Python and on the command line: `model=`).", choices=METHODS),
    )
    server_settings = (
        ServerSetting("refusal_method", str, "heuristic", "detector of /v1/refusal", choices=METHODS),
        ServerSetting("refusal_model", str, None, "the sequence classifier (a directory, or a downloaded hub id) of "
                      "/v1/refusal's `classifier` method, loaded at start when `refusal_method` is classifier"),
    )
    response_fields: ClassVar[dict[str, Any] | None] = {
        "refusal": list[bool],
        "method": str,
    }
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
        model = f"|model:{engine.model_name}" if engine.name == "classifier" else ""
        return f"refusal|method:{engine.name}{model}|rapidscore"

    def totals(self) -> RefusalTotals:
        return RefusalTotals()

    def serving_task(self, engine: Any, solo: Any = None) -> ServingTask:
        from rapidscore.abstention.serving import DetectorTask

        return DetectorTask(engine)

    def serves(self, engine: Any) -> bool:
        from rapidscore.abstention.detectors import Detector

        return isinstance(engine, Detector)

    def serve_engine(self, server: ServerContext, options: Mapping[str, Any], encoder: Mapping[str, Any]) -> Any:
        from rapidscore.abstention.detectors import get_detector

        method = options.get("method") or server.setting("refusal_method")
        if method == "classifier":
            model = server.setting("refusal_model")
            if model is None:
                raise ValueError("method 'classifier' needs a classifier loaded by the server, and this one has none "
                                 "(rapidscore serve --refusal-model DIR, ServeConfig(refusal_model=...))")
            engine = {k: v for k, v in encoder.items() if k in ("backend", "device", "num_threads", "cache_dir")}
            return get_detector(method, model=model, **engine)
        if method != "embedding":
            return get_detector(method)
        # the unpadded graph, which the batched scorers run too: no second copy of the weights
        return get_detector(method, model=server.default_model, **dict(encoder, unpadded=True))

    def serve_request(self, server: ServerContext, columns: dict[str, Any],
                      options: Mapping[str, Any]) -> tuple[tuple, dict]:
        return (columns["response"],), {}

    def serve_response(self, server: ServerContext, result: Any, engine: Any, options: Mapping[str, Any]) -> dict:
        return {"refusal": result.tolist(), "method": options.get("method") or server.setting("refusal_method")}

    def serve_warm_up(self, server: ServerContext, scorer: Any) -> None:
        scorer.warm_up(["I'm sorry, I can't help with that."], repeats=1)


METRIC = RefusalMetric()
