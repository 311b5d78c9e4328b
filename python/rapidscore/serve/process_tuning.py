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
    batches before the server turns ready (``fill_working_memory``), and then the whole reserve
    made resident (:func:`_make_resident`): its memory is the models plus the reserve from ready
    on, flat under any traffic, instead of rising as batches of new shapes first touch more of the
    reserve (a 30-minute soak rose 1.24 -> 1.85 GiB that way) or, without the arena, rising and
    falling with the batches in flight."""
    from rapidscore.encoder.runtime.onnx import share_cpu_arena
    from rapidscore.encoder.shared import fill_working_memory

    reserve = service.config.runtime_memory * 2**20
    before = _anonymous_mappings()  # the reserve is mapped at the arena's first allocation, after this
    share_cpu_arena(reserve)
    if service.config.warmup:
        def fill() -> None:
            fill_working_memory(service.config.workers)
            _make_resident(before, reserve)

        service.before_ready.append(fill)


# madvise(2): fault pages in writable without writing them (Linux 5.14); contents are kept
_MADV_POPULATE_WRITE = 23


def _anonymous_mappings() -> set[tuple[int, int]]:
    """The process's private anonymous mappings (start, end), from /proc/self/maps (empty elsewhere)."""
    try:
        with open("/proc/self/maps", encoding="ascii") as maps:
            lines = maps.read().splitlines()
    except OSError:
        return set()
    found = set()
    for line in lines:
        fields = line.split()
        if len(fields) == 5 and fields[4] == "0" and fields[1].startswith("rw"):  # no path: anonymous
            start, _, end = fields[0].partition("-")
            found.add((int(start, 16), int(end, 16)))
    return found


def _make_resident(before: set[tuple[int, int]], reserve: int) -> int:
    """Fault in every page of the arena's reserve: the one mapping at least the reserve's size
    that appeared since ``before`` (the kernel merges neighbouring anonymous mappings, so it may
    hold a few other blocks too, which are in use). Returns the bytes made resident; 0 where it is
    not found or the kernel cannot (the reserve then becomes resident as batches use it)."""
    import ctypes

    largest = reserve + max(reserve // 4, 64 * 2**20)
    new = [(start, end) for start, end in _anonymous_mappings() - before if reserve <= end - start <= largest]
    if len(new) != 1:
        return 0
    start, end = new[0]
    try:
        madvise = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return 0
    madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    return end - start if madvise(start, end - start, _MADV_POPULATE_WRITE) == 0 else 0
