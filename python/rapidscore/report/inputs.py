"""The result files of an evaluation run, read and told apart by their fields.

Every command writes its numbers in a shape of its own; :func:`read_results` reads each file the
way its shape says (a file name says nothing reliable: ``--json > out.txt`` is common):

==================  =========================================================================
kind                recognised by
==================  =========================================================================
``bertscore``       ``rapidscore bertscore --json``: lists ``precision``, ``recall``, ``f1``;
                    ``--output`` rows: columns ``precision``, ``recall``, ``f1``
``nrr``             ``rapidscore nrr --json``: ``similarities`` and ``rejected``; ``--output``
                    rows: columns ``similarity``, ``rejected``
``ner``             ``rapidscore ner --json``: ``{model: {dmberta, semeval, ...}}`` (one system
                    per model)
``select``          ``rapidscore abstention --json``: ``rows`` of (model, technique, metric),
                    or a SELECT results folder, evaluated here as ``rapidscore abstention`` does
``metric``          a registered metric's ``--output`` rows (the columns of its outputs, e.g.
                    ``refusal``), or a command's totals (``--json``: a ``signature`` and numbers)
==================  =========================================================================

A file is JSON (one document, or an array of rows), JSONL, CSV/TSV or Parquet (``.gz`` too); a
one-line JSONL file holding a command's document counts as the document. Systems are named by
file name (``bertscore_a.json`` -> ``bertscore_a``) unless ``names`` maps the file to a name.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Run", "BertScoreRun", "NRRRun", "NERRun", "SelectRun", "MetricRun", "KINDS", "read_results",
           "read_result", "result_document", "system_name", "signature_field", "attach_texts", "read_gold_texts"]

KINDS = ("bertscore", "nrr", "ner", "select", "metric")
_ROW_KEYS = ("index", "id", "signature")  # columns of a streamed output that are not a metric's outputs
_EXTENSIONS = (".gz", ".json", ".jsonl", ".csv", ".tsv", ".parquet", ".txt")


@dataclass
class Run:
    """One system's results from one file: ``kind`` (see the module's table), the system's
    ``name``, the file's ``path`` and the ``signature`` of its numbers (None when the file
    records none, as streamed rows do)."""

    kind: str
    name: str
    path: str
    signature: str | None


@dataclass
class BertScoreRun(Run):
    """Per-item precision, recall and F1; ``lines``: each item's line (1-based) in the inputs;
    ``ids``: the rows' ids, when the output has them. Texts when given (:func:`attach_texts`)."""

    precision: list[float]
    recall: list[float]
    f1: list[float]
    lines: list[int]
    ids: list[Any] | None = None
    means: dict = field(default_factory=dict)  # the file's own means ("P", "R", "F1"; --json)
    candidates: list[str] | None = None
    references: list[list[str]] | None = None
    alignment: Any = None  # a report.alignment.Alignment, when a model was given

    def mean(self, key: str) -> float:
        """The file's mean of ``key`` ("P", "R", "F1") where it records one, else the items'."""
        if isinstance(self.means.get(key), (int, float)):
            return float(self.means[key])
        values = [v for v in {"P": self.precision, "R": self.recall, "F1": self.f1}[key] if not math.isnan(v)]
        return sum(values) / len(values) if values else math.nan


@dataclass
class NRRRun(Run):
    """Per-item similarity and rejection; ``totals``: the file's own totals (rate, counts,
    threshold) when it has them (``--json``), else counted from the rows."""

    similarities: list[float]
    rejected: list[bool]
    lines: list[int]
    threshold: float | None = None
    best_reference: list[int] | None = None
    ids: list[Any] | None = None
    totals: dict = field(default_factory=dict)
    candidates: list[str] | None = None
    references: list[list[str]] | None = None

    @property
    def n_evaluated(self) -> int:
        return int(self.totals.get("n_evaluated", len(self.rejected)))

    @property
    def n_rejected(self) -> int:
        return int(self.totals.get("n_rejected", sum(self.rejected)))

    @property
    def rate(self) -> float:
        if "negative_rejection_rate" in self.totals:
            return float(self.totals["negative_rejection_rate"])
        return self.n_rejected / self.n_evaluated if self.n_evaluated else math.nan

    @property
    def capture_rate(self) -> float:
        if "capture_rate" in self.totals:
            return float(self.totals["capture_rate"])
        return 1.0 - self.rate


@dataclass
class NERRun(Run):
    """One model of ``rapidscore ner --json``: ``result`` is its document (n_records, dmberta,
    semeval, per-record detail); ``texts``: each record's text by id (``--gold``)."""

    model: str
    result: dict
    texts: dict | None = None


