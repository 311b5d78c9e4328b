"""rapidscore.compare's API: blocks, ratio metrics recomputed per resample, corrections, the
signature and seeds, and the refusals."""

from __future__ import annotations

import numpy as np
import pytest

from rapidscore.compare import (
    PairingError,
    adjust_p_values,
    compare,
    mean_of,
    precision_recall_f1_of,
    ratio_of,
    resampling,
)


def test_bootstrap_drawn_in_blocks_is_the_same_as_at_once() -> None:
    """Blocks bound memory without changing the resamples: the item counts of 7-row blocks are
    those of one draw of every index (the values agree to the matrix product's rounding)."""
    n = 1000
    indices = np.random.default_rng(9).integers(0, n, size=(300, n))
    expected = np.stack([np.bincount(row, minlength=n) for row in indices]).astype(np.float64)
    blocks = [block.copy() for block in resampling.bootstrap_blocks(n, 300, 9, block_bytes=16 * n * 7)]
    assert len(blocks) == 43 and np.array_equal(np.concatenate(blocks), expected)
    values = np.random.default_rng(1).random(n)
    whole = resampling.bootstrap_values([mean_of(values)], 300, 9, resampler="numpy")
    blocked = resampling.bootstrap_values([mean_of(values)], 300, 9, block_bytes=16 * n * 7, resampler="numpy")
    np.testing.assert_allclose(blocked, whole, rtol=1e-13)
    # the splitmix64 kernel's sums do not depend on its blocks at all
    fast = resampling.bootstrap_values([mean_of(values)], 300, 9)
    assert np.array_equal(resampling.bootstrap_values([mean_of(values)], 300, 9, block_bytes=8 * 7), fast)


def test_corpus_f1_is_recomputed_per_resample_not_averaged() -> None:
    credit = np.array([1, 0, 2, 3, 0, 1.0])
    predicted = np.array([1, 2, 2, 4, 0, 1.0])
    gold = np.array([2, 1, 2, 3, 1, 1.0])
    stats = precision_recall_f1_of(credit, predicted, gold, "f1")
    p, r = credit.sum() / predicted.sum(), credit.sum() / gold.sum()
    assert stats.observed() == pytest.approx(2 * p * r / (p + r))
    values = resampling.bootstrap_values([stats], 50, 0, resampler="numpy")[:, 0]
    indices = np.random.default_rng(0).integers(0, 6, size=(50, 6))
    for row, idx in zip(values, indices):
        p, r = credit[idx].sum() / predicted[idx].sum(), credit[idx].sum() / gold[idx].sum()
        assert row == pytest.approx(2 * p * r / (p + r) if p + r else 0.0)


def test_a_rate_with_varying_denominators_is_a_ratio_of_sums() -> None:
    stats = ratio_of([1, 0, 3, 2], [2, 1, 4, 2])
    assert stats.observed() == 6 / 9
    values = resampling.bootstrap_values([stats], 20, 4, resampler="numpy")[:, 0]
    indices = np.random.default_rng(4).integers(0, 4, size=(20, 4))
    top, bottom = np.array([1, 0, 3, 2.0]), np.array([2, 1, 4, 2.0])
    np.testing.assert_allclose(values, [top[i].sum() / bottom[i].sum() for i in indices])


def test_nan_items_are_left_out_of_the_mean() -> None:
    stats = mean_of([0.5, float("nan"), 1.0])
    assert stats.observed() == 0.75
    # paired with a system without NaN items: both tests run on the same layout
    result = compare({"a": [0.5, float("nan"), 1.0, 0.25], "b": [0.5, 0.5, 1.0, 0.5]}, resamples=200, trials=200)
    assert result.system("a").mean == pytest.approx(1.75 / 3)  # the NaN item left out
    assert result.pair("b").difference == pytest.approx(0.625 - 1.75 / 3)
    assert result.exact_randomization and 0 < result.pair("b").p_randomization <= 1


def test_holm_and_bonferroni() -> None:
    p = [0.01, 0.04, 0.03, 0.2]
    assert adjust_p_values(p, "none") == p
    assert adjust_p_values(p, "bonferroni") == pytest.approx([0.04, 0.16, 0.12, 0.8])
    # Holm: sorted 0.01, 0.03, 0.04, 0.2 times 4, 3, 2, 1 -> 0.04, 0.09, 0.08 -> 0.09 (monotone), 0.2
    assert adjust_p_values(p, "holm") == pytest.approx([0.04, 0.09, 0.09, 0.2])
    with pytest.raises(ValueError, match="correction"):
        adjust_p_values(p, "sidak")


def test_the_same_seed_gives_the_same_numbers_and_the_signature_says_how() -> None:
    rng = np.random.default_rng(0)
    systems = {"a": rng.random(50), "b": rng.random(50), "c": rng.random(50)}
    first = compare(systems, baseline="b", resamples=500, trials=700, seed=42, correction="bonferroni")
    assert first.to_dict() == compare(systems, baseline="b", resamples=500, trials=700, seed=42,
                                      correction="bonferroni").to_dict()
    assert first.to_dict() != compare(systems, baseline="b", resamples=500, trials=700, seed=43,
                                       correction="bonferroni").to_dict()
    for field in ("seed:42", "bs:500", "ar:700", "bs-p:two-sided", "ci:percentile-0.95", "correction:bonferroni"):
        assert field in first.signature
    assert [s.name for s in first.systems] == ["b", "a", "c"] and first.baseline == "b"
    pair = first.pair("c")
    assert pair.p_bootstrap_adjusted == pytest.approx(min(1.0, 2 * pair.p_bootstrap))


def test_a_system_equal_to_the_baseline_is_not_different() -> None:
    values = np.random.default_rng(2).random(40)
    pair = compare({"a": values, "b": values.copy()}, resamples=300, trials=300).pairs[0]
    assert pair.difference == 0 and pair.p_bootstrap == 1 and pair.p_randomization == 1


def test_refusals_name_the_systems() -> None:
    with pytest.raises(PairingError, match=r"different item counts \(a: 3, b: 4\)"):
        compare({"a": [1, 2, 3.0], "b": [1, 2, 3, 4.0]})
    with pytest.raises(PairingError, match="baseline 'x' is not one of the systems"):
        compare({"a": [1, 2.0], "b": [1, 2.0]}, baseline="x")
    with pytest.raises(PairingError, match="two systems or more"):
        compare({"a": [1, 2.0]})
    with pytest.raises(PairingError, match="statistics differ"):
        compare({"a": [1, 2.0], "b": ratio_of([1, 1], [2, 2])})
    with pytest.raises(ValueError, match="resamples"):
        compare({"a": [1, 2.0], "b": [1, 2.0]}, resamples=0)
    with pytest.raises(ValueError, match="bootstrap_p"):
        compare({"a": [1, 2.0], "b": [1, 2.0]}, bootstrap_p="one-sided")
