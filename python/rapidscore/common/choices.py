"""The encoder settings every layer names: one list, read by the encoder and by the CLI parsers.

Plain tuples, no imports: building a CLI parser must not load the encoder.
"""

from __future__ import annotations

__all__ = ["BACKENDS", "DEVICES", "PRECISIONS", "POOLINGS", "LONG_TEXTS", "LOG_LEVELS"]

BACKENDS = ("onnx", "openvino", "torch")
DEVICES = ("cpu", "cuda")
# "fast": the machine's fastest mode within the fast-mode bound (encoder/precision.py)
PRECISIONS = ("fp32", "bf16", "fp16", "int8", "fast")
POOLINGS = ("mean", "cls")
# What BERTScore does with texts longer than the model's maximum length (encoder/tokens/windows.py).
LONG_TEXTS = ("truncate", "window")
# The service's log levels (uvicorn's).
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")
