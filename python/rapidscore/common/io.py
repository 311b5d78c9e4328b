"""One reader for the files every command takes: a column of texts, or rows of records.

The format comes from the extension: ``.jsonl``, ``.csv``, ``.tsv``, ``.parquet``; anything else
is text, one item per line, stripped (as bert-score's CLI reads its files; blank lines stay, as
empty strings). Text formats may be gzipped (``.jsonl.gz``, ``.txt.gz``...). Errors are
ValueError ``path:line: message`` (``path: row N: message`` for Parquet, which has no lines).
"""

from __future__ import annotations

import csv
import gzip
import json
import os
import sys
import zlib
from collections.abc import Generator, Iterable, Iterator, Mapping
from contextlib import closing
from typing import Any

__all__ = ["FORMATS", "check_input_file", "check_outputs", "check_output_directory", "iter_lines", "load_json",
           "jsonl_objects", "detect_format", "iter_column", "read_column", "read_texts", "read_records"]

FORMATS = ("txt", "jsonl", "csv", "tsv", "parquet")
_EXTENSIONS = {".jsonl": "jsonl", ".csv": "csv", ".tsv": "tsv", ".parquet": "parquet", ".txt": "txt"}


def detect_format(path: str | os.PathLike, default: str = "txt") -> str:
    """``"txt"``, ``"jsonl"``, ``"csv"``, ``"tsv"`` or ``"parquet"`` from the extension (``.gz``
    ignored); ``default`` for any other extension."""
    name = os.fspath(path).lower()
    if name.endswith(".gz"):
        name = name[:-3]
        if name.endswith(".parquet"):
            raise ValueError(f"{os.fspath(path)}: Parquet files are compressed inside; give the .parquet file")
    return _EXTENSIONS.get(os.path.splitext(name)[1], default)


def check_input_file(path: str) -> None:
    """FileNotFoundError / IsADirectoryError with the path in words (not an errno dump)."""
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path} is a directory; expected a file")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such file: {path}")


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)  # the same inode: one path, a symlink or a hard link
    except OSError:  # one of them does not exist (yet): not the same file
        return False


def check_outputs(outputs: Mapping[str, str | os.PathLike | None],
                  inputs: Mapping[str, str | os.PathLike | Iterable[str | os.PathLike] | None]) -> None:
    """Refuse, before anything is opened for writing, an output file that is an input file by
    any name (the same path, a symlink or a hard link to it), or one file named by two outputs:
    opening it for writing would truncate the input before it is read, or one output would
    overwrite the other. ``outputs`` and ``inputs`` map the option that names each file
    (``"--output"``, ``"-r"``) to its path (or, for inputs, several paths); None and ``-``
    (stdin/stdout) are skipped. ValueError naming both options and the file."""
    def paths(value) -> list[str]:
        if value is None:
            return []
        if isinstance(value, (str, os.PathLike)):
            value = [value]
        return [os.fspath(v) for v in value if v is not None and os.fspath(v) != "-"]

    named_inputs = [(option, path) for option, value in inputs.items() for path in paths(value)]
    seen_outputs: list[tuple[str, str]] = []
    for option, value in outputs.items():
        for path in paths(value):
            for input_option, input_path in named_inputs:
                if _same_file(path, input_path):
                    how = f" (a link to {os.path.realpath(path)})" if os.path.islink(path) else ""
                    raise ValueError(f"{option} {path}{how} is the input file {input_option} {input_path}: writing "
                                     f"it would destroy the input; give another {option}")
            for other_option, other_path in seen_outputs:
                if os.path.realpath(path) == os.path.realpath(other_path) or _same_file(path, other_path):
                    raise ValueError(f"{option} {path} and {other_option} {other_path} are one file: give "
                                     "each output its own file")
            seen_outputs.append((option, path))


def check_output_directory(path: str | os.PathLike, option: str = "output") -> None:
    """An output file's directory must exist: a typo in it is an error, not a tree of new
    directories (FileNotFoundError / NotADirectoryError naming ``option``)."""
    parent = os.path.dirname(os.path.abspath(os.fspath(path)))
    if not os.path.exists(parent):
        raise FileNotFoundError(f"{option} {os.fspath(path)}: no such directory {parent} (it is not created)")
    if not os.path.isdir(parent):
        raise NotADirectoryError(f"{option} {os.fspath(path)}: {parent} is not a directory")


