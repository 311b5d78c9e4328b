"""The report page: one HTML document holding everything it shows (CSS, SVG figures, a few lines
of JS that sort tables), fetching nothing, so it opens from a file on any machine.

Every text that comes from a file (system names, model names, candidates, references, labels,
signatures) goes through :func:`html.escape`. Every number sits in a table cell whose
``data-value`` holds it in full (what the tables sort by, and what a test reads back) and whose
text is it formatted: scores and rates with 4 decimals (:func:`score_text`), the SELECT tables
as the abstention command prints them (percent, 1 decimal, ``mean ± half-width``). Every table
shows the signature of its numbers: per row in the summary tables, above the others.

Over 500 lines because every section of the page (five metrics, the comparisons) is built from
the same cell, table and figure helpers here; a section moved out would import their private names.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

from rapidscore.report.assets import CSP, SORT_SCRIPT, STYLE
from rapidscore.report.inputs import BertScoreRun, MetricRun, NERRun, NRRRun, Run, SelectRun

__all__ = ["Page", "render_page", "score_text", "percent_text", "slug", "select_key"]

SELECT_METRICS = ("abstention", "generalization", "specificity", "performance")
NONE = "\u2013"  # an en dash: no value (none, or NaN)


def score_text(value: Any) -> str:
    """How the page writes a score, a rate or a similarity: 4 decimals; an en dash for none or NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return NONE
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    return f"{float(value):.4f}"


def percent_text(mean: float | None, half_width: float | None, metric: str) -> str:
    """A SELECT table's cell, as ``rapidscore abstention --format markdown`` writes it."""
    if mean is None:
        return NONE
    if metric == "performance":
        return f"{100 * mean:.1f}"
    return f"{100 * mean:.1f} ± {'nan' if half_width is None else f'{100 * half_width:.1f}'}"


@dataclass
class Page:
    """What the page shows: the runs, the notes (warnings shown at the top), the figures made
    (SVG by key, see :func:`render_page`) and how many worst and best items to list."""

    runs: list[Run]
    title: str = "rapidscore report"
    items: int = 3
    notes: list[str] = field(default_factory=list)
    figures: dict[str, str] = field(default_factory=dict)
    version: str = ""
    comparisons: Any = None  # a report.comparisons.Comparisons: intervals and the pairwise tables


# -- cells and tables -------------------------------------------------------------------------------

def slug(text: str) -> str:
    """``text`` as an id part: itself when it is lower-case letters, digits and inner ``-``; else
    those kept (other runs as ``-``) and a short hash of ``text``, so two names never share one."""
    kept = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    if kept == text:
        return kept
    return f"{kept or 'x'}-{hashlib.sha1(text.encode('utf-8')).hexdigest()[:6]}"


def _num(value: Any, text: str | None = None) -> str:
    """A numeric cell: ``data-value`` the number in full (empty for none/NaN), text formatted."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        full = ""
    elif isinstance(value, bool):
        full = str(int(value))
    elif isinstance(value, int):
        full = str(value)
    else:
        full = repr(float(value))
    shown = score_text(value) if text is None else text
    return f'<td class="num" data-value="{escape(full)}">{escape(shown)}</td>'


def _text(value: Any, cls: str = "") -> str:
    shown = "" if value is None else str(value)
    attribute = f' class="{cls}"' if cls else ""
    return f"<td{attribute}>{escape(shown)}</td>"


def _signature(signature: str | None) -> str:
    if signature is None:
        return '<span class="missing">not recorded in the file</span>'
    # a line may break after each field: "|<wbr>" (the text, and a test reading it, stays the same)
    return f'<code class="sig">{escape(signature).replace("|", "|<wbr>")}</code>'


def _sig_cell(signature: str | None) -> str:
    return f'<td class="sigcell">{_signature(signature)}</td>'


def _table(table_id: str, header: Sequence[tuple[str, bool]], rows: Sequence[Sequence[str]], caption: str = "") -> str:
    """``header``: (label, numeric) per column; ``rows``: the cells' HTML (``_num``/``_text``)."""
    head = "".join(f'<th scope="col"{" class=num" if numeric else ""}>{escape(label)}</th>'
                   for label, numeric in header)
    body = "\n".join("<tr>" + "".join(row) + "</tr>" for row in rows)
    cap = f'<p class="caption" id="{escape(table_id)}-caption">{caption}</p>' if caption else ""
    labelled = f' aria-describedby="{escape(table_id)}-caption"' if caption else ""
    return (f'<div class="tablebox">{cap}<div class="scroll"><table id="{escape(table_id)}" class="sortable"'
            f"{labelled}><thead><tr>{head}</tr></thead><tbody>\n{body}\n</tbody></table></div></div>")