@dataclass
class SelectRun(Run):
    """``rapidscore abstention --json``'s document: ``meta``, ``experiments`` (name, taxonomy,
    signature, decision counts) and ``rows`` (experiment, model, technique, metric, mean,
    half_width, n_concepts; fractions)."""

    document: dict


@dataclass
class MetricRun(Run):
    """A registered metric's output rows (``rows``, its output columns ``outputs``) or a
    command's totals (``totals``: the document's numbers)."""

    metric: str
    rows: list[dict] | None = None
    outputs: list[str] = field(default_factory=list)
    totals: dict | None = None
    candidates: list[str] | None = None


# -- names ----------------------------------------------------------------------------------------

def system_name(path: str, names: Mapping[str, str] | None = None) -> str:
    """The system a file holds: ``names[path]`` (matched by path, a link or the same file too),
    else the file (or folder) name without its extensions."""
    for given, name in (names or {}).items():
        if _same_path(given, path):
            return name
    base = os.path.basename(os.path.normpath(path))
    while True:
        stem, ext = os.path.splitext(base)
        if ext.lower() not in _EXTENSIONS or not stem:
            return base
        base = stem


def _same_path(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def signature_field(signature: str | None, key: str) -> str | None:
    """The value of ``key`` in a ``name|key:value|...`` signature (None when absent)."""
    for part in (signature or "").split("|"):
        name, sep, value = part.partition(":")
        if sep and name == key:
            return value
    return None


# -- reading --------------------------------------------------------------------------------------

def read_results(paths: Sequence[str], names: Mapping[str, str] | None = None, *,
                 taxonomy: str | None = None) -> list[Run]:
    """Every system of every result file (or SELECT results folder) in ``paths``, in order.
    ValueError for a file of no known kind (naming its fields) and for two systems of one kind
    with one name."""
    runs: list[Run] = []
    for path in paths:
        runs.extend(read_result(path, system_name(path, names), taxonomy=taxonomy))
    seen: dict[tuple[str, str], str] = {}
    for run in runs:
        key = (run.kind, run.name)
        if key in seen:
            raise ValueError(f"{seen[key]} and {run.path} are both the {run.kind} system {run.name!r}: name one "
                             "with --name FILE=NAME")
        seen[key] = run.path
    return runs


def read_result(path: str, name: str, *, taxonomy: str | None = None) -> list[Run]:
    """The systems of one result file (a NER file holds one per model; ``name`` then prefixes
    each model's when the file holds several), or of a SELECT results folder."""
    if os.path.isdir(path):
        return [_select_run(path, name, _evaluate_select_folder(path, taxonomy))]
    shape, content = _load(path)
    if shape == "rows":
        return [_rows_run(path, name, content)]
    return _document_runs(path, name, content)


def result_document(path: str) -> dict | None:
    """The command's document a result file holds (its ``--json`` output), or None for rows."""
    shape, content = _load(path)
    return content if shape == "document" else None


def _load(path: str) -> tuple[str, Any]:
    """("document", dict) or ("rows", [dict])."""
    from rapidscore.common.readers import RecordTooLongError, check_input_file, detect_format, iter_rows, load_json

    check_input_file(path)
    fmt = detect_format(path, default="jsonl")
    if fmt == "json":
        return _shape(path, load_json(path))
    if fmt in ("csv", "tsv", "parquet"):
        return "rows", [dict(row) for row, _where in iter_rows(path, fmt)]
    rows: list[dict] = []
    try:  # JSONL (or any other extension): one object per line
        for row, _where in iter_rows(path, "jsonl"):
            rows.append(dict(row))
    except RecordTooLongError:
        raise  # read as one document, the line would be held whole: the bound's error, as every reader's
    except ValueError as not_jsonl:
        if rows:  # lines of JSON objects, then a bad one: JSONL with an error, not an indented document
            raise
        try:  # a command's indented --json document (its first line is not a whole object)
            return _shape(path, load_json(path))
        except ValueError:
            raise not_jsonl from None
    if len(rows) == 1 and _document_kind(rows[0]) is not None:
        return "document", rows[0]
    return "rows", rows


def _shape(path: str, data: Any) -> tuple[str, Any]:
    if isinstance(data, dict):
        return "document", data
    if isinstance(data, list) and all(isinstance(row, dict) for row in data):
        return "rows", data
    raise ValueError(f"{path}: expected a JSON object (a command's --json output) or an array of rows, got "
                     f"{type(data).__name__}")


def _document_kind(doc: Mapping) -> str | None:
    if all(isinstance(doc.get(key), list) for key in ("precision", "recall", "f1")):
        return "bertscore"
    if isinstance(doc.get("similarities"), list) and isinstance(doc.get("rejected"), list):
        return "nrr"
    if isinstance(doc.get("rows"), list) and ("experiments" in doc or "meta" in doc):
        return "select"
    if doc and all(isinstance(value, dict) and "dmberta" in value and "semeval" in value for value in doc.values()):
        return "ner"
    if isinstance(doc.get("signature"), str):
        return "metric"
    return None


def _unknown(path: str, fields: Iterable[str]) -> ValueError:
    shown = ", ".join(sorted(map(str, fields))[:12]) or "none"
    return ValueError(f"{path}: not a result file the report knows (fields: {shown}); give the JSON or JSONL "
                      "output of rapidscore bertscore, nrr, ner, abstention or a metric command, or a SELECT "
                      "results folder")


def _document_runs(path: str, name: str, doc: dict) -> list[Run]:
    kind = _document_kind(doc)
    signature = doc.get("signature") if isinstance(doc.get("signature"), str) else None
    if kind == "bertscore":
        n = _same_lengths(path, {key: doc[key] for key in ("precision", "recall", "f1")})
        means = doc["mean"] if isinstance(doc.get("mean"), dict) else {}
        return [BertScoreRun("bertscore", name, path, signature, _floats(path, doc["precision"]),
                             _floats(path, doc["recall"]), _floats(path, doc["f1"]), list(range(1, n + 1)),
                             means=means)]
    if kind == "nrr":
        columns = {"similarities": doc["similarities"], "rejected": doc["rejected"]}
        if isinstance(doc.get("best_reference"), list):
            columns["best_reference"] = doc["best_reference"]
        n = _same_lengths(path, columns)
        totals = {key: doc[key] for key in ("negative_rejection_rate", "capture_rate", "n_evaluated", "n_rejected",
                                            "n_captured") if isinstance(doc.get(key), (int, float))}
        threshold = doc.get("threshold")
        return [NRRRun("nrr", name, path, signature, _floats(path, doc["similarities"]),
                       [_flag(path, value) for value in doc["rejected"]], list(range(1, n + 1)),
                       threshold=float(threshold) if isinstance(threshold, (int, float)) else None,
                       best_reference=columns.get("best_reference"), totals=totals)]
    if kind == "ner":  # one system per model, named by the model unless the file was named
        named = name != system_name(path)
        return [NERRun("ner", (name if len(doc) == 1 else f"{name}/{model}") if named else str(model), path,
                       result.get("signature") if isinstance(result.get("signature"), str) else None,
                       str(model), result) for model, result in doc.items()]
    if kind == "select":
        return [_select_run(path, name, doc)]
    if kind == "metric":
        metric = doc.get("metric") if isinstance(doc.get("metric"), str) else (signature or "").split("|", 1)[0]
        totals = {key: value for key, value in doc.items() if key not in ("metric", "signature")
                  and (isinstance(value, (int, float, str)) or value is None)}
        return [MetricRun("metric", name, path, signature, metric or "metric", totals=totals)]
    raise _unknown(path, doc)


def _rows_run(path: str, name: str, rows: list[dict]) -> Run:
    if not rows:
        raise ValueError(f"{path}: no rows")
    columns = set(rows[0])
    signatures = {row.get("signature") for row in rows if isinstance(row.get("signature"), str)}
    signature = signatures.pop() if len(signatures) == 1 else None
    if len(signatures) > 1:
        raise ValueError(f"{path}: the rows carry {len(signatures) + 1} different signatures: one run per file")
    lines = [_line(path, row, k) for k, row in enumerate(rows)]
    ids = [row.get("id") for row in rows] if "id" in columns else None
    if {"precision", "recall", "f1"} <= columns:
        precision, recall, f1 = (_floats(path, [_get(path, row, key, k) for k, row in enumerate(rows)])
                                 for key in ("precision", "recall", "f1"))
        return BertScoreRun("bertscore", name, path, signature, precision, recall, f1, lines, ids)
    if {"similarity", "rejected"} <= columns:
        best = ([int(row["best_reference"]) for row in rows]
                if "best_reference" in columns and all(row.get("best_reference") is not None for row in rows) else None)
        return NRRRun("nrr", name, path, signature, _floats(path, [_get(path, row, "similarity", k)
                                                                   for k, row in enumerate(rows)]),
                      [_flag(path, _get(path, row, "rejected", k)) for k, row in enumerate(rows)], lines,
                      best_reference=best, ids=ids)
    outputs = sorted(columns - set(_ROW_KEYS))
    metric = _metric_of(outputs)
    if metric is None:
        raise _unknown(path, columns)
    return MetricRun("metric", name, path, signature, metric, rows=rows,
                     outputs=[c for c in rows[0] if c not in _ROW_KEYS])


def _metric_of(outputs: list[str]) -> str | None:
    """The registered metric whose output columns are exactly ``outputs``."""
    from rapidscore.metrics import all_metrics

    for metric in all_metrics():
        if sorted(metric.outputs) == outputs:
            return metric.name
    return None


def _line(path: str, row: Mapping, position: int) -> int:
    index = row.get("index", position)
    try:
        return int(index) + 1
    except (TypeError, ValueError):
        raise ValueError(f"{path}: row {position + 1}: index {index!r} is not an integer") from None


def _get(path: str, row: Mapping, key: str, position: int) -> Any:
    if key not in row:
        raise ValueError(f"{path}: row {position + 1}: no column {key!r} (columns: {list(row)})")
    return row[key]


def _floats(path: str, values: Sequence) -> list[float]:
    out = []
    for k, value in enumerate(values):
        if value is None:
            out.append(math.nan)
            continue
        try:
            out.append(float(value))
        except (TypeError, ValueError):
            raise ValueError(f"{path}: item {k + 1}: expected a number, got {value!r:.40}") from None
    return out


def _flag(path: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ValueError(f"{path}: expected true or false, got {value!r:.40}")


def _same_lengths(path: str, columns: Mapping[str, Any]) -> int:
    lengths = {key: len(values) for key, values in columns.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"{path}: the lists differ in length ({', '.join(f'{k} {n}' for k, n in lengths.items())})")
    return next(iter(lengths.values()))


# -- SELECT ---------------------------------------------------------------------------------------

def _select_run(path: str, name: str, doc: dict) -> SelectRun:
    meta = doc["meta"] if isinstance(doc.get("meta"), dict) else {}
    signature = doc.get("signature") or meta.get("signature")
    experiments = doc.get("experiments")
    if not isinstance(experiments, list) or not experiments:  # AbstentionReport.to_dict: one experiment
        experiments = [{"name": ".", "signature": signature, "decisions": {}, "decisions_by_cell": {}}]
    if signature is None:
        found = {e.get("signature") for e in experiments if isinstance(e, dict)}
        signature = found.pop() if len(found) == 1 else None
    for row in doc["rows"]:
        if not isinstance(row, dict) or not {"model", "technique", "metric", "mean"} <= set(row):
            raise ValueError(f"{path}: an abstention row needs model, technique, metric and mean, got {row!r:.80}")
    return SelectRun("select", name, path, signature if isinstance(signature, str) else None,
                     {"meta": meta, "experiments": experiments, "rows": doc["rows"]})


def _evaluate_select_folder(path: str, taxonomy: str | None) -> dict:
    """``rapidscore abstention FOLDER --json``'s document: the same command, run here (its
    options' defaults: SELECT's pipeline, stored flags first), so the numbers are that command's."""
    import argparse
    import contextlib
    import io
    import json

    from rapidscore.abstention import cli as abstention_cli

    parser = argparse.ArgumentParser(prog="rapidscore abstention")
    abstention_cli.add_arguments(parser)
    args = parser.parse_args([path, "--json", "-q", *(["--taxonomy", taxonomy] if taxonomy else [])])
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        abstention_cli.run(args)
    return json.loads(printed.getvalue())


# -- texts ----------------------------------------------------------------------------------------

def attach_texts(run: Run, candidates: str | None, references: Sequence[str], *, column: str | None = None,
                 reference_column: str | None = None) -> None:
    """Read the texts of ``run``'s items: ``candidates`` (a file of one text per line, or a
    column of a table) and ``references`` (files; several = several references per item). Their
    lengths must cover the items' lines."""
    from rapidscore.common.readers import cell_texts, iter_column, read_texts

    if not isinstance(run, (BertScoreRun, NRRRun, MetricRun)):
        raise ValueError(f"{run.path}: texts belong to BERTScore, NRR or metric rows, not to {run.kind} results")
    lines = ([_line(run.path, row, k) for k, row in enumerate(run.rows or [])] if isinstance(run, MetricRun)
             else run.lines)
    needed = max(lines, default=0)
    if candidates is not None:
        texts = read_texts(candidates, column)
        if len(texts) < needed:
            raise ValueError(f"{candidates} has {len(texts)} texts; {run.path} has results up to line {needed}")
        run.candidates = [texts[line - 1] for line in lines]
    if references and not isinstance(run, MetricRun):
        columns = [[cell_texts(value, where, reference_column) for where, value in iter_column(path, reference_column)]
                   for path in references]
        for path, values in zip(references, columns):
            if len(values) < needed:
                raise ValueError(f"{path} has {len(values)} references; {run.path} has results up to line {needed}")
        run.references = [[ref for values in columns for ref in values[line - 1]] for line in lines]


def read_gold_texts(path: str) -> dict:
    """``{id: text}`` of a NER gold file's records (its ``text`` or ``prompt``)."""
    from rapidscore.common.readers import read_records

    texts = {}
    for record, _where in read_records(path):
        text = record.get("text", record.get("prompt"))
        if "id" in record and isinstance(text, str):
            texts[str(record["id"])] = text
    return texts
