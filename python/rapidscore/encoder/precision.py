"""``precision="fast"``: the fastest mode this machine has whose accuracy meets the fast-mode bound.

The bound (docs/performance.md, "Fast modes"): BERTScore mean |dF| <= 5e-4 and Kendall tau >= 0.995
against the exact scores, sentence cosines within 1e-3, on the real all-MiniLM-L6-v2. What "fast"
becomes, in order:

- ``device="cuda"``: fp16 on the torch backend (measured on an H100: mean |dF| 2.8e-5, tau 1.000;
  bench/RESULTS_GPU.md). A backend other than torch has no GPU fast mode: exact fp32.
- CPU with bf16 instructions (AVX512_BF16 or AMX): bf16 on OpenVINO (mean |dF| about 1e-4, about
  2x fp32; bench/RESULTS.md), or on torch where ``backend="torch"`` is asked for.
- any other CPU, and ``backend="onnx"``: exact fp32. ``precision="int8"``
  (``rapidscore.encoder.int8``) is not chosen: measured on the real model it is within the bound on
  W1's pairs (mean |dF| 3.9e-4, tau 0.997, 1.4x fp32) but not on other texts (unrelated questions
  6.9e-4, tau 0.995; random word sequences tau 0.9945; sentence cosines of unrelated sentences mean
  |d cos| 1.1e-3), and its int8 weights are the cause (bench/RESULTS.md, "int8 schemes"). It stays
  a mode users ask for by name.

The mode actually used is the encoder's ``precision`` and is what every signature records
(``precision:bf16``, never ``precision:fast``). Imports nothing heavy until a CPU is asked about.
"""

from __future__ import annotations

import functools

__all__ = ["FAST", "resolve_precision", "cpu_has_bf16"]

#: the precision name that asks for the machine's fast mode
FAST = "fast"


@functools.cache
def _openvino_cpu_bf16() -> bool:
    try:
        import openvino
    except ImportError:
        return False
    return "BF16" in openvino.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")


def cpu_has_bf16(backend: str = "openvino") -> bool:
    """Whether ``backend`` runs bf16 natively on this CPU (OpenVINO: its CPU plugin's capability,
    False when OpenVINO is not installed; torch: torch's own dispatch check)."""
    if backend == "torch":
        from rapidscore.encoder.runtime.torch import bf16_supported

        return bf16_supported("cpu")
    return backend == "openvino" and _openvino_cpu_bf16()


def resolve_precision(precision: str, device: str = "cpu", backend: str | None = None) -> tuple[str, str | None]:
    """``(precision, backend)`` with ``"fast"`` replaced by the mode it means here (see the module);
    any other precision, and the backend, are returned unchanged."""
    if precision != FAST:
        return precision, backend
    if device == "cuda":
        return ("fp16", "torch") if backend in (None, "torch") else ("fp32", backend)
    if backend in (None, "openvino") and cpu_has_bf16("openvino"):
        return "bf16", "openvino"
    if backend == "torch" and cpu_has_bf16("torch"):
        return "bf16", "torch"
    return "fp32", backend
