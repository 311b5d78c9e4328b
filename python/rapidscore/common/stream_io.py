"""The streaming command line: rows in from a file or stdin, results out as they come, resumable.

Input: txt (one item per line), JSONL, JSON (an array), CSV/TSV or Parquet, gzipped or not, read
by the same reader as the batch commands (:mod:`rapidscore.common.readers`), from a file or ``-``
(stdin; Parquet and JSON from stdin are buffered). Output: JSONL, CSV or Parquet (``-``: stdout,
JSONL or CSV), one row per input row in input order, written chunk by chunk.

Resuming: rows are written to ``OUTPUT.partial``, and beside it a state file
``OUTPUT.resume.json`` records, after every chunk is on disk (flushed and fsync'd), the rows
written, the partial file's size in bytes, a SHA-256 of the input rows they came from and the
run's settings with its fingerprint (``common/outputs.py``: options, settings files' contents,
models). ``--resume`` truncates the partial file to the last recorded state (a torn last line, or
rows written after the last record, go), re-reads that many input rows and checks their hash (the
input must be the same), checks the settings, and continues. Parquet output is written as atomic
part files under ``OUTPUT.parts/`` and joined at the end. The partial file becomes OUTPUT only
when the run succeeds: until then an earlier OUTPUT stays as it was.

Imports only the standard library at module level: the parsers of every command use it.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import hashlib
import io
import json
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from rapidscore.common.cli_options import positive_int
from rapidscore.common.outputs import (
    PARTIAL_SUFFIX,
    PARTS_SUFFIX,
    STATE_SUFFIX,
    commit_when_done,
    current_run,
    input_option,
    is_special_file,
    name_os_error,
    output_option,
)
from rapidscore.common.readers import FORMATS, count_rows, import_parquet, iter_rows, parallel_items, row_items
from rapidscore.errors import RapidscoreError

__all__ = ["INPUT_FORMATS", "OUTPUT_FORMATS", "add_stream_arguments", "iter_rows", "row_items", "file_items",
           "count_rows",
           "StreamWriter", "run_stream", "ResumeError"]

INPUT_FORMATS = FORMATS  # the formats of every reader, batch or streaming
OUTPUT_FORMATS = ("jsonl", "csv", "parquet")
# 2: the rows go to OUTPUT.partial, and the settings hold the run's fingerprint
STATE_VERSION = 2


class ResumeError(RapidscoreError, ValueError):
    """The output cannot be resumed (no state, other settings, other input)."""


def add_stream_arguments(parser: argparse.ArgumentParser, *, item: str = "pair") -> argparse._ArgumentGroup:
    """``--input``, ``--output`` and the options of the streaming mode."""
    group = parser.add_argument_group(
        "streaming (bounded memory: scores are written as they are computed)",
        f"--output FILE switches to streaming: each input {item} is scored in chunks and one row per "
        f"{item} is written in input order; with --resume a killed run continues where it stopped.")
    input_option(group.add_argument(
        "--input", "-i", default=None, metavar="FILE",
        help="one row per item: .jsonl/.json/.csv/.tsv/.parquet (columns below; .gz too) or '-' for stdin"))
    group.add_argument("--input-format", choices=INPUT_FORMATS, default=None,
                       help="format of --input (default: from the extension; jsonl for stdin)")
    output_option(group.add_argument(
        "--output", "-o", default=None, metavar="FILE",
        help="write scores to FILE (.jsonl, .csv or .parquet; '-' = stdout) as they are computed"), stream=True)
    group.add_argument("--output-format", choices=OUTPUT_FORMATS, default=None,
                       help="format of --output (default: from the extension; jsonl for stdout)")
    group.add_argument("--resume", action="store_true",
                       help="continue a partly written --output (checked against its input and settings)")
    group.add_argument("--id-column", default=None, help="copy this input column to the output rows")
    group.add_argument("--chunk-size", type=positive_int, default=None, metavar="N",
                       help="items per chunk at most (default: the metric's)")
    return group


# -- reading: the one reader of every command (common/readers.py) -------------------------------

def file_items(text_path: str, reference_paths: Sequence[str], text_column: str | None = None,
               reference_column: str | None = None) -> Iterator[tuple[str, list[str], Any]]:
    """``(text, [references], None)`` from parallel files read in lockstep, as the batch commands
    read them (:func:`rapidscore.common.readers.parallel_items`); the id of an item is None."""
    for text, references, _where in parallel_items(text_path, reference_paths, text_column, reference_column):
        yield text, references, None


# -- writing ----------------------------------------------------------------------------------

def output_format(path: str, given: str | None) -> str:
    if given:
        return given
    if path == "-" or is_special_file(path):  # standard output, /dev/null, a FIFO
        return "jsonl"
    fmt = {".jsonl": "jsonl", ".json": "jsonl", ".csv": "csv", ".parquet": "parquet"}.get(
        os.path.splitext(path.lower())[1])
    if fmt is None:
        raise ValueError(f"--output {path}: give a .jsonl, .csv or .parquet file, or --output-format")
    return fmt


def _input_digest(digest, item: Sequence) -> None:
    # the scored part of an item (text and references; not a copied id column)
    # surrogatepass: a lone surrogate a JSON escape put in the input is hashed, not an encoding error
    # (valid text gives the same bytes either way, so earlier states still match)
    digest.update(json.dumps([item[0], list(item[1])], ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8", "surrogatepass"))
    digest.update(b"\n")


def _csv_text(rows: Iterable[Sequence]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue()


class StreamWriter:
    """Writes result rows chunk by chunk and records a resumable state after each chunk.

    A file output is written to ``OUTPUT.partial`` (Parquet: part files under ``OUTPUT.parts/``)
    and becomes OUTPUT when the run succeeds (``common/outputs.py``): an interrupted or failed
    run leaves an earlier OUTPUT as it was, and ``--resume`` continues the partial file. The
    state records the run's fingerprint (every option that changes a number, the content of its
    settings files, its models' digests); a resume under another one is refused, naming it.
    Standard output and special files (/dev/null, a FIFO) are written in place, without a state."""

    def __init__(self, path: str, fmt: str, columns: Sequence[str], settings: dict, *, resume: bool):
        self.path, self.fmt, self.columns = path, fmt, list(columns)
        run = current_run()
        # flat, so that a difference names the setting ("--idf-file sha256", "model all-MiniLM-L6-v2")
        settings = {**settings, **(run.fingerprint() if run is not None else {})}
        # as the state file holds them (tuples as lists), so that equal settings compare equal
        self.settings = json.loads(json.dumps(settings, default=str))
        self.to_stdout = path == "-"
        self.in_place = self.to_stdout or is_special_file(path)
        where = "standard output" if self.to_stdout else f"{path}, which is not a regular file,"
        if self.in_place and fmt == "parquet":
            raise ValueError(f"Parquet output needs a file: {where} cannot hold one; give --output FILE.parquet")
        if self.in_place and resume:
            raise ValueError(f"--resume needs an --output file: {where} keeps no resume state")
        if fmt == "parquet":
            import_parquet(path)  # before any input is read or scored
        self.state_path = f"{path}{STATE_SUFFIX}"
        self.partial_path = f"{path}{PARTIAL_SUFFIX}"
        self.parts_dir = f"{path}{PARTS_SUFFIX}"
        self.rows = 0
        self.digest = hashlib.sha256()
        self._handle: Any = None
        self._parts: list[str] = []
        self.resumed_rows = 0
        with self._named_errors():
            if resume:
                self._load_state()
            elif self.to_stdout:
                self._handle = sys.stdout
                if fmt == "csv":
                    self._csv_header()
            elif self.in_place:
                self._handle = open(path, "wb")  # noqa: SIM115 (closed by close())
                if fmt == "csv":
                    self._csv_header()
            else:
                self._start_fresh()

    @contextlib.contextmanager
    def _named_errors(self) -> Iterator[None]:
        """A full disk or another failed write names the file being written."""
        try:
            yield
        except OSError as exc:
            if exc.filename is None:
                name = self.path if self.in_place else (self.parts_dir if self.fmt == "parquet" else self.partial_path)
                raise name_os_error(exc, name) from None
            raise

    # state
    def _start_fresh(self) -> None:
        if self.fmt == "parquet":
            os.makedirs(self.parts_dir, exist_ok=True)
            for name in os.listdir(self.parts_dir):
                os.remove(os.path.join(self.parts_dir, name))
        else:
            self._handle = open(self.partial_path, "wb")  # noqa: SIM115 (closed by close())
            if self.fmt == "csv":
                self._csv_header()
        self._save_state()

    def _read_state(self) -> dict:
        if not os.path.isfile(self.state_path):
            raise ResumeError(f"--resume: no resume state {self.state_path} beside {self.path} (was it written by "
                              "a streaming run that did not finish?)")
        try:
            with open(self.state_path, encoding="utf-8") as handle:
                state = json.load(handle)
            if not isinstance(state, dict):
                raise ValueError(f"a JSON {type(state).__name__}, not an object")
        except (ValueError, UnicodeDecodeError) as exc:
            raise ResumeError(f"--resume: the resume state {self.state_path} is damaged ({exc}); run again without "
                              "--resume to start over") from None
        if state.get("version") != STATE_VERSION:
            raise ResumeError(f"--resume: {self.state_path} was written by another version of rapidscore (state "
                              f"version {state.get('version')!r}, this one reads {STATE_VERSION}); run again "
                              "without --resume to start over")
        return state

    def _load_state(self) -> None:
        state = self._read_state()
        if state.get("format") != self.fmt or state.get("columns") != self.columns:
            raise ResumeError(f"--resume: {self.path} was written in another format or with other columns")
        recorded = state.get("settings", {})
        if recorded != self.settings:
            changed = sorted(k for k in set(recorded) | set(self.settings) if recorded.get(k) != self.settings.get(k))
            details = "; ".join(f"{k}: {_shown(recorded.get(k))} then, {_shown(self.settings.get(k))} now"
                                for k in changed)
            raise ResumeError(f"--resume: {self.path} was written with other settings ({details}); resume with the "
                              "same settings, or run again without --resume")
        try:
            self.rows = self.resumed_rows = int(state["rows"])
            self.expected_digest = str(state["input_sha256"])
            recorded_bytes = int(state["bytes"])
            recorded_parts = [str(name) for name in state["parts"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise ResumeError(f"--resume: the resume state {self.state_path} is damaged (no valid {exc}); run "
                              "again without --resume to start over") from None
        if self.fmt == "parquet":
            self._parts = recorded_parts
            keep = set(self._parts)
            for name in os.listdir(self.parts_dir) if os.path.isdir(self.parts_dir) else ():
                if name not in keep:  # a part written after the last state: redo it
                    os.remove(os.path.join(self.parts_dir, name))
            missing = [name for name in self._parts if not os.path.isfile(os.path.join(self.parts_dir, name))]
            if missing:
                raise ResumeError(f"--resume: {self.parts_dir} lacks {missing[0]} (of {len(missing)} recorded parts)")
        else:
            if not os.path.isfile(self.partial_path):
                raise ResumeError(f"--resume: {self.partial_path}, the rows written so far, is gone")
            size = os.path.getsize(self.partial_path)
            if size < recorded_bytes:
                raise ResumeError(f"--resume: {self.partial_path} is shorter ({size} bytes) than its state says "
                                  f"({recorded_bytes})")
            self._handle = open(self.partial_path, "r+b")  # noqa: SIM115 (closed by close())
            # drop a torn last line and any rows written after the last recorded state
            self._handle.truncate(recorded_bytes)
            self._handle.seek(recorded_bytes)

    def verify_prefix(self, items: Iterator) -> None:
        """Hash the first ``resumed_rows`` input items (consuming them) against the state."""
        for _ in range(self.resumed_rows):
            try:
                item = next(items)
            except StopIteration:
                raise ResumeError(f"--resume: the input has fewer rows than the {self.resumed_rows} already "
                                  f"written to {self.path}") from None
            _input_digest(self.digest, item)
        if self.resumed_rows and self.digest.hexdigest() != self.expected_digest:
            raise ResumeError(f"--resume: the first {self.resumed_rows} input rows differ from those {self.path} "
                              "was computed from")

    def _save_state(self) -> None:
        if self.in_place:
            return
        state = {"version": STATE_VERSION, "format": self.fmt, "columns": self.columns, "settings": self.settings,
                 "rows": self.rows, "input_sha256": self.digest.hexdigest(),
                 "bytes": self._handle.tell() if self._handle is not None else 0, "parts": self._parts}
        tmp = f"{self.state_path}.tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as handle:
                json.dump(state, handle)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:
            raise name_os_error(exc, tmp) from None
        os.replace(tmp, self.state_path)

    # rows
    def _csv_header(self) -> None:
        self._emit(_csv_text([self.columns]))

    def _emit(self, text: str) -> None:
        if self.to_stdout:
            self._handle.write(text)
        else:  # bytes, so that tell() and truncate() count bytes
            self._handle.write(text.encode("utf-8"))

    def write(self, items: Sequence[Any], rows: Sequence[dict]) -> None:
        """Write one chunk: the result ``rows`` of input ``items`` (hashed for resuming)."""
        for item in items:
            _input_digest(self.digest, item)
        try:
            with self._named_errors():
                if self.fmt == "parquet":
                    self._write_part(rows)
                elif self.fmt == "jsonl":
                    self._emit("".join(json.dumps({c: row[c] for c in self.columns}, ensure_ascii=False) + "\n"
                                       for row in rows))
                else:
                    self._emit(_csv_text([[row[c] for c in self.columns] for row in rows]))
                self.rows += len(rows)
                if self._handle is not None:
                    self._handle.flush()
                    if not self.in_place:
                        os.fsync(self._handle.fileno())
                self._save_state()
        except UnicodeEncodeError as exc:
            raise ValueError(f"--output {self.path}: rows {self.rows}-{self.rows + len(rows) - 1} hold text that is "
                             f"not valid Unicode ({exc.object[exc.start:exc.end]!r}: {exc.reason}); clean the "
                             "input") from None

    def _write_part(self, rows: Sequence[dict]) -> None:
        import pyarrow as pa
        import pyarrow.parquet as parquet

        name = f"part-{len(self._parts):06d}.parquet"
        tmp = os.path.join(self.parts_dir, f".{name}.tmp")
        parquet.write_table(pa.Table.from_pylist(list(rows)).select(self.columns), tmp)
        os.replace(tmp, os.path.join(self.parts_dir, name))
        self._parts.append(name)

    def close(self) -> None:
        """Finish the output: the partial file (Parquet: the parts joined) becomes OUTPUT when the
        run succeeds, and the resume state goes then (a run that fails later keeps both)."""
        with self._named_errors():
            if self.fmt == "parquet":
                self._join_parts()
            elif self._handle is not None and not self.to_stdout:
                self._handle.close()
        if self.in_place:
            return
        commit_when_done(self.partial_path, self.path, keep_on_failure=True, after=self._remove_state)

    def _join_parts(self) -> None:
        import pyarrow.parquet as parquet

        writer = None
        for name in self._parts:
            table = parquet.read_table(os.path.join(self.parts_dir, name))
            writer = writer or parquet.ParquetWriter(self.partial_path, table.schema)
            writer.write_table(table)
        if writer is None:
            import pyarrow as pa

            parquet.write_table(pa.table({c: [] for c in self.columns}), self.partial_path)
        else:
            writer.close()

    def discard(self) -> None:
        """Remove the partial output and its state (a run that wrote no row)."""
        if self._handle is not None and not self.to_stdout:
            self._handle.close()
        if self.in_place:
            return
        with contextlib.suppress(OSError):
            if self.fmt != "parquet":
                os.remove(self.partial_path)
            self._remove_state()

    def _remove_state(self) -> None:
        if self.fmt == "parquet":
            for name in self._parts:
                os.remove(os.path.join(self.parts_dir, name))
            os.rmdir(self.parts_dir)
        if os.path.exists(self.state_path):
            os.remove(self.state_path)


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:16] + "..." + text[-8:]


# -- the loop ---------------------------------------------------------------------------------

class RowIds:
    """The id column's values of rows read ahead of their chunk's scores (``column`` None: no id
    column), handed back in order to the output rows. One per stream; not thread-safe."""

    def __init__(self, column: str | None):
        self.column = column
        self._pending: deque = deque()

    def strip(self, items: Iterable[tuple]) -> Iterator[tuple]:
        """``(..., row_id)`` items without their id, which is kept for :meth:`rows`."""
        for *fields, row_id in items:
            if self.column:
                self._pending.append(row_id)
            yield tuple(fields)

    def rows(self, first_index: int, values: Iterable[dict]) -> list[dict]:
        """Output rows: the input index, the values, and the id when there is an id column."""
        rows = []
        for index, value in enumerate(values, first_index):
            row = {"index": index, **value}
            if self.column:
                row["id"] = self._pending.popleft()
            rows.append(row)
        return rows


class _Progress:
    """Rows done, rate and ETA on stderr (tqdm): moved within a chunk (``advance``) and by the
    chunk's rows when they are written (``update``)."""

    def __init__(self, enabled: bool, total: int | None, initial: int, unit: str):
        self.bar = None
        self.in_chunk = 0  # rows of the chunk in flight already on the bar
        if enabled:
            from rapidscore.common.progress import progress_bar

            self.bar = progress_bar(total=total, initial=initial, unit=unit, desc="scoring", dynamic_ncols=True,
                                    smoothing=0.1)

    def advance(self, done: int) -> None:
        """``done`` rows of the chunk in flight are scored (not yet written)."""
        if self.bar is not None and done > self.in_chunk:
            self.bar.update(done - self.in_chunk)
            self.in_chunk = done

    def update(self, n: int) -> None:
        if self.bar is not None and n > self.in_chunk:
            self.bar.update(n - self.in_chunk)
        self.in_chunk = 0

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run_stream(*, items: Iterator, score_chunks: Callable[..., Iterator[tuple[list, list[dict]]]],
               output: str, output_fmt: str | None, columns: Sequence[str], settings: dict, resume: bool,
               progress: bool, total: int | None, unit: str = "pair", quiet: bool = False,
               chunk_progress: bool = False) -> int:
    """Score ``items`` with ``score_chunks(items, first_index)`` (``(items, rows)`` per chunk)
    into ``output``. Returns the number of rows in the finished output. ``chunk_progress``:
    ``score_chunks(items, first_index, advance)`` calls ``advance(rows done)`` within a chunk, so
    that the bar moves (with rate and ETA) before the chunk is written; ``advance`` is None when
    no bar is shown."""
    fmt = output_format(output, output_fmt)
    writer = StreamWriter(output, fmt, columns, settings, resume=resume)
    bar = _Progress(False, None, 0, unit)
    started, done_here = time.perf_counter(), 0
    try:
        writer.verify_prefix(items)
        bar = _Progress(progress, total, writer.rows, unit)
        # advance is None without a bar: nothing to follow within a chunk
        advance = bar.advance if bar.bar is not None else None
        chunks = score_chunks(items, writer.rows, advance) if chunk_progress else score_chunks(items, writer.rows)
        for chunk_items, rows in chunks:
            writer.write(chunk_items, rows)
            bar.update(len(rows))
            done_here += len(rows)
        writer.close()
    except BaseException:
        if writer.rows == 0:  # nothing worth resuming: no partial file or state left behind
            writer.discard()
        raise
    finally:
        bar.close()
    if not quiet and output != "-":
        seconds = time.perf_counter() - started
        rate = f", {done_here / seconds:.1f} {unit}s/s" if seconds > 0 and done_here else ""
        resumed = f" ({writer.resumed_rows} from the earlier run)" if writer.resumed_rows else ""
        print(f"wrote {writer.rows} rows to {output}{resumed}{rate}", file=sys.stderr)
    return writer.rows
