"""What the encoder layer loaded: every model directory the process used, with a lazy content
fingerprint, for whoever needs to know (a command run: its models are inputs, and its resume
state records them). The encoder records; it writes no one else's state.

Each use is numbered, so a caller may ask for the models used since a mark of its own
(``models_used_since``): a command run asks for those used while it runs. Thread-safe.
Imports only the standard library (and the encoder's fingerprint, when one is computed).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

__all__ = ["record_model", "loaded_models", "models_used_since"]

_LOCK = threading.Lock()
_USES: dict[str, int] = {}  # model directory -> the number of its last use
_COUNT = 0  # uses so far


def record_model(model_dir: str | os.PathLike) -> None:
    """A model directory used now (an encoder or classifier got for it)."""
    global _COUNT
    with _LOCK:
        _COUNT += 1
        _USES[os.fspath(model_dir)] = _COUNT


def _digest(model_dir: str) -> Callable[[], str]:
    def digest() -> str:  # computed only when asked (a resume state): it reads every weight file
        from rapidscore.encoder.model_source import fingerprint

        return fingerprint(Path(model_dir))

    return digest


def loaded_models() -> dict[str, Callable[[], str]]:
    """Every model directory the process used -> its content fingerprint (a callable, lazy)."""
    with _LOCK:
        directories = list(_USES)
    return {directory: _digest(directory) for directory in directories}


def models_used_since(mark: int | None) -> tuple[int, dict[str, Callable[[], str]]]:
    """``(mark now, {model directory: fingerprint callable})`` of the models used after ``mark``
    (a mark this function returned before); ``None``: the mark now only, no models."""
    with _LOCK:
        now = _COUNT
        used = [] if mark is None else [directory for directory, use in _USES.items() if use > mark]
    return now, {directory: _digest(directory) for directory in used}
