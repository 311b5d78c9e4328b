"""Execution backends: an ONNX Runtime session or the torch model, same call signature.

A runner maps int64 (input_ids, attention_mask) of shape (batch, seq) to float32 hidden states
(batch, seq, dim), or (layers + 1, batch, seq, dim) for an all-layers export.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

BACKENDS = ("onnx", "openvino", "torch")
DEVICES = ("cpu", "cuda")


def default_threads() -> int:
    """Threads for a session: the CPUs this process may use (containers often allow fewer than exist)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


class OnnxRunner:
    def __init__(self, onnx_path: Path, device: str, num_threads: int | None):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = num_threads or default_threads()
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3
        if device == "cuda":
            if "CUDAExecutionProvider" not in ort.get_available_providers():
                raise RuntimeError(
                    "device='cuda' needs onnxruntime-gpu with the CUDA provider "
                    f"(available providers: {ort.get_available_providers()}); install "
                    "'rapidscore[gpu]', or use backend='torch' with a CUDA build of torch")
            providers = ["CUDAExecutionProvider", "CPUExecutionProvider"]
        else:
            providers = ["CPUExecutionProvider"]
        self.session = ort.InferenceSession(str(onnx_path), options, providers=providers)
        self.provider = self.session.get_providers()[0]
        # The exporter drops inputs a graph does not use (layer 0 ignores the attention mask).
        self._inputs = {i.name for i in self.session.get_inputs()}

    def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        feed = {"input_ids": input_ids, "attention_mask": attention_mask}
        return self.session.run(None, {k: v for k, v in feed.items() if k in self._inputs})[0]


class OpenVinoRunner:
    """The exported ONNX graph compiled by OpenVINO for the CPU.

    Measured here (AMD EPYC, 2 cores, MiniLM): fp32 about 1.3x ONNX Runtime, bf16 about 2.4x.
    ``precision="fp32"`` forces f32 inference: OpenVINO would otherwise pick bf16 by itself on
    CPUs that support it, which is not exact.
    """

    def __init__(self, onnx_path: Path, device: str, precision: str, num_threads: int | None,
                 compile_cache: Path | None = None):
        try:
            import openvino as ov
        except ImportError as exc:
            raise ImportError("backend='openvino' needs OpenVINO: pip install 'rapidscore[openvino]'") from exc
        if device != "cpu":
            raise ValueError(f"backend='openvino' runs on device='cpu', got device={device!r}")
        core = ov.Core()
        if precision == "bf16" and "BF16" not in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES"):
            raise ValueError("precision='bf16' needs a CPU with bf16 instructions (AVX512_BF16 or AMX); "
                             "this CPU has none, use precision='fp32'")
        config = {
            "INFERENCE_PRECISION_HINT": "bf16" if precision == "bf16" else "f32",
            "PERFORMANCE_HINT": "LATENCY",
            "INFERENCE_NUM_THREADS": num_threads or default_threads(),
        }
        if compile_cache is not None:
            config["CACHE_DIR"] = str(compile_cache)
        self.compiled = core.compile_model(core.read_model(str(onnx_path)), "CPU", config)
        self._request = self.compiled.create_infer_request()
        self._inputs = {port.get_any_name() for port in self.compiled.inputs}
        self.provider = f"openvino-cpu-{precision}"

    def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        feed = {"input_ids": input_ids, "attention_mask": attention_mask}
        result = self._request.infer({k: v for k, v in feed.items() if k in self._inputs})
        return np.array(result[0], dtype=np.float32, copy=True)  # the request reuses its buffers


class TorchRunner:
    def __init__(self, model_dir: Path, layer: int | str, device: str, num_threads: int | None):
        import torch

        from rapidscore.encoder.torch_model import hidden_state_of, load_truncated_model

        if device == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("device='cuda' with backend='torch' needs a CUDA build of torch and a GPU")
        if num_threads:
            torch.set_num_threads(num_threads)
        all_layers = layer == "all"
        self._torch = torch
        self._forward = hidden_state_of
        self.device = device
        self.layer = layer
        self.model = load_truncated_model(model_dir, None if all_layers else int(layer), all_layers).to(device)
        self.provider = f"torch-{device}"

    def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        torch = self._torch
        with torch.inference_mode():
            hidden = self._forward(self.model, torch.from_numpy(input_ids).to(self.device),
                                   torch.from_numpy(attention_mask).to(self.device), self.layer)
            return hidden.float().cpu().numpy()