def iter_lines(path: str, encoding: str = "utf-8") -> Generator[str, None, None]:
    """The lines of a text file (gzipped when it ends in .gz), line endings kept, decoded one by
    one so that a decoding error names its line: ValueError ``path:line: ...`` for bytes that are
    not UTF-8 and for a truncated or corrupt .gz (the lines before it are read normally)."""
    check_input_file(path)
    opener = gzip.open if path.lower().endswith(".gz") else open
    with opener(path, "rb") as handle:
        yield from decoded_lines(handle, path, encoding)


def decoded_lines(handle: Any, name: str, encoding: str = "utf-8") -> Generator[str, None, None]:
    """The lines of a binary stream (a file, a gzip file, stdin's buffer), decoded one by one;
    errors are ValueErrors naming ``name:line``, as :func:`iter_lines` describes."""
    number = 0
    while True:
        try:
            raw = handle.readline()
        except (EOFError, OSError, zlib.error) as exc:
            raise ValueError(f"{name}:{number + 1}: cannot read the compressed data (truncated or corrupt "
                             f"file?): {exc}") from None
        if not raw:
            return
        number += 1
        try:
            line = raw.decode(encoding)
        except UnicodeDecodeError as exc:
            raise ValueError(f"{name}:{number}: not valid {encoding.upper().replace('-SIG', '')} text: byte "
                             f"0x{raw[exc.start]:02x} at column {exc.start + 1} (convert the file to UTF-8, "
                             "e.g. iconv -f latin1 -t utf-8)") from None
        if number == 1 and encoding == "utf-8":
            line = line.removeprefix("\ufeff")  # a BOM is not text
        yield line


def load_json(path: str | os.PathLike) -> Any:
    """One JSON document from a file (gzipped when it ends in .gz). Every failure is a ValueError
    naming the file and, where there is one, the line: bytes that are not UTF-8, a truncated .gz,
    invalid JSON, nesting deeper than Python's recursion limit."""
    path = os.fspath(path)
    with closing(iter_lines(path)) as lines:
        text = "".join(lines)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}:{exc.lineno}: invalid JSON (truncated file?): {exc.msg} "
                         f"at column {exc.colno}") from None
    except RecursionError:
        raise ValueError(f"{path}: JSON nested too deeply to read (over ~{sys.getrecursionlimit()} levels)") from None


def _jsonl_objects(path: str) -> Iterator[tuple[dict, str]]:
    with closing(iter_lines(path)) as handle:
        yield from jsonl_objects(handle, path)


