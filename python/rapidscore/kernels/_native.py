"""The one loader of the native extension ``rapidscore._core``, and the choice of implementation.

Every kernel exists twice: in C++ (``rapidscore._core``, built from csrc/) and in pure Python
(:mod:`~rapidscore.kernels.matching_ref`, :mod:`~rapidscore.kernels.alignment_py`,
:mod:`~rapidscore.kernels.phrases_py`), with the same contract, as RapidFuzz keeps a ``*_py``
twin of each C++ module. The environment variable ``RAPIDSCORE_IMPLEMENTATION`` chooses, read at
each kernel call (a matcher object when it is made):

- ``auto`` (default; also when unset or empty): the native kernels; if ``rapidscore._core``
  cannot be imported, the Python twins, with one :class:`~rapidscore.errors.RapidscoreWarning`
  per process naming the import error;
- ``native``: the native kernels; ImportError when the extension cannot be imported;
- ``python``: the Python twins always (the extension is not even imported).

The extension is imported at most once per process, on the first call that wants it, never at
``import rapidscore``; the outcome (the module or the ImportError) is kept.
"""

from __future__ import annotations

import os
import threading
import warnings
from types import ModuleType

from rapidscore.errors import RapidscoreWarning

__all__ = ["ENV_VAR", "CHOICES", "requested", "implementation", "core"]

ENV_VAR = "RAPIDSCORE_IMPLEMENTATION"
CHOICES = ("auto", "native", "python")

_LOCK = threading.Lock()
_module: ModuleType | None = None
_error: ImportError | None = None
_warned = False


def _load() -> ModuleType | None:
    """Imports ``rapidscore._core`` once; the module, or None (the error is kept)."""
    global _module, _error
    if _module is None and _error is None:
        with _LOCK:
            if _module is None and _error is None:
                try:
                    from rapidscore import _core
                except ImportError as exc:
                    _error = exc
                else:
                    _module = _core
    return _module


def requested() -> str:
    """The value of ``RAPIDSCORE_IMPLEMENTATION``: "auto" (unset or empty), "native" or "python"."""
    raw = os.environ.get(ENV_VAR, "")
    value = raw.strip().lower() or "auto"
    if value not in CHOICES:
        raise ValueError(f"{ENV_VAR} must be 'auto', 'native' or 'python', got {raw!r}")
    return value


def _cannot_load() -> ImportError:
    error = ImportError(f"rapidscore's native extension rapidscore._core cannot be imported "
                        f"({type(_error).__name__}: {_error}); set {ENV_VAR}=python (or auto) to use the "
                        "pure-Python kernels")
    error.__cause__ = _error
    return error


def core() -> ModuleType:
    """The native module ``rapidscore._core``, whatever ``RAPIDSCORE_IMPLEMENTATION`` says (for an
    explicit ``implementation="native"``). ImportError when it cannot be imported."""
    module = _load()
    if module is None:
        raise _cannot_load()
    return module


def implementation() -> str:
    """The implementation the kernels run now: "native" or "python" (see the module docstring).

    Raises ValueError for an unknown ``RAPIDSCORE_IMPLEMENTATION``, and ImportError when it says
    "native" and the extension cannot be imported."""
    global _warned
    wanted = requested()
    if wanted == "python":
        return "python"
    if _load() is not None:
        return "native"
    if wanted == "native":
        raise _cannot_load()
    with _LOCK:
        first = not _warned
        _warned = True
    if first:
        warnings.warn(f"rapidscore's native extension rapidscore._core cannot be imported "
                      f"({type(_error).__name__}: {_error}); the kernels run their pure-Python twins, "
                      f"which are slower (set {ENV_VAR}=python to choose them without this warning, "
                      f"or {ENV_VAR}=native to make this an error). For the fast kernels, install a "
                      "binary wheel (pip install --force-reinstall --only-binary rapidscore rapidscore) "
                      "or a C++17 compiler and CMake, then reinstall: docs/install.md",
                      RapidscoreWarning, stacklevel=3)
    return "python"