def select_key(run: str, experiment: str) -> str:
    """The id of a SELECT experiment's section (its tables' ids start with it)."""
    return f"select-{slug(run)}" + ("" if experiment == "." else f"-{slug(experiment)}")


def _figure(page: Page, key: str, caption: str) -> str:
    svg = page.figures.get(key)
    if svg is None:
        return ""
    return f'<figure id="figure-{escape(key)}">{svg}<figcaption>{caption}</figcaption></figure>'


def _ranked(values: Sequence[float], k: int) -> list[tuple[str, str, list[int]]]:
    """(id part, title, item positions): ``worst`` the ``k`` lowest and ``best`` the ``k``
    highest, or ``all`` items, lowest first, when there are at most ``2k``. NaN last."""
    order = sorted(range(len(values)), key=lambda i: (math.isnan(values[i]), values[i]))
    if len(values) == 1:
        return [("all", "The one item", order)]
    if len(values) <= 2 * k:
        return [("all", f"All {len(values)} items, lowest first", order)]
    scored = [i for i in order if not math.isnan(values[i])]
    return [("worst", f"Worst {k}", scored[:k]), ("best", f"Best {k}", scored[::-1][:k])]


def _refs_html(refs: Sequence[str] | None, best: int | None = None) -> str:
    if not refs:
        return '<td class="text missing">not given</td>'
    if len(refs) == 1:
        return _text(refs[0], "text")
    items = "".join(f'<li{" class=best" if k == best else ""}>{escape(ref)}</li>' for k, ref in enumerate(refs))
    return f'<td class="text"><ol class="refs">{items}</ol></td>'


# -- sections ---------------------------------------------------------------------------------------

def _inputs_section(page: Page) -> str:
    rows = []
    for run in page.runs:
        rows.append([_text(run.name), _text(run.kind), _text(run.path, "path"), _num(_n_items(run)),
                     _sig_cell(run.signature)])
    table = _table("inputs", [("System", False), ("Kind", False), ("File", False), ("Items", True),
                              ("Signature", False)], rows)
    return ('<section id="inputs-section"><h2>Results and signatures</h2>'
            "<p>Every number below comes from one of these files; the signature says how it was made "
            "(model, layer, options, versions).</p>" + table + "</section>")


def _n_items(run: Run) -> int | None:
    if isinstance(run, BertScoreRun):
        return len(run.f1)
    if isinstance(run, NRRRun):
        return run.n_evaluated
    if isinstance(run, NERRun):
        return int(run.result.get("n_records", len(run.result.get("records", []))))
    if isinstance(run, SelectRun):
        return len(run.document["rows"])
    if isinstance(run, MetricRun):
        return len(run.rows) if run.rows is not None else None
    return None


def _texts_hint(run: Run) -> str:
    return (f'<p class="missing">Texts not given: <code>--candidates {escape(run.name)}=FILE --references FILE'
            "</code> shows them.</p>")


def _interval_cells(page: Page, section: str, name: str) -> list[str]:
    """The system's interval cells (low, high) in ``section``'s comparison; dashes without one."""
    result = page.comparisons.results.get(section) if page.comparisons is not None else None
    if result is not None:
        for system in result.systems:
            if system.name == name:
                return [_num(system.low), _num(system.high)]
    return [_num(None), _num(None)]


def _p_cell(value: float | None, significant: bool | None) -> str:
    if value is None:
        return _num(None)
    shown = (f"{value:.4f}" if value >= 0.0001 else f"{value:.1e}") + ("*" if significant else "")
    return _num(value, shown)


