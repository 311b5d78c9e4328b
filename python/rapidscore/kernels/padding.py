"""bert-score's padding artefact, as data: which maxima the reference's zero padding raises to 0.

Shared by the native and torch implementations of matching (the numpy reference pads for real,
which is how this is checked).
"""

from __future__ import annotations

import numpy as np

from rapidscore.errors import check_positive_int

__all__ = ["padding_floors"]


def padding_floors(offsets: np.ndarray, pairs: np.ndarray, batch_size) -> np.ndarray | None:
    """(m, 2) bool: [k, 0] the reference of pair k was padded in its batch (its candidate
    tokens' maxima include a 0), [k, 1] the candidate was padded (reference tokens' maxima)."""
    batch_size = check_positive_int(batch_size, "bert_score_batch_size")
    n = len(offsets) - 1
    if (
        pairs.ndim != 2 or pairs.shape[1:] != (2,) or pairs.dtype.kind not in "iu"
        or offsets.ndim != 1 or n < 0 or offsets.dtype.kind not in "iu"
        or (pairs.size and (pairs.min() < 0 or pairs.max() >= n))
    ):
        return None  # invalid input: the native call reports it with its usual message
    lengths = np.diff(offsets.astype(np.int64))
    cand_len, ref_len = lengths[pairs[:, 0]], lengths[pairs[:, 1]]
    floors = np.zeros(pairs.shape, dtype=bool)
    if len(pairs):
        # a batch of more pairs than there are is one batch (as in bert-score), and numpy's int64
        # could not hold a size such as 10**20
        batch_size = min(batch_size, len(pairs))
        starts = np.arange(0, len(pairs), batch_size)
        batch = np.arange(len(pairs)) // batch_size
        floors[:, 0] = ref_len < np.maximum.reduceat(ref_len, starts)[batch]
        floors[:, 1] = cand_len < np.maximum.reduceat(cand_len, starts)[batch]
    return floors
