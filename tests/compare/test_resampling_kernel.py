"""The splitmix64 resampler (rapidscore.kernels.resampling): the native kernel and its pure-Python
twin give the same sums bit for bit, the twin follows its written specification, the draws are
uniform, bad arguments are refused before native code runs, and compare() names the resampler."""

from __future__ import annotations

import numpy as np
import pytest

from rapidscore.compare import PairingError, compare, ratio_of
from rapidscore.kernels import _native, resampling, resampling_py


def _native_resampling():
    try:
        return _native.core().resampling
    except ImportError as exc:  # a fallback install: the twin alone is tested then
        pytest.skip(f"the native extension is not built ({exc})")


@pytest.mark.parametrize("n", [1, 3, 63, 64, 65, 130, 257, 1000])
@pytest.mark.parametrize("width", [1, 2, 4, 8, 16])
def test_native_and_twin_give_the_same_sums_bit_for_bit(n: int, width: int) -> None:
    native = _native_resampling()
    rows = np.random.default_rng(n * 100 + width).normal(size=(n, width))
    rows[::5] = -0.0  # signed zeros and exact ties are where orders of addition would show
    for first, count in ((0, 9), (31, 4), (0, 1030)):  # 1030: past one 1024-trial block
        key = resampling_py.stream_key(n + width, "bootstrap")
        assert np.array_equal(native.bootstrap_sums(rows, key, first, count),
                              resampling_py.bootstrap_sums(rows, key, first, count))
        key = resampling_py.stream_key(n + width, "randomization")
        assert np.array_equal(native.randomization_sums(rows, key, first, count),
                              resampling_py.randomization_sums(rows, key, first, count))


def test_the_twin_follows_its_specification() -> None:
    n, width = 37, 2
    rows = np.random.default_rng(0).normal(size=(n, width))
    key = resampling_py.stream_key(5, "bootstrap")
    indices = resampling_py.bootstrap_indices(n, key, 3, 6)
    expected = np.zeros((6, width))
    for r in range(6):
        lanes = np.zeros((resampling_py.LANES, width))
        for slot in range(n):
            lanes[slot % resampling_py.LANES] += rows[indices[r, slot]]
        expected[r] = ((lanes[0] + lanes[1]) + lanes[2]) + lanes[3]
    assert np.array_equal(resampling_py.bootstrap_sums(rows, key, 3, 6), expected)
    key = resampling_py.stream_key(5, "randomization")
    bits = resampling_py.swap_bits(n, key, 2, 6)
    padded = np.zeros((64, width))
    padded[:n] = rows
    expected = np.zeros((6, width))
    for t in range(6):
        for byte in range(8):  # each byte's subset sum, built as the tables build it
            subset = np.zeros(width)
            chosen = [k for k in range(8) if byte * 8 + k < n and bits[t, byte * 8 + k]]
            table = [np.zeros(width)]
            for k in range(8):
                table += [entry + padded[byte * 8 + k] for entry in table]
            subset = table[sum(1 << k for k in chosen)]
            expected[t] += subset
    assert np.array_equal(resampling_py.randomization_sums(rows, key, 2, 6), expected)
    np.testing.assert_allclose(expected, bits.astype(float) @ rows, rtol=1e-12, atol=1e-12)
    # the twin's memory blocks change no sum
    blocked = pytest.MonkeyPatch()
    blocked.setattr(resampling_py, "_BLOCK_BYTES", 2048)
    try:
        assert np.array_equal(resampling_py.randomization_sums(rows, key, 2, 6), expected)
        big = np.random.default_rng(1).normal(size=(300, 4))
        key = resampling_py.stream_key(1, "bootstrap")
        small = resampling_py.bootstrap_sums(big, key, 0, 5)
    finally:
        blocked.undo()
    assert np.array_equal(small, resampling_py.bootstrap_sums(big, key, 0, 5))


