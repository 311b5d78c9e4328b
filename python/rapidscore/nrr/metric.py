"""Semantic similarity and the Negative Rejection Rate as a registered metric
(``rapidscore.metrics``): generated and reference columns -> similarity, best_reference and, with
a threshold, rejected. Older name: "similarity" (the HTTP path and the Ray class)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

from rapidscore.common.engine_options import ENGINE_OPTIONS
from rapidscore.common.metric import (
    Column,
    FrontEnds,
    Metric,
    Option,
    RequestOption,
    RowNames,
    Rows,
    ServerSetting,
    ServingTask,
    Totals,
    check_pairs,
)

__all__ = ["NRRMetric", "NRREngine", "RateCounter", "METRIC"]


@dataclass(frozen=True)
class NRREngine:
    """A ``SentenceSimilarity`` model and the threshold of the rejection decision (None: no
    decision, similarities only). Thread-safe as the model."""

    model: Any
    threshold: float | None = None

    @property
    def signature(self) -> str:
        return self.model.signature


class RateCounter(Totals):
    """Running NRR over streamed decisions: ``add(rejected)`` (or ``update`` with output
    columns); ``rate``, ``capture_rate``. Not thread-safe: one per stream."""

    def __init__(self) -> None:
        self.n_evaluated = self.n_rejected = 0

    def add(self, rejected: bool) -> None:
        self.n_evaluated += 1
        self.n_rejected += bool(rejected)

    def update(self, outputs: Mapping[str, Sequence]) -> None:
        import numpy as np

        rejected = outputs.get("rejected")
        if rejected is not None:
            self.n_evaluated += len(rejected)
            self.n_rejected += int(np.count_nonzero(rejected))

    @property
    def rate(self) -> float:
        return self.n_rejected / self.n_evaluated if self.n_evaluated else 0.0

    @property
    def capture_rate(self) -> float:
        return 1.0 - self.rate if self.n_evaluated else 0.0

    def summary(self) -> dict:
        return {"n_evaluated": self.n_evaluated, "n_rejected": self.n_rejected,
                "negative_rejection_rate": self.rate, "capture_rate": self.capture_rate}


class NRRMetric(Metric):
    name = "nrr"
    inputs = (Column("generated", "text", "the generated answer", keyword="text_column"),
              Column("reference", "texts", "its ground truth, or a list of them (the best counts)",
                     request_field="references"))
    outputs = ("similarity", "best_reference", "rejected")
    rows = Rows(minimum=1)  # the rate of no answers is undefined: negative_rejection refuses it too
    front_ends = FrontEnds(
        aliases=("similarity",),
        summary="semantic similarity and the Negative Rejection Rate",
        command="rapidscore.nrr.cli",
        batch_class_names=("NRRBatch", "SimilarityBatch"),
        response_fields={"similarities": list[float], "rejected": list[bool], "rate": float,
                         "best_reference": list[int], "threshold": float, "signature": str},
        example=("The cat sat on the mat.", "A cat was sitting on the mat."),
        engine_types=("rapidscore.nrr.scoring:SentenceSimilarity",),
        takes_solo=True,
    )
    options = (
        RequestOption("threshold", float, None, "Rejected when the similarity is below it (default: the server's "
                      "`similarity_threshold`).", minimum=-1.0, maximum=1.0, per_request=True,
                      server="similarity_threshold"),
        RequestOption("model", str, None, "One of the models the server was started with (`--model`, "
                      "repeatable); default the first.", among="model"),
        ServerSetting("similarity_method", str, "embedding", "similarity of /v1/nrr: sentence-embedding cosine, or "
                      "BERTScore F1", choices=("embedding", "bertscore")),
        ServerSetting("similarity_threshold", float, 0.8, "NRR threshold of requests that name none",
                      minimum=-1.0, maximum=1.0),
        Option("method", str, "embedding", "sentence-embedding cosine, or BERTScore F1",
               choices=("embedding", "bertscore"), server="similarity_method"),
        *ENGINE_OPTIONS,
    )
    def build(self, *, threshold: float | None = None, similarity_model: Any = None,
              **options: Any) -> NRREngine:
        """``options``: ``SentenceSimilarity``'s (model, method, layer, engine options), or a
        loaded ``similarity_model``. ``threshold``: rejected when the similarity is below it."""
        from rapidscore.nrr.scoring import SentenceSimilarity, check_threshold

        model = similarity_model or SentenceSimilarity(**options)
        return NRREngine(model, None if threshold is None else check_threshold(threshold))

    def score(self, engine: NRREngine, columns: Mapping[str, Sequence],
              names: RowNames | None = None) -> dict[str, Any]:
        import numpy as np

        pairs = check_pairs(columns["generated"], columns["reference"], ("generated", "reference"), names)
        if pairs:
            sims, best = engine.model.pairs([text for text, _refs in pairs], [refs for _text, refs in pairs])
        else:
            sims, best = np.zeros(0, np.float32), np.zeros(0, np.int64)
        return self._outputs(engine, sims, best)

    @staticmethod
    def _outputs(engine: NRREngine, sims: np.ndarray, best: np.ndarray) -> dict[str, Any]:
        from rapidscore.nrr.scoring import rejected_below

        outputs: dict[str, Any] = {"similarity": sims, "best_reference": best}
        if engine.threshold is not None:
            outputs["rejected"] = rejected_below(sims, engine.threshold)
        return outputs

    def stream(self, engine: NRREngine, rows: Iterable, *, chunk_size: int = 4096,
               max_chars: int = 2_000_000) -> Iterator[tuple[list, dict]]:
        """``SentenceSimilarity.score_chunks``: chunks of at most ``chunk_size`` rows and
        ``max_chars`` characters, as ``(generated, [references])`` items."""
        for chunk, sims, best in engine.model.score_chunks(rows, chunk_size=chunk_size, max_chars=max_chars):
            yield chunk, self._outputs(engine, sims, best)

    def totals(self) -> RateCounter:
        return RateCounter()

    def task(self, engine: Any, solo: Any = None) -> ServingTask:
        from rapidscore.nrr.serving import NRRTask

        def model_of(engine: Any) -> Any:  # the metric's engine holds a SentenceSimilarity; one is its own
            return engine.model if isinstance(engine, NRREngine) else engine

        return NRRTask(model_of(engine), None if solo is None else model_of(solo))


METRIC = NRRMetric()
