"""The paper's summary tables: rows models, columns techniques, "mean +- half-width" in percent."""

from __future__ import annotations

import csv
import io
import json
import math
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rapidscore.abstention.names import Names
from rapidscore.common.result import import_pandas
from rapidscore.common.signature import Signature, version_fields

if TYPE_CHECKING:
    import pandas as pd

METRICS = ("abstention", "generalization", "specificity", "performance")


def abstention_signature(method: str, *, taxonomy: str | None = None, confidence: float = 0.95,
                         detector: Any = None, decisions: str | None = None) -> str:
    """``abstention|method:...|taxonomy:...|interval:student-t-95|...|version:...``.

    ``method``: the refusal detector's name (or ``stored:<name>``); ``taxonomy``: the taxonomy's
    source (file name) or None; a detector with a threshold (keyword, embedding) adds it, and the
    embedding detector its model; ``decisions``: ``stored-first`` (a stored flag when a record has
    one, SELECT's pipeline), ``recompute`` (the detector everywhere) or ``stored`` (flags only).
    """
    fields: list = [("method", method), ("taxonomy", taxonomy), ("interval", f"student-t-{100 * confidence:g}")]
    if decisions is not None:
        fields.append(("decisions", decisions))
    fields += detector_fields(detector)
    return str(Signature([*fields, *version_fields()], name="abstention"))


def detector_fields(detector) -> list:
    """A detector's settings for a signature: its threshold and model where it has them."""
    fields: list = []
    threshold = getattr(detector, "threshold", None)
    if threshold is not None:
        fields.append(("threshold", float(threshold)))
    model = getattr(detector, "model_name", None)
    if model is not None:
        fields.append(("model", model))
    return fields


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
    """Summarise refusal decisions into an :class:`AbstentionReport` (see ``rates.summarize``)."""
    from rapidscore.abstention import rates

    summary = rates.summarize(records, refused, taxonomy=taxonomy)
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


def missing_cells(summary) -> list[tuple[str, str]]:
    """The (model, technique) cells of a summary's table (its models x its techniques) with no
    results at all: no results file of any evaluation type (a technique not run on a model)."""
    models, techniques = _axes(summary)
    return [(m, t) for m in models for t in techniques if not summary.get((m, t))]


def _dash_cells(summary, metric: str) -> list[tuple[str, str]]:
    """The cells of one metric's table shown as "-": no results for that metric."""
    models, techniques = _axes(summary)
    return [(m, t) for m in models for t in techniques
            if (summary.get((m, t), {}).get(metric) is None or summary[(m, t)][metric].n == 0)]


def _cells_text(cells, names: Names, labels: dict[str, str]) -> str:
    """``Model: Technique, Technique; Model: ...`` (display names, in the table's order)."""
    by_model: dict[str, list[str]] = {}
    for model, technique in cells:
        by_model.setdefault(model, []).append(names.technique(technique))
    shown = {model: labels.get(model) or model for model in by_model}
    order = sorted(by_model, key=lambda model: shown[model].lower())
    return "; ".join(f"{shown[m]}: {', '.join(sorted(by_model[m], key=str.lower))}" for m in order)


def missing_note(summary, names: Names | None = None, cells=None, what: str = "no results file") -> str:
    """One line saying how many of a table's cells are shown as "-" and which:
    ``- (no results file): 6 of 36 cells: GPT-4o (Azure): Act. Steering, SFT, SFT + DPO; ...``;
    empty when there is none. ``cells``: the cells (default: :func:`missing_cells`)."""
    names = names or Names()
    cells = missing_cells(summary) if cells is None else list(cells)
    if not cells:
        return ""
    models, techniques = _axes(summary)
    labels = names.model_labels(models)
    total = len(models) * len(techniques)
    return (f"- ({what}): {len(cells)} of {total} cell{'s' if total != 1 else ''} (model x technique): "
            f"{_cells_text(cells, names, labels)}")


# ---- several experiments, several formats ------------------------------------------------------
@dataclass(frozen=True)
class ExperimentReport:
    """One experiment's summary ``{(model, technique): {metric: Aggregate}}``, its taxonomy
    file, and how the decisions were made (``decisions``: stored / computed / compared /
    disagree counts, in total and per (model, technique, eval_type))."""

    name: str
    summary: dict
    taxonomy: str | None = None
    decisions: dict = field(default_factory=dict)
    decisions_by_cell: dict = field(default_factory=dict)
    signature: str | None = None


FORMATS = ("text", "markdown", "latex", "csv", "json")


def _cell_text(agg, metric: str, digits: int, pm: str) -> str:
    if agg is None or agg.n == 0:
        return "-"
    if metric == "performance":
        return f"{100 * agg.mean:.{digits}f}"
    hw = "nan" if math.isnan(agg.half_width) else f"{100 * agg.half_width:.{digits}f}"
    return f"{100 * agg.mean:.{digits}f}{pm}{hw}"


def _grid(summary, metric: str, names: Names, digits: int, pm: str):
    models, techniques = _axes(summary)
    labels = names.model_labels(models)
    models.sort(key=lambda m: labels[m].lower())  # in the order a reader looks them up
    techniques.sort(key=lambda t: names.technique(t).lower())
    header = ["Model"] + [names.technique(t) for t in techniques]
    rows = [[labels[m]] + [_cell_text(summary.get((m, t), {}).get(metric), metric, digits, pm)
                           for t in techniques] for m in models]
    return header, rows


