"""The streaming command line: rows in from a file or stdin, results out as they come, resumable.

Input: txt (one item per line), JSONL, JSON (an array), CSV/TSV or Parquet, gzipped or not, read
by the same reader as the batch commands (:mod:`rapidscore.common.readers`), from a file or ``-``
(stdin; Parquet and JSON from stdin are buffered). Output: JSONL, CSV or Parquet (``-``: stdout,
JSONL or CSV), one row per input row in input order, written chunk by chunk by
:class:`~rapidscore.common.stream_writer.StreamWriter` (``OUTPUT.partial`` and its resume state;
``--resume`` continues it).

Imports only the standard library at module level: the parsers of every command use it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from rapidscore.common.cli_options import positive_int, run_only
from rapidscore.common.file_options import input_option, output_option
from rapidscore.common.readers import FORMATS, count_rows, iter_rows, parallel_items, row_items
from rapidscore.common.stream_writer import OUTPUT_FORMATS, StreamWriter, output_format
from rapidscore.errors import ResumeError

__all__ = ["INPUT_FORMATS", "OUTPUT_FORMATS", "add_stream_arguments", "add_column_option", "iter_rows", "row_items",
           "file_items", "count_rows", "StreamWriter", "run_stream", "stream_metric_file", "ResumeError"]

INPUT_FORMATS = FORMATS  # the formats of every reader, batch or streaming


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
    run_only(group.add_argument("--resume", action="store_true",
                                help="continue a partly written --output (checked against its input and settings)"))
    group.add_argument("--id-column", default=None, help="copy this input column to the output rows")
    run_only(group.add_argument("--chunk-size", type=positive_int, default=None, metavar="N",
                                help="items per chunk at most (default: the metric's)"))
    return group


def key_value(text: str) -> tuple[str, str]:
    """A ``NAME=VALUE`` argument (``--column``, ``--set``) as ``(name, value)``."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return key.strip(), value


def add_column_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--column INPUT=COLUMN``: where a metric's input is read from (:func:`stream_metric_file`)."""
    parser.add_argument("--column", action="append", type=key_value, default=[], metavar="INPUT=COLUMN",
                        help="read the metric's input INPUT from the file's column COLUMN (repeatable)")


# -- reading: the one reader of every command (common/readers.py) -------------------------------

def file_items(text_path: str, reference_paths: Sequence[str], text_column: str | None = None,
               reference_column: str | None = None) -> Iterator[tuple[str, list[str], Any]]:
    """``(text, [references], None)`` from parallel files read in lockstep, as the batch commands
    read them (:func:`rapidscore.common.readers.parallel_items`); the id of an item is None."""
    for text, references, _where in parallel_items(text_path, reference_paths, text_column, reference_column):
        yield text, references, None


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
        if not quiet:
            for note in writer.notes:
                print(note, file=sys.stderr)
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


def stream_metric_file(metric: Any, build: Callable[[], Any], args: argparse.Namespace, settings: dict) -> None:
    """Score the rows of ``args.input`` with a registered metric's engine (``build()``, called
    once the options are checked) into ``args.output``
    (one row per input row: index, id, the metric's output columns), chunk by chunk, resumable:
    the streamed mode of the generic command and of a metric's own command. ``args``: the options
    of :func:`add_stream_arguments` and :func:`add_column_option`, ``quiet``, ``progress``.
    ``settings``: what the resume state records besides the run's options (the engine's
    signature is added). ``build`` loads the engine's models (the metric contract), so the resume
    state records their content before the first row. The metric's
    totals, where it has them, end the run: one JSON document on stdout with ``--json`` (then
    ``--output`` must be a file), else one line on stderr."""
    from rapidscore.common.cli_options import show_progress
    from rapidscore.common.metric import RowNames, output_rows
    from rapidscore.common.stream import chunks

    if args.json and args.output == "-":
        raise ValueError("--json prints the totals on stdout: give --output FILE for the rows")
    mapping = dict(args.column)
    unknown = sorted(set(mapping) - {c.name for c in metric.inputs})
    if unknown:
        raise ValueError(f"--column: {metric.name} has no input {unknown} (its inputs: "
                         f"{[c.name for c in metric.inputs]})")
    sources = [(c.name, mapping.get(c.name, c.name), c.optional) for c in metric.inputs]
    engine = build()

    def items():
        for row, where in iter_rows(args.input, args.input_format):
            values = []
            for name, column, optional in sources:
                if column not in row and not optional:
                    raise ValueError(f"{where}: no column {column!r} for the input {name!r} (columns: "
                                     f"{list(row)}; map one with --column {name}=COLUMN)")
                values.append(row.get(column))
            if args.id_column and args.id_column not in row:
                raise ValueError(f"{where}: no --id-column {args.id_column!r} (columns: {list(row)})")
            # (first input, [other inputs], id): the writer hashes the first two for --resume
            yield values[0], values[1:], row.get(args.id_column) if args.id_column else None

    totals = metric.totals()

    def score_chunks(rows, first_index: int):
        index = first_index
        for chunk in chunks(rows, args.chunk_size or 4096):
            columns = {name: [item[0] if k == 0 else item[1][k - 1] for item in chunk]
                       for k, (name, _column, _optional) in enumerate(sources)}
            outputs = metric.score(engine, columns, RowNames(metric.rows.noun, index))
            if totals is not None:
                totals.update(outputs)
            out = [{"index": index + k, **({"id": item[2]} if args.id_column else {}), **values}
                   for k, (item, values) in enumerate(zip(chunk, output_rows(outputs, metric.outputs)))]
            index += len(chunk)
            yield chunk, out

    columns = ["index", *(["id"] if args.id_column else []), *metric.outputs]
    recorded = {"command": metric.name, "signature": metric.signature(engine), "columns": mapping,
                "id_column": args.id_column, **settings}
    run_stream(items=items(), score_chunks=score_chunks, output=args.output, output_fmt=args.output_format,
               columns=columns, settings=recorded, resume=args.resume, progress=show_progress(args),
               total=count_rows(args.input, args.input_format), unit=metric.rows.noun, quiet=args.quiet)
    if totals is None:
        return
    if args.json:
        import json

        print(json.dumps({"metric": metric.name, "signature": recorded["signature"], **totals.summary()}))
    elif not args.quiet:
        print(f"{metric.name}: {totals.line()}", file=sys.stderr)
