"""The bounds on what the readers hold at once (``rapidscore.common.readers``): a line, a CSV
record or field at most :func:`max_record_bytes`, a whole document at most
:func:`max_document_bytes`; sizes as ``"1G"``; the errors that name the file and the bound to
raise. Standard library only."""

from __future__ import annotations

import csv
import os
import re
import sys

from rapidscore.errors import RecordTooLongError

# -- bounds ---------------------------------------------------------------------------------------

# 256 MiB: far above any text a metric scores (a 100 MB JSONL row is read), far below the memory
# of the machines the commands run on (a line is held ~3 times: its bytes, its text, its parse).
DEFAULT_MAX_RECORD_BYTES = 256 << 20
# 2 GiB: a whole document is parsed at once into Python objects taking ~3-5 times its size, so
# 2 GiB is about what a 16-32 GB machine still parses; SELECT results files are tens of MB, so
# this leaves them two orders of magnitude of headroom. JSONL has no such bound (a line at a time).
DEFAULT_MAX_DOCUMENT_BYTES = 2 << 30
MAX_RECORD_ENV = "RAPIDSCORE_MAX_RECORD_BYTES"
MAX_DOCUMENT_ENV = "RAPIDSCORE_MAX_DOCUMENT_BYTES"
READ_CHUNK = 256 << 10  # bytes read (compressed) at a time from a whole-document file
DECOMPRESS_PIECE = 4 << 20  # bytes decompressed at a time (sizes measured fastest on a 48 MiB results file)
_bounds: dict[str, int | None] = {"record": None, "document": None}  # set_max_*_bytes; None: env/default
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(?:([kmgt])(?:i?b)?|b)?", re.IGNORECASE)
_UNITS = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(size: int | str) -> int:
    """A size in bytes from an int or a text: ``1000``, ``64K``, ``512M``, ``2G``, ``1.5G``, ``2GiB``
    (K/M/G/T are powers of 1024; a ``B``/``iB`` after them is optional). ValueError unless >= 1."""
    if isinstance(size, int) and not isinstance(size, bool):
        value = size
    else:
        match = _SIZE.fullmatch(str(size).strip())
        if match is None:
            raise ValueError(f"expected a size in bytes such as 1000, 512M or 2G, got {size!r}")
        value = int(float(match.group(1)) * _UNITS.get((match.group(2) or "").lower(), 1))
    if value < 1:
        raise ValueError(f"a size must be at least 1 byte, got {size!r}")
    return value


def _bound(key: str, env: str, default: int) -> int:
    value = _bounds[key]
    if value is None:
        text = os.environ.get(env, "").strip()  # read at each file opened: a change applies to the next one
        try:
            value = parse_size(text) if text else default
        except ValueError as exc:
            raise ValueError(f"${env}: {exc}") from None
    return min(value, sys.maxsize // 4)  # readline and zlib take a C ssize_t: larger means no bound


def max_record_bytes() -> int:
    """The most bytes of one line, CSV record or CSV field a reader holds: the value of
    :func:`set_max_record_bytes`, else ``$RAPIDSCORE_MAX_RECORD_BYTES``, else 256 MiB."""
    return _bound("record", MAX_RECORD_ENV, DEFAULT_MAX_RECORD_BYTES)


def set_max_record_bytes(size: int | str | None) -> None:
    """Set the bound of :func:`max_record_bytes` for this process (an int or a size such as
    ``"512M"``); None: back to ``$RAPIDSCORE_MAX_RECORD_BYTES`` or the default. The CLI's
    ``--max-record-bytes`` calls it."""
    _bounds["record"] = None if size is None else parse_size(size)


def max_document_bytes() -> int:
    """The most bytes of a whole document (a ``.json`` input, a results file), decompressed: the
    value of :func:`set_max_document_bytes`, else ``$RAPIDSCORE_MAX_DOCUMENT_BYTES``, else 2 GiB;
    never less than :func:`max_record_bytes` (a document holds at least one record, and
    ``--max-record-bytes`` raises both)."""
    return max(_bound("document", MAX_DOCUMENT_ENV, DEFAULT_MAX_DOCUMENT_BYTES), max_record_bytes())


def set_max_document_bytes(size: int | str | None) -> None:
    """Set the bound of :func:`max_document_bytes` for this process; None: back to
    ``$RAPIDSCORE_MAX_DOCUMENT_BYTES`` or the default."""
    _bounds["document"] = None if size is None else parse_size(size)


def format_size(size: int) -> str:
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size:,} bytes"


RAISE_RECORD_HINT = f"raise it with --max-record-bytes SIZE, e.g. --max-record-bytes 1G, or {MAX_RECORD_ENV}=SIZE"


def line_too_long(where: str, limit: int) -> RecordTooLongError:
    """The error of a line over the bound ``limit``, at ``where`` (``path:line``)."""
    return RecordTooLongError(f"{where}: line longer than {format_size(limit)} (the bound on one line or record; "
                              f"{RAISE_RECORD_HINT})")


def document_too_big(name: str, limit: int, what: str) -> ValueError:
    return ValueError(f"{name}: over {format_size(limit)} of {what} (the bound on one whole document, read "
                      f"at once; raise it with --max-record-bytes SIZE or {MAX_DOCUMENT_ENV}=SIZE, e.g. 4G)")


def set_csv_field_limit(limit: int) -> None:
    """csv's own field limit (131,072 characters by default) raised to the record bound; it takes
    a C long, 32 bits on Windows."""
    try:
        csv.field_size_limit(min(limit, sys.maxsize))
    except OverflowError:
        csv.field_size_limit(2**31 - 1)


def digits_error(exc: ValueError, where: str, text: str | None = None) -> ValueError | None:
    """For Python's limit on the digits of an integer read from text (``sys.get_int_max_str_digits``,
    4,300 by default: json and tomllib raise a bare ValueError naming nothing), the error naming
    ``where`` (a file, ``file:line``) and what to do; None for any other ValueError. ``text``: the
    whole document, whose line holding the integer is then named (``where`` is the file)."""
    if "integer string conversion" not in str(exc):
        return None
    digits = sys.get_int_max_str_digits()
    if text is not None:  # a number follows ":", "[", "," (JSON) or "=" (TOML)
        match = re.search(rf"[:\[,=]\s*[-+]?(\d{{{digits + 1},}})", text)
        if match is not None:
            line = text.count("\n", 0, match.start(1)) + 1
            where = f"{where}:{line}"
    return ValueError(f"{where}: an integer of more than {digits} digits (Python's limit on reading integers): "
                      "store it as a string, or lift the limit with PYTHONINTMAXSTRDIGITS=0")