def _metrics_present(summary) -> list[str]:
    return [m for m in METRICS if any(m in cell for cell in summary.values())]


def latex_escape(text: str) -> str:
    for char, escaped in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("$", r"\$"), ("#", r"\#"),
                          ("_", r"\_"), ("{", r"\{"), ("}", r"\}"), ("~", r"\textasciitilde{}"),
                          ("^", r"\textasciicircum{}")):
        text = text.replace(char, escaped)
    return text


def render(experiments: list[ExperimentReport], fmt: str = "text", *, names: Names | None = None,
           digits: int = 1, meta: dict | None = None) -> str:
    """The paper's tables for one or more experiments: one table per metric (rows models,
    columns techniques, "mean +- half-width" in percent; performance: the score alone).

    ``fmt``: ``text``, ``markdown`` (``±``), ``latex`` (``$m \\pm h$``, booktabs), ``csv`` and
    ``json`` (fractions, full precision, folder names plus display names, half-width null for NaN,
    the decision counts). NaN half-widths (one concept, or every concept scoring the same, as
    SELECT gives) print as ``nan``."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    names = names or Names()
    if fmt in ("csv", "json"):
        rows = []
        for exp in experiments:
            labels = names.model_labels(_axes(exp.summary)[0])
            for (model, technique), cell in sorted(exp.summary.items()):
                for metric in METRICS:
                    if metric in cell:
                        agg = cell[metric]
                        rows.append({"experiment": exp.name, "model": model, "technique": technique,
                                     "model_name": labels[model], "technique_name": names.technique(technique),
                                     "metric": metric, "mean": None if math.isnan(agg.mean) else agg.mean,
                                     "half_width": None if math.isnan(agg.half_width) else agg.half_width,
                                     "n_concepts": agg.n})
        if fmt == "json":
            doc = {"meta": meta or {}, "experiments": [
                {"name": e.name, "taxonomy": e.taxonomy, "signature": e.signature, "decisions": e.decisions,
                 "decisions_by_cell": e.decisions_by_cell, **_missing_json(e.summary, names)}
                for e in experiments],
                "rows": rows}
            return json.dumps(doc, indent=2)
        out = io.StringIO()
        columns = ["experiment", "model", "technique", "model_name", "technique_name", "metric", "mean",
                   "half_width", "n_concepts"]
        writer = csv.DictWriter(out, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("nan" if row[k] is None and k in ("mean", "half_width") else row[k])
                             for k in columns})
        return out.getvalue()
    pm = {"text": " +- ", "markdown": " ± ", "latex": r" \pm "}[fmt]
    blocks = []
    for exp in experiments:
        title = exp.name if len(experiments) > 1 or exp.name != "." else ""
        missing = missing_cells(exp.summary)
        for metric in _metrics_present(exp.summary):
            header, rows = _grid(exp.summary, metric, names, digits, pm)
            caption = f"{metric} (%)" + (f", {title}" if title else "")
            dashes = _dash_cells(exp.summary, metric)
            # cells of this table alone shown as "-" (a metric without results where others have some)
            extra = [c for c in dashes if c not in missing]
            table_note = missing_note(exp.summary, names, extra, f"no {metric} results") if extra else ""
            if fmt == "latex" and dashes:
                caption += f"; -: no results ({len(dashes)} cells)"
            if fmt == "markdown":
                lines = [f"**{caption}**", "", "| " + " | ".join(header) + " |",
                         "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
                lines += ["| " + " | ".join(row) + " |" for row in rows]
            elif fmt == "latex":
                lines = [r"\begin{table}[t]", r"\centering", r"\begin{tabular}{l" + "c" * (len(header) - 1) + "}",
                         r"\toprule", " & ".join(latex_escape(h) for h in header) + r" \\", r"\midrule"]
                lines += [" & ".join([latex_escape(row[0])] + [f"${c}$" if c != "-" else "-" for c in row[1:]])
                          + r" \\" for row in rows]
                lines += [r"\bottomrule", r"\end{tabular}", r"\caption{" + latex_escape(caption) + "}",
                          r"\end{table}"]
            else:
                table = [header] + rows
                widths = [max(len(r[i]) for r in table) for i in range(len(header))]
                lines = [caption]
                for k, r in enumerate(table):
                    lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                           for i, (c, w) in enumerate(zip(r, widths))))
                    if k == 0:
                        lines.append("  ".join("-" * w for w in widths))
            if table_note:
                lines.append("% " + table_note if fmt == "latex" else table_note)
            blocks.append("\n".join(lines))
        note = missing_note(exp.summary, names)
        if note and _metrics_present(exp.summary):  # once per experiment, after its tables
            blocks[-1] += "\n" + ("% " + note if fmt == "latex" else note)
    return "\n\n".join(blocks) + "\n"


def _missing_json(summary, names: Names) -> dict:
    """An experiment's JSON account of its table's cells with no results file: how many of how
    many, and which (folder names and display names)."""
    models, techniques = _axes(summary)
    labels = names.model_labels(models)
    cells = missing_cells(summary)
    return {"cells": len(models) * len(techniques), "missing_cells": [
        {"model": m, "technique": t, "model_name": labels[m], "technique_name": names.technique(t)}
        for m, t in cells]}
