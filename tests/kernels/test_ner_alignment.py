"""The C++ span alignment against brute-force optimal matching (hypothesis) and its input checks."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rapidscore import _core
from rapidscore.ner.alignment import PackedSpans, align_batch, align_spans


def jaccard(a, b):
    inter = min(a[1], b[1]) - max(a[0], b[0])
    if inter <= 0:
        return 0.0
    return inter / ((a[1] - a[0]) + (b[1] - b[0]) - inter)


def brute_force_best(n, m, weight):
    """Maximum total weight over all one-to-one matchings using only positive-weight pairs."""
    best = 0.0

    def walk(i, used, total):
        nonlocal best
        if i == n:
            best = max(best, total)
            return
        walk(i + 1, used, total)
        for j in range(m):
            if j not in used and weight(i, j) > 0:
                walk(i + 1, used | {j}, total + weight(i, j))

    walk(0, frozenset(), 0.0)
    return best


@st.composite
def flat_spans(draw, max_size=6):
    """Sorted, pairwise disjoint spans with random gaps (possibly touching)."""
    size = draw(st.integers(0, max_size))
    spans, at = [], 0
    for _ in range(size):
        at += draw(st.integers(0, 4))
        length = draw(st.integers(1, 6))
        spans.append((at, at + length))
        at += length
    return spans


@st.composite
def any_spans(draw, max_size=5):
    """Arbitrary (possibly overlapping, nested, duplicated) spans, sorted by position."""
    spans = draw(st.lists(st.tuples(st.integers(0, 20), st.integers(1, 8)), max_size=max_size))
    return sorted((s, s + length) for s, length in spans)


def check_matching(gold, pred, pairs):
    """One-to-one, positive Jaccard, reported Jaccard correct; returns the total."""
    assert len({i for i, _, _ in pairs}) == len(pairs)
    assert len({j for _, j, _ in pairs}) == len(pairs)
    total = 0.0
    for i, j, x in pairs:
        assert x == pytest.approx(jaccard(gold[i], pred[j]), abs=1e-12)
        assert x > 0
        total += x
    return total


@settings(max_examples=300, deadline=None)
@given(flat_spans(), flat_spans())
def test_dp_equals_brute_force_on_flat_spans(gold, pred):
    best = brute_force_best(len(gold), len(pred), lambda i, j: jaccard(gold[i], pred[j]))
    for method in ("dp", "auto", "assignment"):
        pairs = align_spans(gold, pred, method=method)
        assert check_matching(gold, pred, pairs) == pytest.approx(best, abs=1e-9), method


@settings(max_examples=300, deadline=None)
@given(any_spans(), any_spans())
def test_assignment_equals_brute_force_on_overlapping_spans(gold, pred):
    best = brute_force_best(len(gold), len(pred), lambda i, j: jaccard(gold[i], pred[j]))
    for method in ("assignment", "auto"):
        pairs = align_spans(gold, pred, method=method)
        assert check_matching(gold, pred, pairs) == pytest.approx(best, abs=1e-9), method


@settings(max_examples=150, deadline=None)
@given(any_spans(), any_spans(), st.lists(st.integers(0, 2), min_size=5, max_size=5),
       st.lists(st.integers(0, 2), min_size=5, max_size=5), st.sampled_from(["strict", "exact", "partial", "type"]))
def test_semeval_schemes_maximise_correct_then_matched_then_jaccard(gold, pred, glab, plab, scheme):
    """Brute force over the lexicographic objective (correct pairs, matched pairs, total Jaccard)."""
    glab, plab = glab[: len(gold)], plab[: len(pred)]

    def eligible(i, j):
        g, p = gold[i], pred[j]
        overlap = min(g[1], p[1]) - max(g[0], p[0])
        return overlap > 0 and overlap / (g[1] - g[0]) * 100.0 >= 1.0

    def correct(i, j):
        same_bounds = gold[i] == pred[j]
        same_label = glab[i] == plab[j]
        return {"strict": same_bounds and same_label, "exact": same_bounds,
                "partial": same_bounds, "type": same_label}[scheme]

    k = min(len(gold), len(pred))
    big_b = k + 1.0
    big_a = (k + 1.0) * (big_b + 1.0)

    def weight(i, j):
        if not eligible(i, j):
            return 0.0
        return (big_a if correct(i, j) else 0.0) + big_b + jaccard(gold[i], pred[j])

    best = brute_force_best(len(gold), len(pred), weight)
    g = PackedSpans.from_records([gold]); g.labels = np.array(glab, dtype=np.int64)
    p = PackedSpans.from_records([pred]); p.labels = np.array(plab, dtype=np.int64)
    out = align_batch(g, p, scheme=scheme, num_threads=1)
    got = sum(weight(i, j) for i, j in zip(out.gold_index.tolist(), out.pred_index.tolist()))
    assert all(weight(i, j) > 0 for i, j in zip(out.gold_index.tolist(), out.pred_index.tolist()))
    assert got == pytest.approx(best, rel=1e-12, abs=1e-9)


def test_hand_made_dja_case():
    # Derivable by hand: gold (0,4) and (10,20); prediction (0,4) exact, (12,20) covers 8 of 10.
    pairs = align_spans([(0, 4), (10, 20)], [(0, 4), (12, 20)])
    assert pairs == [(0, 0, 1.0), (1, 1, 0.8)]


def test_min_jaccard_filters_pairs():
    pairs = align_spans([(0, 10)], [(0, 2)], min_jaccard=0.5)  # J = 0.2
    assert pairs == []


def test_optimal_beats_first_overlap():
    # Prediction (0,10) overlaps both gold spans; the optimum gives it the one it covers best
    # and leaves the other for the exact prediction.
    gold, pred = [(0, 3), (3, 10)], [(0, 10), (0, 3)]
    pairs = align_spans(gold, pred, method="assignment")
    assert sorted((i, j) for i, j, _ in pairs) == [(0, 1), (1, 0)]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(flat_spans(4), any_spans(4)), min_size=1, max_size=40))
def test_batch_threads_equal_single_record_calls(records):
    g = PackedSpans.from_records([a for a, _ in records])
    p = PackedSpans.from_records([b for _, b in records])
    out = align_batch(g, p, num_threads=4)
    for r, (gold, pred) in enumerate(records):
        lo, hi = out.pair_offsets[r], out.pair_offsets[r + 1]
        single = align_spans(gold, pred)
        assert list(zip(out.gold_index[lo:hi].tolist(), out.pred_index[lo:hi].tolist())) == [(i, j) for i, j, _ in single]
        flat_pred = all(pred[k][0] >= pred[k - 1][1] for k in range(1, len(pred)))
        assert bool(out.used_dp[r]) == flat_pred


def test_dp_refuses_overlapping_spans_naming_the_record():
    with pytest.raises(ValueError, match="record 1: the dynamic programme needs sorted, non-overlapping"):
        _core.alignment.align_spans_batch([0, 1, 3], [0, 0, 2], [1, 5, 6], [0, 0, 1], [0], [3], method="dp")


@pytest.mark.parametrize(
    "args, message",
    [
        (([0, 1], [0], [2], [0, 1, 2], [0, 1], [1, 2]), "gold_offsets and pred_offsets describe different"),
        (([0, 2], [0], [2], [0, 0], [], []), "gold_offsets must end at the number of spans"),
        (([1, 1], [0], [2], [0, 0], [], []), "gold_offsets must start at 0"),
        (([0, 1], [-1], [2], [0, 0], [], []), r"record 0: gold span 0 has invalid offsets \(-1, 2\)"),
        (([0, 1], [5], [2], [0, 0], [], []), r"record 0: gold span 0 has invalid offsets \(5, 2\)"),
        (([0, 1], [0, 1], [2], [0, 0], [], []), "gold_starts and gold_ends differ in length"),
        (([0, 2, 1, 2], [0, 1], [1, 2], [0, 0, 0, 0], [], []), "gold_offsets decrease at record 1"),
    ],
)
def test_kernel_rejects_bad_layout(args, message):
    with pytest.raises(ValueError, match=message):
        _core.alignment.align_spans_batch(*args)


def test_kernel_rejects_bad_options():
    base = ([0, 1], [0], [2], [0, 1], [0], [2])
    with pytest.raises(ValueError, match="scheme must be"):
        _core.alignment.align_spans_batch(*base, scheme="fuzzy")
    with pytest.raises(ValueError, match="method must be"):
        _core.alignment.align_spans_batch(*base, method="greedy")
    with pytest.raises(ValueError, match="needs gold_labels and pred_labels"):
        _core.alignment.align_spans_batch(*base, scheme="strict")
    with pytest.raises(ValueError, match="min_jaccard"):
        _core.alignment.align_spans_batch(*base, min_jaccard=1.5)
    with pytest.raises(ValueError, match="gold_labels and gold_starts differ"):
        _core.alignment.align_spans_batch(*base, scheme="strict", gold_labels=[0, 1], pred_labels=[0])
    with pytest.raises(ValueError, match="one-dimensional"):
        _core.alignment.align_spans_batch([[0, 1]], [0], [2], [0, 1], [0], [2])
