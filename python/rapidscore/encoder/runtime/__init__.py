"""Execution backends behind one contract (the runner).

A runner maps int64 ``(input_ids, attention_mask)`` of shape (batch, seq) to float32 hidden
states (batch, seq, dim), or (layers + 1, batch, seq, dim) for an all-layers model. Each runner
declares:

- ``returns``: "numpy" (host arrays) or "torch" (tensors on the runner's device), so the encoder
  keeps embeddings where they were produced;
- ``thread_safe``: whether many threads may call it at once (the encoder serialises calls of a
  runner that is not);
- ``provider``: a short name of where it runs, for signatures and logs.

Runners size their thread pools from the process-wide budget (``rapidscore.threads``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import numpy as np

from rapidscore.common.choices import BACKENDS, DEVICES

__all__ = ["BACKENDS", "DEVICES", "Runner", "make_runner"]


class Runner(Protocol):
    provider: str
    returns: str
    thread_safe: bool

    def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> Any: ...


def make_runner(backend: str, *, onnx_path: Path | None = None, model_dir: Path | None = None,
                layer: int | str | None = None, device: str = "cpu", precision: str = "fp32",
                num_threads: int | None = None, compile_cache: Path | None = None) -> Runner:
    """The runner of ``backend``: the ONNX graph (onnx, openvino) or the torch model (torch)."""
    if backend == "onnx":
        from rapidscore.encoder.runtime.onnx import OnnxRunner

        if onnx_path is None:
            raise ValueError("the onnx backend needs onnx_path")
        return OnnxRunner(onnx_path, device, num_threads)
    if backend == "openvino":
        from rapidscore.encoder.runtime.openvino import OpenVinoRunner

        if onnx_path is None:
            raise ValueError("the openvino backend needs onnx_path")
        return OpenVinoRunner(onnx_path, device, precision, num_threads, compile_cache=compile_cache)
    if backend == "torch":
        from rapidscore.encoder.runtime.torch import TorchRunner

        if model_dir is None or layer is None:
            raise ValueError("the torch backend needs model_dir and layer")
        return TorchRunner(model_dir, layer, device, num_threads, precision)
    raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
