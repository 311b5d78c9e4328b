"""``compare``: each system's value with a bootstrap interval, and each system against a baseline
with the difference, its interval and paired p-values."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rapidscore.common.signature import build_signature, version_fields
from rapidscore.compare import resampling
from rapidscore.compare.statistics import ItemStats, mean_of
from rapidscore.errors import PairingError

__all__ = ["SystemInterval", "PairedResult", "Comparison", "compare", "TESTS", "DEFAULT_SEED"]

TESTS = ("bootstrap", "randomization")
DEFAULT_SEED = 12345  # sacrebleu's SACREBLEU_SEED default
BOOTSTRAP_P = ("two-sided", "sacrebleu")


@dataclass(frozen=True)
class SystemInterval:
    """One system: its value on the items (``mean``: the mean, or the corpus-level value of a
    ratio metric) and the bootstrap percentile interval ``[low, high]``."""

    name: str
    mean: float
    low: float
    high: float
    n_items: int


@dataclass(frozen=True)
class PairedResult:
    """One system against the baseline: ``difference`` (system minus baseline), its bootstrap
    interval, the p-values (None for a test not run) and the same adjusted for the number of
    systems compared (``correction``); ``significant``: adjusted p < alpha, per test run."""

    system: str
    baseline: str
    difference: float
    low: float
    high: float
    p_bootstrap: float | None
    p_randomization: float | None
    p_bootstrap_adjusted: float | None
    p_randomization_adjusted: float | None
    significant: dict[str, bool] = field(default_factory=dict)


@dataclass(frozen=True)
class Comparison:
    """The result of :func:`compare`: ``systems`` (baseline first) and ``pairs`` (each other
    system against the baseline), with the settings that made them and their ``signature``."""

    metric: str
    statistic: str
    baseline: str
    systems: list[SystemInterval]
    pairs: list[PairedResult]
    tests: tuple[str, ...]
    resamples: int
    trials: int
    exact_randomization: bool
    seed: int | None
    confidence: float
    correction: str
    alpha: float
    bootstrap_p: str
    signature: str
    inputs: list[dict] = field(default_factory=list)  # each system's file and signature (the CLI's)
    resampler: str = resampling.DEFAULT_RESAMPLER

    def system(self, name: str) -> SystemInterval:
        for system in self.systems:
            if system.name == name:
                return system
        raise KeyError(f"no system {name!r} (systems: {', '.join(s.name for s in self.systems)})")

    def pair(self, name: str) -> PairedResult:
        for pair in self.pairs:
            if pair.system == name:
                return pair
        raise KeyError(f"no system {name!r} against the baseline {self.baseline!r} "
                       f"(systems: {', '.join(p.system for p in self.pairs)})")

    def to_dict(self) -> dict[str, Any]:
        """The JSON document (``rapidscore compare --json``); NaN as null."""
        pairs = {pair.system: pair for pair in self.pairs}
        systems = []
        for system in self.systems:
            row: dict[str, Any] = {"name": system.name, "mean": _number(system.mean), "low": _number(system.low),
                                   "high": _number(system.high), "n_items": system.n_items,
                                   "baseline": system.name == self.baseline}
            pair = pairs.get(system.name)
            if pair is not None:
                row.update({"difference": _number(pair.difference), "difference_low": _number(pair.low),
                            "difference_high": _number(pair.high), "p_bootstrap": _number(pair.p_bootstrap),
                            "p_randomization": _number(pair.p_randomization),
                            "p_bootstrap_adjusted": _number(pair.p_bootstrap_adjusted),
                            "p_randomization_adjusted": _number(pair.p_randomization_adjusted),
                            "significant": dict(pair.significant)})
            systems.append(row)
        return {"metric": self.metric, "statistic": self.statistic, "baseline": self.baseline,
                "tests": list(self.tests), "resamples": self.resamples, "trials": self.trials,
                "exact_randomization": self.exact_randomization, "seed": self.seed,
                "confidence": self.confidence, "correction": self.correction, "alpha": self.alpha,
                "bootstrap_p": self.bootstrap_p, "resampler": self.resampler, "signature": self.signature,
                "systems": systems,
                "inputs": self.inputs}


def _number(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


def _positive(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name}: expected a positive integer, got {value!r}")
    return int(value)


def compare(systems: Mapping[str, ItemStats | Sequence[float] | np.ndarray], baseline: str | None = None, *,
            metric: str = "score", tests: Sequence[str] = TESTS, resamples: int = 10_000, trials: int = 10_000,
            seed: int | None = DEFAULT_SEED, confidence: float = 0.95, correction: str = "holm",
            alpha: float = 0.05, bootstrap_p: str = "two-sided", resampler: str = resampling.DEFAULT_RESAMPLER,
            block_bytes: int = resampling.DEFAULT_BLOCK_BYTES) -> Comparison:
    """Paired comparison of systems scored on the same items.

    ``systems``: name -> per-item scores (their mean is compared) or :class:`ItemStats` (a ratio
    metric's per-item counts: ``ratio_of``, ``precision_recall_f1_of``), in the same item order
    for every system; ``baseline``: the system the others are tested against (default: the first).
    Each system gets its value and a ``confidence`` percentile bootstrap interval; each other
    system the difference from the baseline, its interval, ``p_bootstrap`` (paired bootstrap,
    ``resamples`` resamples; ``bootstrap_p``: ``two-sided`` or ``sacrebleu``'s definition) and
    ``p_randomization`` (paired approximate randomization, ``trials`` swap patterns, every pattern
    when 2**n <= trials: exact), adjusted by ``correction`` (``holm``, ``bonferroni``, ``none``)
    for the number of systems tested. The same ``seed`` gives the same numbers.

    ``resampler``: ``splitmix64`` (default: the native kernel's counter-based stream, or its
    pure-Python twin, the same numbers) or ``numpy`` (numpy's streams: the resamples
    ``scipy.stats.bootstrap`` and sacrebleu draw for the same seed; slower). The signature names it.

    PairingError: fewer than two systems, different item counts, an unknown baseline, a
    non-finite per-item statistic.
    """
    tests = tuple(tests)
    for test in tests:
        if test not in TESTS:
            raise ValueError(f"tests: expected {' and/or '.join(TESTS)}, got {test!r}")
    if not tests:
        raise ValueError("tests: name at least one test (bootstrap, randomization)")
    resamples, trials = _positive("resamples", resamples), _positive("trials", trials)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence: expected a level between 0 and 1 (0.95), got {confidence!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha: expected a level between 0 and 1 (0.05), got {alpha!r}")
    if correction not in resampling.CORRECTIONS:
        raise ValueError(f"correction: expected one of {', '.join(resampling.CORRECTIONS)}, got {correction!r}")
    if resampler not in resampling.RESAMPLERS:
        raise ValueError(f"resampler: expected one of {', '.join(resampling.RESAMPLERS)}, got {resampler!r}")
    if bootstrap_p not in BOOTSTRAP_P:
        raise ValueError(f"bootstrap_p: expected one of {', '.join(BOOTSTRAP_P)}, got {bootstrap_p!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
        raise ValueError(f"seed: expected a non-negative integer or None, got {seed!r}")
    if resampler == "splitmix64" and seed is not None and seed >= 2**64:
        raise ValueError(f"seed: the splitmix64 resampler takes seeds below 2**64, got {seed}")
    if len(systems) < 2:
        given = ", ".join(systems) or "none"
        raise PairingError(f"a comparison needs two systems or more, got {len(systems)}: {given}")
    stats = {name: value if isinstance(value, ItemStats) else mean_of(value, f"system {name!r}")
             for name, value in systems.items()}
    names = list(stats)
    baseline = names[0] if baseline is None else baseline
    if baseline not in stats:
        raise PairingError(f"baseline {baseline!r} is not one of the systems ({', '.join(names)})")
    counts = {name: s.n_items for name, s in stats.items()}
    if len(set(counts.values())) > 1:
        raise PairingError("the systems have different item counts (" +
                           ", ".join(f"{name}: {n}" for name, n in counts.items()) + "): a paired test needs the "
                           "same items in the same order")
    for name, s in stats.items():
        bad = ~np.isfinite(s.columns)
        if bad.any():
            item, column = (int(i) for i in np.argwhere(bad)[0])
            raise PairingError(f"system {name!r}: item {item + 1} has a non-finite statistic "
                               f"({float(s.columns[item, column])} in column {column + 1} of its {s.statistic})")
    n_first = next(iter(counts.values()))
    if resampler == "splitmix64" and n_first > 2**32 - 1:
        raise PairingError(f"{n_first} items: the splitmix64 resampler draws from at most 2**32 - 1 items; "
                           "use resampler='numpy'")
    kinds = {s.statistic for s in stats.values()}
    if len(kinds) > 1:
        raise PairingError(f"the systems' statistics differ ({', '.join(sorted(kinds))}): compare one metric")

    order = [baseline, *(name for name in names if name != baseline)]
    ordered = [stats[name] for name in order]
    observed = np.array([s.observed() for s in ordered])
    values = resampling.bootstrap_values(ordered, resamples, seed, block_bytes, resampler)
    low, high = resampling.percentile_interval(values, confidence)
    differences = values[:, 1:] - values[:, :1]
    observed_diff = observed[1:] - observed[0]
    diff_low, diff_high = resampling.percentile_interval(differences, confidence)
    n_items = ordered[0].n_items
    exact = resampling.exhaustive(n_items, trials)
    p_boot = p_rand = None
    if "bootstrap" in tests:
        p_boot = resampling.bootstrap_p_value(differences, observed_diff, bootstrap_p)
    if "randomization" in tests:
        shuffled = resampling.randomization_differences(ordered[0], ordered[1:], trials, seed, block_bytes, resampler)
        p_rand = resampling.randomization_p_value(shuffled, observed_diff, exact)
    adjusted_boot = resampling.adjust_p_values(p_boot, correction) if p_boot is not None else None
    adjusted_rand = resampling.adjust_p_values(p_rand, correction) if p_rand is not None else None

    intervals = [SystemInterval(name, float(observed[k]), float(low[k]), float(high[k]), n_items)
                 for k, name in enumerate(order)]
    pairs = []
    for k, name in enumerate(order[1:]):
        significant = {}
        if adjusted_boot is not None:
            significant["bootstrap"] = bool(adjusted_boot[k] < alpha)
        if adjusted_rand is not None:
            significant["randomization"] = bool(adjusted_rand[k] < alpha)
        pairs.append(PairedResult(
            name, baseline, float(observed_diff[k]), float(diff_low[k]), float(diff_high[k]),
            None if p_boot is None else float(p_boot[k]), None if p_rand is None else float(p_rand[k]),
            None if adjusted_boot is None else adjusted_boot[k], None if adjusted_rand is None else adjusted_rand[k],
            significant))
    statistic = ordered[0].statistic
    signature = build_signature([
        ("metric", metric), ("statistic", statistic), ("n", n_items), ("systems", len(order)),
        ("seed", "none" if seed is None else seed), ("resampler", resampler),
        ("bs", resamples if "bootstrap" in tests else "no"), ("bs-p", bootstrap_p if "bootstrap" in tests else "no"),
        ("ar", ("exact" if exact else trials) if "randomization" in tests else "no"),
        ("ci", f"percentile-{confidence:g}"), ("correction", correction), ("alpha", alpha),
        *version_fields("numpy")], name="compare")
    return Comparison(metric, statistic, baseline, intervals, pairs, tests, resamples, trials, exact, seed,
                      confidence, correction, alpha, bootstrap_p, signature, resampler=resampler)
