"""Systems to compare, read from the result files the other commands write.

A file is read as ``rapidscore report`` reads it (:mod:`rapidscore.report.inputs`: its kind told
from its fields); each system's per-item statistics for one metric are then taken from it:

==============  =======================  ==================================================
kind            metrics (default first)  per item
==============  =======================  ==================================================
bertscore       f1, precision, recall    the pair's score (mean)
nrr             rejection_rate,          the answer's rejected flag / similarity (mean)
                similarity
ner             strict_f1 (and each      the record's SemEval counts (corpus precision,
                scheme's precision,      recall, F1 from summed counts); DMBertA's credit,
                recall, f1), dmberta_*   predictions and gold (micro), or its score (mean)
metric rows     the output columns       the row's value (mean)
select          abstention, specificity, each concept's rate (SELECT's mean over concepts):
                generalization           a SELECT results folder, evaluated as ``rapidscore
                                         abstention FOLDER`` does; each (model, technique)
                                         cell is a system, ``model/technique``
==============  =======================  ==================================================

Pairing: items are matched by id when every system's items carry one (streamed rows' ``id``,
NER records' ``id``, SELECT's concepts), else by line; an item one system has and another lacks is named in a
:class:`~rapidscore.errors.PairingError`, never dropped. Files whose signatures differ (another
model, layer, idf, label matching...) or whose recorded input digests (``*_sha256`` fields)
differ are refused too, naming the fields.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rapidscore.compare.comparison import Comparison, compare
from rapidscore.compare.statistics import ItemStats, mean_of, precision_recall_f1_of
from rapidscore.errors import PairingError

__all__ = ["SystemInput", "read_systems", "systems_of_runs", "pair_systems", "metrics_of", "compare_files",
           "select_systems", "select_folder_systems", "SCHEMES", "SELECT_METRICS"]

SCHEMES = ("strict", "exact", "partial", "type")
_NER_METRICS = tuple(f"{scheme}_{what}" for scheme in SCHEMES for what in ("f1", "precision", "recall")) + (
    "dmberta_f1", "dmberta_precision", "dmberta_recall", "dmberta_mean")
SELECT_METRICS = ("abstention", "specificity", "generalization")  # SELECT's evaluation types, the default first
# fields of a signature that may differ between systems compared: the package's version
_FREE_FIELDS = {"version"}
_SHOWN = 5  # unmatched items named in a message


@dataclass
class SystemInput:
    """One system read from a file: ``name``, ``path``, ``kind``, ``signature``, its items'
    keys (ids, else lines, in file order) and lines, and the per-item values of each metric it offers
    (``columns``: metric -> builder of its :class:`ItemStats` from an item order)."""

    name: str
    path: str
    kind: str
    signature: str | None
    keys: list[Any]
    keyed_by: str  # "id" or "line"
    lines: list[int]
    columns: dict[str, Any]
    digests: dict[str, str]
    gold_counts: list[float] | None = None  # NER: each record's gold entities (the same gold has the same)

    def stats(self, metric: str, order: Sequence[int]) -> ItemStats:
        return self.columns[metric](np.asarray(order, dtype=np.int64))


def metrics_of(kind: str, outputs: Sequence[str] = ()) -> tuple[str, ...]:
    """The metrics a result kind offers, its default first."""
    if kind == "bertscore":
        return ("f1", "precision", "recall")
    if kind == "nrr":
        return ("rejection_rate", "similarity")
    if kind == "ner":
        return _NER_METRICS
    if kind == "select":
        return SELECT_METRICS
    return tuple(outputs)


def _named(value: str) -> tuple[str | None, str]:
    name, sep, path = value.partition("=")
    if sep and name.strip() and path.strip() and not os.path.exists(value):
        return name.strip(), path.strip()
    return None, value


def _mean_column(values: Sequence[float], what: str):
    array = np.asarray(values, dtype=np.float64)
    return lambda order: mean_of(array[order], what)


def _ner_columns(records: list[dict], what: str) -> dict[str, Any]:
    counts = {scheme: np.array([[float(r["semeval"][scheme][c]) for c in
                                 ("correct", "incorrect", "partial", "missed", "spurious")] for r in records])
              for scheme in SCHEMES}
    columns: dict[str, Any] = {}
    for scheme in SCHEMES:
        table = counts[scheme]
        credit = table[:, 0] + (0.5 * table[:, 2] if scheme in ("partial", "type") else 0.0)
        actual = table[:, 0] + table[:, 1] + table[:, 2] + table[:, 4]
        possible = table[:, 0] + table[:, 1] + table[:, 2] + table[:, 3]
        for which in ("f1", "precision", "recall"):
            columns[f"{scheme}_{which}"] = (lambda order, c=credit, a=actual, p=possible, w=which:
                                            precision_recall_f1_of(c[order], a[order], p[order], w, what=what))
    n_gold = np.array([float(r["n_gold"]) for r in records])
    n_pred = np.array([float(r["n_pred"]) for r in records])
    if all(isinstance(r.get("matches"), list) for r in records):
        credit = np.array([sum(float(m.get("credit", 0.0)) for m in r["matches"]) for r in records])
        for which in ("f1", "precision", "recall"):
            # DMBertA's micro numbers: 1.0 when no record has gold or predictions (its convention)
            columns[f"dmberta_{which}"] = (lambda order, w=which: precision_recall_f1_of(
                credit[order], n_pred[order], n_gold[order], w, both_empty=1.0, what=what))
    columns["dmberta_mean"] = _mean_column([float(r["score"]) for r in records], what)
    return columns


def _ner_row_records(rows: list[dict]) -> list[dict]:
    return [{"id": row.get("id"), "n_gold": row["n_gold"], "n_pred": row["n_pred"], "score": row["score"],
             "semeval": {scheme: {c: row[f"{scheme}_{c}"] for c in
                                  ("correct", "incorrect", "partial", "missed", "spurious")} for scheme in SCHEMES}}
            for row in rows]


def _digests(document: Mapping | None) -> dict[str, str]:
    if not isinstance(document, Mapping):
        return {}
    return {key: value for key, value in document.items() if key.endswith("_sha256") and isinstance(value, str)}


def _system_inputs(path: str, name: str | None, metric: str | None) -> list[SystemInput]:
    """Every system of one result file (or SELECT results folder: ``metric``'s concepts)."""
    from rapidscore.report import inputs as report_inputs

    if os.path.isdir(path):
        return select_folder_systems(path, metric)
    system = name or report_inputs.system_name(path)
    return systems_of_runs(report_inputs.read_result(path, system), report_inputs.result_document(path))


def _concept_label(concept: tuple) -> str:
    relation, name = concept
    return str(name) if relation is None else f"{relation}:{name}"


def select_folder_systems(path: str, metric: str | None = None,
                          taxonomies: Mapping[str, str | None] | None = None) -> list[SystemInput]:
    """Each (model, technique) cell of a SELECT results folder as a system whose items are its
    concepts' ``metric`` rates (default ``abstention``; ``specificity``, ``generalization``), as
    ``rapidscore abstention FOLDER`` computes them (the heuristic detector where no stored flag
    decides, each experiment's taxonomy, or ``taxonomies``' by experiment name as
    ``find_experiments`` takes them); cells without that evaluation type are not systems.
    Several experiments under the folder: ``experiment/model/technique``."""
    from rapidscore.abstention import rates
    from rapidscore.abstention.detectors import get_detector
    from rapidscore.abstention.pipeline import evaluate, find_experiments
    from rapidscore.abstention.report import abstention_signature
    from rapidscore.abstention.taxonomy import Taxonomy

    metric = SELECT_METRICS[0] if metric is None else metric
    if metric not in SELECT_METRICS:
        raise PairingError(f"--metric {metric}: not a metric of SELECT results (metrics: {', '.join(SELECT_METRICS)})")
    experiments = find_experiments(path, taxonomies=taxonomies)
    detector = get_detector("heuristic")
    out = []
    for experiment in experiments:
        counts = evaluate(experiment.files, detector, method="heuristic", workers=1).counts
        taxonomy = Taxonomy.load(experiment.taxonomy) if experiment.taxonomy else None
        scores = rates.concept_scores_from_counts(counts, taxonomy=taxonomy)
        signature = abstention_signature(
            "heuristic", taxonomy=None if taxonomy is None else os.path.basename(str(taxonomy.source)),
            detector=detector, decisions="stored-first")
        prefix = "" if len(experiments) == 1 else f"{experiment.name}/"
        for (model, technique, eval_type), values in sorted(scores.items()):
            if eval_type != metric:
                continue
            concepts = sorted(values, key=lambda c: (str(c[0]), str(c[1])))
            name = f"{prefix}{model}/{technique}"
            column = _mean_column([values[c] for c in concepts], f"{name} ({path}) {metric}")
            out.append(SystemInput(name, path, "select", signature, [_concept_label(c) for c in concepts], "id",
                                   list(range(1, len(concepts) + 1)), {metric: column}, {}))
    if not out:
        raise PairingError(f"{path}: no {metric} results in this SELECT results folder")
    return out


def systems_of_runs(runs: Sequence[Any], document: Mapping | None = None) -> list[SystemInput]:
    """The systems of runs read by :mod:`rapidscore.report.inputs` (``document``: the file's
    command document, for its recorded input digests)."""
    from rapidscore.report import inputs as report_inputs

    out = []
    for run in runs:
        gold: list[float] | None = None
        path = run.path
        what = f"{run.name} ({path})"
        if isinstance(run, report_inputs.BertScoreRun):
            keys, by = (run.ids, "id") if run.ids is not None and None not in run.ids else (run.lines, "line")
            lines = run.lines
            columns = {"f1": _mean_column(run.f1, what), "precision": _mean_column(run.precision, what),
                       "recall": _mean_column(run.recall, what)}
        elif isinstance(run, report_inputs.NRRRun):
            keys, by = (run.ids, "id") if run.ids is not None and None not in run.ids else (run.lines, "line")
            lines = run.lines
            columns = {"rejection_rate": _mean_column([float(r) for r in run.rejected], what),
                       "similarity": _mean_column(run.similarities, what)}
        elif isinstance(run, report_inputs.NERRun):
            records = run.result.get("records")
            if not isinstance(records, list) or not records:
                raise PairingError(f"{path}: {run.name} has no per-record results (write them: rapidscore ner --json "
                                   "keeps each record); its totals alone cannot be paired")
            keys, by = [str(r.get("id")) for r in records], "id"
            lines = list(range(1, len(records) + 1))
            columns = _ner_columns(records, what)
            gold = [float(r["n_gold"]) for r in records]
            document = run.result
        elif isinstance(run, report_inputs.MetricRun):
            if run.rows is None:
                raise PairingError(f"{path}: {run.metric} totals without per-item scores (give the command's "
                                   "--output rows)")
            rows = run.rows
            lines = [int(row.get("index", k)) + 1 for k, row in enumerate(rows)]
            keys, by = ([row["id"] for row in rows], "id") if all(row.get("id") is not None for row in rows) else (
                lines, "line")
            if run.metric == "ner":
                columns = _ner_columns(_ner_row_records(rows), what)
                gold = [float(row["n_gold"]) for row in rows]
            else:
                columns = {}
                for column in run.outputs:
                    values = [row.get(column) for row in rows]
                    if all(isinstance(v, (bool, int, float)) or v is None for v in values):
                        columns[column] = _mean_column([np.nan if v is None else float(v) for v in values], what)
                if not columns:
                    raise PairingError(f"{path}: {run.metric} rows have no numeric column to compare")
        elif isinstance(run, report_inputs.SelectRun):
            raise PairingError(f"{path}: rapidscore abstention's output holds each cell's mean over concepts, not "
                               "each concept's rate; give the SELECT results folder it was computed from")
        else:
            raise PairingError(f"{path}: {run.kind} results have no per-item scores to pair")
        if len(set(map(str, keys))) != len(keys):
            raise PairingError(f"{path}: {run.name}: an item {by} appears twice; items must be unique to pair")
        out.append(SystemInput(run.name, path, run.kind if not isinstance(run, report_inputs.MetricRun)
                               else run.metric, run.signature, keys, by, lines, columns, _digests(document), gold))
    return out


def read_systems(results: Sequence[str], metric: str | None = None, baseline: str | None = None,
                 ) -> tuple[str, dict[str, ItemStats], list[SystemInput]]:
    """(metric, {system: ItemStats} baseline first, the systems as read) from result files
    (``PATH`` or ``NAME=PATH``). PairingError when they cannot be paired (see the module)."""
    systems: list[SystemInput] = []
    for value in results:
        name, path = _named(value)
        found = _system_inputs(path, name, metric)
        if name is not None and len(found) == 1:
            found[0].name = name  # NAME=FILE names it, whatever the file calls it (a NER model)
        elif name is not None:
            for item in found:
                item.name = f"{name}/{item.name}"
        systems.extend(found)
    names = [s.name for s in systems]
    for name in set(names):
        if names.count(name) > 1:
            paths = ", ".join(s.path for s in systems if s.name == name)
            raise PairingError(f"two systems are named {name!r} ({paths}): name them with NAME=FILE")
    if len(systems) < 2:
        raise PairingError(f"a comparison needs two systems or more; {', '.join(results)} hold "
                           f"{len(systems)}: {', '.join(names) or 'none'}")
    return pair_systems(systems, metric, baseline)


def pair_systems(systems: list[SystemInput], metric: str | None = None, baseline: str | None = None,
                 ) -> tuple[str, dict[str, ItemStats], list[SystemInput]]:
    """:func:`read_systems` on systems already read: the metric, each system's statistics in the
    baseline's item order (baseline first), the systems in that order."""
    names = [s.name for s in systems]
    if len(systems) < 2:
        raise PairingError(f"a comparison needs two systems or more, got {len(systems)}: {', '.join(names) or 'none'}")
    kinds = {s.kind for s in systems}
    if len(kinds) > 1:
        raise PairingError("the files hold results of different metrics (" +
                           ", ".join(f"{s.name}: {s.kind}" for s in systems) + ")")
    base = next((s for s in systems if s.name == baseline), None) if baseline is not None else systems[0]
    if base is None:
        raise PairingError(f"--baseline {baseline}: no such system (systems: {', '.join(names)})")
    offered = [m for m in metrics_of(base.kind, list(base.columns)) if all(m in s.columns for s in systems)]
    if metric is None:
        if not offered:
            raise PairingError(f"the systems share no metric to compare ({', '.join(names)})")
        metric = offered[0]
    elif metric not in offered:
        raise PairingError(f"--metric {metric}: not a metric of these {base.kind} results "
                           f"(metrics: {', '.join(offered) or 'none'})")
    _check_same_inputs(base, systems)
    orders = _pair_items(base, systems)
    _check_same_gold(base, systems, orders)
    ordered = [base, *(s for s in systems if s is not base)]
    return metric, {s.name: s.stats(metric, orders[s.name]) for s in ordered}, ordered


def _check_same_inputs(base: SystemInput, systems: Sequence[SystemInput]) -> None:
    from rapidscore.common.signature import Signature

    for system in systems:
        if system is base:
            continue
        if base.signature and system.signature and base.signature != system.signature:
            a, b = Signature.parse(base.signature).as_dict(), Signature.parse(system.signature).as_dict()
            differ = [k for k in dict.fromkeys([*a, *b]) if k not in _FREE_FIELDS and a.get(k) != b.get(k)]
            if differ:
                raise PairingError(
                    f"{system.name} ({system.path}) was scored with other settings than {base.name} ({base.path}): " +
                    ", ".join(f"{k} {b.get(k, 'absent')} vs {a.get(k, 'absent')}" for k in differ) +
                    "; a paired test compares systems scored the same way")
        for key in sorted(set(base.digests) & set(system.digests)):
            if base.digests[key] != system.digests[key]:
                raise PairingError(f"{system.name} ({system.path}) and {base.name} ({base.path}) were scored against "
                                   f"different inputs ({key} {system.digests[key][:12]} vs {base.digests[key][:12]})")


def _check_same_gold(base: SystemInput, systems: Sequence[SystemInput], orders: Mapping[str, list[int]]) -> None:
    """NER: a record has as many gold entities in every system scored on the same gold."""
    if base.gold_counts is None:
        return
    for system in systems:
        if system is base or system.gold_counts is None:
            continue
        for k, position in enumerate(orders[system.name]):
            if system.gold_counts[position] != base.gold_counts[k]:
                raise PairingError(
                    f"{system.name} ({system.path}) and {base.name} ({base.path}) were scored against different "
                    f"gold: record {base.keys[k]} has {system.gold_counts[position]:g} gold entities in one, "
                    f"{base.gold_counts[k]:g} in the other")


def _pair_items(base: SystemInput, systems: Sequence[SystemInput]) -> dict[str, list[int]]:
    """Each system's item positions in the baseline's item order; PairingError naming the items
    one system has and another lacks."""
    by_id = all(s.keyed_by == "id" for s in systems)

    def keys_of(system: SystemInput) -> list:
        return [str(k) for k in system.keys] if by_id else list(system.lines)

    reference = keys_of(base)
    orders = {}
    problems = []
    for system in systems:
        keys = keys_of(system)
        position = {k: i for i, k in enumerate(keys)}
        missing = [k for k in reference if k not in position]
        extra = [k for k in keys if k not in set(reference)]
        if missing or extra:
            what = ("concepts" if base.kind == "select" else "ids") if by_id else "lines"
            parts = []
            if missing:
                parts.append(f"lacks {len(missing)} of {base.name}'s {what} ({_show(missing)})")
            if extra:
                parts.append(f"has {len(extra)} {what} {base.name} lacks ({_show(extra)})")
            problems.append(f"{system.name} ({system.path}) " + " and ".join(parts))
            continue
        orders[system.name] = [position[k] for k in reference]
    if problems:
        raise PairingError("items unmatched between systems: " + "; ".join(problems))
    return orders


def _show(keys: Sequence) -> str:
    shown = ", ".join(str(k) for k in keys[:_SHOWN])
    return shown + (f", ... {len(keys) - _SHOWN} more" if len(keys) > _SHOWN else "")


def compare_files(results: Sequence[str], baseline: str | None = None, *, metric: str | None = None,
                  **options: Any) -> Comparison:
    """:func:`rapidscore.compare.compare` over result files (``PATH`` or ``NAME=PATH``; a
    system's name is its file's stem): each file's ``signature`` is recorded in the result's
    ``inputs``."""
    metric, stats, systems = read_systems(results, metric, baseline)
    result = compare(stats, systems[0].name, metric=metric, **options)
    result.inputs.extend({"name": s.name, "file": s.path, "kind": s.kind, "signature": s.signature,
                          "paired_by": "concept" if s.kind == "select" else
                          "id" if all(x.keyed_by == "id" for x in systems) else "line"}
                         for s in systems)
    return result


def select_systems(scores: Mapping[tuple, Mapping[tuple, float]], eval_type: str,
                   cells: Sequence[tuple[str, str]]) -> dict[str, ItemStats]:
    """SELECT cells ``(model, technique)`` as systems paired by concept: each concept's rate
    (``rapidscore.abstention.rates.concept_scores``: ``{(model, technique, eval_type):
    {(relation, concept): rate}}``) for one ``eval_type``; the mean over concepts is SELECT's
    mean. PairingError naming a cell without scores or the concepts one cell has and another lacks."""
    per_cell = {}
    for model, technique in cells:
        key = (model, technique, eval_type)
        if key not in scores:
            raise PairingError(f"no {eval_type} scores for {model}/{technique} (cells: " +
                               ", ".join(sorted({f'{m}/{t}' for m, t, e in scores if e == eval_type})) + ")")
        per_cell[f"{model}/{technique}"] = scores[key]
    first_name, first = next(iter(per_cell.items()))
    concepts = sorted(first, key=lambda c: (str(c[0]), str(c[1])))
    problems = []
    for name, values in per_cell.items():
        missing = [c for c in concepts if c not in values]
        extra = [c for c in values if c not in first]
        if missing or extra:
            def label(c: tuple) -> str:
                return c[1] if c[0] is None else f"{c[0]}:{c[1]}"
            parts = ([f"lacks {len(missing)} of {first_name}'s concepts ({_show([label(c) for c in missing])})"]
                     if missing else []) + ([f"has {len(extra)} concepts {first_name} lacks "
                                             f"({_show([label(c) for c in extra])})"] if extra else [])
            problems.append(f"{name} " + " and ".join(parts))
    if problems:
        raise PairingError("concepts unmatched between cells: " + "; ".join(problems))
    return {name: mean_of([values[c] for c in concepts], f"{name} {eval_type}") for name, values in per_cell.items()}
