"""The tests' size and power, simulated: identically distributed systems are called different at
the 5% level in about 5% of seeds, and a shifted system as often as the textbook power of a
two-sided z-test of the mean paired difference predicts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rapidscore.compare import compare, resampling

pytestmark = pytest.mark.slow  # 2 x 1,000 comparisons

SEEDS = 1000
N_ITEMS = 100


def _rejections(shift: float, resampler: str) -> dict[str, float]:
    hits = {"bootstrap": 0, "randomization": 0}
    for seed in range(SEEDS):
        rng = np.random.default_rng(seed)
        base = rng.normal(0.7, 0.1, N_ITEMS)
        system = base + rng.normal(shift, 0.1, N_ITEMS)
        pair = compare({"base": base, "system": system}, resamples=999, trials=999,
                       seed=10_000 + seed, resampler=resampler).pairs[0]
        hits["bootstrap"] += pair.p_bootstrap < 0.05
        hits["randomization"] += pair.p_randomization < 0.05
    return {test: count / SEEDS for test, count in hits.items()}


def _normal_cdf(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


@pytest.mark.parametrize("resampler", resampling.RESAMPLERS)
def test_identical_distributions_are_rejected_about_5_percent_of_the_time(resampler) -> None:
    rates = _rejections(0.0, resampler)
    assert 0.03 <= rates["bootstrap"] <= 0.07, rates
    assert 0.03 <= rates["randomization"] <= 0.07, rates


@pytest.mark.parametrize("resampler", resampling.RESAMPLERS)
def test_a_shifted_system_has_the_textbook_power(resampler) -> None:
    shift, sd = 0.025, 0.1  # paired differences ~ N(shift, sd**2)
    z = shift * math.sqrt(N_ITEMS) / sd
    power = _normal_cdf(z - 1.959964) + _normal_cdf(-z - 1.959964)  # ~0.71
    rates = _rejections(shift, resampler)
    # 1,000 seeds: a standard error of ~1.5 points; the bootstrap's intervals are a little
    # narrow at n = 100 (its power a little high), hence a few points
    assert abs(rates["bootstrap"] - power) < 0.05, (rates, power)
    assert abs(rates["randomization"] - power) < 0.05, (rates, power)
