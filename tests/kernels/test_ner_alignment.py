"""The span alignment against brute-force optimal matching (hypothesis) and its input checks.

Every test runs twice (the ``kernel_implementation`` fixture of conftest.py): on the C++ kernel
and on its pure-Python twin (rapidscore.kernels.alignment_py). Besides, every hypothesis case
checks that the twin returns exactly the C++ kernel's arrays (the same pairs, ties included)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rapidscore.kernels import _native, alignment_py
from rapidscore.kernels.alignment import align_spans_batch
from rapidscore.ner.alignment import PackedSpans, align_batch, align_spans

pytestmark = pytest.mark.usefixtures("kernel_implementation")


def assert_twins_agree(gold, pred, gold_labels=None, pred_labels=None, **options):
    """The Python twin and the C++ kernel return the same arrays (dtypes included) for these
    records (lists of (start, end) per record), for every method unless one is given."""
    g, p = PackedSpans.from_records(gold), PackedSpans.from_records(pred)
    native = _native.core().alignment.align_spans_batch
    methods = [options.pop("method")] if "method" in options else ["auto", "dp", "assignment"]
    for method in methods:
        args = (g.offsets, g.starts, g.ends, p.offsets, p.starts, p.ends)
        kwargs = dict(gold_labels=gold_labels, pred_labels=pred_labels, method=method, **options)
        try:
            want = native(*args, **kwargs)
        except ValueError as error:
            with pytest.raises(ValueError) as raised:
                alignment_py.align_spans_batch(*args, **kwargs)
            assert str(raised.value) == str(error)
            continue
        got = alignment_py.align_spans_batch(*args, **kwargs)
        for a, b in zip(got, want):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)


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
    assert_twins_agree([gold], [pred])
    best = brute_force_best(len(gold), len(pred), lambda i, j: jaccard(gold[i], pred[j]))
    for method in ("dp", "auto", "assignment"):
        pairs = align_spans(gold, pred, method=method)
        assert check_matching(gold, pred, pairs) == pytest.approx(best, abs=1e-9), method


@settings(max_examples=300, deadline=None)
@given(any_spans(), any_spans())
def test_assignment_equals_brute_force_on_overlapping_spans(gold, pred):
    assert_twins_agree([gold], [pred])
    assert_twins_agree([gold], [pred], min_jaccard=0.25)
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
    for min_overlap_percent in (1.0, 50.0):
        assert_twins_agree([gold], [pred], np.array(glab, dtype=np.int64), np.array(plab, dtype=np.int64),
                           scheme=scheme, min_overlap_percent=min_overlap_percent)
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
    assert_twins_agree([a for a, _ in records], [b for _, b in records])
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
        align_spans_batch([0, 1, 3], [0, 0, 2], [1, 5, 6], [0, 0, 1], [0], [3], method="dp")


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
        align_spans_batch(*args)


def test_kernel_rejects_bad_options():
    base = ([0, 1], [0], [2], [0, 1], [0], [2])
    with pytest.raises(ValueError, match="scheme must be"):
        align_spans_batch(*base, scheme="fuzzy")
    with pytest.raises(ValueError, match="method must be"):
        align_spans_batch(*base, method="greedy")
    with pytest.raises(ValueError, match="needs gold_labels and pred_labels"):
        align_spans_batch(*base, scheme="strict")
    with pytest.raises(ValueError, match="min_jaccard"):
        align_spans_batch(*base, min_jaccard=1.5)
    with pytest.raises(ValueError, match="gold_labels and gold_starts differ"):
        align_spans_batch(*base, scheme="strict", gold_labels=[0, 1], pred_labels=[0])
    with pytest.raises(ValueError, match="one-dimensional"):
        align_spans_batch([[0, 1]], [0], [2], [0, 1], [0], [2])


@st.composite
def crowded_records(draw):
    """Records of up to 25 spans per side on a coarse grid: many equal weights (ties), nested and
    duplicated spans, long chains, empty spans, and labels for the SemEval schemes."""
    def side(flat):
        size = draw(st.integers(0, 25))
        if flat:
            spans, at = [], 0
            for _ in range(size):
                at += draw(st.integers(0, 2))
                length = draw(st.integers(0, 3))
                spans.append((at, at + length))
                at += length
            return spans
        starts = draw(st.lists(st.integers(0, 12), min_size=size, max_size=size))
        spans = [(2 * s, 2 * s + 2 * draw(st.integers(0, 3))) for s in starts]
        return spans if draw(st.booleans()) else sorted(spans)

    records = [(side(draw(st.booleans())), side(draw(st.booleans()))) for _ in range(draw(st.integers(1, 4)))]
    gold, pred = [g for g, _ in records], [p for _, p in records]
    n_gold, n_pred = sum(map(len, gold)), sum(map(len, pred))
    labels = st.integers(0, 1)
    gold_labels = np.array(draw(st.lists(labels, min_size=n_gold, max_size=n_gold)), dtype=np.int64)
    pred_labels = np.array(draw(st.lists(labels, min_size=n_pred, max_size=n_pred)), dtype=np.int64)
    return gold, pred, gold_labels, pred_labels


@settings(max_examples=150, deadline=None)
@given(crowded_records(), st.sampled_from(["jaccard", "strict", "exact", "partial", "type"]),
       st.sampled_from([0.0, 0.3]), st.sampled_from([1.0, 40.0, 100.0]))
def test_twin_equals_kernel_on_crowded_records(case, scheme, min_jaccard, min_overlap_percent):
    gold, pred, gold_labels, pred_labels = case
    assert_twins_agree(gold, pred, gold_labels, pred_labels, scheme=scheme, min_jaccard=min_jaccard,
                       min_overlap_percent=min_overlap_percent)


@pytest.mark.parametrize("scheme", ["jaccard", "strict"])
def test_twin_equals_kernel_on_a_flat_chain_too_long_for_the_block_tables(scheme):
    # 3,000 gold and 3,000 predicted spans, each overlapping two of the other side: one block of
    # more than 2**23 cells, so both take the sparse chain programme (which breaks ties its own way)
    n = 3000
    starts = 2 * np.arange(n)
    gold, pred = [list(zip(starts, starts + 2))], [list(zip(starts + 1, starts + 3))]
    labels = np.zeros(n, dtype=np.int64)
    assert_twins_agree(gold, pred, labels, labels, scheme=scheme, method="auto")
    out = align_batch(PackedSpans.from_records(gold), PackedSpans.from_records(pred))
    assert len(out.gold_index) == n - 1 or len(out.gold_index) == n


def test_a_cluster_too_large_for_the_assignment_solver_is_refused_alike():
    spans = [(0, 10)] * 2049  # 2049 x 2049 overlapping pairs > 4,194,304
    with pytest.raises(ValueError, match="record 0: a cluster of 2049 gold x 2049 predicted overlapping spans"):
        align_spans(spans, spans)
    assert_twins_agree([spans], [spans], method="auto")
