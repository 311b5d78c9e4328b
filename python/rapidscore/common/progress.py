"""The one progress-bar policy of every command and of the library's bars.

* A command shows bars when ``--progress`` is given, never with ``--no-progress`` or ``-q``, and
  otherwise only when stderr is a terminal: a log or a captured stderr gets no bar text
  (``decide``, behind ``rapidscore.common.cli_options.show_progress``).
* A bar appears only after a second of work (tqdm's ``delay``): a run of a few pairs draws none.
  ``--progress`` forces bars at once, whatever stderr is (``progress_bar``'s delay is then 0).
* A library call with ``progress=True`` gets the same bar (a second's delay; on stderr, or a
  notebook widget through ``tqdm.auto``).

Every bar of rapidscore is made by :func:`progress_bar`. Standard library only at import: tqdm
loads with the first bar.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["DELAY_SECONDS", "decide", "progress_bar", "stderr_is_terminal"]

DELAY_SECONDS = 1.0  # a bar appears only after this much work
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


def progress_bar(iterable: Any = None, **options: Any) -> Any:
    """A tqdm bar (``tqdm.auto``: a widget in a notebook) on stderr that appears after a second of
    work, at once when the command was given ``--progress``. ``options``: tqdm's."""
    from tqdm.auto import tqdm

    options.setdefault("file", sys.stderr)
    options.setdefault("delay", 0.0 if _forced else DELAY_SECONDS)
    return tqdm(iterable, **options)
