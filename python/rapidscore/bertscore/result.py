"""The result of a BERTScore call."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from rapidscore.common.result import import_pandas, jsonable

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["BERTScoreResult"]


@dataclass(frozen=True)
class BERTScoreResult:
    """Scores of N candidates: arrays of shape (N,), or (layers + 1, N) with all_layers."""

    precision: np.ndarray
    recall: np.ndarray
    f1: np.ndarray
    signature: str
    details: dict = field(default_factory=dict, repr=False)

    @property
    def mean_precision(self) -> float:
        return float(np.mean(self.precision)) if self.precision.size else 0.0

    @property
    def mean_recall(self) -> float:
        return float(np.mean(self.recall)) if self.recall.size else 0.0

    @property
    def mean_f1(self) -> float:
        return float(np.mean(self.f1)) if self.f1.size else 0.0

    def to_dict(self) -> dict:
        """Signature, means and per-candidate scores (lists; nested per layer with all_layers)."""
        return {"signature": self.signature,
                "mean": {"P": self.mean_precision, "R": self.mean_recall, "F1": self.mean_f1},
                "precision": self.precision.tolist(), "recall": self.recall.tolist(), "f1": self.f1.tolist(),
                "details": jsonable(self.details)}

    def to_frame(self) -> pd.DataFrame:
        """One row per candidate: precision, recall, f1 (with all_layers, one row per layer and
        candidate, with a ``layer`` column); the signature in ``attrs``."""
        pandas = import_pandas()
        if self.f1.ndim == 1:
            frame = pandas.DataFrame({"precision": self.precision, "recall": self.recall, "f1": self.f1})
        else:
            layers, n = self.f1.shape
            frame = pandas.DataFrame({"layer": np.repeat(np.arange(layers), n),
                                      "candidate": np.tile(np.arange(n), layers),
                                      "precision": self.precision.ravel(), "recall": self.recall.ravel(),
                                      "f1": self.f1.ravel()})
        frame.attrs["signature"] = self.signature
        return frame

    def __str__(self) -> str:
        return (f"{self.signature} P: {self.mean_precision:.6f} R: {self.mean_recall:.6f} "
                f"F1: {self.mean_f1:.6f}")
