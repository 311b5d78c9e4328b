"""rapidscore.compare against the references it follows: scipy.stats.bootstrap (percentile) and
permutation_test (paired samples), and sacrebleu's paired bootstrap (sacrebleu/significance.py)."""

from __future__ import annotations

import numpy as np
import pytest

from rapidscore.compare import compare, mean_of, resampling

pytestmark = pytest.mark.slow  # imports scipy or sacrebleu, the references


def _dyadic(rng, n, shift=0.0):
    # multiples of 1/64: every sum of up to 2**40 of them is exact in float64, so orders of
    # summation cannot differ and "equal" means equal
    return np.round((rng.random(n) + shift) * 64) / 64


def test_bootstrap_interval_equals_scipy_percentile_with_the_same_resamples() -> None:
    stats = pytest.importorskip("scipy.stats", reason="scipy is the reference")
    rng = np.random.default_rng(7)
    base, system = _dyadic(rng, 64), _dyadic(rng, 64, 0.1)  # n = 2**6: exact means
    result = compare({"base": base, "system": system}, resamples=3000, seed=2024, tests=("bootstrap",),
                     resampler="numpy")
    for name, values in (("base", base), ("system", system)):
        ref = stats.bootstrap((values,), np.mean, n_resamples=3000, method="percentile", confidence_level=0.95,
                              rng=np.random.default_rng(2024), vectorized=True)
        assert (result.system(name).low, result.system(name).high) == (
            ref.confidence_interval.low, ref.confidence_interval.high)
    # the difference's interval: scipy's paired bootstrap of the mean difference, same indices
    ref = stats.bootstrap((system, base), lambda s, b, axis: np.mean(s, axis=axis) - np.mean(b, axis=axis),
                          paired=True, n_resamples=3000, method="percentile", rng=np.random.default_rng(2024),
                          vectorized=True)
    pair = result.pair("system")
    assert (pair.low, pair.high) == (ref.confidence_interval.low, ref.confidence_interval.high)


def test_bootstrap_interval_of_real_valued_scores_matches_scipy_to_rounding() -> None:
    stats = pytest.importorskip("scipy.stats", reason="scipy is the reference")
    values = np.random.default_rng(3).normal(0.8, 0.1, 500)
    result = compare({"a": values, "b": values[::-1]}, resamples=2000, seed=5, tests=("bootstrap",),
                     resampler="numpy")
    ref = stats.bootstrap((values,), np.mean, n_resamples=2000, method="percentile",
                          rng=np.random.default_rng(5), vectorized=True)
    np.testing.assert_allclose([result.system("a").low, result.system("a").high],
                               [ref.confidence_interval.low, ref.confidence_interval.high], rtol=1e-13)


@pytest.mark.parametrize("resampler", resampling.RESAMPLERS)
@pytest.mark.parametrize("n", [5, 9, 12])
def test_randomization_is_exact_and_equals_scipy_permutation_test_for_small_n(n, resampler) -> None:
    stats = pytest.importorskip("scipy.stats", reason="scipy is the reference")
    rng = np.random.default_rng(n)
    base, system = rng.normal(size=n), rng.normal(0.7, 1, size=n)
    result = compare({"base": base, "system": system}, trials=10_000, seed=1, tests=("randomization",),
                     resampler=resampler)
    assert result.exact_randomization and "ar:exact" in result.signature
    ref = stats.permutation_test((system, base), lambda s, b, axis: np.mean(s, axis=axis) - np.mean(b, axis=axis),
                                 permutation_type="samples", vectorized=True, n_resamples=10_000)
    assert result.pair("system").p_randomization == pytest.approx(ref.pvalue, abs=1e-12)


@pytest.mark.parametrize("resampler", resampling.RESAMPLERS)
def test_randomization_agrees_with_scipy_within_monte_carlo_error(resampler) -> None:
    stats = pytest.importorskip("scipy.stats", reason="scipy is the reference")
    rng = np.random.default_rng(11)
    base = rng.normal(size=200)
    system = base + rng.normal(0.08, 1, size=200)
    trials = 20_000
    ours = compare({"base": base, "system": system}, trials=trials, seed=3, tests=("randomization",),
                   resampler=resampler)
    ref = stats.permutation_test((system, base), lambda s, b, axis: np.mean(s, axis=axis) - np.mean(b, axis=axis),
                                 permutation_type="samples", vectorized=True, n_resamples=trials,
                                 rng=np.random.default_rng(4))
    p, q = ours.pair("system").p_randomization, ref.pvalue
    assert 0.01 < q < 0.5  # a p-value in the range where the check has teeth
    standard_error = np.sqrt(2 * q * (1 - q) / trials)  # of a difference of two estimates
    assert abs(p - q) < 4 * standard_error


