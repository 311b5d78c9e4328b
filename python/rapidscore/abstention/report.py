"""The paper's summary tables: rows models, columns techniques, "mean +- half-width" in percent."""

from __future__ import annotations

import csv
import io
import json
import math

METRICS = ("abstention", "generalization", "specificity", "performance")


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