def _pairwise(page: Page, section: str, label: str, paired_by: str = "item") -> str:
    """The section's systems against the baseline (difference, interval, p-values; ``*``:
    significant after the correction), its intervals' figure, or why its systems are not paired."""
    if page.comparisons is None:
        return ""
    refused = page.comparisons.refused.get(section)
    if refused is not None:
        return (f'<p class="missing" id="{escape(section)}-pairwise-refused">No pairwise comparison: '
                f"{escape(refused)}</p>")
    result = page.comparisons.results.get(section)
    if result is None:
        return ""
    level = f"{100 * result.confidence:g}%"
    rows = [[_text(pair.system), _num(pair.difference), _num(pair.low), _num(pair.high),
             _p_cell(pair.p_bootstrap, None), _p_cell(pair.p_randomization, None),
             _p_cell(pair.p_bootstrap_adjusted, pair.significant.get("bootstrap")),
             _p_cell(pair.p_randomization_adjusted, pair.significant.get("randomization"))] for pair in result.pairs]
    correction = {"holm": "Holm", "bonferroni": "Bonferroni", "none": "no"}[result.correction]
    caption = (f"{escape(label)} of each system minus the baseline {escape(result.baseline)}'s, paired by {paired_by}: "
               f"{level} bootstrap interval and p-values ({correction} correction; * adjusted p &lt; "
               f"{result.alpha:g}); <code class=\"sig\">{escape(result.signature).replace('|', '|<wbr>')}</code>")
    table = _table(f"{section}-pairwise", [("System", False), ("Difference", True), (f"{level} low", True),
                                           (f"{level} high", True), ("p bootstrap", True), ("p randomization", True),
                                           ("p bootstrap adjusted", True), ("p randomization adjusted", True)],
                   rows, caption)
    return table + _figure(page, f"{section}-intervals", f"{escape(label)} per system with its {level} bootstrap "
                           "interval (error bars).")


def _bertscore_section(page: Page, runs: list[BertScoreRun]) -> str:
    rows = []
    for run in runs:
        finite = [v for v in run.f1 if not math.isnan(v)]
        rows.append([_text(run.name), _num(len(run.f1)), _num(run.mean("P")), _num(run.mean("R")),
                     _num(run.mean("F1")), _num(min(finite) if finite else None),
                     _num(max(finite) if finite else None), *_interval_cells(page, "bertscore", run.name),
                     _sig_cell(run.signature)])
    parts = ['<section id="bertscore"><h2>BERTScore</h2>',
             _table("bertscore-summary", [("System", False), ("Items", True), ("P", True), ("R", True), ("F1", True),
                                          ("F1 min", True), ("F1 max", True), ("F1 CI low", True),
                                          ("F1 CI high", True), ("Signature", False)], rows,
                    "Mean precision, recall and F1 per system; the 95% bootstrap interval of the mean F1"),
             _figure(page, "bertscore", "BERTScore F1 of every item, per system."),
             _pairwise(page, "bertscore", "Mean F1")]
    for run in runs:
        key = slug(run.name)
        parts.append(f'<h3 id="bertscore-{key}">{escape(run.name)}</h3><p>{_signature(run.signature)}</p>')
        if run.candidates is None:
            parts.append(_texts_hint(run))
        for part, title, positions in _ranked(run.f1, page.items):
            header = [("Line", True), *([("id", False)] if run.ids else []), ("P", True), ("R", True), ("F1", True),
                      ("Candidate", False), ("Reference", False)]
            item_rows = [[_num(run.lines[i]), *([_text(run.ids[i])] if run.ids else []), _num(run.precision[i]),
                          _num(run.recall[i]), _num(run.f1[i]),
                          _text(run.candidates[i] if run.candidates else None, "text"),
                          _refs_html(run.references[i] if run.references else None)] for i in positions]
            parts.append(_table(f"bertscore-items-{key}-{part}", header, item_rows,
                                f"{escape(title)}, by F1"))
        if run.alignment is not None:
            parts.append(_alignment_html(run, run.alignment))
    parts.append("</section>")
    return "\n".join(parts)


def _similarity_cell(value: float) -> str:
    alpha = max(0.0, min(1.0, value)) * 0.55
    return (f'<td class="num" data-value="{value!r}" style="background:rgba(76,114,176,{alpha:.2f})">'
            f"{escape(score_text(value))}</td>")


