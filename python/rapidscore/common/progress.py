"""The one progress-bar policy of every command and of the library's bars.

* A command shows bars when ``--progress`` is given, never with ``--no-progress`` or ``-q``, and
  otherwise only when stderr is a terminal: a log or a captured stderr gets no bar text
  (``decide``, behind ``rapidscore.common.cli_options.show_progress``).
* A bar appears only after a second of work (tqdm's ``delay``): a run of a few pairs draws none.
  ``--progress`` forces bars at once, whatever stderr is (``progress_bar``'s delay is then 0).
* A library call with ``progress=True`` gets the same bar (a second's delay; on stderr, or a
  notebook widget through ``tqdm.auto``).
* A terminal that reports no size (0 columns or 0 rows: ``script``, some CI runners) gets a bar
  of :data:`FALLBACK_SIZE` (``$COLUMNS`` / ``$LINES`` when set): tqdm would take 0 rows as no room
  and draw nothing.

Every bar of rapidscore is made by :func:`progress_bar`. Standard library only at import: tqdm
loads with the first bar.
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["DELAY_SECONDS", "FALLBACK_SIZE", "decide", "progress_bar", "stderr_is_terminal", "terminal_size"]

DELAY_SECONDS = 1.0  # a bar appears only after this much work
FALLBACK_SIZE = (80, 24)  # columns, rows of a terminal that reports a size of 0
_forced = False  # the running command was given --progress: bars at once


def stderr_is_terminal() -> bool:
    """Whether ``sys.stderr`` (as it is now) is a terminal."""
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError):  # no stderr, or a closed one
        return False


def decide(flag: bool | None, *, quiet: bool = False, default: bool = True) -> bool:
    """Whether a command shows progress bars: ``flag`` (``--progress`` True, ``--no-progress``
    False) when given, and then ``--progress`` also draws them at once; else none with ``quiet``
    or ``default=False``, else only when stderr is a terminal. Called once per command run."""
    global _forced
    _forced = flag is True
    if flag is not None:
        return bool(flag)
    return default and not quiet and stderr_is_terminal()


def _size_from_environment(name: str, fallback: int) -> int:
    try:
        value = int(os.environ.get(name, ""))
    except ValueError:
        return fallback
    return value if value > 0 else fallback


def terminal_size(file: Any) -> tuple[int, int] | None:
    """``(columns, rows)`` of the terminal ``file`` writes to; None when it is not a terminal. A
    size of 0 (a pseudo-terminal nobody sized) is read as ``$COLUMNS`` / ``$LINES`` when they are
    positive, else :data:`FALLBACK_SIZE`."""
    try:
        columns, rows = os.get_terminal_size(file.fileno())
    except (AttributeError, ValueError, OSError):  # no file descriptor, a closed file, not a terminal
        return None
    if columns <= 0:
        columns = _size_from_environment("COLUMNS", FALLBACK_SIZE[0])
    if rows <= 0:
        rows = _size_from_environment("LINES", FALLBACK_SIZE[1])
    return columns, rows


def _tqdm_shape(file: Any) -> tuple[int | None, int | None]:
    """The ``(ncols, nrows)`` tqdm takes from a terminal (one column less, so that a full line
    never wraps), read through :func:`terminal_size`; (None, None) off a terminal (tqdm's own
    defaults)."""
    size = terminal_size(file)
    return (None, None) if size is None else (size[0] - 1, size[1] - 1)


def progress_bar(iterable: Any = None, **options: Any) -> Any:
    """A tqdm bar (``tqdm.auto``: a widget in a notebook) on stderr that appears after a second of
    work, at once when the command was given ``--progress``. ``options``: tqdm's. The bar's width
    and the rows it may use come from :func:`terminal_size` (``dynamic_ncols``: read again at each
    refresh), so a terminal that reports a size of 0 still shows it."""
    from tqdm.auto import tqdm
    from tqdm.autonotebook import tqdm as chosen
    from tqdm.std import tqdm as text_bar

    options.setdefault("file", sys.stderr)
    options.setdefault("delay", 0.0 if _forced else DELAY_SECONDS)
    if chosen is not text_bar:  # a notebook widget: sized by the page, not by a terminal
        return tqdm(iterable, **options)
    dynamic = bool(options.pop("dynamic_ncols", False))
    ncols, nrows = _tqdm_shape(options["file"])
    if ncols is not None:  # a terminal: its size, never 0 (tqdm reads 0 rows as no room and draws nothing)
        options.setdefault("ncols", ncols)
        options.setdefault("nrows", nrows)
    bar = tqdm(iterable, **options)
    if dynamic and ncols is not None:
        bar.dynamic_ncols = _tqdm_shape  # tqdm calls it with the bar's file at each refresh
    return bar
