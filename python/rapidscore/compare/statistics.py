"""Per-item sufficient statistics of one system, and the corpus-level value they make.

A metric that is a mean of per-item scores keeps one column (the scores); a ratio metric keeps
the per-item counts whose corpus sums make it (NER's true/false positives, a rate's numerator and
denominator), so that a resample's value is recomputed from the resample's sums, never averaged
over items.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from rapidscore.errors import PairingError

__all__ = ["ItemStats", "mean_of", "ratio_of", "precision_recall_f1_of"]


@dataclass(frozen=True)
class ItemStats:
    """``columns``: an ``(n_items, k)`` float64 matrix of per-item statistics; ``value``: the
    corpus-level value of column sums, vectorised (``(..., k)`` sums -> ``(...)`` values; the
    resample size is ``n_items``); ``statistic``: what the value is (``mean``, ``ratio``, ``f1``...)."""

    columns: np.ndarray
    value: Callable[[np.ndarray], np.ndarray]
    statistic: str

    @property
    def n_items(self) -> int:
        return int(self.columns.shape[0])

    def observed(self) -> float:
        """The value on the items as they are."""
        return float(self.value(self.columns.sum(axis=0)))


def _as_column(values: Sequence[float] | np.ndarray, what: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise PairingError(f"{what}: expected one score per item (a 1-D sequence), got shape {array.shape}")
    if array.size == 0:
        raise PairingError(f"{what}: no items")
    return array


def mean_of(values: Sequence[float] | np.ndarray, what: str = "scores") -> ItemStats:
    """The mean of per-item scores. NaN items (a score that could not be computed) count neither
    in the sum nor in the count, as the report's means do: the mean is then a ratio of sums."""
    scores = _as_column(values, what)
    if np.isinf(scores).any():
        raise PairingError(f"{what}: item {int(np.flatnonzero(np.isinf(scores))[0]) + 1} is infinite")
    missing = np.isnan(scores)
    if missing.all():
        raise PairingError(f"{what}: every item is NaN")
    # always (sum, count) columns: systems with and without NaN items stack and swap alike; with
    # no NaN the count's sum is exactly the resample size, so the value is sum / n as it is
    columns = np.stack([np.where(missing, 0.0, scores), (~missing).astype(np.float64)], axis=1)
    return ItemStats(columns, _ratio, "mean")


def _ratio(sums: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(sums[..., 1] > 0, sums[..., 0] / np.where(sums[..., 1] > 0, sums[..., 1], 1.0), np.nan)


def ratio_of(numerators: Sequence[float] | np.ndarray, denominators: Sequence[float] | np.ndarray,
             what: str = "rate") -> ItemStats:
    """sum(numerators) / sum(denominators): a rate whose per-item denominator varies (NaN for a
    resample whose denominators sum to 0)."""
    top, bottom = _as_column(numerators, f"{what} numerators"), _as_column(denominators, f"{what} denominators")
    if top.size != bottom.size:
        raise PairingError(f"{what}: {top.size} numerators but {bottom.size} denominators")
    if (bottom < 0).any():
        raise PairingError(f"{what}: item {int(np.flatnonzero(bottom < 0)[0]) + 1} has a negative denominator")
    return ItemStats(np.stack([top, bottom], axis=1), _ratio, "ratio")


def precision_recall_f1_of(credit: Sequence[float] | np.ndarray, predicted: Sequence[float] | np.ndarray,
                           gold: Sequence[float] | np.ndarray, which: str = "f1", *,
                           both_empty: float = 0.0, what: str = "counts") -> ItemStats:
    """Corpus precision ``sum(credit) / sum(predicted)``, recall ``sum(credit) / sum(gold)`` or
    their F1 from per-item counts (0 where a denominator is 0, nervaluate's convention; a resample
    with no gold and no prediction at all is ``both_empty``)."""
    if which not in ("precision", "recall", "f1"):
        raise ValueError(f"which: expected precision, recall or f1, got {which!r}")
    columns = np.stack([_as_column(credit, f"{what} credit"), _as_column(predicted, f"{what} predicted"),
                        _as_column(gold, f"{what} gold")], axis=1)

    def value(sums: np.ndarray) -> np.ndarray:
        credit_sum, predicted_sum, gold_sum = sums[..., 0], sums[..., 1], sums[..., 2]
        with np.errstate(divide="ignore", invalid="ignore"):
            precision = np.where(predicted_sum > 0, credit_sum / np.where(predicted_sum > 0, predicted_sum, 1), 0.0)
            recall = np.where(gold_sum > 0, credit_sum / np.where(gold_sum > 0, gold_sum, 1), 0.0)
            if which == "precision":
                out = precision
            elif which == "recall":
                out = recall
            else:
                total = precision + recall
                out = np.where(total > 0, 2 * precision * recall / np.where(total > 0, total, 1), 0.0)
        return np.where((predicted_sum == 0) & (gold_sum == 0), both_empty, out)

    return ItemStats(columns, value, which)
