"""Loading model responses: SELECT results files and flat tables.

SELECT layout: ``{root}/{model}/{eval_type}/{technique}.json.gz`` holding
``{seed: {concept: {instance_id: record}}}`` (compositions: ``{seed: {relation: {concept:
{instance_id: record}}}}``); a record has ``response`` (str, or ``{"complete", "answer"}`` for
chain-of-thought) and the stored ``refusal`` flags. Flat tables (JSONL / CSV / pandas DataFrame)
have columns ``model, technique, eval_type, seed, concept, question, response`` (optional
``relation``, ``id``).

Errors name the file and the key path. With ``on_error="skip"`` malformed records are skipped and
counted in the returned :class:`LoadReport` instead (nothing is dropped silently).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any

from rapidscore.common import readers
from rapidscore.common.readers import iter_lines
from rapidscore.errors import ResultsError

EVAL_TYPES = ("abstention", "generalization", "specificity")
FLAT_COLUMNS = ("model", "technique", "eval_type", "seed", "concept", "question", "response")


@dataclass(frozen=True)
class Record:
    model: str
    technique: str
    eval_type: str
    seed: str
    concept: str
    response: Any  # str or {"complete", "answer"}
    relation: str | None = None
    instance_id: str | None = None
    question: str | None = None
    stored_refusal: Mapping[str, bool] | None = None


@dataclass
class LoadReport:
    records: list[Record] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> count
    files: int = 0

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    @property
    def n_skipped(self) -> int:
        return sum(self.skipped.values())


def _check_on_error(on_error: str) -> None:
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")


_orjson: Any
try:  # 1.5-2x faster than json on results files (optional: the [fast] extra)
    import orjson as _orjson
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None
JSON_PARSER = "orjson" if _orjson is not None else "json"


def _read_json(path: str) -> Any:
    """Parse a results file (gzipped when its name ends in .gz) with orjson when installed."""
    return parse_json(path, read_bytes(path))


def read_bytes(path: str, max_bytes: int | None = None) -> bytes:
    """A results file's JSON bytes (gunzipped when its name ends in .gz), at most ``max_bytes``
    (default: the shared reader's bound on a whole document, 2 GiB; a results file is one JSON
    document, parsed at once). A truncated or corrupt .gz, or a file over the bound, raises
    ResultsError naming the file (the shared reader's words)."""
    try:
        return readers.read_bytes(path, max_bytes)
    except ValueError as exc:
        raise ResultsError(str(exc)) from None


def parse_json(path: str, raw: bytes, max_bytes: int | None = None) -> Any:
    """The parsed document (orjson when installed); any failure raises ResultsError naming the
    file and line (bytes that are not UTF-8, invalid JSON, an integer over Python's digit limit)
    in the shared reader's words (``max_bytes``: the bound ``raw`` was read under)."""
    try:
        return readers.parse_json(path, raw, _orjson.loads if _orjson is not None else json.loads, max_bytes)
    except ValueError as exc:
        raise ResultsError(str(exc)) from None


def _path_fields(path: str, model: str | None, technique: str | None, eval_type: str | None):
    """model / eval_type / technique from ``{model}/{eval_type}/{technique}.json[.gz]`` unless given."""
    parts = os.path.normpath(os.path.abspath(path)).split(os.sep)
    stem = parts[-1]
    for suffix in (".gz", ".json"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
    if (model is None and len(parts) < 3) or (eval_type is None and len(parts) < 2):  # was an IndexError
        raise ValueError(f"{path}: the path does not hold {{model}}/{{eval_type}}/{{technique}}.json.gz; "
                         "pass model= and eval_type=")
    return model or parts[-3], technique or stem, eval_type or parts[-2]


def names_arg(values: Iterable[str] | None, name: str, allowed: tuple[str, ...] | None = None) -> list[str] | None:
    """A list of names (models, techniques, eval types), or None. A single string is refused: it
    was iterated by characters (``eval_types="abstention"`` looked for "a", "b", ...)."""
    if values is None:
        return None
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{name} must be a list of names, got one {type(values).__name__} {values!r}; "
                        f"use [{values!r}]")
    if isinstance(values, Mapping) or not isinstance(values, Iterable):
        raise TypeError(f"{name} must be a list of names, got {type(values).__name__}")
    names = list(values)
    for value in names:
        if not isinstance(value, str):
            raise TypeError(f"{name} must hold strings, got {type(value).__name__}: {value!r}")
        if allowed is not None and value not in allowed:
            raise ValueError(f"{name}: {value!r} is not one of {', '.join(allowed)}")
    return names


def eval_types_arg(eval_types: Iterable[str] | None) -> tuple[str, ...]:
    """The eval types to load: a list of :data:`EVAL_TYPES` names (None: all of them)."""
    return EVAL_TYPES if eval_types is None else tuple(names_arg(eval_types, "eval_types", EVAL_TYPES) or ())


def _is_record(value) -> bool:
    return isinstance(value, Mapping) and "response" in value


def load_select_file(path: str | os.PathLike, *, model: str | None = None, technique: str | None = None,
                     eval_type: str | None = None, on_error: str = "raise",
                     report: LoadReport | None = None) -> LoadReport:
    """Read one SELECT results file (``.json.gz`` or ``.json``). model / eval_type / technique
    default to the path components ``{model}/{eval_type}/{technique}.json.gz``."""
    _check_on_error(on_error)
    path = os.fspath(path)
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path} is a directory; load_select_file reads one results file (.json.gz or "
                                ".json): for a tree of them, use load_results_tree")
    report = report if report is not None else LoadReport()
    model, technique, eval_type = _path_fields(path, model, technique, eval_type)
    try:
        data = _read_json(path)
    except ResultsError:
        if on_error != "skip":
            raise
        report.skip("unreadable file")  # a truncated .gz: the other files still count
        return report
    report.files += 1
    for seed, relation, concept, records, key_path, fail in iter_file_groups(path, data, eval_type, on_error,
                                                                            report.skip):
        for instance_id, record in records.items():
            problem = record_problem(record)
            if problem is not None:
                fail(key_path + [instance_id], problem, "malformed record")
                continue
            stored = record.get("refusal")
            report.records.append(Record(model, technique, eval_type, seed, concept, record["response"], relation,
                                         str(record.get("id", instance_id)), record.get("query"),
                                         dict(stored) if isinstance(stored, Mapping) else None))
    return report


