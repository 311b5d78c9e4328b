"""Writing a stream's rows chunk by chunk, resumably: the partial file, its state, Parquet parts.

Rows are written to ``OUTPUT.partial``, and beside it a state file ``OUTPUT.resume.json``
records, after every chunk is on disk (flushed and fsync'd), the rows written, the partial file's
size in bytes and a running SHA-256 of those bytes, a SHA-256 of the input rows they came from
and the run's settings with its fingerprint (``common/file_run.py``: options, settings files'
contents, models). ``--resume`` checks every field of the state, the settings (a model by its
content, not its name; ``common/resume_settings.py`` names what differs), the partial file's
recorded bytes against their digest (on a row boundary, holding the recorded rows), truncates
what follows (a torn last line, rows written after the last record), re-reads that many input
rows and checks their hash, and continues. Parquet output is written as atomic part files under
``OUTPUT.parts/`` (each part's SHA-256 in the state) and joined at the end. The partial file
becomes OUTPUT only when the run succeeds: until then an earlier OUTPUT stays as it was.

Imports only the standard library at module level: the parsers of every command use it.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import os
import re
import sys
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from typing import Any

from rapidscore.common.file_run import current_run, file_sha256
from rapidscore.common.output_checks import (
    PARTIAL_SUFFIX,
    PARTS_SUFFIX,
    STATE_SUFFIX,
    STATE_TMP_SUFFIX,
    is_special_file,
)
from rapidscore.common.outputs import commit_when_done, name_os_error
from rapidscore.common.readers import import_parquet
from rapidscore.common.resume_settings import model_spelling_keys, settings_difference, settings_meaning, shown_value
from rapidscore.common.stream import item_sha256
from rapidscore.errors import ResumeError

__all__ = ["StreamWriter", "output_format", "OUTPUT_FORMATS", "STATE_VERSION"]

OUTPUT_FORMATS = ("jsonl", "csv", "parquet")
# 2: the rows go to OUTPUT.partial, and the settings hold the run's fingerprint
# 3: the SHA-256 of the rows written (of each Parquet part), checked before a resume continues
STATE_VERSION = 3
_SHA256 = re.compile("[0-9a-f]{64}")
_PART_NAME = re.compile(r"part-[0-9]{6}\.parquet")


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
    # the scored part of an item (text and references; not a copied id column), by its own digest:
    # a stream that holds only part of a long text (common.stream.HeldItem) carries the whole one's
    digest.update(item_sha256(item))


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
    settings files, its models' digests) and a SHA-256 of the rows written (of each part for
    Parquet); a resume under another fingerprint, or over rows that are not those the state
    records, is refused, naming what differs. Standard output and special files (/dev/null, a
    FIFO) are written in place, without a state."""

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
        self.state_tmp_path = f"{path}{STATE_TMP_SUFFIX}"
        self.partial_path = f"{path}{PARTIAL_SUFFIX}"
        self.parts_dir = f"{path}{PARTS_SUFFIX}"
        self.rows = 0
        self.digest = hashlib.sha256()  # of the input rows written
        self.output_digest = hashlib.sha256()  # of the partial file's bytes written
        self._handle: Any = None
        self._parts: list[str] = []
        self._part_digests: list[str] = []
        self.resumed_rows = 0
        self.notes: list[str] = []  # what a resume accepted that differs in spelling only
        with self._named_errors():
            if not self.in_place:
                self._remove_stale_state_tmp()
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
                try:
                    self._start_fresh()
                except BaseException:
                    self.discard()  # a fresh run that could not start leaves no partial file or state
                    raise

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
    def _remove_stale_state_tmp(self) -> None:
        """A run killed while writing its state leaves the state's temporary: the next run removes
        it (never an input: the output layer refuses an input among a stream's files first)."""
        if not os.path.isfile(self.state_tmp_path):
            return
        run = current_run()
        if run is not None:
            run.check_output(self.state_tmp_path, "--output")
        os.remove(self.state_tmp_path)

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

    def _damaged(self, what: str) -> ResumeError:
        return ResumeError(f"--resume: the resume state {self.state_path} is damaged ({what}); run again without "
                           "--resume to start over")

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
            raise self._damaged(str(exc)) from None
        if state.get("version") != STATE_VERSION:
            raise ResumeError(f"--resume: {self.state_path} was written by another version of rapidscore (state "
                              f"version {shown_value(state.get('version'))}, this one reads {STATE_VERSION}); run "
                              "again without --resume to start over")
        return state

    def _validated(self, state: dict) -> dict:
        """Every field of a state, of its type and in its range, or a ResumeError naming the field."""
        def field(name: str, ok: Callable[[Any], bool], wanted: str) -> Any:
            if name not in state:
                raise self._damaged(f'no "{name}"')
            value = state[name]
            if not ok(value):
                raise self._damaged(f'"{name}" is {shown_value(value)}, not {wanted}')
            return value

        def count(value: Any) -> bool:
            return isinstance(value, int) and not isinstance(value, bool) and value >= 0

        def digest(value: Any) -> bool:
            return isinstance(value, str) and _SHA256.fullmatch(value) is not None

        field("format", lambda v: v in OUTPUT_FORMATS, f"one of {list(OUTPUT_FORMATS)}")
        field("columns", lambda v: isinstance(v, list) and all(isinstance(c, str) for c in v), "a list of names")
        field("settings", lambda v: isinstance(v, dict), "an object")
        field("rows", count, "a non-negative integer")
        field("bytes", count, "a non-negative integer")
        field("input_sha256", digest, "a SHA-256 in hex")
        field("output_sha256", digest, "a SHA-256 in hex")
        parts = field("parts", lambda v: isinstance(v, list) and all(
            isinstance(n, str) and _PART_NAME.fullmatch(n) for n in v), "a list of part file names")
        field("parts_sha256", lambda v: isinstance(v, list) and len(v) == len(parts) and all(map(digest, v)),
              f"a list of {len(parts)} SHA-256s in hex, one per part")
        return state

    def _load_state(self) -> None:
        state = self._validated(self._read_state())
        if state["format"] != self.fmt or state["columns"] != self.columns:
            raise ResumeError(f"--resume: {self.path} was written in another format or with other columns "
                              f"({state['format']} {state['columns']} then, {self.fmt} {self.columns} now)")
        self._compare_settings(state["settings"])
        self.rows = self.resumed_rows = state["rows"]
        self.expected_digest = state["input_sha256"]
        if self.fmt == "parquet":
            self._verify_parts(state["parts"], state["parts_sha256"])
        else:
            self._verify_partial(state["bytes"], state["output_sha256"])

    def _compare_settings(self, recorded: dict) -> None:
        """Refuse other settings, naming each difference by the part of its value that differs.
        A model is compared by its content ("models"); its spelling (``-m``, the model field of a
        signature) is only reported."""
        then, now = settings_meaning(recorded), settings_meaning(self.settings)
        if then != now:
            changed = sorted(k for k in set(then) | set(now) if then.get(k) != now.get(k))
            spelled = [settings_difference(k, recorded.get(k), self.settings.get(k))
                       for k in sorted(model_spelling_keys(recorded, self.settings))]
            details = "; ".join([*(settings_difference(k, then.get(k), now.get(k)) for k in changed),
                                 *(f"{line} (the model's name)" for line in spelled)])
            raise ResumeError(f"--resume: {self.path} was written with other settings ({details}); resume with the "
                              "same settings, or run again without --resume")
        for key in sorted(model_spelling_keys(recorded, self.settings)):
            named = settings_difference(key, recorded.get(key), self.settings.get(key))
            self.notes.append(f"--resume: the model is named otherwise ({named}); its content is the same")

    def _verify_partial(self, recorded_bytes: int, recorded_sha256: str) -> None:
        """The partial file's first ``bytes`` must be the rows the state records: their SHA-256
        equal, ending on a row boundary, and as many rows as the state says. What follows (a
        torn last line, rows written after the last state) is dropped."""
        if not os.path.isfile(self.partial_path):
            raise ResumeError(f"--resume: {self.partial_path}, the rows written so far, is gone; run again without "
                              "--resume to start over")
        size = os.path.getsize(self.partial_path)
        if size < recorded_bytes:
            raise ResumeError(f"--resume: {self.partial_path} is shorter ({size} bytes) than its state "
                              f"{self.state_path} says ({recorded_bytes}): the rows or the state are damaged; run "
                              "again without --resume to start over")
        digest = hashlib.sha256()
        lines: list[bytes] = []
        with open(self.partial_path, "rb") as handle:
            left = recorded_bytes

            def prefix_lines() -> Generator[str, None, None]:
                """The lines of the first ``recorded_bytes`` (the last one maybe torn), hashed as read."""
                nonlocal left
                pieces: list[bytes] = []
                while left > 0:
                    piece = handle.readline(min(left, 1 << 24))  # a longer line comes in pieces
                    if not piece:
                        break
                    left -= len(piece)
                    digest.update(piece)
                    pieces.append(piece)
                    if piece.endswith(b"\n") or left == 0:
                        line, pieces = b"".join(pieces), []
                        lines[:] = [line[-1:]]  # the last byte, for the boundary check
                        yield line.decode("utf-8", "surrogatepass")

            read = prefix_lines()
            try:
                counted = self._count_rows(read)
            except (UnicodeDecodeError, csv.Error):
                counted = -1  # not rows as this writer writes them: the digest below names it
            read.close()
            while left > 0:  # the bytes a count stopped before: hashed all the same
                block = handle.read(min(left, 1 << 20))
                if not block:
                    break
                left -= len(block)
                digest.update(block)
        if digest.hexdigest() != recorded_sha256:
            raise ResumeError(f"--resume: {self.partial_path} does not hold the rows its state {self.state_path} "
                              f"records (the SHA-256 of its first {recorded_bytes} bytes differs): the rows or the "
                              "state are damaged; run again without --resume to start over")
        if lines and not lines[0].endswith(b"\n"):
            raise self._damaged(f'"bytes" {recorded_bytes} is not on a row boundary of {self.partial_path}')
        if counted != self.rows:
            raise self._damaged(f'"rows" is {self.rows}, but the first {recorded_bytes} bytes of {self.partial_path} '
                                f"hold {max(counted, 0)} rows")
        self.output_digest = digest
        self._handle = open(self.partial_path, "r+b")  # noqa: SIM115 (closed by close())
        # drop a torn last line and any rows written after the last recorded state
        self._handle.truncate(recorded_bytes)
        self._handle.seek(recorded_bytes)

    def _count_rows(self, lines: Iterator[str]) -> int:
        if self.fmt == "jsonl":  # one row a line: JSON escapes a newline inside a value
            return sum(1 for _ in lines)
        records = csv.reader(lines, strict=True)
        header = next(records, None)
        if header != self.columns:
            return -1
        return sum(1 for _ in records)

    def _verify_parts(self, parts: list[str], digests: list[str]) -> None:
        """Each recorded part must be there with its SHA-256, and hold the rows the state says;
        files in the part directory the state does not record (a part written after the last
        state, a part's temporary) go."""
        import pyarrow.parquet as parquet

        counted = 0
        for name, recorded in zip(parts, digests):
            part = os.path.join(self.parts_dir, name)
            if not os.path.isfile(part):
                raise ResumeError(f"--resume: {self.parts_dir} lacks {name} (of {len(parts)} recorded parts); run "
                                  "again without --resume to start over")
            if file_sha256(part) != recorded:
                raise ResumeError(f"--resume: {part} is not the part its state {self.state_path} records (its "
                                  "SHA-256 differs): the part or the state is damaged; run again without --resume "
                                  "to start over")
            counted += parquet.ParquetFile(part).metadata.num_rows
        if counted != self.rows:
            raise self._damaged(f'"rows" is {self.rows}, but its {len(parts)} parts hold {counted} rows')
        keep = set(parts)
        for name in os.listdir(self.parts_dir) if os.path.isdir(self.parts_dir) else ():
            if name not in keep:  # a part written after the last state, or its temporary: redo it
                os.remove(os.path.join(self.parts_dir, name))
        self._parts, self._part_digests = list(parts), list(digests)

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
                 "bytes": self._handle.tell() if self._handle is not None else 0,
                 "output_sha256": self.output_digest.hexdigest(), "parts": self._parts,
                 "parts_sha256": self._part_digests}
        try:
            with open(self.state_tmp_path, "w", encoding="utf-8") as handle:
                json.dump(state, handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(self.state_tmp_path, self.state_path)
        except BaseException as exc:
            with contextlib.suppress(OSError):  # a failed write leaves no temporary behind
                os.remove(self.state_tmp_path)
            if isinstance(exc, OSError):
                raise name_os_error(exc, self.state_tmp_path) from None
            raise

    # rows
    def _csv_header(self) -> None:
        self._emit(_csv_text([self.columns]))

    def _emit(self, text: str) -> None:
        if self.to_stdout:
            self._handle.write(text)
        else:  # bytes, so that tell() and truncate() count bytes
            data = text.encode("utf-8")
            self._handle.write(data)
            self.output_digest.update(data)

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
        buffer = pa.BufferOutputStream()  # in memory first: the part's digest is of the bytes written
        parquet.write_table(pa.Table.from_pylist(list(rows)).select(self.columns), buffer)
        data = buffer.getvalue().to_pybytes()
        try:
            with open(tmp, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, os.path.join(self.parts_dir, name))
        except BaseException:
            with contextlib.suppress(OSError):
                os.remove(tmp)
            raise
        self._parts.append(name)
        self._part_digests.append(hashlib.sha256(data).hexdigest())

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
        """Remove the partial output, its state and the state's temporary (a run that wrote no row)."""
        if self._handle is not None and not self.to_stdout:
            self._handle.close()
        if self.in_place:
            return
        if self.fmt != "parquet":
            with contextlib.suppress(OSError):
                os.remove(self.partial_path)
        with contextlib.suppress(OSError):
            self._remove_state()

    def _remove_state(self) -> None:
        if self.fmt == "parquet":
            for name in self._parts:
                os.remove(os.path.join(self.parts_dir, name))
            with contextlib.suppress(FileNotFoundError):
                os.rmdir(self.parts_dir)
        for path in (self.state_path, self.state_tmp_path):
            if os.path.exists(path):
                os.remove(path)
