"""BERTScore as a registered metric (``rapidscore.metrics``): candidate and reference columns ->
precision, recall, F1, for the streaming runner, Ray, the service and the CLI."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from rapidscore.bertscore.settings import BERTScoreSettings

from rapidscore.bertscore.dataset_pass import count_documents, merge_document_counts
from rapidscore.common.engine_options import ENGINE_OPTIONS
from rapidscore.common.metric import (
    Column,
    DatasetPass,
    FrontEnds,
    Metric,
    Option,
    RequestOption,
    RowNames,
    Rows,
    ServerSetting,
    ServingTask,
    Settings,
    Totals,
    check_pairs,
    field_error,
)

__all__ = ["BERTScoreMetric", "BERTScoreEngine", "METRIC"]


@dataclass(frozen=True)
class BERTScoreEngine:
    """A BERTScore scorer with the options of a run: idf weights fixed for the whole input (a
    dataset's document counts, an idf file or dict: per chunk they would differ), bert-score's
    padding batches, the memory budget per chunk. Thread-safe as the scorer."""

    scorer: Any
    idf_weights: dict | None = None
    reference_batch_size: int | None = None
    memory_budget: int | None = None

    @property
    def signature(self) -> str:
        return self.scorer.signature


def idf_of_the_references(counts: Any) -> Any:
    """The idf source of a dataset pass's document counts: the scored references' own, signed
    ``idf:yes`` as ``idf=True`` is."""
    from rapidscore.bertscore.idf_source import IdfSource

    return IdfSource.references(counts)


class MeanTotals(Totals):
    """Mean of each named output column over the rows seen (BERTScore's P, R, F1)."""

    def __init__(self, names: Sequence[str]):
        self.sums = dict.fromkeys(names, 0.0)
        self.n_rows = 0

    def update(self, outputs: Mapping[str, Sequence]) -> None:
        import numpy as np

        columns = {name: np.asarray(outputs[name], dtype=np.float64) for name in self.sums}
        self.n_rows += len(next(iter(columns.values()), ()))
        for name, values in columns.items():
            self.sums[name] += float(values.sum())

    def summary(self) -> dict:
        means = {name: (total / self.n_rows if self.n_rows else 0.0) for name, total in self.sums.items()}
        return {"n": self.n_rows, **means}


class BERTScoreMetric(Metric):
    name = "bertscore"
    inputs = (Column("candidate", "text", "the text scored", request_field="candidates"),
              Column("reference", "texts", "its reference, or a list of references (best P, R, F1)",
                     request_field="references"))
    outputs = ("precision", "recall", "f1")
    rows = Rows(dataset_pass=DatasetPass("idf", "reference", count_documents, merge_document_counts,
                                         becomes=idf_of_the_references))
    front_ends = FrontEnds(
        summary="BERTScore precision, recall and F1 (bert-score compatible)",
        command="rapidscore.bertscore.cli",
        batch_class_names=("BERTScoreBatch",),
        response_fields={"precision": list[float], "recall": list[float], "f1": list[float], "signature": str},
        example=("The cat sat on the mat.", "A cat was sitting on the mat."),
        engine_types=("rapidscore.bertscore.scorer:BERTScore",),
        takes_solo=True,
    )
    options = (
        RequestOption("idf", bool, False, "Weight tokens by idf computed from this request's references, as "
                      "BERTScore(idf=True).score does."),
        RequestOption("idf_file", str, None, "Weight tokens by the idf file the server loaded at start under this "
                      "name (`--idf-file`; its file name without the extension); implies `idf`, and with `idf` "
                      "the file's counts are used.", among="idf_file"),
        RequestOption("rescale_with_baseline", bool, False, "Rescale with the model's published baseline of "
                      "`lang`; a model without one is a 400."),
        RequestOption("lang", str, None, "The baseline's language (default en when rescaling); the model "
                      "stays the request's `model`."),
        RequestOption("model", str, None, "One of the models the server was started with (`--model`, "
                      "repeatable); default the first.", among="model"),
        RequestOption("num_layers", int, None, "One of the layers the server loaded for the model (`--layer`, "
                      "repeatable); default the first.", among="layer", minimum=0),
        RequestOption("long_texts", str, None, "Texts longer than the model: `truncate`, or `window` (every "
                      "token embedded in overlapping windows); default the server's.", choices=("truncate", "window"),
                      server="long_texts"),
        RequestOption("reference_batch_size", int, None, "Reproduce bert-score's padding artefact of batches of "
                      "this size, digit for digit (its `batch_size`).", minimum=1, per_request=True),
        ServerSetting("idf_file", str, None, "an idf file (rapidscore bertscore --write-idf, or "
                      "DocumentFrequencies.save) requests may name by its file name (repeatable)", repeated=True,
                      files=True),
        Option("memory_budget", int, None, "bytes of a chunk's arrays at most (a stream's chunks)", minimum=1,
               run_only=True),
        *ENGINE_OPTIONS,
    )
    def settings(self, *, idf: Any = False, idf_file: Any = None, rescale_with_baseline: bool = False,
                 lang: str | None = None, num_layers: int | None = None, model: str | None = None,
                 memory_budget: int | None = None, **options: Any) -> Settings:
        """The engine's settings, resolved once (``rapidscore.bertscore.settings.resolve_settings``):
        the idf source (``idf``; an ``idf_file`` implies idf, and given with ``idf`` the file's
        counts are used), checked against the model (ValueError naming ``idf_file``); the
        baseline's language (en when rescaling a named model names none: the model stays the one
        named); the layer (``num_layers``); the engine keywords. ``build`` takes them as they are."""
        from rapidscore.bertscore.idf_source import resolve_idf_source
        from rapidscore.bertscore.settings import resolve_settings

        super().settings(lang=lang, num_layers=num_layers, model=model, memory_budget=memory_budget, **options)
        try:
            source = resolve_idf_source(idf, idf_file)
            if model is not None:
                source.check_model(model)
        except (ValueError, OSError) as exc:
            if idf_file is None:
                raise
            raise field_error("idf_file", str(exc)) from None
        rescale = bool(rescale_with_baseline)
        lang = lang or ("en" if rescale and model is not None else None)
        resolved = resolve_settings(model, num_layers, idf=source, rescale_with_baseline=rescale, lang=lang, **options)
        return Settings(resolved=resolved, memory_budget=memory_budget)

    def build(self, *, idf: Any = None, reference_batch_size: int | None = None, memory_budget: int | None = None,
              resolved: BERTScoreSettings | None = None, **scorer_options: Any) -> BERTScoreEngine:
        """``scorer_options``: :class:`~rapidscore.bertscore.BERTScore`'s. ``idf``: document counts
        (``DocumentFrequencies``), an idf file path, a dict or an ``IdfSource`` (a dataset pass's
        counts of the references: ``IdfSource.references(counts)``), for the whole input, as
        ``BERTScore(idf=...)`` takes them; ``True`` only with ``idf_sents`` (idf over a dataset
        needs a pass over all its references first). ``resolved``: settings made by
        :meth:`settings`, built as they are."""
        from rapidscore.bertscore import BERTScore

        if resolved is not None:
            return BERTScoreEngine(BERTScore.from_settings(resolved), None, reference_batch_size, memory_budget)
        if idf is None:
            idf = False
        if idf is True and scorer_options.get("idf_sents") is None:
            raise ValueError("idf=True over a dataset needs its document counts: pass "
                             "idf=rapidscore.integrations.ray.document_frequencies(dataset) (score_dataset does)")
        scorer = BERTScore(idf=idf, **scorer_options)  # the scorer holds the weights: one decision, one place
        return BERTScoreEngine(scorer, None, reference_batch_size, memory_budget)

    def score(self, engine: BERTScoreEngine, columns: Mapping[str, Sequence],
              names: RowNames | None = None) -> dict[str, Any]:
        pairs = check_pairs(columns["candidate"], columns["reference"], ("candidate", "reference"), names)
        parts = [result for _chunk, result in self.chunks(engine, pairs)]

        def column(name: str) -> np.ndarray:
            import numpy as np

            return np.concatenate([getattr(r, name) for r in parts]) if parts else np.zeros(0, np.float32)
        return {name: column(name) for name in self.outputs}

    @staticmethod
    def chunks(engine: BERTScoreEngine, pairs: Any, **options: Any) -> Iterator[tuple[list, Any]]:
        """``(pairs, BERTScoreResult)`` per chunk under the engine's memory budget."""
        from rapidscore.bertscore.streaming import chunk_results

        return chunk_results(engine.scorer, pairs, memory_budget=engine.memory_budget, idf=engine.idf_weights,
                             reference_batch_size=engine.reference_batch_size, **options)

    def stream(self, engine: BERTScoreEngine, rows: Iterable, *, chunk_size: int = 16384,
               ) -> Iterator[tuple[list, dict]]:
        """``BERTScore.score_iter``'s chunks: the memory budget, idf by a first pass over a
        re-iterable stream, bert-score's padding batches across chunks. With ``all_layers`` a
        row's outputs are arrays (one value per layer)."""
        for chunk, result in self.chunks(engine, rows, chunk_size=chunk_size):
            yield chunk, {name: (values.T if values.ndim == 2 else values)
                          for name, values in ((n, getattr(result, n)) for n in self.outputs)}

    def totals(self) -> Totals:
        return MeanTotals(self.outputs)

    def task(self, engine: Any, solo: Any = None) -> ServingTask:
        from rapidscore.bertscore.serving import BERTScoreTask

        def scorer_of(engine: Any) -> Any:  # the metric's engine holds a BERTScore; a BERTScore is its own
            return engine.scorer if isinstance(engine, BERTScoreEngine) else engine

        return BERTScoreTask(scorer_of(engine), None if solo is None else scorer_of(solo))


METRIC = BERTScoreMetric()