def iter_file_groups(path: str, data, eval_type: str, on_error: str, skip: Callable[[str], None],
                     ) -> Iterator[tuple[str, str | None, str, Mapping, list, Callable]]:
    """The (seed, concept) groups of a parsed results file: ``(seed, relation, concept, records,
    key_path, fail)``, ``records`` a non-empty ``{instance_id: record}`` whose records the caller
    checks (:func:`record_problem`), reporting a bad one with ``fail(key_path + [instance_id],
    problem, "malformed record")``. Malformed structure raises ResultsError naming the file and
    key path, or (on_error="skip") is counted through ``skip(reason)``."""
    if not isinstance(data, Mapping) or not data:
        raise ResultsError(f"{path}: expected a non-empty object keyed by seed")
    if len(data) == 1 and next(iter(data)) in (eval_type, *EVAL_TYPES):  # {eval_type: {seed: ...}}
        data = next(iter(data.values()))

    def fail(key_path, message, reason):
        where = "/".join(str(k) for k in key_path)
        if on_error == "skip":
            skip(reason)
            return
        raise ResultsError(f"{path}: at key {where}: {message}")

    depth = _record_depth(data)
    if depth is None:
        raise ResultsError(f"{path}: no record with a 'response' found")
    if depth not in (3, 4):
        raise ResultsError(f"{path}: records found {depth} levels deep; expected {{seed: {{concept: {{id: record}}}}}} "
                           "or {seed: {relation: {concept: {id: record}}}}")
    for seed, seed_data in data.items():
        if not isinstance(seed_data, Mapping) or not seed_data:
            fail([seed], "seed has no concepts (empty or not an object)", "empty seed")
            continue
        groups = [(None, seed_data, [seed])]
        if depth == 4:
            groups = []
            for relation, rel_data in seed_data.items():
                if not isinstance(rel_data, Mapping) or not rel_data:
                    fail([seed, relation], "relation has no concepts (empty or not an object)", "empty relation")
                    continue
                groups.append((relation, rel_data, [seed, relation]))
        seed = str(seed)
        for relation, concepts, key_path in groups:
            for concept, records in concepts.items():
                if not isinstance(concept, str) or not concept.strip():
                    fail(key_path + [concept], "missing concept id", "missing concept id")
                    continue
                if not isinstance(records, Mapping) or not records:
                    fail(key_path + [concept], "concept has no records (empty or not an object)", "empty concept")
                    continue
                yield seed, relation, concept, records, key_path + [concept], fail


