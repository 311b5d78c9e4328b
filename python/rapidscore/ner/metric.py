"""NER evaluation (DMBertA and SemEval) as a registered metric (``rapidscore.metrics``): gold and
predicted entity columns (and an optional text column) -> each record's DMBertA precision,
recall and score, entity counts and SemEval counts; the corpus totals add records up."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rapidscore.common.engine_options import ENGINE_OPTIONS
from rapidscore.common.metric import (
    Column,
    FrontEnds,
    Metric,
    RequestOption,
    RowNames,
    Rows,
    ServerSetting,
    ServingTask,
    Settings,
    Totals,
)
from rapidscore.ner.formats import FORMATS

if TYPE_CHECKING:
    import numpy as np

__all__ = ["NERMetric", "NEREngine", "NerTotals", "SEMEVAL_COUNTS", "METRIC"]

SEMEVAL_COUNTS = ("correct", "incorrect", "partial", "missed", "spurious")
# The options of the label similarity, built once per engine (its model loads once): its model and
# the label encoder's engine keywords (num_threads is the alignment's too: it is passed to both).
LABEL_SIMILARITY_OPTIONS = ("label_model", "embedder", "label_map", "backend", "device", "precision", "batch_tokens",
                            "cache_dir", "unpadded", "progress", "encoder_options")


@dataclass(frozen=True)
class NEREngine:
    """The label similarity (built once) and the other ``rapidscore.ner.evaluate`` options;
    ``labels``: the label similarity's name and options, from which a served request builds
    its own (its label cache bounded by the request, not by every label clients ever sent)."""

    similarity: Any
    options: dict
    labels: dict = field(default_factory=dict)

    @property
    def signature(self) -> str:
        from rapidscore.ner.evaluation import ner_signature

        keys = ("min_jaccard", "min_overlap_percent", "semeval_matching", "trim")
        return ner_signature(self.similarity, **{k: self.options[k] for k in keys if k in self.options})


class NerTotals(Totals):
    """The corpus scores of streamed NER records: ``add(record)`` for each record of
    ``rapidscore.streaming.ner_records_iter`` (or ``update`` with output columns holding
    ``record``); ``dmberta`` and ``semeval`` as ``NerResult`` reports them.
    Not thread-safe: one per stream."""

    def __init__(self) -> None:
        self.n_records = 0
        self.credit = 0.0
        self.n_gold = self.n_pred = 0
        self.score_sum = self.precision_sum = self.recall_sum = 0.0
        self.semeval_counts: dict[str, np.ndarray] = {}

    def add(self, record: Mapping) -> None:
        import numpy as np

        self.n_records += 1
        self.credit += sum(match["credit"] for match in record["matches"])
        self.n_gold += record["n_gold"]
        self.n_pred += record["n_pred"]
        self.score_sum += record["score"]
        self.precision_sum += record["precision"]
        self.recall_sum += record["recall"]
        for scheme, counts in record["semeval"].items():
            row = np.array([counts[k] for k in SEMEVAL_COUNTS], np.int64)
            self.semeval_counts[scheme] = self.semeval_counts.get(scheme, 0) + row

    def update(self, outputs: Mapping[str, Sequence]) -> None:
        for record in outputs["record"]:
            self.add(record)

    @property
    def dmberta(self) -> dict:
        from rapidscore.ner.evaluation import precision_recall_f1

        n = self.n_records
        precision, recall, f1 = precision_recall_f1(self.credit, self.n_pred, self.n_gold)
        if self.n_gold == 0 and self.n_pred == 0:
            precision = recall = f1 = 1.0
        return {"mean": self.score_sum / n if n else 0.0, "accumulate": self.score_sum,
                "precision_mean": self.precision_sum / n if n else 0.0,
                "recall_mean": self.recall_sum / n if n else 0.0,
                "precision": precision, "recall": recall, "f1": f1,
                "credit": self.credit, "n_gold": self.n_gold, "n_pred": self.n_pred}

    @property
    def semeval(self) -> dict:
        from rapidscore.ner.evaluation import semeval_summary

        out = {}
        for scheme, counts in self.semeval_counts.items():
            correct, incorrect, partial, missed, spurious = (int(c) for c in counts)
            out[scheme] = semeval_summary(correct, incorrect, partial, missed, spurious, scheme=scheme)
        return out

    def summary(self) -> dict:
        return {"n_records": self.n_records, "dmberta": self.dmberta, "semeval": self.semeval}

    def line(self) -> str:
        """The summary in one line (the streamed command's last line on stderr)."""
        dmberta = self.dmberta
        semeval = " ".join(f"{scheme} {summary['f1']:.4f}" for scheme, summary in self.semeval.items())
        return (f"{self.n_records} records, DMBertA mean {dmberta['mean']:.4f} (P {dmberta['precision']:.4f} "
                f"R {dmberta['recall']:.4f} F1 {dmberta['f1']:.4f}), SemEval F1 {semeval}")


def _semeval_columns() -> tuple[str, ...]:
    from rapidscore.ner.evaluation import SEMEVAL_SCHEMES

    return tuple(f"{scheme}_{count}" for scheme in SEMEVAL_SCHEMES for count in SEMEVAL_COUNTS)


class NERMetric(Metric):
    name = "ner"
    inputs = (Column("gold", "entities", "a record's gold entities (any format rapidscore.ner reads), or the record"),
              Column("predicted", "entities", "its predicted entities, or the predicted record",
                     request_field="predictions"),
              Column("text", "text", "the record's text, where the entity format needs it", optional=True,
                     request_field="texts"))
    outputs = ("n_gold", "n_pred", "precision", "recall", "score",
               "strict_correct", "strict_incorrect", "strict_partial", "strict_missed", "strict_spurious",
               "exact_correct", "exact_incorrect", "exact_partial", "exact_missed", "exact_spurious",
               "partial_correct", "partial_incorrect", "partial_partial", "partial_missed", "partial_spurious",
               "type_correct", "type_incorrect", "type_partial", "type_missed", "type_spurious")
    rows = Rows(noun="record", aligned=False)  # records are joined by id (or position), not row by row
    front_ends = FrontEnds(
        summary="NER evaluation with DMBertA and SemEval schemes",
        command="rapidscore.ner.cli",
        batch_class_names=("NERBatch",),
        response_fields={"n_records": int, "dmberta": dict, "semeval": dict, "semeval_by_type": dict, "per_label": dict,
                         "repairs": Any, "settings": dict, "signature": str, "records": list | None},
        example=({"id": 0, "text": "Ada Lovelace", "labels": [[0, 3, "PER"]]},
                 {"id": 0, "text": "Ada Lovelace", "labels": [[0, 12, "person"]]}),
    )
    options = (
        RequestOption("format", str, "auto", "The entity format of both sides (`auto`: detected per record).",
                      choices=FORMATS, per_request=True),
        RequestOption("gold_format", str, None, "The gold side's format where it differs.", choices=FORMATS,
                      per_request=True),
        RequestOption("label_similarity", str, None, "How labels compare: `embedding` cosine or `exact`; default "
                      "the server's `ner_label_similarity`.", choices=("embedding", "exact"),
                      server="ner_label_similarity"),
        RequestOption("label_model", str, None, "The model that embeds labels: one the server was started with "
                      "(`--model`); default the first.", among="model"),
        RequestOption("min_jaccard", float, 0.0, "Aligned spans overlap at least this much (Jaccard).", minimum=0.0,
                      maximum=1.0, per_request=True),
        RequestOption("min_overlap_percent", float, 1.0, "SemEval's partial match: the least overlap, in percent.",
                      minimum=0.0, maximum=100.0, per_request=True),
        RequestOption("semeval_matching", str, "optimal", "SemEval matching: `optimal`, or nervaluate's greedy "
                      "order.", choices=("optimal", "nervaluate"), per_request=True),
        RequestOption("records", bool, False, "Include per-record detail in the answer.", per_request=True),
        ServerSetting("ner_label_similarity", str, "embedding", "label similarity of /v1/ner",
                      choices=("embedding", "exact")),
        *ENGINE_OPTIONS,
    )

    def build(self, *, label_similarity: Any = "embedding", **options: Any) -> NEREngine:
        """``options``: ``rapidscore.ner.evaluate``'s; the label similarity (and its model) is
        built once here."""
        from rapidscore.ner.labels import make_label_similarity

        label_options = {k: options.pop(k) for k in LABEL_SIMILARITY_OPTIONS if k in options}
        if options.get("num_threads") is not None:
            label_options["num_threads"] = options["num_threads"]
        similarity = make_label_similarity(label_similarity, **label_options)
        similarity.load()  # the model loads here, once, not at the first label (a stream's resume state records it)
        labels = {"label_similarity": label_similarity, **label_options} if isinstance(label_similarity, str) else {}
        return NEREngine(similarity, options, labels)

    def settings(self, **options: Any) -> Settings:
        """The options as given; the label encoder runs the unpadded graph, which the batched
        scorers run too (the same numbers: no second copy of the model's weights)."""
        return super().settings(**{"unpadded": True, **options})

    def score(self, engine: NEREngine, columns: Mapping[str, Sequence],
              names: RowNames | None = None) -> dict[str, Any]:
        import numpy as np

        from rapidscore.ner.evaluation import evaluate
        from rapidscore.ner.records import is_record_dict

        names = names or RowNames(self.rows.noun)
        gold, predicted = list(columns["gold"]), list(columns["predicted"])
        texts = columns.get("text")
        texts = None if texts is None or all(t is None for t in texts) else list(texts)
        positional = not all(is_record_dict(g) for g in gold)
        ids = list(range(names.offset, names.offset + len(gold))) if positional else None
        try:
            records = evaluate(gold, predicted, texts=texts, ids=ids, label_similarity=engine.similarity,
                               **engine.options).records if gold else []
        except (TypeError, ValueError) as exc:
            row = _row_named_in(str(exc), names.offset, len(gold)) if positional else None
            label = names.row(row) if row is not None else names.rows(0, len(gold) - 1)
            raise type(exc)(f"{label}: {exc}") from None
        outputs: dict[str, Any] = {key: [r[key] for r in records]
                                   for key in ("n_gold", "n_pred", "precision", "recall", "score")}
        for column in _semeval_columns():
            scheme, count = column.split("_", 1)
            outputs[column] = np.array([r["semeval"][scheme][count] for r in records], np.int64)
        outputs["record"] = records
        return outputs

    def totals(self) -> NerTotals:
        return NerTotals()

    def task(self, engine: Any, solo: Any = None) -> ServingTask:
        from rapidscore.ner.serving import NERTask

        return NERTask(engine)


def _row_named_in(message: str, offset: int, n_rows: int) -> int | None:
    """The row a rapidscore.ner message names: "record N" (N an id given by position, from
    ``offset``) or "gold[N]" (a position in the chunk); None if neither, or out of the chunk."""
    match = re.search(r"record (\d+)", message)
    row = int(match.group(1)) - offset if match else None
    if row is None:
        match = re.search(r"\[(\d+)\]", message)
        row = int(match.group(1)) if match else None
    return row if row is not None and 0 <= row < n_rows else None


METRIC = NERMetric()
