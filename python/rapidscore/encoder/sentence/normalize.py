"""sentence-transformers' Normalize module: unit L2 length, on host vectors or a torch tensor.

No torch at import: the numpy path runs without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rapidscore.encoder.sentence.config import check_feature_names, read_json

__all__ = ["Normalize"]

_EPS = 1e-12  # torch.nn.functional.normalize's


@dataclass(frozen=True)
class Normalize:
    """Unit L2 length (``torch.nn.functional.normalize``: a zero vector stays zero)."""

    name = "norm"

    @classmethod
    def load(cls, folder: Path) -> Normalize:
        """The Normalize saved in ``folder``: its config is optional (older models save none)."""
        file = folder / "config.json"
        if file.is_file():
            config = read_json(file)
            if isinstance(config, dict):
                check_feature_names(config, file, "Normalize")
        return cls()

    def forward(self, x: Any) -> Any:
        """(n, d) vectors at unit length: a float32 numpy array on the host, or a torch tensor, on its device."""
        if isinstance(x, np.ndarray):
            return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), np.float32(_EPS))
        import torch

        return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True).clamp_min(_EPS)
