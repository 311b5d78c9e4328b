"""``precision="fast"``: the fastest mode this machine has whose accuracy meets the fast-mode bound.

The bound (docs/performance.md, "Fast modes"): BERTScore mean |dF| <= 5e-4 and Kendall tau >= 0.995
against the exact scores, sentence cosines within 1e-3, on the real all-MiniLM-L6-v2. What "fast"
becomes, in order:

- ``device="cuda"``: fp16 on the torch backend (measured on an H100: mean |dF| 2.8e-5, tau 1.000;
  bench/RESULTS_GPU.md). A backend other than torch has no GPU fast mode: exact fp32.
- CPU with bf16 instructions (AVX512_BF16 or AMX): bf16 on OpenVINO (mean |dF| about 1e-4, about
  2x fp32; bench/RESULTS.md), or on torch where ``backend="torch"`` is asked for.
- x86 CPU with VNNI (AVX512_VNNI or AVX-VNNI) but no bf16, and ``backend`` ONNX Runtime or unnamed:
  int8 (``rapidscore.encoder.export.int8``: mean |dF| 3.2e-4, tau 0.998 on W1's pairs, sentence cosines
  of unrelated sentences 9.3e-4 to 1.0e-3, at the bound; 1.3-1.4x fp32, bench/RESULTS.md). A model
  int8 refuses (``Int8Error``) runs in exact fp32 instead, with a warning, and its signature says
  fp32.
- any other CPU: exact fp32. Without VNNI, x86 int8 products go through ``vpmaddubsw`` at about
  half the VNNI rate, so two int8 passes cost about as much as fp32 and int8 is no faster there;
  on ARM it has not been measured. ``precision="int8"`` still runs there when asked for by name.

The mode actually used is the encoder's ``precision`` and is what every signature records
(``precision:bf16``, never ``precision:fast``). Each backend's fast mode on each device is its
capability table's ``fast`` (``rapidscore.encoder.runtime``); this module adds what the machine
has. Imports nothing heavy until a CPU is asked about.
"""

from __future__ import annotations

import functools
import platform

from rapidscore.encoder.runtime import RUNTIMES

__all__ = ["FAST", "resolve_precision", "unnamed_backends", "cpu_has_bf16", "cpu_has_vnni", "is_x86"]

#: the precision name that asks for the machine's fast mode
FAST = "fast"


def unnamed_backends(device: str) -> tuple[str, ...]:
    """The backends whose fast modes "fast" tries on ``device`` when no backend is named, in
    order: their capability tables' ``unnamed_fast`` ranks (torch's CPU bf16 is left to
    OpenVINO's, which runs the same mode faster)."""
    ranked = sorted((caps.unnamed_fast[device], name) for name, caps in RUNTIMES.items()
                    if device in caps.unnamed_fast)
    return tuple(name for _, name in ranked)


def cpu_has_bf16(backend: str = "openvino") -> bool:
    """Whether ``backend`` runs bf16 natively on this CPU (its table's ``native_bf16``: OpenVINO's
    CPU plugin, False when OpenVINO is not installed; torch's own dispatch check)."""
    caps = RUNTIMES.get(backend)
    return bool(caps is not None and caps.native_bf16 is not None and caps.native_bf16("cpu"))


def is_x86() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64", "i386", "i686", "x86")


@functools.cache
def _linux_cpu_flags() -> frozenset[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


def cpu_has_vnni() -> bool:
    """Whether this is an x86 CPU with VNNI (AVX512_VNNI or AVX-VNNI): u8 x s8 products summed in
    32 bits by ``vpdpbusd``, which ONNX Runtime's int8 kernels use where it exists. Read from
    /proc/cpuinfo; False where that cannot be read (other systems: int8 then stays in the 7-bit
    form that is exact on every x86 CPU)."""
    return is_x86() and bool(_linux_cpu_flags() & {"avx512_vnni", "avx_vnni"})


def _machine_has(precision: str, backend: str) -> bool:
    """Whether this machine runs a fast mode at its full speed: bf16 natively, int8 with VNNI (fp16
    is a GPU's mode: it does not depend on the CPU)."""
    if precision == "bf16":
        return cpu_has_bf16(backend)
    if precision == "int8":
        return cpu_has_vnni()
    return True


def resolve_precision(precision: str, device: str = "cpu", backend: str | None = None) -> tuple[str, str | None]:
    """``(precision, backend)`` with ``"fast"`` replaced by the mode it means here (see the module):
    the fast mode of the backend's table on ``device`` (``unnamed_backends`` in turn when none is
    named) where this machine has it, else fp32. Any other precision, and the backend, are
    returned unchanged."""
    if precision != FAST:
        return precision, backend
    for name in (backend,) if backend is not None else unnamed_backends(device):
        caps = RUNTIMES.get(name)
        mode = caps.fast.get(device) if caps is not None else None
        if mode is not None and _machine_has(mode, name):
            return mode, name
    return "fp32", backend
