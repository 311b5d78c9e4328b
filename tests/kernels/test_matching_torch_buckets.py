"""The torch matcher's length buckets (``match_rows``): any block budget, from one pair a batch to
every pair in one, gives the numpy specification's scores (padding floors included).

Tolerance: abs 1e-6 on P and R (float32 dot products against the float64 reference); F is checked
where P + R >= 0.5 at 1e-5 (F = 2PR / (P + R) amplifies the error by up to 2 / (P + R)^2).
"""

from __future__ import annotations

import numpy as np
import pytest

from rapidscore.kernels import matching_ref
from rapidscore.kernels.padding import padding_floors

torch = pytest.importorskip("torch", reason="the torch matcher")


@pytest.mark.parametrize("block_elements", [1, 5_000, 2**24])
@pytest.mark.parametrize("layers", [1, 3])
@pytest.mark.parametrize("batch_size", [None, 4])
def test_buckets_of_any_size_match_the_specification(block_elements, layers, batch_size):
    from rapidscore.device.matching_torch import match_rows

    rng = np.random.default_rng([block_elements % 97, layers, batch_size or 0])
    lengths = rng.integers(0, 30, size=40)
    lengths[:3] = [0, 1, 29]
    dim = 16
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    E = rng.standard_normal((layers, int(offsets[-1]), dim))  # isotropic: negative cosines, floors act
    E /= np.linalg.norm(E, axis=-1, keepdims=True)
    E = E.astype(np.float32)
    weights = rng.uniform(0.1, 3.0, size=int(offsets[-1])).astype(np.float32)
    weights[offsets[5]:offsets[6]] = 0.0  # a zero-weight sentence
    pairs = rng.integers(0, len(lengths), size=(300, 2)).astype(np.int64)
    floors = None if batch_size is None else padding_floors(offsets, pairs, batch_size)
    got = match_rows(torch.from_numpy(E), offsets, weights, pairs[:, 0], pairs[:, 1], floors,
                     block_elements=block_elements)
    want = matching_ref.greedy_match(E.astype(np.float64), offsets, weights, pairs, batch_size)
    np.testing.assert_allclose(got[0], want[0], rtol=0, atol=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=0, atol=1e-6)
    well = np.abs(want[0] + want[1]) >= 0.5
    np.testing.assert_allclose(got[2][well], want[2][well], rtol=0, atol=1e-5)