def _record_depth(node, depth=0):
    """Nesting depth of the first record (1 = top-level values)."""
    if _is_record(node):
        return depth
    if isinstance(node, Mapping):
        for value in node.values():
            found = _record_depth(value, depth + 1)
            if found is not None:
                return found
    return None


def record_problem(record) -> str | None:
    """Why a record is malformed, or None when it is valid."""
    if not isinstance(record, Mapping) or "response" not in record:
        return "malformed record (expected an object with a 'response')"
    response = record["response"]
    if isinstance(response, str):
        return None
    if isinstance(response, Mapping):
        if not isinstance(response.get("answer"), str):
            return "chain-of-thought response without a str 'answer'"
        return None
    return f"response must be a str or a {{complete, answer}} object, got {type(response).__name__}"


@dataclass(frozen=True)
class ResultFile:
    path: str
    model: str
    eval_type: str
    technique: str


def list_result_files(folder: str, models: set[str] | None = None, techniques: set[str] | None = None,
                      eval_types: tuple[str, ...] = EVAL_TYPES) -> list[ResultFile]:
    """The ``{folder}/{model}/{eval_type}/{technique}.json[.gz]`` files (sorted), optionally only
    some models / techniques (``None``: all)."""
    files = []
    for model in sorted(os.listdir(folder)):
        if models is not None and model not in models:
            continue
        for eval_type in eval_types:
            sub = os.path.join(folder, model, eval_type)
            if not os.path.isdir(sub):
                continue
            for name in sorted(os.listdir(sub)):
                if not name.endswith((".json.gz", ".json")):
                    continue
                technique = name[: -len(".json.gz")] if name.endswith(".gz") else name[: -len(".json")]
                if techniques is None or technique in techniques:
                    files.append(ResultFile(os.path.join(sub, name), model, eval_type, technique))
    return files


def check_results_root(root: str) -> None:
    """FileNotFoundError / NotADirectoryError unless ``root`` is a directory (a file was reported
    as a directory that "does not exist")."""
    if os.path.isdir(root):
        return
    if os.path.exists(root):
        raise NotADirectoryError(f"results directory {root!r} is not a directory (a results tree holds "
                                 "{model}/{eval_type}/{technique}.json.gz; one file: load_select_file)")
    raise FileNotFoundError(f"results directory {root!r} does not exist")


