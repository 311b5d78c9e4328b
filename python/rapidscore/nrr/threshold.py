"""Threshold tools for the Negative Rejection Rate: the NRR curve and threshold calibration."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CRITERIA = ("f1", "youden")

__all__ = ["nrr_curve", "calibrate_threshold", "ThresholdCalibration"]


def nrr_curve(similarities, thresholds=None) -> tuple[np.ndarray, np.ndarray]:
    """(thresholds, NRR at each threshold), NRR(t) = fraction of similarities strictly below t.

    Default thresholds: 201 points from -1 to 1. Computed once from the sorted similarities.
    """
    sims = np.sort(np.asarray(similarities, dtype=np.float64))
    if sims.size == 0:
        raise ValueError("similarities is empty")
    if np.isnan(sims).any():
        raise ValueError("similarities contain NaN")
    grid = np.linspace(-1, 1, 201) if thresholds is None else np.asarray(thresholds, dtype=np.float64)
    bad = np.flatnonzero(np.isnan(grid))
    if bad.size:
        raise ValueError(f"thresholds[{bad[0]}] is NaN")
    return grid, np.searchsorted(sims, grid, side="left") / sims.size


@dataclass(frozen=True)
class ThresholdCalibration:
    """The chosen threshold and the confusion matrix of the *rejected* (not captured) class."""

    threshold: float
    criterion: str
    value: float
    true_positive: int   # not captured, rejected
    false_positive: int  # captured, rejected
    true_negative: int   # captured, not rejected
    false_negative: int  # not captured, not rejected

    @property
    def confusion_matrix(self) -> np.ndarray:
        """[[TN, FP], [FN, TP]] with rows = truth (captured, not captured), columns = decision
        (kept, rejected)."""
        return np.array([[self.true_negative, self.false_positive], [self.false_negative, self.true_positive]])


def calibrate_threshold(similarities, captured, criterion: str = "f1") -> ThresholdCalibration:
    """Choose the threshold that best separates labelled examples.

    ``captured[i]`` is True when a person judged item i's meaning captured. The decision "rejected"
    is similarity < threshold; ``criterion`` "f1" maximises F1 of the rejected class, "youden"
    maximises Youden's J (TPR - FPR). Candidate thresholds are the midpoints between consecutive
    distinct similarities (and just beyond both ends); ties go to the lower threshold.
    """
    if criterion not in CRITERIA:
        raise ValueError(f"criterion must be one of {CRITERIA}, got {criterion!r}")
    sims = np.asarray(similarities, dtype=np.float64)
    labels = np.asarray(captured)
    if sims.ndim != 1 or labels.shape != sims.shape:
        raise ValueError(f"similarities and captured must be 1-D of equal length, got {sims.shape} and {labels.shape}")
    if sims.size == 0:
        raise ValueError("no labelled examples")
    bad = np.flatnonzero(~np.isfinite(sims))
    if bad.size:
        raise ValueError(f"similarities[{bad[0]}] is {sims[bad[0]]}: similarities must be finite")
    if labels.dtype != bool:
        if not np.isin(labels, [0, 1]).all():
            raise ValueError("captured must hold booleans (or 0/1)")
        labels = labels.astype(bool)
    not_captured = ~labels
    distinct = np.unique(sims)
    candidates = np.concatenate([[distinct[0] - 1e-6], (distinct[:-1] + distinct[1:]) / 2, [distinct[-1] + 1e-6]])
    rejected = sims[None, :] < candidates[:, None]
    tp = (rejected & not_captured).sum(1)
    fp = (rejected & labels).sum(1)
    fn = (~rejected & not_captured).sum(1)
    tn = (~rejected & labels).sum(1)
    if criterion == "f1":
        denominator = 2 * tp + fp + fn
        values = np.where(denominator > 0, 2 * tp / np.maximum(denominator, 1), 0.0)
    else:
        tpr = tp / max(int(not_captured.sum()), 1)
        fpr = fp / max(int(labels.sum()), 1)
        values = tpr - fpr
    best = int(np.argmax(values))
    return ThresholdCalibration(threshold=float(candidates[best]), criterion=criterion, value=float(values[best]),
                                true_positive=int(tp[best]), false_positive=int(fp[best]),
                                true_negative=int(tn[best]), false_negative=int(fn[best]))
