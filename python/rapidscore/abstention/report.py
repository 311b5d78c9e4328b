"""The paper's summary tables: rows models, columns techniques, "mean +- half-width" in percent."""

from __future__ import annotations

import csv
import io
import json
import math
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rapidscore.common.result import import_pandas
from rapidscore.common.signature import Signature, version_fields

if TYPE_CHECKING:
    import pandas as pd

METRICS = ("abstention", "generalization", "specificity", "performance")


def abstention_signature(method: str, *, taxonomy: str | None = None, confidence: float = 0.95,
                         detector: Any = None) -> str:
    """``abstention|method:...|taxonomy:...|interval:student-t-95|...|version:...``.

    ``method``: the refusal detector's name (or ``stored:<name>``); ``taxonomy``: the taxonomy's
    source (file name) or None; a detector with a threshold (keyword, embedding) adds it, and the
    embedding detector its model.
    """
    fields: list = [("method", method), ("taxonomy", taxonomy), ("interval", f"student-t-{100 * confidence:g}")]
    threshold = getattr(detector, "threshold", None)
    if threshold is not None:
        fields.append(("threshold", float(threshold)))
    model = getattr(detector, "model_name", None)
    if model is not None:
        fields.append(("model", model))
    return str(Signature([*fields, *version_fields()], name="abstention"))


@dataclass(frozen=True)
class AbstentionReport:
    """The summary table ``{(model, technique): {metric: Aggregate}}``, its signature and meta."""

    summary: dict
    signature: str
    meta: dict = field(default_factory=dict)

    def rows(self) -> list[dict]:
        """One row per (model, technique, metric): mean, half_width (None for NaN), n_concepts."""
        return json.loads(to_json(self.summary))["rows"]

    def to_dict(self) -> dict:
        """``to_json``'s document (meta, rows) with the signature added."""
        return {"meta": dict(self.meta), "rows": self.rows(), "signature": self.signature}

    def to_frame(self) -> pd.DataFrame:
        """The rows as a DataFrame (the signature in ``attrs``)."""
        frame = import_pandas().DataFrame(self.rows(), columns=["model", "technique", "metric", "mean",
                                                                 "half_width", "n_concepts"])
        frame.attrs["signature"] = self.signature
        return frame

    def __str__(self) -> str:
        cells = [f"{model}/{technique} {metric} {cell[metric].as_percent()}"
                 for (model, technique), cell in sorted(self.summary.items())
                 for metric in ("abstention", "performance") if metric in cell]
        return f"{self.signature} " + ("; ".join(cells) if cells else "no scores")


def build_report(records, refused, *, taxonomy=None, method: str = "heuristic", detector: Any = None,
                 meta: dict | None = None) -> AbstentionReport:
    """Summarise refusal decisions into an :class:`AbstentionReport` (see ``metrics.summarize``)."""
    from rapidscore.abstention import metrics

    summary = metrics.summarize(records, refused, taxonomy=taxonomy)
    # the file name, not the path: a signature should not depend on where the files sit
    source = None if taxonomy is None else os.path.basename(str(taxonomy.source))
    return AbstentionReport(summary, abstention_signature(method, taxonomy=source, detector=detector), meta or {})


def _axes(summary):
    models = sorted({m for m, _ in summary})
    techniques = sorted({t for _, t in summary})
    return models, techniques


def to_json(summary, meta: dict | None = None) -> str:
    """{"meta": ..., "rows": [{model, technique, metric, mean, half_width, n}]} (fractions)."""
    rows = []
    for (model, technique), cell in sorted(summary.items()):
        for metric in METRICS:
            if metric in cell:
                agg = cell[metric]
                rows.append({"model": model, "technique": technique, "metric": metric,
                             "mean": None if math.isnan(agg.mean) else agg.mean,
                             "half_width": None if math.isnan(agg.half_width) else agg.half_width,
                             "n_concepts": agg.n})
    return json.dumps({"meta": meta or {}, "rows": rows}, indent=2)


def to_csv(summary) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["model", "technique", "metric", "mean", "half_width", "n_concepts"])
    for (model, technique), cell in sorted(summary.items()):
        for metric in METRICS:
            if metric in cell:
                agg = cell[metric]
                writer.writerow([model, technique, metric, repr(agg.mean), repr(agg.half_width), agg.n])
    return out.getvalue()


def to_text(summary, digits: int = 1) -> str:
    """One table per metric, percentages "mean +- half-width"."""
    models, techniques = _axes(summary)
    blocks = []
    for metric in METRICS:
        if not any(metric in cell for cell in summary.values()):
            continue
        header = ["model"] + techniques
        rows = [header]
        for model in models:
            row = [model]
            for technique in techniques:
                cell = summary.get((model, technique), {})
                agg = cell.get(metric)
                if agg is None:
                    row.append("-")
                elif metric == "performance":
                    row.append(f"{100 * agg.mean:.{digits}f}")
                else:
                    row.append(agg.as_percent(digits))
            rows.append(row)
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        lines = [f"{metric} (%)"]
        for k, r in enumerate(rows):
            lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
            if k == 0:
                lines.append("  ".join("-" * w for w in widths))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"
