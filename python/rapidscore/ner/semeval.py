"""SemEval-2013 9.1 schemes (strict / exact / partial / type) of NER predictions: the matching of
each scheme, its counts and precision/recall/F1, overall and per entity type, and the per-record
lists of correct, incorrect, partial, missed and spurious entities.

Every function here is pure (no shared state): thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np

from rapidscore.errors import SemevalOptionError
from rapidscore.ner.alignment import PackedSpans, align_batch

SEMEVAL_SCHEMES = ("strict", "exact", "partial", "type")
SEMEVAL_MATCHING = ("optimal", "nervaluate")
SEMEVAL_CATEGORIES = ("correct", "incorrect", "partial", "missed", "spurious")


def precision_recall_f1(correct: float, actual: int, possible: int) -> tuple[float, float, float]:
    """Precision ``correct / actual``, recall ``correct / possible`` and their F1; 0 where a
    denominator is 0 (nervaluate's convention)."""
    precision = correct / actual if actual > 0 else 0.0
    recall = correct / possible if possible > 0 else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return precision, recall, f1


def semeval_summary(correct: int, incorrect: int, partial: int, missed: int, spurious: int, scheme: str) -> dict:
    """SemEval-2013 9.1 counts with precision/recall/F1 as nervaluate computes them: COR/ACT and
    COR/POS for strict and exact, (COR + 0.5 PAR)/ACT and /POS for partial and type."""
    actual = correct + incorrect + partial + spurious
    possible = correct + incorrect + partial + missed
    credit = correct + 0.5 * partial if scheme in ("partial", "type") else correct
    precision, recall, f1 = precision_recall_f1(credit, actual, possible)
    return {
        "correct": int(correct), "incorrect": int(incorrect), "partial": int(partial),
        "missed": int(missed), "spurious": int(spurious), "possible": int(possible), "actual": int(actual),
        "precision": precision, "recall": recall, "f1": f1,
    }


def _overlap_qualifies(gold_start: int, gold_end: int, pred_start: int, pred_end: int,
                       min_overlap_percent: float) -> bool:
    # nervaluate's rule on inclusive ends (end - 1), kept verbatim for parity.
    gold_last, pred_last = gold_end - 1, pred_end - 1
    if pred_start > gold_last or pred_last < gold_start:
        return False
    overlap = min(pred_last, gold_last) - max(pred_start, gold_start) + 1
    return (overlap / (gold_last - gold_start + 1)) * 100.0 >= min_overlap_percent


def semeval_greedy_matches(gold: Sequence, pred: Sequence, gold_labels: Sequence, pred_labels: Sequence,
                           scheme: str, min_overlap_percent: float = 1.0) -> list[tuple[int, int, bool]]:
    """Matched pairs ``(gold index, pred index, correct)`` of one record, in prediction order, by
    nervaluate 1.x's greedy first-match rule: predictions in order each take the first unmatched
    gold entity that qualifies (for 'type', the same-label overlap with the closest boundaries).
    ``gold``/``pred``: ``Entity`` objects or ``(start, end, ...)`` tuples, end exclusive.
    Unmatched gold entities are missed, unmatched predictions spurious."""
    pairs = []
    matched: set[int] = set()
    for j, p in enumerate(pred):
        p_start, p_end = p[0], p[1]
        found_match, fallback, best_distance = None, None, None
        for i, g in enumerate(gold):
            if i in matched:
                continue
            g_start, g_end = g[0], g[1]
            same_bounds = g_start == p_start and g_end == p_end
            overlap_ok = _overlap_qualifies(g_start, g_end, p_start, p_end, min_overlap_percent)
            if scheme == "type":
                if overlap_ok:
                    distance = abs(p_start - g_start) + abs(p_end - g_end)
                    if gold_labels[i] == pred_labels[j]:
                        if best_distance is None or distance < best_distance:
                            found_match, best_distance = i, distance
                    elif fallback is None:
                        fallback = i
                continue
            if scheme == "partial":
                if overlap_ok:
                    if same_bounds:
                        found_match = i
                        break
                    if fallback is None:
                        fallback = i
                continue
            if same_bounds and (scheme == "exact" or gold_labels[i] == pred_labels[j]):
                found_match = i
                break
            if overlap_ok and fallback is None:
                fallback = i
        if found_match is not None:
            pairs.append((found_match, j, True))
            matched.add(found_match)
        elif fallback is not None:
            pairs.append((fallback, j, False))
            matched.add(fallback)
    return pairs


@dataclass
class SchemeMatches:
    """One scheme's matched pairs in every record, CSR: record r owns pairs
    ``pair_offsets[r]:pair_offsets[r+1]``, sorted by prediction index; ``gold_index`` and
    ``pred_index`` are indices within the record, ``correct`` whether the pair is correct (else it
    is partial for the partial scheme, incorrect for the others). ``n_gold``/``n_pred``: entities
    per record. Read-only after construction: thread-safe to read."""

    scheme: str
    pair_offsets: np.ndarray
    gold_index: np.ndarray
    pred_index: np.ndarray
    correct: np.ndarray
    n_gold: np.ndarray
    n_pred: np.ndarray

    def counts(self) -> np.ndarray:
        """(n_records, 5) int64: correct, incorrect, partial, missed, spurious of each record."""
        n = len(self.pair_offsets) - 1
        pair_records = np.repeat(np.arange(n), np.diff(self.pair_offsets))
        matched = np.diff(self.pair_offsets)
        correct = np.bincount(pair_records, weights=self.correct, minlength=n).astype(np.int64)
        rest = matched - correct
        none = np.zeros(n, np.int64)
        incorrect, partial = (none, rest) if self.scheme == "partial" else (rest, none)
        return np.stack([correct, incorrect, partial, self.n_gold - matched, self.n_pred - matched], axis=1)

    def summary(self) -> dict:
        """The scheme's totals over all records (:func:`semeval_summary`)."""
        correct, incorrect, partial, missed, spurious = (int(c) for c in self.counts().sum(axis=0))
        return semeval_summary(correct, incorrect, partial, missed, spurious, scheme=self.scheme)

    def record_lists(self, record: int) -> dict[str, list]:
        """Record ``record``'s entities by category: ``correct``/``incorrect``/``partial`` are
        ``(gold index, pred index)`` pairs in prediction order, ``missed`` gold indices and
        ``spurious`` pred indices in order."""
        lo, hi = int(self.pair_offsets[record]), int(self.pair_offsets[record + 1])
        return self._lists(self.gold_index[lo:hi].tolist(), self.pred_index[lo:hi].tolist(),
                           self.correct[lo:hi].tolist(), int(self.n_gold[record]), int(self.n_pred[record]))

    def iter_record_lists(self) -> Iterator[dict[str, list]]:
        """:meth:`record_lists` of every record in order (the arrays converted once)."""
        offsets = self.pair_offsets.tolist()
        gold, pred, correct = self.gold_index.tolist(), self.pred_index.tolist(), self.correct.tolist()
        for r, (n_gold, n_pred) in enumerate(zip(self.n_gold.tolist(), self.n_pred.tolist())):
            lo, hi = offsets[r], offsets[r + 1]
            yield self._lists(gold[lo:hi], pred[lo:hi], correct[lo:hi], n_gold, n_pred)

    def _lists(self, gold: list, pred: list, correct: list, n_gold: int, n_pred: int) -> dict[str, list]:
        not_correct = "partial" if self.scheme == "partial" else "incorrect"
        lists: dict[str, list] = {category: [] for category in SEMEVAL_CATEGORIES}
        for i, j, ok in zip(gold, pred, correct):
            lists["correct" if ok else not_correct].append((i, j))
        matched_gold, matched_pred = set(gold), set(pred)
        lists["missed"] = [i for i in range(n_gold) if i not in matched_gold]
        lists["spurious"] = [j for j in range(n_pred) if j not in matched_pred]
        return lists


def match_scheme(gold: PackedSpans, pred: PackedSpans, scheme: str, *, matching: str = "optimal",
                 min_overlap_percent: float = 1.0, num_threads: int | None = None) -> SchemeMatches:
    """The matched pairs of one SemEval ``scheme`` in every record of ``gold``/``pred`` (packed
    with label ids). ``matching="optimal"``: the C++ alignment maximising correct pairs, then
    matched pairs, then total Jaccard; ``"nervaluate"``: nervaluate 1.x's greedy first match over
    each record's entities in order. Thread-safe."""
    if scheme not in SEMEVAL_SCHEMES:
        raise SemevalOptionError(f"scheme must be one of {SEMEVAL_SCHEMES}, got {scheme!r}")
    if matching not in SEMEVAL_MATCHING:
        raise SemevalOptionError(f"semeval_matching must be one of {SEMEVAL_MATCHING}, got {matching!r}")
    if gold.labels is None or pred.labels is None:
        raise SemevalOptionError("match_scheme needs spans packed with label ids: "
                                 "PackedSpans.from_records(records, label_ids, label_of)")
    n_gold, n_pred = np.diff(gold.offsets), np.diff(pred.offsets)
    if matching == "optimal":
        aligned = align_batch(gold, pred, scheme=scheme, min_overlap_percent=min_overlap_percent,
                              num_threads=num_threads)
        pair_records = aligned.pair_records()
        order = np.lexsort((aligned.pred_index, pair_records))  # records stay grouped, pred order within
        gold_index, pred_index = aligned.gold_index[order], aligned.pred_index[order]
        pair_records = pair_records[order]
        rows_g, rows_p = gold.offsets[pair_records] + gold_index, pred.offsets[pair_records] + pred_index
        same_bounds = (gold.starts[rows_g] == pred.starts[rows_p]) & (gold.ends[rows_g] == pred.ends[rows_p])
        same_label = gold.labels[rows_g] == pred.labels[rows_p]
        correct = {"strict": same_bounds & same_label, "exact": same_bounds, "partial": same_bounds,
                   "type": same_label}[scheme]
        return SchemeMatches(scheme, np.asarray(aligned.pair_offsets, np.int64), gold_index, pred_index,
                             correct, n_gold, n_pred)
    g_starts, g_ends, g_labels = gold.starts.tolist(), gold.ends.tolist(), gold.labels.tolist()
    p_starts, p_ends, p_labels = pred.starts.tolist(), pred.ends.tolist(), pred.labels.tolist()
    g_off, p_off = gold.offsets.tolist(), pred.offsets.tolist()
    sizes, flat_gold, flat_pred, flat_ok = [], [], [], []
    for r in range(gold.n_records):
        ga, gb, pa, pb = g_off[r], g_off[r + 1], p_off[r], p_off[r + 1]
        pairs = semeval_greedy_matches(list(zip(g_starts[ga:gb], g_ends[ga:gb])),
                                       list(zip(p_starts[pa:pb], p_ends[pa:pb])),
                                       g_labels[ga:gb], p_labels[pa:pb], scheme, min_overlap_percent)
        sizes.append(len(pairs))
        for i, j, ok in pairs:
            flat_gold.append(i)
            flat_pred.append(j)
            flat_ok.append(ok)
    pair_offsets = np.zeros(gold.n_records + 1, np.int64)
    np.cumsum(np.asarray(sizes, np.int64), out=pair_offsets[1:])
    return SchemeMatches(scheme, pair_offsets, np.asarray(flat_gold, np.int64), np.asarray(flat_pred, np.int64),
                         np.asarray(flat_ok, bool), n_gold, n_pred)


def _rows_of_label(spans: PackedSpans, n_labels: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows ordered by label then position, label bounds into that order, record of each row)."""
    assert spans.labels is not None
    order = np.argsort(spans.labels, kind="stable")  # stable: each label's rows stay in record order
    bounds = np.searchsorted(spans.labels[order], np.arange(n_labels + 1))
    record_of_row = np.repeat(np.arange(spans.n_records), np.diff(spans.offsets))
    return order, bounds, record_of_row


def _restricted(spans: PackedSpans, rows: np.ndarray, record_of_row: np.ndarray, records: np.ndarray) -> PackedSpans:
    """The spans ``rows`` (ascending) packed over ``records`` (ascending record ids holding them)."""
    assert spans.labels is not None
    local = np.searchsorted(records, record_of_row[rows])
    offsets = np.zeros(len(records) + 1, np.int64)
    np.cumsum(np.bincount(local, minlength=len(records)), out=offsets[1:])
    return PackedSpans(offsets, spans.starts[rows], spans.ends[rows], spans.labels[rows])


def semeval_by_type(gold: PackedSpans, pred: PackedSpans, labels: Sequence[str], *, matching: str = "optimal",
                    min_overlap_percent: float = 1.0, num_threads: int | None = None) -> dict[str, dict]:
    """``{type: {scheme: semeval_summary}}`` per entity type, as nervaluate 1.x's per-tag results:
    each type is scored on its own, with only the gold and predicted entities of that type in
    every record, under the same matching. So a predicted ORG overlapping a gold PER counts as a
    spurious ORG and a missed PER (not as incorrect), and ``incorrect`` per type is a same-type
    boundary mismatch. ``labels[k]`` names label id k; types on neither side are left out.
    Thread-safe."""
    gold_order, gold_bounds, gold_record = _rows_of_label(gold, len(labels))
    pred_order, pred_bounds, pred_record = _rows_of_label(pred, len(labels))
    out = {}
    for k, label in enumerate(labels):
        gold_rows = gold_order[gold_bounds[k]:gold_bounds[k + 1]]
        pred_rows = pred_order[pred_bounds[k]:pred_bounds[k + 1]]
        if not len(gold_rows) and not len(pred_rows):
            continue
        # only the records holding the type: the work is the type's entities, not all records
        records = np.union1d(gold_record[gold_rows], pred_record[pred_rows])
        gold_k = _restricted(gold, gold_rows, gold_record, records)
        pred_k = _restricted(pred, pred_rows, pred_record, records)
        # One type: the label test always passes, so strict, exact and partial make the same
        # matching (correct = same bounds); partial counts the other pairs as partial.
        bounds, overlap = (match_scheme(gold_k, pred_k, scheme, matching=matching,
                                        min_overlap_percent=min_overlap_percent, num_threads=num_threads)
                           for scheme in ("exact", "type"))
        out[label] = {"strict": replace(bounds, scheme="strict").summary(), "exact": bounds.summary(),
                      "partial": replace(bounds, scheme="partial").summary(), "type": overlap.summary()}
    return out