def jsonl_objects(lines: Iterable[str], name: str) -> Iterator[tuple[dict, str]]:
    """``(object, "name:line")`` for each non-blank line of JSONL text; errors name the line."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{name}:{number}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where}: not valid JSON: {exc.msg}") from None
        except RecursionError:  # was raised bare, naming neither the file nor the line
            raise ValueError(f"{where}: JSON nested too deeply to read (over ~{sys.getrecursionlimit()} "
                             "levels)") from None
        if not isinstance(item, dict):
            raise ValueError(f"{where}: each line must be a JSON object, got {type(item).__name__}")
        yield item, where


def _delimited_rows(path: str, delimiter: str) -> tuple[list[str], Generator[tuple[dict, str], None, None]]:
    # the BOM of spreadsheet exports is not part of the first column's name (iter_lines drops it)
    lines = iter_lines(path)
    handle = closing(lines)
    reader = csv.DictReader(lines, delimiter=delimiter)
    columns = list(reader.fieldnames or [])

    def rows():
        with handle:
            for row in reader:
                # line_num is the last physical line of the row (quoted fields may span lines)
                yield row, f"{path}:{reader.line_num}"

    return columns, rows()


def import_parquet(path: str):
    """``pyarrow.parquet``; ImportError naming ``path`` (the file that needs it) when pyarrow is missing."""
    try:
        import pyarrow.parquet as parquet
    except ImportError as exc:  # named the package but not the file that needed it
        raise ImportError(f"{path}: Parquet files need pyarrow (pip install pyarrow), or use JSONL or CSV") from exc
    return parquet


def _parquet_columns(path: str) -> list[str]:
    check_input_file(path)
    return list(import_parquet(path).read_schema(path).names)


def _pick_column(path: str, column: str | None, columns: list[str], kind: str) -> str:
    if column is None:
        if len(columns) == 1:
            return columns[0]  # a one-column table needs no column name
        raise ValueError(f"{path}: {kind} input needs a column name (columns: {columns})")
    if column not in columns:
        raise ValueError(f"{path}: no column {column!r} (columns: {columns})")
    return column


def iter_column(path: str | os.PathLike, column: str | None = None) -> Iterator[tuple[str, Any]]:
    """``(location, value)`` of each item of one column; see :func:`read_column`."""
    path = os.fspath(path)
    fmt = detect_format(path)
    if fmt == "txt":
        with closing(iter_lines(path)) as handle:
            for number, line in enumerate(handle, 1):
                yield f"{path}:{number}", line.strip()
    elif fmt == "jsonl":
        if column is None:
            raise ValueError(f"{path}: JSONL input needs a column name (the key holding the values)")
        for item, where in _jsonl_objects(path):
            if column not in item:
                raise ValueError(f"{where}: no key {column!r}")
            yield where, item[column]
    elif fmt in ("csv", "tsv"):
        columns, rows = _delimited_rows(path, "," if fmt == "csv" else "\t")
        try:
            column = _pick_column(f"{path}:1", column, columns, fmt.upper())
        except ValueError:
            rows.close()
            raise
        for row, where in rows:
            value = row.get(column)
            if value is None:  # a short row: csv fills missing cells with None
                raise ValueError(f"{where}: no value in column {column!r}")
            yield where, value
    else:
        column = _pick_column(path, column, _parquet_columns(path), "Parquet")
        values = import_parquet(path).read_table(path, columns=[column]).column(column).to_pylist()
        for number, value in enumerate(values, 1):
            yield f"{path}: row {number}", value


def read_column(path: str | os.PathLike, column: str | None = None) -> list:
    """The values of one column of a file, in file order.

    Text files: one stripped line per item (``column`` ignored). JSONL: ``record[column]`` of each
    non-blank line. CSV/TSV (header row) and Parquet: that column; ``column`` may be omitted
    when the table has one column. Values are kept as stored (a JSONL or Parquet cell may hold a
    list, e.g. several references).
    """
    return [value for _where, value in iter_column(path, column)]


def read_texts(path: str | os.PathLike, column: str | None = None) -> list[str]:
    """:func:`read_column` whose every value must be a string (ValueError ``path:line`` otherwise)."""
    texts = []
    for where, value in iter_column(path, column):
        if not isinstance(value, str):
            raise ValueError(f"{where}: expected a string, got {type(value).__name__}: {value!r:.80}")
        texts.append(value)
    return texts


def read_records(path: str | os.PathLike, default: str = "jsonl") -> Iterator[tuple[dict, str]]:
    """``(record, location)`` for each row of a JSONL, CSV/TSV or Parquet file (``default``: the
    format of any other extension). JSONL lines must be objects; blank lines are skipped."""
    path = os.fspath(path)
    fmt = detect_format(path, default=default)
    if fmt == "txt":  # plain lines cannot hold records: a .txt file of records is read as the default
        fmt = default
    if fmt == "jsonl":
        yield from _jsonl_objects(path)
    elif fmt in ("csv", "tsv"):
        _columns, rows = _delimited_rows(path, "," if fmt == "csv" else "\t")
        yield from rows
    elif fmt == "parquet":
        _parquet_columns(path)  # the same FileNotFoundError as the other formats
        for number, row in enumerate(import_parquet(path).read_table(path).to_pylist(), 1):
            yield row, f"{path}: row {number}"
    else:
        raise ValueError(f"read_records: default must be one of jsonl, csv, tsv, parquet, got {default!r}")
