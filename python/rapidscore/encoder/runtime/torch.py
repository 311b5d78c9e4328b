"""The Hugging Face torch model, on the CPU or a GPU; hidden states stay on its device."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch


class TorchRunner:
    """The truncated torch model in inference mode. Returns tensors on its device.

    Thread-safe: an eval-mode forward pass under ``torch.inference_mode`` keeps no state between
    calls, so threads may share the model.
    """

    returns = "torch"
    thread_safe = True

    def __init__(self, model_dir: Path, layer: int | str, device: str, num_threads: int | None):
        from rapidscore.encoder.onnx_export import require_torch_stack

        require_torch_stack("backend='torch'")
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

    def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> torch.Tensor:
        torch = self._torch
        with torch.inference_mode():
            hidden = self._forward(self.model, torch.from_numpy(input_ids).to(self.device),
                                   torch.from_numpy(attention_mask).to(self.device), self.layer)
            return hidden.float()