def _alignment_html(run: BertScoreRun, alignment: Any) -> str:
    key = slug(run.name)
    same = "" if alignment.signature == run.signature else (
        f'<p class="note">Made with {_signature(alignment.signature)} (the scores: {_signature(run.signature)}).</p>')
    sides = []
    for side, matches, own, other in (("precision", alignment.precision_side, "Candidate token", "Reference token"),
                                      ("recall", alignment.recall_side, "Reference token", "Candidate token")):
        rows = [[_num(k + 1), _text(m.token, "token"), _text(m.matched + (" (special)" if m.special else ""), "token"),
                 _similarity_cell(m.similarity)] for k, m in enumerate(matches)]
        sides.append(_table(f"alignment-{key}-{side}", [("#", True), (own, False), (other, False),
                                                          ("Similarity", True)], rows,
                            f"{'P' if side == 'precision' else 'R'} side: the most similar "
                            f"{'reference' if side == 'precision' else 'candidate'} token "
                            f"(mean {escape(score_text(getattr(alignment, side)))})"))
    line = alignment.line
    return (f'<h4 id="alignment-{key}">Token alignment of line {line}</h4>'
            f'<p class="pair"><b>Candidate</b> {escape(alignment.candidate)}<br><b>Reference</b> '
            f"{escape(alignment.reference)}</p>"
            f'<p>Cosine similarity of the token embeddings, [CLS]/[SEP] matched but not averaged; without idf the '
            f"means are the pair's P and R before rescaling: P {escape(score_text(alignment.precision))}, "
            f"R {escape(score_text(alignment.recall))}, F1 {escape(score_text(alignment.f1))}.</p>"
            f'{same}<div class="sides">{"".join(sides)}</div>')


def _nrr_section(page: Page, runs: list[NRRRun]) -> str:
    rows = []
    for run in runs:
        finite = [v for v in run.similarities if not math.isnan(v)]
        rows.append([_text(run.name), _num(run.n_evaluated), _num(run.n_rejected), _num(run.rate),
                     _num(run.capture_rate),
                     _num(run.threshold, NONE if run.threshold is None else f"{run.threshold:g}"),
                     _num(sum(finite) / len(finite) if finite else None), *_interval_cells(page, "nrr", run.name),
                     _sig_cell(run.signature)])
    parts = ['<section id="nrr"><h2>Negative Rejection Rate</h2>',
             _table("nrr-summary", [("System", False), ("Evaluated", True), ("Rejected", True), ("NRR", True),
                                    ("Capture rate", True), ("Threshold", True), ("Mean similarity", True),
                                    ("NRR CI low", True), ("NRR CI high", True), ("Signature", False)], rows,
                    "Rejected: similarity to the best reference below the threshold; the 95% bootstrap interval "
                    "of the rate (with two systems or more)"),
             _pairwise(page, "nrr", "NRR")]
    for run in runs:
        key = slug(run.name)
        parts.append(f'<h3 id="nrr-{key}">{escape(run.name)}</h3><p>{_signature(run.signature)}</p>')
        parts.append(_figure(page, f"nrr-{key}", "Similarity of each answer to its best reference, and the threshold."))
        if run.candidates is None:
            parts.append(_texts_hint(run))
        for part, title, positions in _ranked(run.similarities, page.items):
            header = [("Line", True), *([("id", False)] if run.ids else []), ("Similarity", True),
                      ("Rejected", False), ("Generated", False), ("Reference", False)]
            item_rows = [[_num(run.lines[i]), *([_text(run.ids[i])] if run.ids else []), _num(run.similarities[i]),
                          _text("yes" if run.rejected[i] else "no"),
                          _text(run.candidates[i] if run.candidates else None, "text"),
                          _refs_html(run.references[i] if run.references else None,
                                     run.best_reference[i] if run.best_reference else None)] for i in positions]
            parts.append(_table(f"nrr-items-{key}-{part}", header, item_rows, f"{escape(title)}, by similarity"))
    parts.append("</section>")
    return "\n".join(parts)


def _semeval(result: dict, scheme: str) -> Any:
    try:
        return result["semeval"][scheme]["f1"]
    except (KeyError, TypeError):
        return None


def _entity(span: Any) -> str:
    """``"surface" [label]`` of a [start, end, label, surface] span."""
    if isinstance(span, (list, tuple)) and len(span) >= 4:
        return f"\u201c{span[3]}\u201d [{span[2]}]"
    return str(span)


