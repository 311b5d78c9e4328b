"""Input files: a path checked (a missing file or a directory named in words; the file joins the
run's inputs, ``rapidscore.common.file_run``), and whole documents (a ``.json`` file, an
abstention results file, a settings file) read within
:func:`~rapidscore.common.read_bounds.max_document_bytes`, decompressed in pieces up to the
bound, decoded and parsed with errors that name the file (``rapidscore.common.readers`` reads
the line and row formats). Standard library only."""

from __future__ import annotations

import io
import json
import os
import stat
import sys
import zlib
from typing import Any, Callable

from rapidscore.common.file_run import note_input
from rapidscore.common.read_bounds import (
    DECOMPRESS_PIECE,
    READ_CHUNK,
    digits_error,
    document_too_big,
    max_document_bytes,
)

STDIN = "-"


def display_name(path: str) -> str:
    return "<stdin>" if path == STDIN else path


def missing_file(path: str) -> FileNotFoundError:
    """The error of an input file that is not there, the same on every route: "no such file:
    PATH", the path also in ``input_path`` (``filename`` would turn the message into errno's
    format), so that a command names the option that gave it (``rapidscore.cli``)."""
    error = FileNotFoundError(f"no such file: {path}")
    error.input_path = path  # type: ignore[attr-defined]
    return error


def check_input_file(path: str) -> None:
    """FileNotFoundError / IsADirectoryError with the path in words (not an errno dump), the path
    in ``input_path``."""
    if path == STDIN:
        return
    if os.path.isdir(path):
        error = IsADirectoryError(f"{path} is a directory; expected a file")
        error.input_path = path  # type: ignore[attr-defined]
        raise error
    if not os.path.isfile(path):
        raise missing_file(path)
    note_input(path)  # read by the command in progress: none of its outputs may replace it


def parse_json_text(text: str, name: str, hint: str = "") -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        if hint and exc.msg == "Extra data":  # more than one document: not a truncated file
            raise ValueError(f"{name}:{exc.lineno}: invalid JSON: {exc.msg} at column {exc.colno}{hint}") from None
        raise ValueError(f"{name}:{exc.lineno}: invalid JSON (truncated file?): {exc.msg} "
                         f"at column {exc.colno}") from None
    except RecursionError:
        raise ValueError(f"{name}: JSON nested too deeply to read (over ~{sys.getrecursionlimit()} levels)") from None
    except ValueError as exc:  # an integer over Python's digit limit
        raise digits_error(exc, name, text) or ValueError(f"{name}: invalid JSON: {exc}") from None


def _inflate(handle: Any, name: str, limit: int, what: str) -> bytes:
    """The gunzipped bytes of ``handle`` (every gzip member, zero padding after the last one
    skipped, as gzip does), decompressed a piece at a time into at most ``limit`` bytes."""
    out = io.BytesIO()
    try:
        data = handle.read(READ_CHUNK)
        if not data:
            return b""  # an empty file, as gzip reads it
        if data[:2] != b"\x1f\x8b":
            raise OSError(f"Not a gzipped file ({data[:2]!r})")  # gzip's words; zlib says "incorrect header"
        inflater = zlib.decompressobj(wbits=31)  # zlib checks the trailer itself: no crc32 pass in Python
        while True:
            # at most 4 MiB out of one call (256 KiB of a bomb inflates to 256 MiB), never past the bound
            piece = inflater.decompress(data, min(DECOMPRESS_PIECE, limit + 1 - out.tell()))
            out.write(piece)
            if out.tell() > limit:
                break
            if inflater.eof:  # the end of a member: another may follow
                data = inflater.unused_data or handle.read(READ_CHUNK)
                while data and not data.strip(b"\0"):
                    data = handle.read(READ_CHUNK)
                data = data.lstrip(b"\0")
                if not data:
                    break
                inflater = zlib.decompressobj(wbits=31)
                continue
            data = inflater.unconsumed_tail or handle.read(READ_CHUNK)
            if not data and not piece:  # no input left, and no output held back by the last call
                raise EOFError("Compressed file ended before the end-of-stream marker was reached")
    except (EOFError, OSError, zlib.error) as exc:
        line = out.getvalue().count(b"\n") + 1
        raise ValueError(f"{name}:{line}: cannot read the compressed data (truncated or corrupt file?): "
                         f"{exc}") from None
    if out.tell() > limit:
        raise document_too_big(name, limit, what)
    return out.getvalue()