@pytest.mark.parametrize("resampler", resampling.RESAMPLERS)
def test_bootstrap_interval_agrees_with_scipy_over_20_seeds(resampler) -> None:
    """Different resamples (seeds 0..19 for us, 100..119 for scipy; the splitmix64 stream too):
    the endpoints agree within Monte Carlo error, the mean over seeds to a tenth of the seeds'
    spread."""
    stats = pytest.importorskip("scipy.stats", reason="scipy is the reference")
    values = np.random.default_rng(0).exponential(size=400)
    ours, theirs = [], []
    for seed in range(20):
        r = compare({"a": values, "b": values + 1}, resamples=2000, seed=seed, tests=("bootstrap",),
                    resampler=resampler)
        ours.append((r.system("a").low, r.system("a").high))
        ref = stats.bootstrap((values,), np.mean, n_resamples=2000, method="percentile",
                              rng=np.random.default_rng(100 + seed), vectorized=True)
        theirs.append((ref.confidence_interval.low, ref.confidence_interval.high))
    ours_mean, theirs_mean = np.mean(ours, axis=0), np.mean(theirs, axis=0)
    spread = np.std(theirs, axis=0, ddof=1)
    assert np.all(np.abs(ours_mean - theirs_mean) < 4 * spread / np.sqrt(10))


def _toy_sacrebleu_metric(scores: dict):
    """A sentence-level metric in sacrebleu's Metric interface: a hypothesis's score is looked up,
    the corpus score is the mean (statistics: [score, 1] per sentence)."""
    base = pytest.importorskip("sacrebleu.metrics.base", reason="sacrebleu is the reference")

    class MeanScore(base.Metric):
        _SIGNATURE_TYPE = base.Signature

        def __init__(self) -> None:
            super().__init__()

        def _extract_corpus_statistics(self, hypotheses, references):
            return [[scores[h], 1.0] for h in hypotheses]

        def _compute_score_from_stats(self, stats):
            return base.Score("toy", float(stats[0] / stats[1]))

        def _aggregate_and_compute(self, stats):
            return self._compute_score_from_stats(np.sum(stats, axis=0))

        def _preprocess_segment(self, sent):
            return sent

        def _compute_segment_statistics(self, hypothesis, ref_kwargs):
            return [scores[hypothesis], 1.0]

        def _extract_reference_info(self, refs):
            return {}

        def compute_f1(self, *args):
            return 0

    return MeanScore()


@pytest.mark.slow
def test_paired_bootstrap_follows_sacrebleu() -> None:
    significance = pytest.importorskip("sacrebleu.significance", reason="sacrebleu is the reference")
    rng = np.random.default_rng(8)
    n = 120
    base, system = _dyadic(rng, n), _dyadic(rng, n, 0.05)
    base_h, sys_h = [f"b{i}" for i in range(n)], [f"s{i}" for i in range(n)]
    metric = _toy_sacrebleu_metric({**dict(zip(base_h, base)), **dict(zip(sys_h, system))})
    bl_stats = metric._extract_corpus_statistics(base_h, None)
    bl_result = significance.Result(metric._aggregate_and_compute(bl_stats).score)
    _, results = significance._paired_bs_test({"toy": (bl_stats, bl_result)}, "system", sys_h, None,
                                              {"toy": metric}, n_samples=1000, seed=12345)
    theirs = results["toy"]
    ours = compare({"base": base, "system": system}, resamples=1000, seed=12345, tests=("bootstrap",),
                   bootstrap_p="sacrebleu", resampler="numpy")
    assert ours.system("system").mean == pytest.approx(theirs.score, abs=1e-6)
    assert ours.pair("system").p_bootstrap == theirs.p_value  # same resamples, same p-value definition
    # the same resampled scores: sacrebleu's interval is its mean +- half the 2.5..97.5 order statistics
    values = resampling.bootstrap_values([mean_of(system)], 1000, 12345, resampler="numpy")[:, 0]
    mean, half_width = significance.estimate_ci(values)
    assert (theirs.mean, theirs.ci) == pytest.approx((mean, half_width), abs=1e-6)
    # rapidscore's own default differs deliberately (docs/compare.md): two-sided, valid size
    assert compare({"base": base, "system": system}, resamples=1000, seed=12345, tests=("bootstrap",),
                   resampler="numpy").pair("system").p_bootstrap != theirs.p_value