def _ner_section(page: Page, runs: list[NERRun]) -> str:
    rows = []
    for run in runs:
        d = run.result.get("dmberta", {})
        rows.append([_text(run.name), _num(run.result.get("n_records")), _num(d.get("mean")), _num(d.get("accumulate")),
                     _num(d.get("precision")), _num(d.get("recall")), _num(d.get("f1")),
                     *(_num(_semeval(run.result, s)) for s in ("strict", "exact", "partial", "type")),
                     *_interval_cells(page, "ner", run.name), _sig_cell(run.signature)])
    parts = ['<section id="ner"><h2>NER: DMBertA and SemEval</h2>',
             _table("ner-summary", [("System", False), ("Records", True), ("DMBertA mean", True),
                                    ("DMBertA accumulate", True), ("DMBertA P", True), ("DMBertA R", True),
                                    ("DMBertA F1", True), ("Strict F1", True), ("Exact F1", True),
                                    ("Partial F1", True), ("Type F1", True), ("Strict F1 CI low", True),
                                    ("Strict F1 CI high", True), ("Signature", False)], rows,
                    "Per model: DMBertA (label similarity credit) and the SemEval schemes; the 95% bootstrap "
                    "interval of the strict F1 (recomputed from each resample's counts)"),
             _figure(page, "ner", "The headline scores per model."),
             _pairwise(page, "ner", "Strict F1")]
    for run in runs:
        key = slug(run.name)
        records = [r for r in run.result.get("records", []) if isinstance(r, dict)]
        parts.append(f'<h3 id="ner-{key}">{escape(run.name)}</h3><p>{_signature(run.signature)}</p>')
        if not records:
            parts.append('<p class="missing">No per-record detail in the file (ner --json writes it).</p>')
            continue
        scores = [float(r["score"]) if isinstance(r.get("score"), (int, float)) else math.nan for r in records]
        for part, title, positions in _ranked(scores, page.items):
            item_rows = []
            for i in positions:
                record = records[i]
                strict = (record.get("semeval_entities") or {}).get("strict") or {}
                details = [f"{_entity(m.get('gold'))} \u2192 {_entity(m.get('pred'))} credit "
                           f"{score_text(m.get('credit'))}" for m in record.get("matches", []) if isinstance(m, dict)]
                details += [f"missed {_entity(span)}" for span in strict.get("missed", [])]
                details += [f"spurious {_entity(span)}" for span in strict.get("spurious", [])]
                text = (run.texts or {}).get(str(record.get("id")))
                detail = "".join(f"<li>{escape(d)}</li>" for d in details)
                item_rows.append([_text(record.get("id")), _num(scores[i]), _num(record.get("precision")),
                                  _num(record.get("recall")), _text(text if text is not None else "", "text"),
                                  f'<td class="text"><ul class="ents">{detail}</ul></td>'])
            parts.append(_table(f"ner-items-{key}-{part}", [("Record", False), ("Score", True), ("P", True),
                                                                     ("R", True), ("Text", False), ("Entities", False)],
                                item_rows, f"{escape(title)}, by DMBertA score"))
    parts.append("</section>")
    return "\n".join(parts)


def _select_section(page: Page, runs: list[SelectRun]) -> str:
    parts = ['<section id="select"><h2>Abstention (SELECT)</h2>']
    for run in runs:
        rows = run.document["rows"]
        for exp in run.document["experiments"]:
            name = exp.get("name", ".")
            exp_rows = [r for r in rows if r.get("experiment", ".") == name or len(run.document["experiments"]) == 1]
            title = run.name if name == "." else f"{run.name}: {name}"
            key = select_key(run.name, name)
            parts.append(f'<h3 id="{key}">{escape(title)}</h3><p>{_signature(exp.get("signature") or run.signature)}'
                         '</p><p class="note">Percent over concepts: mean ± half-width of the 95% Student-t interval '
                         '(performance: the mean), as <code>rapidscore abstention</code> prints them.</p>'
                         '<div class="tiles">')
            for metric in SELECT_METRICS:
                metric_rows = [r for r in exp_rows if r.get("metric") == metric]
                if not metric_rows:
                    continue
                model_names = {r["model"]: r.get("model_name") or r["model"] for r in metric_rows}
                technique_names = {r["technique"]: r.get("technique_name") or r["technique"] for r in metric_rows}
                models = sorted(model_names, key=lambda m: model_names[m].lower())
                techniques = sorted(technique_names, key=lambda t: technique_names[t].lower())
                cells = {(r["model"], r["technique"]): r for r in metric_rows}
                grid = []
                for model in models:
                    row = [_text(model_names[model])]
                    for technique in techniques:
                        cell = cells.get((model, technique))
                        mean = None if cell is None else cell.get("mean")
                        row.append(_num(mean, NONE if cell is None else
                                        percent_text(mean, cell.get("half_width"), metric)))
                    grid.append(row)
                parts.append(_table(f"{key}-{metric}", [("Model", False), *((technique_names[t], True)
                                                                            for t in techniques)],
                                    grid, f"{escape(metric)} (%)"))
            parts.append("</div>")
            decisions = exp.get("decisions_by_cell") or {}
            if decisions:
                counts = [[_text(cell), *(_num(stats.get(k)) for k in ("stored", "computed", "compared", "disagree"))]
                          for cell, stats in sorted(decisions.items()) if isinstance(stats, dict)]
                table = _table(f"{key}-decisions", [("Model / technique / evaluation", False), ("Stored", True),
                                                    ("Computed", True), ("Compared", True), ("Disagree", True)], counts)
                total = exp.get("decisions") or {}
                parts.append(f"<details><summary>Refusal decisions: {escape(str(total.get('stored', 0)))} stored flags "
                             f"used, {escape(str(total.get('computed', 0)))} decided by the detector</summary>"
                             f"{table}</details>")
            parts.append(_figure(page, key, "Abstention, generalization and specificity per model and technique."))
    parts.append(_pairwise(page, "select", "Abstention", paired_by="concept"))
    parts.append("</section>")
    return "\n".join(parts)


