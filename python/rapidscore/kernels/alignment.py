"""Wrapper of the span alignment: the native kernel (``rapidscore._core.alignment``,
csrc/core/align_spans.hpp) or its pure-Python twin (:mod:`rapidscore.kernels.alignment_py`), as
``RAPIDSCORE_IMPLEMENTATION`` chooses (:mod:`rapidscore.kernels._native`); both give the same pairs.

:mod:`rapidscore.ner.alignment` builds its records API (``PackedSpans``, ``align_batch``,
``align_spans``) on this function.
"""

from __future__ import annotations

import numpy as np

from rapidscore.kernels import _native
from rapidscore.threads import lease, num_threads_or_alias

__all__ = ["align_spans_batch"]


def align_spans_batch(
    gold_offsets, gold_starts, gold_ends, pred_offsets, pred_starts, pred_ends,
    *,
    gold_labels=None,
    pred_labels=None,
    scheme: str = "jaccard",
    method: str = "auto",
    min_jaccard: float = 0.0,
    min_overlap_percent: float = 1.0,
    num_threads: int | None = None,
    n_threads: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Maximum-weight one-to-one alignment of the gold and predicted spans of many records.

    Records are in CSR layout: record r owns gold spans ``gold_offsets[r]:gold_offsets[r + 1]``
    (integer starts and exclusive ends; lists or arrays). ``scheme="jaccard"`` maximises the total
    character Jaccard over pairs with Jaccard > 0 and >= ``min_jaccard`` (DMBertA); the SemEval
    schemes ("strict", "exact", "partial", "type") maximise correct pairs, then matched pairs,
    then Jaccard, among pairs whose overlap covers ``min_overlap_percent`` % of the gold span, and
    need integer label ids. ``method="auto"`` runs the dynamic programme where both sides are sorted
    and non-overlapping, the assignment solver otherwise. ``num_threads``: at most this many threads,
    leased from the thread budget (``rapidscore.threads``); None takes as many as it allows.
    ``n_threads`` is the deprecated alias of ``num_threads`` (DeprecationWarning; its 0 = None).

    Returns (pair_offsets, gold_index, pred_index, jaccard, used_dp): the matched pairs of record r
    are ``pair_offsets[r]:pair_offsets[r + 1]``, with within-record indices sorted by gold index;
    ``used_dp[r]`` tells whether the dynamic programme ran.
    """
    wanted = num_threads_or_alias(num_threads, n_threads, where="align_spans_batch")
    if _native.implementation() == "native":
        kernel = _native.core().alignment.align_spans_batch
    else:
        from rapidscore.kernels import alignment_py

        kernel = alignment_py.align_spans_batch
    with lease(wanted) as granted:
        return kernel(
            gold_offsets, gold_starts, gold_ends, pred_offsets, pred_starts, pred_ends,
            gold_labels=gold_labels, pred_labels=pred_labels, scheme=scheme, method=method,
            min_jaccard=float(min_jaccard), min_overlap_percent=float(min_overlap_percent), n_threads=granted,
        )

