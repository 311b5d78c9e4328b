"""Where an array lives: numpy on the host, or a torch tensor on some device.

Decided without importing torch, so that code paths that never see a tensor never load it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["is_torch_tensor", "host_array"]


def is_torch_tensor(value: Any) -> bool:
    """Whether ``value`` is a torch tensor."""
    return type(value).__module__.split(".")[0] == "torch" and hasattr(value, "device")


def host_array(value: Any) -> np.ndarray:
    """``value`` as a numpy array; a tensor is copied to the host first (a GPU tensor has no
    host view)."""
    if is_torch_tensor(value):
        return value.detach().cpu().numpy()
    return np.asarray(value)
