"""ONNX Runtime: the exported graph on the CPU (or CUDA with onnxruntime-gpu)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rapidscore.threads import thread_budget


class OnnxRunner:
    """An ONNX Runtime session. Thread-safe: ``InferenceSession.run`` may be called from many
    threads at once; they share the session's intra-op pool (sized to the thread budget)."""

    returns = "numpy"
    thread_safe = True

    def __init__(self, onnx_path: Path, device: str, num_threads: int | None):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = num_threads or thread_budget()
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
