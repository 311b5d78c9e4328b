"""One thread budget for the whole process: the model runtimes and the native kernels share it.

Without it, every kernel call started threads for all cores beside ONNX Runtime's pool, which was
also sized to all cores, so concurrent calls oversubscribed the CPU. Now:

- ``thread_budget()`` is the number of cores rapidscore may keep busy: ``$RAPIDSCORE_NUM_THREADS``,
  else the CPUs this process may run on. Runtimes size their pools from it.
- A kernel call takes a *lease* on the budget: it gets as many threads as it asked for, or as are
  free, but always at least one, and gives them back when it ends. Eight threads each calling the
  matching kernel on a 2-core budget therefore run about 2 kernel threads in all, not 16.

Thread-safe: the lease counter is guarded by a lock.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import SupportsIndex, overload

__all__ = ["thread_budget", "set_thread_budget", "available_cpus", "lease", "check_num_threads", "threads_in_use",
           "requested_threads", "num_threads_or_alias"]

# A thread count above this is a typo (or an attack), not a machine: refuse it with a clear error.
MAX_THREADS = 1024


def available_cpus() -> int:
    """CPUs this process may run on (containers often allow fewer than the machine has)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


@overload
def check_num_threads(value: None, name: str = ...) -> None: ...
@overload
def check_num_threads(value: SupportsIndex, name: str = ...) -> int: ...
@overload
def check_num_threads(value: object, name: str = ...) -> int | None: ...


def check_num_threads(value, name: str = "num_threads") -> int | None:
    """``value`` as an int in [1, MAX_THREADS], or None (use the budget); else a clear error."""
    if value is None:
        return None
    if isinstance(value, bool) or (not isinstance(value, int) and not hasattr(value, "__index__")):
        raise TypeError(f"{name} must be an int or None, got {type(value).__name__}: {value!r}")
    value = int(value)
    if not 1 <= value <= MAX_THREADS:
        raise ValueError(f"{name} must be in [1, {MAX_THREADS}] (or None for the thread budget), got {value}")
    return value


def requested_threads(n_threads, name: str = "n_threads") -> int | None:
    """A kernel's ``n_threads`` argument as a lease request: ``<= 0`` (the kernels' "all cores")
    asks for the whole budget (None), a positive count is checked like ``num_threads``."""
    if not isinstance(n_threads, bool) and isinstance(n_threads, int) and n_threads <= 0:
        return None
    if hasattr(n_threads, "__index__") and not isinstance(n_threads, bool) and int(n_threads) <= 0:
        return None
    return check_num_threads(n_threads, name)


def num_threads_or_alias(num_threads: object = None, n_threads: object = None, *, where: str,
                         stacklevel: int = 3) -> int | None:
    """The public threads keyword of ``where`` (a function or class name, for the messages):
    ``num_threads`` (None = the thread budget, else an int in [1, MAX_THREADS]), or its deprecated
    alias ``n_threads`` (0 or less = the budget, as it always meant), with a DeprecationWarning
    pointing at the caller. Both given: TypeError."""
    if n_threads is None:
        return check_num_threads(num_threads, "num_threads")
    if num_threads is not None:
        raise TypeError(f"{where}() got both num_threads and its deprecated alias n_threads: give num_threads only")
    warnings.warn(f"{where}(n_threads=...) is deprecated: use num_threads (None = the thread budget, "
                  "where n_threads=0 meant all cores)", DeprecationWarning, stacklevel=stacklevel)
    return requested_threads(n_threads, "n_threads")


class _Budget:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._size: int | None = None
        self._in_use = 0

    def size(self) -> int:
        with self._lock:
            if self._size is None:
                configured = os.environ.get("RAPIDSCORE_NUM_THREADS")
                if configured:
                    try:
                        self._size = check_num_threads(int(configured), "RAPIDSCORE_NUM_THREADS")
                    except ValueError as exc:
                        raise ValueError(f"RAPIDSCORE_NUM_THREADS={configured!r}: {exc}") from None
                else:
                    self._size = available_cpus()
            return self._size

    def set_size(self, n: int) -> None:
        n = check_num_threads(n, "thread budget")
        with self._lock:
            self._size = n

    def acquire(self, wanted: int | None) -> int:
        size = self.size()
        wanted = size if wanted is None else wanted
        with self._lock:
            granted = max(1, min(wanted, size - self._in_use))
            self._in_use += granted
            return granted

    def release(self, granted: int) -> None:
        with self._lock:
            self._in_use -= granted

    def in_use(self) -> int:
        with self._lock:
            return self._in_use


_BUDGET = _Budget()


def thread_budget() -> int:
    """Cores rapidscore may keep busy in this process."""
    return _BUDGET.size()


def set_thread_budget(n: int) -> None:
    """Change the budget (encoders created later size their runtime pools from it)."""
    _BUDGET.set_size(n)


@contextmanager
def lease(wanted: int | None = None) -> Iterator[int]:
    """Threads for one kernel call: ``wanted`` (None: the whole budget) or what is free, >= 1."""
    wanted = check_num_threads(wanted)
    granted = _BUDGET.acquire(wanted)
    try:
        yield granted
    finally:
        _BUDGET.release(granted)


def threads_in_use() -> int:
    """Kernel threads leased right now (for tests and monitoring)."""
    return _BUDGET.in_use()