def load_results_tree(root: str | os.PathLike, *, models: Iterable[str] | None = None,
                      techniques: Iterable[str] | None = None, eval_types: Iterable[str] = EVAL_TYPES,
                      on_error: str = "raise", progress: bool = False) -> LoadReport:
    """Every ``{root}/{model}/{eval_type}/{technique}.json[.gz]`` file under ``root``."""
    _check_on_error(on_error)
    root = os.fspath(root)
    check_results_root(root)
    models, techniques = names_arg(models, "models"), names_arg(techniques, "techniques")
    wanted_types = eval_types_arg(eval_types)
    files = [(f.path, f.model, f.eval_type, f.technique)
             for f in list_result_files(root, set(models) if models else None,
                                        set(techniques) if techniques else None, wanted_types)]
    if not files:
        raise ResultsError(f"{root}: no results files found under {{model}}/{{eval_type}}/{{technique}}.json.gz "
                           "(a folder of experiments: rapidscore.abstention.find_experiments)")
    report = LoadReport()
    iterator = files
    if progress:
        from rapidscore.common.progress import progress_bar

        iterator = progress_bar(files, desc="loading results", unit="file")
    for path, model, eval_type, technique in iterator:
        load_select_file(path, model=model, technique=technique, eval_type=eval_type, on_error=on_error,
                         report=report)
    return report


def load_flat_table(table, *, on_error: str = "raise") -> LoadReport:
    """Records from a flat table: a path (``.jsonl``; ``.csv``, ``.tsv``, a ``.json`` array or
    ``.parquet``, read by the one input reader; ``.gz`` too), a pandas DataFrame or a list of
    dicts, with columns ``model, technique, eval_type, seed, concept, question, response``."""
    _check_on_error(on_error)
    source = "<table>"
    rows: list[dict | None]  # None: a line that was skipped as invalid JSON
    if isinstance(table, (str, os.PathLike)):
        source = os.fspath(table)
        fmt = readers.detect_format(source, default="jsonl")
        if fmt not in ("jsonl", "txt"):
            rows = [row for row, _where in readers.iter_rows(source, fmt)]
            start = 2 if fmt in ("csv", "tsv") else 1  # a CSV's first row is its line 2
        else:  # JSONL (any other extension too), read here: on_error="skip" passes over a bad line
            rows, start = [], 1
            with closing(iter_lines(source)) as handle:
                for line_no, line in enumerate(handle, start=1):
                    if not line.strip():
                        continue
                    try:
                        rows.append(json.loads(line))
                    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
                        if on_error == "skip":
                            rows.append(None)
                            continue
                        if isinstance(exc, ValueError) and not isinstance(exc, json.JSONDecodeError):
                            # an integer over Python's digit limit: was a bare ValueError naming no file
                            digits = readers.digits_error(exc, f"{source}:{line_no}")
                            if digits is not None:
                                raise ResultsError(str(digits)) from None
                        problem = "JSON nested too deeply to read" if isinstance(exc, RecursionError) else exc
                        raise ResultsError(f"{source}: line {line_no}: invalid JSON: {problem}") from None
    elif hasattr(table, "to_dict") and hasattr(table, "columns"):
        rows, start = table.to_dict(orient="records"), 0
    else:
        rows, start = list(table), 0
    report = LoadReport(files=1)
    for i, row in enumerate(rows, start=start):
        where = f"{source}: row {i}"
        if not isinstance(row, Mapping):
            if on_error == "skip":
                report.skip("malformed record")
                continue
            raise ResultsError(f"{where}: not an object/row")
        missing = [c for c in FLAT_COLUMNS if c not in row or row[c] is None or row[c] == ""]
        if "question" in missing and "response" not in missing:
            missing.remove("question")  # the question text is informative only
        if missing:
            if on_error == "skip":
                report.skip(f"missing {missing[0]}")
                continue
            raise ResultsError(f"{where}: missing key(s) {missing}")
        response = row["response"]
        if isinstance(response, Mapping):
            ok = isinstance(response.get("answer"), str)
        else:
            ok = isinstance(response, str)
        if not ok:
            if on_error == "skip":
                report.skip("malformed record")
                continue
            raise ResultsError(f"{where}: key 'response' must be a str or a {{complete, answer}} object")
        relation = row.get("relation")
        report.records.append(Record(str(row["model"]), str(row["technique"]), str(row["eval_type"]),
                                     str(row["seed"]), str(row["concept"]), response,
                                     relation if relation not in (None, "") else None,
                                     None if row.get("id") in (None, "") else str(row["id"]), row.get("question")))
    return report