def _read_capped(handle: Any, name: str, limit: int, what: str) -> bytes:
    """A stream's bytes (a pipe: its size is known once read), a piece at a time, up to ``limit``."""
    buffer = io.BytesIO()
    while buffer.tell() <= limit and (piece := handle.read(READ_CHUNK)):
        buffer.write(piece)
    if buffer.tell() > limit:
        raise document_too_big(name, limit, what)
    return buffer.getvalue()


def _read_document(path: str, what: str, limit: int | None) -> bytes:
    """The bytes of a whole-document file (gunzipped when its name ends in .gz; ``-``: stdin),
    at most ``limit`` (default :func:`max_document_bytes`): over it, a ValueError naming the file
    and the bound, raised before more than the bound is held."""
    limit = max_document_bytes() if limit is None else limit
    name = display_name(path)
    if path == STDIN:
        return _read_capped(sys.stdin.buffer, name, limit, what)
    check_input_file(path)
    with open(path, "rb") as handle:
        if path.lower().endswith(".gz"):
            return _inflate(handle, name, limit, what)
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):  # a named pipe, a device
            return _read_capped(handle, name, limit, what)
        if info.st_size > limit:  # refused from its size, before it is read
            raise document_too_big(name, limit, what)
        data = handle.read()  # not read(limit + 1): that allocates the whole bound up front
    if len(data) > limit:  # the file grew while it was read
        raise document_too_big(name, limit, what)
    return data


def _decode_document(raw: bytes, name: str) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:  # named by line and column, as decoded_lines names them
        line, line_start = raw.count(b"\n", 0, exc.start) + 1, raw.rfind(b"\n", 0, exc.start) + 1
        raise ValueError(f"{name}:{line}: not valid UTF-8 text: byte 0x{raw[exc.start]:02x} at column "
                         f"{exc.start - line_start + 1} (convert the file to UTF-8, e.g. iconv -f latin1 -t "
                         "utf-8)") from None
    return text.removeprefix("\ufeff")  # a BOM is not text


def read_text(path: str | os.PathLike, what: str = "text", max_bytes: int | None = None) -> str:
    """A whole document's text (gunzipped when the name ends in .gz; ``-``: stdin), read up to
    ``max_bytes`` (default :func:`max_document_bytes`). ValueError naming the file for a document
    over the bound (``what`` names its kind: "JSON", "TOML"), bytes that are not UTF-8 (and the
    line), a truncated or corrupt .gz."""
    path = os.fspath(path)
    return _decode_document(_read_document(path, what, max_bytes), display_name(path))


def load_json(path: str | os.PathLike, max_bytes: int | None = None) -> Any:
    """One JSON document from a file (gzipped when it ends in .gz), at most ``max_bytes``
    (default :func:`max_document_bytes`). Every failure is a ValueError naming the file and,
    where there is one, the line: a document over the bound, bytes that are not UTF-8, a
    truncated .gz, invalid JSON, nesting deeper than Python's recursion limit, an integer over
    Python's digit limit."""
    path = os.fspath(path)
    return parse_json_text(read_text(path, "JSON", max_bytes), display_name(path))


def _unreadable(path: str, max_bytes: int | None) -> ValueError:
    """The error of a file the fast path (:func:`parse_json`) could not parse, in
    :func:`load_json`'s words, which name the line."""
    try:
        load_json(path, max_bytes)
    except ValueError as exc:
        return exc
    return ValueError(f"{path}: unreadable JSON file")  # pragma: no cover - fast and slow paths disagree


def read_bytes(path: str, max_bytes: int | None = None) -> bytes:
    """A whole file's bytes, gunzipped when its name ends in .gz: the fast path for large JSON
    documents. At most ``max_bytes`` (default :func:`max_document_bytes`), decompressed a piece
    at a time: over it, a ValueError naming the file and the bound. A truncated or corrupt .gz
    is a ValueError naming the file and the line."""
    return _read_document(path, "JSON", max_bytes)


def parse_json(path: str, raw: bytes, loads: Callable[[bytes], Any] = json.loads,
               max_bytes: int | None = None) -> Any:
    """The document in ``raw`` (the bytes of ``path``) parsed by ``loads`` (``json.loads``, or a
    faster one such as ``orjson.loads``); any failure is a ValueError naming the file and the
    line (bytes that are not UTF-8, invalid JSON) in :func:`load_json`'s words (``max_bytes``:
    the bound ``raw`` was read under)."""
    try:
        return loads(raw)
    except (ValueError, RecursionError):  # JSONDecodeError, UnicodeDecodeError, orjson's errors
        raise _unreadable(path, max_bytes) from None