def test_the_bounded_draw_is_floor_z_n_over_2_64_and_uniform() -> None:
    z = np.random.default_rng(3).integers(0, 2**63, size=2000, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    for n in (1, 7, 100_000, 2**32 - 1):
        assert resampling_py.bounded(z, n).tolist() == [int(v) * n >> 64 for v in z]
    key = resampling_py.stream_key(0, "bootstrap")
    counts = np.bincount(resampling_py.bootstrap_indices(10, key, 0, 20_000).ravel(), minlength=10)
    chi2 = float(np.sum((counts - 20_000) ** 2 / 20_000))
    assert chi2 < 30  # 9 degrees of freedom: p ~ 0.0004
    bits = resampling_py.swap_bits(1000, resampling_py.stream_key(0, "randomization"), 0, 200)
    assert abs(bits.mean() - 0.5) < 0.005  # 200,000 bits: 4.5 standard errors


def test_bad_arguments_are_refused_before_native_code(monkeypatch) -> None:
    rows = np.zeros((4, 2))
    cases = [
        (np.zeros((0, 2)), 1, 0, 1, ValueError, "between 1 and 2\\*\\*32 - 1 items"),
        (np.zeros((4, 3)), 1, 0, 1, ValueError, "1, 2, 4 or a multiple of 8 columns"),
        (np.zeros((4, 2), dtype=np.float32), 1, 0, 1, TypeError, "float64"),
        (np.zeros((2, 4)).T, 1, 0, 1, ValueError, "C-contiguous"),
        (np.zeros(4), 1, 0, 1, ValueError, "2 dimensions"),
        ([[0.0, 1.0]], 1, 0, 1, TypeError, "numpy array"),
        (rows, -1, 0, 1, ValueError, "key must be an int in \\[0, 2\\*\\*64\\)"),
        (rows, 2**64, 0, 1, ValueError, "key"),
        (rows, 1, 2**64 - 2, 5, ValueError, "64-bit draw counter"),
        (rows, 1, 0, True, TypeError, "count must be an int"),
    ]
    for implementation in ("python", "native"):
        if implementation == "native":
            _native_resampling()
        monkeypatch.setenv(_native.ENV_VAR, implementation)
        for array, key, first, count, error, message in cases:
            for run in (resampling.bootstrap_sums, resampling.randomization_sums):
                with pytest.raises(error, match=message):
                    run(array, key, first, count)
    native = _native_resampling()  # called directly, the binding makes the same checks
    for array, key, first, count, error, message in cases:
        for run in (native.bootstrap_sums, native.randomization_sums):
            with pytest.raises(error, match=message):
                run(array, key, first, count)


def test_compare_names_the_resampler_and_both_implementations_agree(monkeypatch) -> None:
    rng = np.random.default_rng(4)
    systems = {"a": rng.random(300), "b": rng.random(300), "c": rng.random(300)}
    fast = compare(systems, resamples=400, trials=400, seed=9)
    assert fast.resampler == "splitmix64" and "resampler:splitmix64" in fast.signature
    assert fast.to_dict()["resampler"] == "splitmix64"
    slow = compare(systems, resamples=400, trials=400, seed=9, resampler="numpy")
    assert "resampler:numpy" in slow.signature and slow.to_dict() != fast.to_dict()
    monkeypatch.setenv(_native.ENV_VAR, "python")
    assert compare(systems, resamples=400, trials=400, seed=9).to_dict() == fast.to_dict()
    with pytest.raises(ValueError, match="resampler: expected one of splitmix64, numpy"):
        compare(systems, resampler="pcg")


def test_non_finite_statistics_are_refused_naming_the_system_and_item() -> None:
    with pytest.raises(PairingError, match=r"system 'b': item 2 has a non-finite statistic \(nan in column 1"):
        compare({"a": ratio_of([1, 2, 3], [1, 1, 1]), "b": ratio_of([1, float("nan"), 3], [1, 1, 1])})
    with pytest.raises(ValueError, match="seeds below 2\\*\\*64"):
        compare({"a": [1.0, 2.0], "b": [1.0, 2.5]}, seed=2**64)