def _metric_section(page: Page, runs: list[MetricRun]) -> str:
    parts = ['<section id="metrics"><h2>Other metrics</h2>']
    for metric in sorted({run.metric for run in runs}):
        group = [run for run in runs if run.metric == metric]
        columns: list[str] = []
        for run in group:
            fields = run.outputs if run.rows is not None else list(run.totals or {})
            columns += [c for c in fields if c not in columns]
        rows = []
        for run in group:
            values = _metric_values(run)
            row = [_text(run.name), _num(len(run.rows) if run.rows is not None else None)]
            for column in columns:
                value = values.get(column)
                row.append(_num(value) if isinstance(value, (int, float)) or value is None else _text(value))
            rows.append(row + [_sig_cell(run.signature)])
        parts.append(_table(f"metric-{slug(metric)}-summary",
                            [("System", False), ("Rows", True), *((c, True) for c in columns), ("Signature", False)],
                            rows, f"{escape(metric)}: the totals, or the mean of each output column over the rows"))
        parts.append(_pairwise(page, f"metric-{metric}", f"Mean {metric}"))
    parts.append("</section>")
    return "\n".join(parts)


def _metric_values(run: MetricRun) -> dict[str, Any]:
    if run.rows is None:
        return {k: v for k, v in (run.totals or {}).items() if not isinstance(v, (list, dict))}
    out: dict[str, Any] = {}
    for column in run.outputs:
        values = [row.get(column) for row in run.rows]
        numbers = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, str)]
        out[column] = sum(numbers) / len(numbers) if numbers and len(numbers) == len(values) else None
    return out


# -- the page ---------------------------------------------------------------------------------------


def render_page(page: Page) -> str:
    """The whole HTML document of ``page``."""
    sections: list[tuple[str, str, Callable[[Page, list], str], type]] = [
        ("bertscore", "BERTScore", _bertscore_section, BertScoreRun),
        ("nrr", "NRR", _nrr_section, NRRRun),
        ("ner", "NER", _ner_section, NERRun),
        ("select", "Abstention", _select_section, SelectRun),
        ("metrics", "Other metrics", _metric_section, MetricRun),
    ]
    nav = ['<a href="#inputs-section">Results</a>']
    body = [_inputs_section(page)]
    for anchor, label, build, kind in sections:
        runs = [run for run in page.runs if isinstance(run, kind)]
        if runs:
            nav.append(f'<a href="#{anchor}">{label}</a>')
            body.append(build(page, runs))
    notes = "".join(f"<li>{escape(note)}</li>" for note in page.notes)
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="generator" content="rapidscore report">',
        f"<title>{escape(page.title)}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<header><h1>{escape(page.title)}</h1><nav>{''.join(nav)}</nav>",
        (f'<ul class="notes">{notes}</ul>' if notes else "") + "</header>",
        "<main>", *body, "</main>",
        f"<footer>Made by rapidscore {escape(page.version)} (<code>rapidscore report</code>). Self-contained: it "
        "fetches nothing. Click a column header to sort a table.</footer>",
        f"<script>{SORT_SCRIPT}</script>",
        "</body></html>",
        "",
    ])
