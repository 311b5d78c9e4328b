"""Confidence intervals of proportions: the one Wilson interval of the package (the RGB rates,
the abstention figures and tables), and the check of a confidence level."""

from __future__ import annotations

import math
import numbers
from statistics import NormalDist
from typing import Any

__all__ = ["wilson_interval", "check_confidence"]


def wilson_interval(successes: float, n: float, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion ``successes / n`` (Wilson 1927; Newcombe 1998, method
    3, without continuity correction): ``(centre -+ half) / (1 + z^2/n)`` with ``centre = p +
    z^2/(2n)``, ``half = z sqrt(p(1-p)/n + z^2/(4n^2))``, ``z`` the two-sided normal quantile of
    ``confidence``; clipped to [0, 1]. ``successes`` in [0, n] may be fractional (a mean of 0/1
    values times ``n``); NaNs when ``n == 0``. The one implementation: the RGB rates
    (``rapidscore.abstention.wilson_interval``, counts only) and the abstention figures use it."""
    check_confidence(confidence)
    if isinstance(n, bool) or not isinstance(n, numbers.Real) or n < 0 or not math.isfinite(n):
        raise ValueError(f"n must be a finite count >= 0, got {n!r}")
    if n == 0:
        return float("nan"), float("nan")
    if isinstance(successes, bool) or not isinstance(successes, numbers.Real) or not 0 <= successes <= n:
        raise ValueError(f"successes must be in [0, n={n}], got {successes!r}")
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    p, z2 = successes / n, z * z
    denominator = 1.0 + z2 / n
    centre = (p + z2 / (2.0 * n)) / denominator
    half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def check_confidence(confidence: Any) -> float:
    """``confidence`` as a float in (0, 1), else a ValueError naming it."""
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be a number in (0, 1), e.g. 0.95; got {confidence!r}")
    return float(confidence)
