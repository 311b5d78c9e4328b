"""SemEval-2013 strict/exact/partial/type counts and P/R/F1 against the nervaluate package."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.slow  # every test here runs the nervaluate reference

nervaluate = pytest.importorskip("nervaluate", reason="nervaluate is the parity reference (test extra)")

from rapidscore.ner import evaluate  # noqa: E402

SCHEMES = {"strict": "strict", "exact": "exact", "partial": "partial", "type": "ent_type"}
LABELS = ["PER", "ORG", "LOC"]
COUNT_FIELDS = ("correct", "incorrect", "partial", "missed", "spurious", "possible", "actual")


def nervaluate_overall(gold_docs, pred_docs):
    """nervaluate on our (start, end exclusive, label) tuples; its ends are inclusive."""
    to_dicts = lambda docs: [[{"label": lab, "start": s, "end": e - 1} for s, e, lab in doc] for doc in docs]
    return nervaluate.Evaluator(to_dicts(gold_docs), to_dicts(pred_docs), tags=LABELS, loader="dict").evaluate()["overall"]


def ours(gold_docs, pred_docs, matching):
    return evaluate(gold_docs, pred_docs, format="tuples", label_similarity="exact", semeval_matching=matching).semeval


def assert_same(reference, result):
    for ours_name, theirs_name in SCHEMES.items():
        theirs, mine = reference[theirs_name], result[ours_name]
        for name in COUNT_FIELDS:
            assert mine[name] == getattr(theirs, name), (ours_name, name)
        for name in ("precision", "recall", "f1"):
            assert mine[name] == pytest.approx(getattr(theirs, name), abs=1e-12), (ours_name, name)


@st.composite
def documents(draw, max_entities=5):
    """Entities sorted by (start, end, label) without exact duplicates, as rapidscore normalises."""
    ents = draw(st.lists(st.tuples(st.integers(0, 30), st.integers(1, 8), st.sampled_from(LABELS)), max_size=max_entities))
    return sorted({(s, s + n, lab) for s, n, lab in ents})


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(documents(), documents()), min_size=1, max_size=4))
def test_nervaluate_matching_equals_nervaluate_everywhere(docs):
    gold, pred = [g for g, _ in docs], [p for _, p in docs]
    assert_same(nervaluate_overall(gold, pred), ours(gold, pred, "nervaluate"))


def _unambiguous(gold, pred):
    """Every entity overlaps at most one entity of the other side: every matching rule agrees."""
    overlaps = lambda a, b: min(a[1], b[1]) > max(a[0], b[0])
    return all(sum(overlaps(g, p) for p in pred) <= 1 for g in gold) and all(
        sum(overlaps(g, p) for g in gold) <= 1 for p in pred
    )


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(documents(), documents()), min_size=1, max_size=4))
def test_optimal_matching_equals_nervaluate_when_matching_is_unambiguous(docs):
    docs = [(g, p) for g, p in docs if _unambiguous(g, p)]
    if not docs:
        docs = [([(0, 4, "PER")], [(0, 4, "PER")])]
    gold, pred = [g for g, _ in docs], [p for _, p in docs]
    assert_same(nervaluate_overall(gold, pred), ours(gold, pred, "optimal"))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(documents(), documents()), min_size=1, max_size=4))
def test_optimal_matching_never_finds_fewer_correct_than_nervaluate(docs):
    gold, pred = [g for g, _ in docs], [p for _, p in docs]
    greedy, optimal = ours(gold, pred, "nervaluate"), ours(gold, pred, "optimal")
    for scheme in SCHEMES:
        assert optimal[scheme]["correct"] >= greedy[scheme]["correct"]
        # POS is the number of gold entities and ACT the number of predictions under any matching.
        assert optimal[scheme]["possible"] == greedy[scheme]["possible"] == sum(map(len, gold))
        assert optimal[scheme]["actual"] == greedy[scheme]["actual"] == sum(map(len, pred))


def test_greedy_first_match_differs_from_optimal_matching():
    # Hand-derived. Gold: A = [2, 5) PER, B = [6, 11) PER. Predictions in text order:
    # p1 = [0, 8) PER overlaps A and B, p2 = [2, 5) PER is exactly A.
    # nervaluate: p1 takes the first overlapping gold (A) as "incorrect"; p2 then finds A taken and
    # becomes spurious; B is missed -> correct 0, incorrect 1, missed 1, spurious 1.
    # Optimal: p2-A correct, p1-B incorrect (overlap 2 of B's 5 chars) -> correct 1, incorrect 1.
    gold = [[(2, 5, "PER"), (6, 11, "PER")]]
    pred = [[(0, 8, "PER"), (2, 5, "PER")]]
    reference = nervaluate_overall(gold, pred)["strict"]
    assert (reference.correct, reference.incorrect, reference.missed, reference.spurious) == (0, 1, 1, 1)
    greedy = ours(gold, pred, "nervaluate")["strict"]
    assert (greedy["correct"], greedy["incorrect"], greedy["missed"], greedy["spurious"]) == (0, 1, 1, 1)
    optimal = ours(gold, pred, "optimal")["strict"]
    assert (optimal["correct"], optimal["incorrect"], optimal["missed"], optimal["spurious"]) == (1, 1, 0, 0)
    assert optimal["f1"] == pytest.approx(0.5)  # P = R = 1/2
