"""``batching.packed_batches``: the packed forward's batches, against a brute-force greedy plan."""

from __future__ import annotations

import numpy as np
import pytest

from rapidscore.encoder.tokens.batching import packed_batches


def _greedy(lengths, batch_tokens: int, max_batch_size: int) -> list[list[int]]:
    """Longest first (stable), each batch filled while its real tokens stay within the budget."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches, current, used = [], [], 0
    for index in order:
        size = max(int(lengths[index]), 1)
        if current and (used + size > batch_tokens or len(current) == max_batch_size):
            batches.append(current)
            current, used = [], 0
        current.append(index)
        used += size
    if current:
        batches.append(current)
    return batches


def test_packed_batches_equal_the_greedy_plan() -> None:
    rng = np.random.default_rng(0)
    for _ in range(500):
        lengths = rng.integers(0, 60, size=int(rng.integers(0, 50)))
        budget, most = int(rng.integers(1, 300)), int(rng.integers(1, 20))
        got = [batch.tolist() for batch in packed_batches(lengths, budget, most)]
        assert got == _greedy(lengths.tolist(), budget, most), (lengths.tolist(), budget, most)


def test_bad_budgets_are_refused_naming_them() -> None:
    with pytest.raises(ValueError, match="batch_tokens and max_batch_size must be >= 1, got 0, 4"):
        packed_batches([3, 4], 0, 4)
