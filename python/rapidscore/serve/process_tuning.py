"""Process-wide settings of a process that only serves (``rapidscore serve``; never done for a
scorer embedded in another program): the GIL switch interval, ``gc.freeze`` once the models are
loaded, and glibc's allocator bounded."""

from __future__ import annotations

import gc
import sys
import threading
from typing import Any

__all__ = ["tune_process"]


def tune_process(service: Any) -> None:
    """Process-wide settings for a process that only serves (never done for an embedded scorer).

    On 2 cores at 32 clients, p99 went from 166 ms to 120 ms with both: a 1 ms GIL switch interval
    (the event loop waits less behind a worker's Python between runtime calls) and, once the
    models are loaded, ``gc.freeze()`` (collections stop rescanning the models' objects). And
    glibc's allocator is kept from holding freed memory (:func:`_bound_allocator`), and the
    runtime's batches get one arena of ``runtime_memory`` MiB (:func:`_share_runtime_arena`)."""
    sys.setswitchinterval(0.001)
    _bound_allocator()
    if service.config.runtime_memory and service.config.device == "cpu":
        _share_runtime_arena(service)

    def freeze_when_ready() -> None:
        service.ready.wait()
        gc.freeze()

    threading.Thread(target=freeze_when_ready, name="rapidscore-gc-freeze", daemon=True).start()


# glibc mallopt parameters (malloc.h)
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
# Blocks from this size on are mapped and unmapped with each request: by default glibc raises the
# threshold up to 32 MiB as large blocks are freed, and freed blocks below it stay in the process.
_MMAP_THRESHOLD = 128 * 1024
# Arenas (per-thread heaps): by default 8 per core, each keeping its own freed memory; the worker,
# runtime and event-loop threads then hold memory in as many heaps as they happen to touch.
_ARENA_MAX = 2


def _bound_allocator() -> None:
    """Cap glibc's arenas and fix its mmap threshold, so that the server's memory follows what its
    requests hold (bench/soak_serve.py: a 30-minute soak under mixed window traffic, recorded in
    bench/RESULTS.md). Settings the operator gave in the environment (MALLOC_ARENA_MAX,
    MALLOC_MMAP_THRESHOLD_) are left alone; nothing is done outside glibc."""
    import ctypes
    import os
    import platform

    if platform.libc_ver()[0] != "glibc":
        return
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return
    if "MALLOC_ARENA_MAX" not in os.environ:
        mallopt(_M_ARENA_MAX, _ARENA_MAX)
    if "MALLOC_MMAP_THRESHOLD_" not in os.environ:
        mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)


def _share_runtime_arena(service: Any) -> None:
    """One ONNX Runtime CPU arena for every session of the server (``share_cpu_arena``: a reserve
    of ``runtime_memory`` MiB kept, growth past it given back), used up to the workers' largest
    batches before the server turns ready (``fill_working_memory``): its memory is then the models
    plus the high-water mark of the batches inside the reserve, flat under any traffic, instead of
    rising and falling with the batches in flight (or, with per-session arenas, growing)."""
    from rapidscore.encoder.runtime.onnx import share_cpu_arena
    from rapidscore.encoder.shared import fill_working_memory

    share_cpu_arena(service.config.runtime_memory * 2**20)
    if service.config.warmup:
        service.before_ready.append(lambda: fill_working_memory(service.config.workers))
