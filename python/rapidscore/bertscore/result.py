"""The result of a BERTScore call."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

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

    def __str__(self) -> str:
        return (f"{self.signature} P: {self.mean_precision:.6f} R: {self.mean_recall:.6f} "
                f"F1: {self.mean_f1:.6f}")
