"""One reader for every input file, used by the batch commands and the streaming mode alike.

Formats, from the extension (``.gz`` of each, except Parquet, decided by the suffix before it):

- ``txt`` (any other extension): one text per line, stripped (as bert-score's CLI reads its
  files); blank lines stay, as empty strings. A row is ``{"text": line}``.
- ``jsonl``: one JSON object per non-blank line.
- ``json``: one document read whole, an array of objects (rows) or of strings (rows ``{"text": string}``).
- ``csv``, ``tsv``: a header row, then one row per record (quoted fields may span lines).
- ``parquet``: read lazily in record batches (pyarrow).

``-`` is stdin (JSONL unless a format is given; Parquet and JSON from stdin are buffered). The
column readers ignore the column name for plain texts (txt, a JSON array of strings): such a file
has one column. Errors are ValueError ``path:line: message`` (``path: row N: message`` for
Parquet and JSON arrays, whose rows have no line of their own) naming the file and the line: a
bad JSON line, a missing column (with the columns there are), bytes that are not UTF-8, a
truncated .gz, a file shorter than those read beside it.

Bounds (issue 36): reading holds at most one line or record of a file at a time, and a whole
document (a ``.json`` file, an abstention results file) up to a size, so that a small ``.gz``
holding gigabytes without a newline is an error naming the file, never an out-of-memory:

- a line, a CSV record (quoted fields may span lines) or a CSV field: at most
  :func:`max_record_bytes` (default 256 MiB; ``$RAPIDSCORE_MAX_RECORD_BYTES``, the
  ``--max-record-bytes`` option of every command, :func:`set_max_record_bytes`). The line is read
  with a size limit (``readline``), never read whole and then checked.
- a whole document: at most :func:`max_document_bytes` (default 2 GiB, or the record bound when
  that is larger; ``$RAPIDSCORE_MAX_DOCUMENT_BYTES``, :func:`set_max_document_bytes`),
  decompressed in pieces up to the bound.

Imports only the standard library at module level: the parsers of every command use it.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import json
import os
import sys
import zlib
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from contextlib import closing
from typing import Any

from rapidscore.common.input_files import (
    STDIN,
    check_input_file,
    display_name,
    load_json,
    parse_json,
    parse_json_text,
    read_bytes,
    read_text,
)
from rapidscore.common.read_bounds import (
    DEFAULT_MAX_DOCUMENT_BYTES,
    DEFAULT_MAX_RECORD_BYTES,
    MAX_DOCUMENT_ENV,
    MAX_RECORD_ENV,
    RAISE_RECORD_HINT,
    RecordTooLongError,
    digits_error,
    format_size,
    line_too_long,
    max_document_bytes,
    max_record_bytes,
    parse_size,
    set_csv_field_limit,
    set_max_document_bytes,
    set_max_record_bytes,
)

__all__ = ["FORMATS", "STDIN", "TextRow", "detect_format", "check_input_file", "open_binary", "iter_lines",
           "decoded_lines", "load_json", "read_bytes", "read_text", "parse_json", "jsonl_objects", "csv_rows",
           "import_parquet", "iter_rows", "iter_column", "read_column", "read_texts", "read_records", "text_value",
           "cell_texts", "row_items", "parallel_items", "zip_checked", "count_rows", "parse_size",
           "max_record_bytes", "set_max_record_bytes", "max_document_bytes", "set_max_document_bytes",
           "line_too_long", "RecordTooLongError", "digits_error", "DEFAULT_MAX_RECORD_BYTES",
           "DEFAULT_MAX_DOCUMENT_BYTES", "MAX_RECORD_ENV", "MAX_DOCUMENT_ENV"]

FORMATS = ("txt", "jsonl", "json", "csv", "tsv", "parquet")
_EXTENSIONS = {".txt": "txt", ".jsonl": "jsonl", ".json": "json", ".csv": "csv", ".tsv": "tsv", ".parquet": "parquet"}
_DELIMITERS = {"csv": ",", "tsv": "\t"}


def detect_format(path: str | os.PathLike, default: str = "txt", given: str | None = None) -> str:
    """The format of an input: ``given`` when there is one; ``"jsonl"`` for stdin (``-``);
    else from the extension, ``.gz`` ignored (``a.tsv.gz`` is ``"tsv"``); ``default`` for any
    other extension. A ``.parquet.gz`` is refused (Parquet compresses inside)."""
    if given is not None:
        if given not in FORMATS:
            raise ValueError(f"input format must be one of {', '.join(FORMATS)}, got {given!r}")
        return given
    name = os.fspath(path)
    if name == STDIN:
        return "jsonl"
    name = name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
        if name.endswith(".parquet"):
            raise ValueError(f"{os.fspath(path)}: Parquet files are compressed inside; give the .parquet file")
    return _EXTENSIONS.get(os.path.splitext(name)[1], default)


@contextlib.contextmanager
def open_binary(path: str) -> Iterator[Any]:
    """A binary stream of the input's bytes: stdin's buffer for ``-``, gunzipped when the name
    ends in .gz. FileNotFoundError / IsADirectoryError naming the path."""
    if path == STDIN:
        yield sys.stdin.buffer
        return
    check_input_file(path)
    opener: Callable[..., Any] = gzip.open if path.lower().endswith(".gz") else open
    with opener(path, "rb") as handle:
        yield handle


def iter_lines(path: str, encoding: str = "utf-8") -> Generator[str, None, None]:
    """The lines of a text file (gzipped when it ends in .gz; ``-``: stdin), line endings kept,
    decoded one by one so that a decoding error names its line: ValueError ``path:line: ...`` for
    bytes that are not UTF-8 and for a truncated or corrupt .gz (the lines before it are read
    normally)."""
    with open_binary(path) as handle:
        yield from decoded_lines(handle, display_name(path), encoding)


def decoded_lines(handle: Any, name: str, encoding: str = "utf-8") -> Generator[str, None, None]:
    """The lines of a binary stream (a file, a gzip file, stdin's buffer), decoded one by one;
    errors are ValueErrors naming ``name:line``, as :func:`iter_lines` describes. A line longer
    than :func:`max_record_bytes` (its line ending not counted) is a ValueError too: it is read
    with that size limit, so no more than the bound is ever held."""
    limit = max_record_bytes()
    number = 0
    while True:
        try:
            raw = handle.readline(limit + 2)  # + "\r\n"
        except (EOFError, OSError, zlib.error) as exc:
            raise ValueError(f"{name}:{number + 1}: cannot read the compressed data (truncated or corrupt "
                             f"file?): {exc}") from None
        if not raw:
            return
        number += 1
        if len(raw) > limit and len(raw) - (2 if raw.endswith(b"\r\n") else raw.endswith(b"\n")) > limit:
            raise line_too_long(f"{name}:{number}", limit)
        try:
            line = raw.decode(encoding)
        except UnicodeDecodeError as exc:
            raise ValueError(f"{name}:{number}: not valid {encoding.upper().replace('-SIG', '')} text: byte "
                             f"0x{raw[exc.start]:02x} at column {exc.start + 1} (convert the file to UTF-8, "
                             "e.g. iconv -f latin1 -t utf-8)") from None
        if number == 1 and encoding == "utf-8":
            line = line.removeprefix("\ufeff")  # a BOM is not text
        yield line


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
        except ValueError as exc:  # an integer over Python's digit limit named neither
            raise digits_error(exc, where) or ValueError(f"{where}: not valid JSON: {exc}") from None
        if not isinstance(item, dict):
            raise ValueError(f"{where}: each line must be a JSON object, got {type(item).__name__}")
        yield item, where


class TextRow(dict):
    """A row of plain texts (a txt line, a string of a JSON array): ``{"text": text}``. Such a
    file has one column: the column readers ignore a column name given for it."""


def csv_rows(lines: Iterable[str], name: str, delimiter: str = ",",
             check_columns: Callable[[list[str], str], None] | None = None) -> Iterator[tuple[dict, str]]:
    """``(row, "name:line")`` of each record of CSV text (a header row first), ``line`` the last
    physical line of the record. ``check_columns(header, "name:1")`` is called before the first
    row. A record (quoted fields may span lines) or a field over :func:`max_record_bytes`
    characters, and malformed CSV, are ValueErrors naming the file and the line."""
    limit = max_record_bytes()
    set_csv_field_limit(limit)
    size = last = 0  # characters of the record being read; the last line read
    first = 1  # the record's first line

    def counted() -> Iterator[str]:
        nonlocal size, last  # closure cells: a third of the cost of a list's items, per line
        for last, line in enumerate(lines, 1):
            size += len(line)
            if size > limit:  # a quoted field left open, or many fields over many lines
                raise RecordTooLongError(f"{name}:{first}: CSV record longer than {format_size(limit)} (lines "
                                 f"{first}-{last}; the bound on one line or record; {RAISE_RECORD_HINT})")
            yield line

    reader = csv.DictReader(counted(), delimiter=delimiter)
    try:
        header = reader.fieldnames
        if check_columns is not None:
            check_columns(list(header or []), f"{name}:1")
        size, first = 0, reader.line_num + 1
        for row in reader:
            # line_num is the last physical line of the row (quoted fields may span lines)
            yield row, f"{name}:{reader.line_num}"
            size, first = 0, reader.line_num + 1
    except csv.Error as exc:  # was "(unexpected ...)", naming no file
        problem = str(exc)
        if problem.startswith("new-line character seen in unquoted field"):  # csv's hint is about open()
            problem = "a carriage return (\\r) inside an unquoted field: quote the field, or end lines with \\n"
        raise ValueError(f"{name}:{last}: not valid CSV: {problem}") from None


def _json_array_rows(path: str) -> Iterator[tuple[dict, str]]:
    name = display_name(path)
    text = read_text(path, "JSON")
    if not text.strip():
        return  # an empty file holds no rows, as an empty JSONL or text file
    document = parse_json_text(text, name, hint=" (one JSON object per line is JSONL: name the file .jsonl "
                                                 "or give the jsonl format)")
    if not isinstance(document, list):
        raise ValueError(f"{name}: a JSON input must hold a top-level array of rows (objects) or of texts "
                         f"(strings), got {type(document).__name__} (pandas: to_json(orient='records'))")
    kind = None
    for number, item in enumerate(document, 1):
        where = f"{name}: row {number}"
        if not isinstance(item, (dict, str)):
            raise ValueError(f"{where}: each item of the JSON array must be an object (a row) or a string "
                             f"(a text), got {type(item).__name__}")
        if kind is None:
            kind = type(item)
        elif type(item) is not kind:
            raise ValueError(f"{where}: the JSON array mixes rows (objects) and texts (strings)")
        yield (TextRow(text=item) if isinstance(item, str) else item), where


def import_parquet(path: str) -> Any:
    """``pyarrow.parquet``; ImportError naming ``path`` (the file that needs it) when pyarrow is missing."""
    try:
        import pyarrow.parquet as parquet
    except ImportError as exc:  # named the package but not the file that needed it
        raise ImportError(f"{path}: Parquet files need pyarrow (pip install pyarrow), or use JSONL or CSV") from exc
    return parquet


def _not_parquet(name: str, exc: Exception, after: int | None = None) -> ValueError:
    where = "" if after is None else f" (after row {after})"
    return ValueError(f"{name}: not a readable Parquet file{where}: {exc} (expected Parquet: the magic bytes PAR1 "
                      "at its start and end, and a footer with its schema; truncated, or another format?)")


def _open_parquet(path: str) -> Any:
    """``pyarrow.parquet.ParquetFile`` of ``path`` (``-``: stdin, buffered: it needs to seek); a
    file that is not Parquet (pyarrow's "magic bytes not found", naming no file) is a ValueError
    naming it."""
    name = display_name(path)
    parquet = import_parquet(name)
    check_input_file(path)
    from pyarrow.lib import ArrowException

    source: Any = io.BytesIO(sys.stdin.buffer.read()) if path == STDIN else path
    try:
        table = parquet.ParquetFile(source)
        table.schema_arrow  # noqa: B018 - the footer's schema is decoded here, errors named here too
    except (ArrowException, OSError) as exc:  # ArrowInvalid is a ValueError, ArrowIOError an OSError
        raise _not_parquet(name, exc) from None
    return table


def _parquet_rows(path: str, columns: Sequence[str] | None,
                  check_columns: Callable[[list[str], str], None] | None) -> Iterator[tuple[dict, str]]:
    name = display_name(path)
    table = _open_parquet(path)  # first: without pyarrow, the ImportError naming the file
    from pyarrow.lib import ArrowException

    if check_columns is not None:
        check_columns(list(table.schema_arrow.names), name)
    number = 0
    batches = table.iter_batches(batch_size=4096, columns=list(columns) if columns is not None else None)
    while True:
        try:
            batch = next(batches, None)
        except (ArrowException, OSError) as exc:  # a corrupt page or a column chunk cut short
            raise _not_parquet(name, exc, number) from None
        if batch is None:
            return
        for row in batch.to_pylist():
            number += 1
            yield row, f"{name}: row {number}"


def _plain_lines(path: str) -> Iterator[tuple[str, str]]:
    """``(location, stripped line)`` of a text file: the rows of txt (the column readers take
    them without a row dict per line, twice as fast)."""
    name = display_name(path)
    with closing(iter_lines(path)) as lines:
        for number, line in enumerate(lines, 1):
            yield f"{name}:{number}", line.strip()


def iter_rows(path: str | os.PathLike, fmt: str | None = None, *, columns: Sequence[str] | None = None,
              check_columns: Callable[[list[str], str], None] | None = None) -> Iterator[tuple[dict, str]]:
    """``(row, location)`` for each row of ``path`` (``-`` = stdin), read lazily; ``fmt``: the
    format (default: :func:`detect_format`). A row is a dict of column values (a :class:`TextRow`
    for plain texts). ``columns``: the only columns needed (Parquet reads no other).
    ``check_columns(columns, location)``: called before the first row with the header of a CSV/TSV
    file (location ``path:1``) or the schema of a Parquet file, so that a missing column is an
    error even in a file without rows. Errors name ``path:line`` (``path: row N``)."""
    path = os.fspath(path)
    fmt = detect_format(path, given=fmt)
    name = display_name(path)
    if fmt == "parquet":
        yield from _parquet_rows(path, columns, check_columns)
        return
    if fmt == "txt":
        for where, text in _plain_lines(path):
            yield TextRow(text=text), where
        return
    if fmt == "json":  # one document, bounded as a whole (minified JSON is one long line)
        yield from _json_array_rows(path)
        return
    with closing(iter_lines(path)) as lines:
        if fmt == "jsonl":
            yield from jsonl_objects(lines, name)
        else:
            yield from csv_rows(lines, name, _DELIMITERS[fmt], check_columns)


def _column_needed(where: str, what: str, columns: Sequence[str] | None = None) -> ValueError:
    """One message on every route for a table read without its column name (``--column``/``column=``)."""
    known = f"; columns: {list(columns)}" if columns is not None else ""
    return ValueError(f"{where}: {what} needs a column name: give --column KEY (column= in Python), the key holding "
                      f"the values{known}")


def _pick_column(where: str, column: str | None, columns: list[str], kind: str) -> str:
    if column is None:
        if len(columns) == 1:
            return columns[0]  # a one-column table needs no column name
        raise _column_needed(where, f"{kind} input", columns)
    if column not in columns:
        raise ValueError(f"{where}: no column {column!r} (columns: {columns})")
    return column


def iter_column(path: str | os.PathLike, column: str | None = None, fmt: str | None = None,
                ) -> Iterator[tuple[str, Any]]:
    """``(location, value)`` of each item of one column; see :func:`read_column`."""
    path = os.fspath(path)
    fmt = detect_format(path, given=fmt)
    if fmt == "txt":
        yield from _plain_lines(path)
        return
    if fmt == "jsonl" and column is None:  # before reading: a JSONL file has no plain texts
        raise _column_needed(display_name(path), "JSONL input")
    picked = [column]

    def check_header(columns: list[str], where: str) -> None:  # CSV/TSV header, Parquet schema
        picked[0] = _pick_column(where, column, columns, "Parquet" if fmt == "parquet" else fmt.upper())

    check = check_header if fmt in ("csv", "tsv", "parquet") else None
    # Parquet reads the one column (known once the schema is checked, hence a column of None: all)
    needed = [column] if fmt == "parquet" and column is not None else None
    for row, where in iter_rows(path, fmt, columns=needed, check_columns=check):
        if isinstance(row, TextRow):
            yield where, row["text"]
            continue
        key = picked[0]
        if check is not None:
            value = row.get(key)
            if value is None and fmt != "parquet":  # a short row: csv fills missing cells with None
                raise ValueError(f"{where}: no value in column {key!r}")
            yield where, value
            continue
        if key is None:  # rows of a JSON array
            raise _column_needed(display_name(path), "JSON input of rows")
        if key not in row:
            raise ValueError(f"{where}: no key {key!r}")
        yield where, row[key]


def read_column(path: str | os.PathLike, column: str | None = None, fmt: str | None = None) -> list:
    """The values of one column of a file, in file order.

    Plain texts (txt, a JSON array of strings): one item per line or string (``column``
    ignored). JSONL, a JSON array of objects: ``record[column]`` of each record. CSV/TSV (header
    row) and Parquet: that column; ``column`` may be omitted when the table has one column.
    Values are kept as stored (a JSON or Parquet cell may hold a list, e.g. several references).
    """
    return [value for _where, value in iter_column(path, column, fmt)]


def text_value(value: Any, where: str) -> str:
    """``value`` when it is a string; ValueError ``where: expected a string, got ...`` otherwise."""
    if not isinstance(value, str):
        raise ValueError(f"{where}: expected a string, got {type(value).__name__}: {value!r:.80}")
    return value


def read_texts(path: str | os.PathLike, column: str | None = None, fmt: str | None = None) -> list[str]:
    """:func:`read_column` whose every value must be a string (ValueError ``path:line`` otherwise)."""
    return [text_value(value, where) for where, value in iter_column(path, column, fmt)]


def read_records(path: str | os.PathLike, default: str = "jsonl") -> Iterator[tuple[dict, str]]:
    """``(record, location)`` for each row of a JSONL, JSON, CSV/TSV or Parquet file (``default``:
    the format of any other extension, plain lines holding no records). JSONL lines must be
    objects; blank lines are skipped."""
    if default not in FORMATS or default == "txt":
        raise ValueError(f"read_records: default must be one of jsonl, json, csv, tsv, parquet, got {default!r}")
    fmt = detect_format(path, default=default)
    yield from iter_rows(path, default if fmt == "txt" else fmt)


def cell_texts(value: Any, where: str, column: str | None) -> list[str]:
    """The texts of one cell: a string, or a non-empty list of strings (several references)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        return list(value)
    what = "the value" if column is None else f"column {column!r}"
    raise ValueError(f"{where}: {what} must hold a string or a non-empty list of strings, got "
                     f"{type(value).__name__}: {value!r:.80}")


def row_items(path: str, fmt: str | None, text_column: str, reference_columns: Sequence[str],
              id_column: str | None = None) -> Iterator[tuple[str, list[str], Any]]:
    """``(text, [references], id)`` per row of a table: one text column, one or more reference
    columns (a JSON/JSONL/Parquet cell may hold a list of references). Errors name ``file:line``
    and the column."""
    for row, where in iter_rows(path, fmt):
        for column in (text_column, *reference_columns, *([id_column] if id_column else [])):
            if column not in row or row[column] is None:
                raise ValueError(f"{where}: no value in column {column!r} (columns: {list(row)})")
        text = row[text_column]
        if not isinstance(text, str):
            raise ValueError(f"{where}: column {text_column!r} must hold a string, got {type(text).__name__}: "
                             f"{text!r:.80}")
        refs = [ref for column in reference_columns for ref in cell_texts(row[column], where, column)]
        yield text, refs, row[id_column] if id_column else None


def zip_checked(readers: Sequence[Iterator], paths: Sequence[str]) -> Iterator[tuple]:
    """One item of each reader at a time, in lockstep; ValueError naming the file(s) that end
    before the others (``paths``: one per reader), with the rows read from them."""
    sentinel = object()
    count = 0
    while True:
        items = [next(reader, sentinel) for reader in readers]
        done = [item is sentinel for item in items]
        if all(done):
            return
        if any(done):
            short = [display_name(path) for path, ended in zip(paths, done) if ended]
            longer = display_name(paths[done.index(False)])
            rows = "row" if count == 1 else "rows"
            raise ValueError(f"{', '.join(short)} ended after {count} {rows}, before {longer}: the files must have "
                             "the same number of rows")
        count += 1
        yield tuple(items)


def parallel_items(text_path: str, reference_paths: Sequence[str], text_column: str | None = None,
                   reference_column: str | None = None, fmt: str | None = None,
                   ) -> Iterator[tuple[str, list[str], str]]:
    """``(text, [references], location)`` per item of parallel files read in lockstep: the text
    (a string) of ``text_column`` in ``text_path``, and the references of ``reference_column`` in
    each reference file (a string, or a list of strings in a JSON/JSONL/Parquet cell; several
    files = several references per item). ``fmt``: the format of every file (default: each
    from its extension). Every file is checked to exist before any is read; a file that ends
    before the others is a ValueError naming it."""
    paths = [text_path, *reference_paths]
    for path in paths:
        check_input_file(path)
    columns = [iter_column(text_path, text_column, fmt),
               *(iter_column(path, reference_column, fmt) for path in reference_paths)]
    for (where, text), *references in zip_checked(columns, paths):
        text = text_value(text, where)  # checked first: a bad row names the text file
        refs = [ref for ref_where, value in references for ref in cell_texts(value, ref_where, reference_column)]
        yield text, refs, where


def count_rows(path: str, fmt: str | None = None) -> int | None:
    """Rows of a file for a progress bar's ETA (a fast pass: lines, or Parquet metadata); None for stdin."""
    fmt = detect_format(path, given=fmt)
    if path == STDIN or not os.path.isfile(path):
        return None
    if fmt == "parquet":
        return int(_open_parquet(path).metadata.num_rows)
    if fmt in ("csv", "tsv", "json"):  # quoted fields may span lines; a JSON array is one document
        return sum(1 for _ in iter_rows(path, fmt))
    with closing(iter_lines(path)) as lines:
        return sum(1 for line in lines if fmt == "txt" or line.strip())
