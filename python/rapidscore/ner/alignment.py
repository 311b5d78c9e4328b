"""One-to-one alignment of gold and predicted spans (the C++ kernel, ``rapidscore.kernels.alignment``).

``align_spans`` aligns one record; :class:`PackedSpans` + ``align_batch`` align many records at
once with the GIL released. Spans are ``(start, end)`` character offsets, end exclusive.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rapidscore.ner.formats import Entity

SCHEMES = ("jaccard", "strict", "exact", "partial", "type")
METHODS = ("auto", "dp", "assignment")


def _check_integer_offsets(records: Sequence[Sequence]) -> None:
    """(start, end) offsets must be integers: np.fromiter would truncate 0.5 to 0 silently."""
    for r, record in enumerate(records):
        for k, span in enumerate(record):
            for name, value in zip(("start", "end"), span[:2]):
                if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                    raise TypeError(f"record {r}, span {k}: {name} must be an integer character offset, "
                                    f"got {type(value).__name__}: {value!r}")


@dataclass
class PackedSpans:
    """Spans of many records in CSR layout: record r owns rows ``offsets[r]:offsets[r+1]``."""

    offsets: np.ndarray  # int64, n_records + 1
    starts: np.ndarray  # int64
    ends: np.ndarray  # int64
    labels: np.ndarray | None = None  # int64 label ids, or None

    @property
    def n_records(self) -> int:
        return len(self.offsets) - 1

    @classmethod
    def from_records(cls, records: Sequence[Sequence], label_ids: dict | None = None, label_of=None) -> PackedSpans:
        """Pack per-record lists of ``Entity`` or ``(start, end, ...)`` tuples. With ``label_ids``,
        ``label_ids[label_of(entity)]`` gives each span's label id."""
        sizes = np.fromiter((len(r) for r in records), dtype=np.int64, count=len(records))
        offsets = np.zeros(len(records) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        total = int(offsets[-1])
        flat = [span for rec in records for span in rec]
        if flat and isinstance(flat[0], Entity):
            starts = np.fromiter((e.start for e in flat), dtype=np.int64, count=total)
            ends = np.fromiter((e.end for e in flat), dtype=np.int64, count=total)
        else:
            _check_integer_offsets(records)
            starts = np.fromiter((s[0] for s in flat), dtype=np.int64, count=total)
            ends = np.fromiter((s[1] for s in flat), dtype=np.int64, count=total)
        labels = None
        if label_ids is not None:
            labels = np.fromiter((label_ids[label_of(e)] for e in flat), dtype=np.int64, count=total)
        return cls(offsets, starts, ends, labels)


@dataclass
class BatchAlignment:
    """Matched pairs of every record: record r owns pairs ``pair_offsets[r]:pair_offsets[r+1]``;
    ``gold_index``/``pred_index`` are indices within the record, ``jaccard`` the pair's character
    Jaccard, ``used_dp[r]`` whether the dynamic programme (flat spans) or the assignment solver ran."""

    pair_offsets: np.ndarray
    gold_index: np.ndarray
    pred_index: np.ndarray
    jaccard: np.ndarray
    used_dp: np.ndarray

    def pair_records(self) -> np.ndarray:
        """Record index of each pair."""
        return np.repeat(np.arange(len(self.pair_offsets) - 1), np.diff(self.pair_offsets))


def align_batch(
    gold: PackedSpans,
    pred: PackedSpans,
    *,
    scheme: str = "jaccard",
    method: str = "auto",
    min_jaccard: float = 0.0,
    min_overlap_percent: float = 1.0,
    num_threads: int | None = None,
    n_threads: int | None = None,
) -> BatchAlignment:
    """Maximum-weight one-to-one alignment of every record (see ``rapidscore.kernels.alignment.align_spans_batch``).

    ``scheme="jaccard"`` maximises the total character Jaccard over pairs with Jaccard > 0 and
    >= ``min_jaccard`` (DMBertA). The SemEval schemes maximise the number of correct pairs, then
    of matched pairs, then the total Jaccard, among pairs whose overlap covers at least
    ``min_overlap_percent`` % of the gold span (nervaluate's rule); they need label ids.
    ``num_threads``: at most this many threads (None: the thread budget, ``rapidscore.threads``).
    ``n_threads``: the deprecated alias of ``num_threads`` (DeprecationWarning; its 0 = None).
    """
    from rapidscore.kernels.alignment import align_spans_batch
    from rapidscore.threads import num_threads_or_alias

    num_threads = num_threads_or_alias(num_threads, n_threads, where="align_batch")

    result = align_spans_batch(
        gold.offsets, gold.starts, gold.ends, pred.offsets, pred.starts, pred.ends,
        gold_labels=gold.labels, pred_labels=pred.labels, scheme=scheme, method=method,
        min_jaccard=min_jaccard, min_overlap_percent=min_overlap_percent, num_threads=num_threads,
    )
    return BatchAlignment(*result)


def align_spans(
    gold: Sequence, pred: Sequence, *, min_jaccard: float = 0.0, method: str = "auto"
) -> list[tuple[int, int, float]]:
    """Optimal DMBertA alignment of one record: ``[(gold index, pred index, jaccard), ...]``
    maximising the total character Jaccard, sorted by gold index. ``gold``/``pred`` are lists of
    ``Entity`` or ``(start, end)``; the DP needs each side sorted and non-overlapping (``auto``
    falls back to the assignment solver otherwise)."""
    g = PackedSpans.from_records([list(gold)])
    p = PackedSpans.from_records([list(pred)])
    out = align_batch(g, p, min_jaccard=min_jaccard, method=method, num_threads=1)
    return [(int(i), int(j), float(x)) for i, j, x in zip(out.gold_index, out.pred_index, out.jaccard)]
