"""Inverse document frequency weights over token ids, as BERTScore defines them."""

from __future__ import annotations

import math
from collections import Counter, defaultdict

import numpy as np


def idf_from_ids(documents: list[np.ndarray]) -> defaultdict:
    """idf(w) = ln((M + 1) / (df(w) + 1)) over M documents (token id arrays); df counts each
    document's id *set*. Unseen ids get ln(M + 1). Returned as a defaultdict like the reference."""
    counts: Counter = Counter()
    for ids in documents:
        counts.update({int(i) for i in ids})
    m = len(documents)
    unseen = math.log(m + 1)
    weights: defaultdict[int, float] = defaultdict(lambda: unseen)
    weights.update({token: math.log((m + 1) / (count + 1)) for token, count in counts.items()})
    return weights


def is_any_of(ids: np.ndarray, values) -> np.ndarray:
    """Boolean mask of ``ids`` equal to one of a few ``values`` (special token ids). One
    comparison per value: for a handful of values this beats np.isin, whose setup dominates the
    short inputs of single-pair latency."""
    mask = np.zeros(len(ids), dtype=bool)
    for value in values:
        mask |= ids == value
    return mask


def token_weights(ids: np.ndarray, idf: dict | None, special_ids: tuple[int, ...]) -> np.ndarray:
    """Per-token weights, float32: with ``idf`` None every token weighs 1 except ``special_ids``
    (0); otherwise the idf value of each id (a plain dict must hold every id that occurs)."""
    if idf is None:
        weights = np.ones(len(ids), dtype=np.float32)
        if len(special_ids):
            weights[is_any_of(ids, special_ids)] = 0.0
        return weights
    unique, inverse = np.unique(ids, return_inverse=True)
    if isinstance(idf, defaultdict):
        values = [idf[int(u)] for u in unique]
    else:
        missing = [int(u) for u in unique if int(u) not in idf]
        if missing:
            raise ValueError(f"idf dict has no weight for token ids {missing[:10]}"
                             f"{' ...' if len(missing) > 10 else ''}; give every id or use a defaultdict")
        values = [idf[int(u)] for u in unique]
    return np.asarray(values, dtype=np.float32)[inverse]
