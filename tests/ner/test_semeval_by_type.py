"""SemEval counts per entity type and the per-record lists of correct / incorrect / partial /
missed / spurious entities, against the nervaluate package (its per-tag results and indices)."""

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rapidscore.cli import main
from rapidscore.errors import RapidscoreError
from rapidscore.ner import PackedSpans, compare, evaluate, read_jsonl
from rapidscore.ner.evaluation import prepare
from rapidscore.ner.labels import normalize_label
from rapidscore.ner.records import join_by_id
from rapidscore.ner.semeval import SemevalOptionError, match_scheme

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ner"
SCHEMES = {"strict": "strict", "exact": "exact", "partial": "partial", "type": "ent_type"}
GOLD_LABELS = ["PER", "ORG", "LOC"]  # LOC is never predicted
PRED_LABELS = ["PER", "ORG", "MISC"]  # MISC is never gold
ALL_LABELS = sorted(set(GOLD_LABELS) | set(PRED_LABELS))
COUNT_FIELDS = ("correct", "incorrect", "partial", "missed", "spurious", "possible", "actual")
CATEGORIES = ("correct", "incorrect", "partial", "missed", "spurious")
MATCHED = ("correct", "incorrect", "partial")


def nervaluate_evaluate(gold_docs, pred_docs, tags):
    """nervaluate on (start, end exclusive, label) tuples; its ends are inclusive."""
    nervaluate = pytest.importorskip("nervaluate", reason="nervaluate is the parity reference (test extra)")
    to_dicts = lambda docs: [[{"label": lab, "start": s, "end": e - 1} for s, e, lab in doc] for doc in docs]
    return nervaluate.Evaluator(to_dicts(gold_docs), to_dicts(pred_docs), tags=tags, loader="dict").evaluate()


def ours(gold_docs, pred_docs, matching):
    return evaluate(gold_docs, pred_docs, format="tuples", label_similarity="exact", semeval_matching=matching)


def assert_same_summary(theirs, mine, where):
    for name in COUNT_FIELDS:
        assert mine[name] == getattr(theirs, name), (where, name)
    for name in ("precision", "recall", "f1"):
        assert mine[name] == pytest.approx(getattr(theirs, name), abs=1e-12), (where, name)


def assert_same_by_type(reference, by_type):
    """nervaluate's per-tag results (tags are rapidscore's types before label normalisation)."""
    assert sorted(by_type) == sorted(normalize_label(tag) for tag in reference["entities"])
    for tag, schemes in reference["entities"].items():
        for ours_name, theirs_name in SCHEMES.items():
            assert_same_summary(schemes[theirs_name], by_type[normalize_label(tag)][ours_name], (tag, ours_name))


def assert_same_lists(reference, records, gold_docs, pred_docs):
    """Our per-record lists hold the entities nervaluate's indices point at, in its order: the
    prediction of each correct/incorrect/partial/spurious index, the gold entity of each missed."""
    for ours_name, theirs_name in SCHEMES.items():
        indices = reference["overall_indices"][theirs_name]
        for category in CATEGORIES:
            docs = gold_docs if category == "missed" else pred_docs
            expected = [(doc, docs[doc][k]) for doc, k in getattr(indices, f"{category}_indices")]
            mine = []
            for r, record in enumerate(records):
                for item in record["semeval_entities"][ours_name][category]:
                    entity = item if category in ("missed", "spurious") else item[1]  # (gold, pred)
                    mine.append((r, tuple(entity[:3])))
            assert mine == expected, (ours_name, category)


def assert_lists_partition(records, gold_docs, pred_docs):
    """Each gold entity is in exactly one of correct/incorrect/partial/missed, each prediction in
    exactly one of correct/incorrect/partial/spurious; the list lengths are the record's counts;
    correct pairs pass the scheme's test and the others do not."""
    for record, gold, pred in zip(records, gold_docs, pred_docs):
        for scheme, lists in record["semeval_entities"].items():
            assert {c: len(lists[c]) for c in CATEGORIES} == record["semeval"][scheme]
            golds = [tuple(gold_entity[:3]) for c in MATCHED for gold_entity, _ in lists[c]]
            preds = [tuple(pred_entity[:3]) for c in MATCHED for _, pred_entity in lists[c]]
            assert sorted(golds + [tuple(e[:3]) for e in lists["missed"]]) == sorted(gold)
            assert sorted(preds + [tuple(e[:3]) for e in lists["spurious"]]) == sorted(pred)
            # in entity order (the entities are sorted): pairs by prediction, as nervaluate lists them
            for category in MATCHED:
                in_list = [tuple(pred_entity[:3]) for _, pred_entity in lists[category]]
                assert in_list == sorted(in_list), (scheme, category)
            for category in ("missed", "spurious"):
                in_list = [tuple(e[:3]) for e in lists[category]]
                assert in_list == sorted(in_list), (scheme, category)
            if scheme == "partial":
                assert not lists["incorrect"]
            else:
                assert not lists["partial"]
            for category in MATCHED:
                for item in lists[category]:
                    (gs, ge, gl), (ps, pe, pl) = item[0][:3], item[1][:3]
                    assert min(ge, pe) > max(gs, ps)  # matched pairs overlap
                    ok = {"strict": (gs, ge, gl) == (ps, pe, pl), "exact": (gs, ge) == (ps, pe),
                          "partial": (gs, ge) == (ps, pe), "type": gl == pl}[scheme]
                    assert ok == (category == "correct"), (scheme, category, item)


@st.composite
def documents(draw, labels, max_entities=5):
    """Sorted, de-duplicated (start, end, label) entities as rapidscore normalises them, with
    overlaps and, now and then, an entity nested inside another (of any label)."""
    inner = st.none() | st.tuples(st.integers(0, 3), st.integers(0, 3), st.sampled_from(labels))
    drawn = draw(st.lists(st.tuples(st.integers(0, 30), st.integers(1, 8), st.sampled_from(labels), inner),
                          max_size=max_entities))
    ents = set()
    for start, length, label, nested in drawn:
        ents.add((start, start + length, label))
        if nested is not None and nested[0] + nested[1] < length:
            ents.add((start + nested[0], start + length - nested[1], nested[2]))
    return sorted(ents)


corpora = st.lists(st.tuples(documents(GOLD_LABELS), documents(PRED_LABELS)), min_size=1, max_size=4)


def _unambiguous(gold, pred):
    """Every entity overlaps at most one entity of the other side: every matching rule agrees."""
    overlaps = lambda a, b: min(a[1], b[1]) > max(a[0], b[0])
    return all(sum(overlaps(g, p) for p in pred) <= 1 for g in gold) and all(
        sum(overlaps(g, p) for g in gold) <= 1 for p in pred
    )


# ---------------------------------------------------------------- against nervaluate


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(corpora)
def test_nervaluate_matching_equals_nervaluate_per_type_and_its_indices(docs):
    gold, pred = [g for g, _ in docs], [p for _, p in docs]
    reference = nervaluate_evaluate(gold, pred, ALL_LABELS)
    result = ours(gold, pred, "nervaluate")
    assert_same_by_type(reference, result.semeval_by_type)
    assert_same_lists(reference, result.records, gold, pred)


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(corpora)
def test_optimal_matching_per_type_equals_nervaluate_when_matching_is_unambiguous(docs):
    docs = [(g, p) for g, p in docs if _unambiguous(g, p)]
    if not docs:
        docs = [([(0, 4, "PER"), (6, 9, "LOC")], [(0, 3, "PER"), (6, 9, "MISC")])]
    gold, pred = [g for g, _ in docs], [p for _, p in docs]
    reference = nervaluate_evaluate(gold, pred, ALL_LABELS)
    result = ours(gold, pred, "optimal")
    assert_same_by_type(reference, result.semeval_by_type)
    assert_same_lists(reference, result.records, gold, pred)


def example_sides(model):
    """gold.jsonl and one model file after rapidscore's repairs, as (start, end, canonical label)
    per record: what both evaluators see."""
    gold_records = read_jsonl(str(EXAMPLE / "gold.jsonl"))
    pred_records = join_by_id(gold_records, read_jsonl(str(EXAMPLE / f"{model}.jsonl")), model)
    texts = [rec.text for rec in gold_records]
    sides = [prepare(records, texts=texts) for records in (gold_records, pred_records)]
    return [[[(e.start, e.end, normalize_label(e.label)) for e in ents] for ents in side.entities] for side in sides]


@pytest.mark.slow
@pytest.mark.parametrize("model", ["gliner", "deberta", "spacy"])
def test_examples_equal_nervaluate_per_type_and_lists(model):
    gold, pred = example_sides(model)
    tags = sorted({lab for doc in gold + pred for _, _, lab in doc})
    reference = nervaluate_evaluate(gold, pred, tags)
    # The example's spans overlap at most one span of the other side: both matchings apply.
    assert all(_unambiguous(g, p) for g, p in zip(gold, pred))
    for matching in ("nervaluate", "optimal"):
        result = evaluate(read_jsonl(str(EXAMPLE / "gold.jsonl")), read_jsonl(str(EXAMPLE / f"{model}.jsonl")),
                          label_similarity="exact", semeval_matching=matching)
        assert_same_by_type(reference, result.semeval_by_type)
        for ours_name, theirs_name in SCHEMES.items():
            assert_same_summary(reference["overall"][theirs_name], result.semeval[ours_name], ours_name)
        canonical_records = [
            {**record, "semeval_entities": {
                scheme: {c: [_canonical(item) for item in items] for c, items in lists.items()}
                for scheme, lists in record["semeval_entities"].items()}}
            for record in result.records
        ]
        assert_same_lists(reference, canonical_records, gold, pred)
        assert_lists_partition(canonical_records, gold, pred)


def _canonical(item):
    """A list item (an entity or a (gold, pred) pair) with its labels normalised (nervaluate saw
    the canonical labels)."""
    if len(item) == 2:
        return tuple(_canonical(entity) for entity in item)
    return (item[0], item[1], normalize_label(item[2]), item[3])


@pytest.mark.slow
def test_cli_json_carries_types_and_lists(capsys):
    args = ["ner", "--gold", str(EXAMPLE / "gold.jsonl"), "--pred", f"spacy={EXAMPLE / 'spacy.jsonl'}",
            "--pred", f"gliner={EXAMPLE / 'gliner.jsonl'}", "--label-similarity", "exact",
            "--semeval-matching", "nervaluate", "--json"]
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    api = compare(read_jsonl(str(EXAMPLE / "gold.jsonl")),
                  {m: read_jsonl(str(EXAMPLE / f"{m}.jsonl")) for m in ("spacy", "gliner")},
                  label_similarity="exact", semeval_matching="nervaluate")
    for model in ("spacy", "gliner"):
        gold, pred = example_sides(model)
        tags = sorted({lab for d in gold + pred for _, _, lab in d})
        assert_same_by_type(nervaluate_evaluate(gold, pred, tags), doc[model]["semeval_by_type"])
        assert doc[model]["semeval_by_type"] == api[model].semeval_by_type
        assert [r["semeval_entities"] for r in doc[model]["records"]] == json.loads(json.dumps(
            [r["semeval_entities"] for r in api[model].records]))
    # spaCy's "Driver" (org) overlaps no gold entity; hand-checked against the files
    spurious = doc["spacy"]["records"][0]["semeval_entities"]["strict"]["spurious"]
    assert spurious == [[0, 6, "org", "Driver"]]


# ---------------------------------------------------------------- invariants (no reference needed)


@settings(max_examples=80, deadline=None)
@given(corpora, st.sampled_from(["optimal", "nervaluate"]))
def test_lists_partition_the_counts_and_types_add_up(docs, matching):
    gold, pred = [g for g, _ in docs], [p for _, p in docs]
    result = ours(gold, pred, matching)
    assert_lists_partition(result.records, gold, pred)
    for scheme in SCHEMES:
        per_type = [schemes[scheme] for schemes in result.semeval_by_type.values()]
        # every gold entity is possible in its own type, every prediction actual in its own type
        assert sum(s["possible"] for s in per_type) == result.semeval[scheme]["possible"]
        assert sum(s["actual"] for s in per_type) == result.semeval[scheme]["actual"]
        for label, schemes in result.semeval_by_type.items():
            n_gold = sum(normalize_label(lab) == label for doc in gold for *_, lab in doc)
            n_pred = sum(normalize_label(lab) == label for doc in pred for *_, lab in doc)
            assert (schemes[scheme]["possible"], schemes[scheme]["actual"]) == (n_gold, n_pred)
            assert n_gold + n_pred > 0  # types on neither side are left out
            assert schemes["type"]["incorrect"] == 0  # one type: a qualifying overlap is correct


@settings(max_examples=60, deadline=None)
@given(corpora)
def test_optimal_matching_per_type_never_finds_fewer_correct_than_nervaluate(docs):
    gold, pred = [g for g, _ in docs], [p for _, p in docs]
    greedy, optimal = ours(gold, pred, "nervaluate"), ours(gold, pred, "optimal")
    assert sorted(greedy.semeval_by_type) == sorted(optimal.semeval_by_type)
    for label in greedy.semeval_by_type:
        for scheme in SCHEMES:
            assert optimal.semeval_by_type[label][scheme]["correct"] >= greedy.semeval_by_type[label][scheme]["correct"]


def test_a_wrong_type_is_incorrect_overall_but_missed_and_spurious_per_type():
    # Hand-derived: gold PER [0, 4), predicted ORG [0, 4). Overall strict: one incorrect pair;
    # per type (each type on its own entities): PER missed, ORG spurious. exact: correct overall.
    result = ours([[(0, 4, "PER")]], [[(0, 4, "ORG")]], "optimal")
    assert (result.semeval["strict"]["incorrect"], result.semeval["exact"]["correct"]) == (1, 1)
    per, org = result.semeval_by_type["per"], result.semeval_by_type["org"]
    for scheme in SCHEMES:
        assert (per[scheme]["missed"], per[scheme]["actual"], org[scheme]["spurious"], org[scheme]["possible"]) == (
            1, 0, 1, 0)
    lists = result.records[0]["semeval_entities"]
    assert lists["strict"]["incorrect"] == [((0, 4, "PER", None), (0, 4, "ORG", None))]
    assert lists["exact"]["correct"] == lists["strict"]["incorrect"]


def test_by_type_frame_and_to_dict():
    pytest.importorskip("pandas", reason="to_frame needs pandas")
    result = ours([[(0, 4, "PER"), (6, 9, "LOC")], []], [[(0, 3, "PER")], [(1, 2, "MISC")]], "optimal")
    frame = result.by_type_frame()
    assert list(frame["type"]) == list(result.semeval_by_type) == ["loc", "misc", "per"]
    for _, row in frame.iterrows():
        for scheme, summary in result.semeval_by_type[row["type"]].items():
            for key, value in summary.items():
                assert row[f"{scheme}_{key}"] == value
    assert frame.attrs["signature"] == result.signature
    assert result.to_dict(records=False)["semeval_by_type"] == result.semeval_by_type
    assert "records" not in result.to_dict(records=False)
    assert json.loads(json.dumps(result.to_dict()))["records"][1]["semeval_entities"]["partial"]["spurious"] == [
        [1, 2, "MISC", None]]


# ---------------------------------------------------------------- errors


def test_bad_scheme_or_matching_is_an_error_naming_it():
    spans = PackedSpans.from_records([[(0, 4, "PER")]], {"PER": 0}, lambda e: e[2])
    with pytest.raises(SemevalOptionError, match="'lenient'") as info:
        match_scheme(spans, spans, "lenient")
    assert isinstance(info.value, RapidscoreError) and isinstance(info.value, ValueError)
    with pytest.raises(SemevalOptionError, match="'greedy'"):
        match_scheme(spans, spans, "strict", matching="greedy")
    with pytest.raises(SemevalOptionError, match="label ids"):
        match_scheme(PackedSpans.from_records([[(0, 4)]]), spans, "strict")
    with pytest.raises(SemevalOptionError, match=r"semeval_matching .* got 'greedy'"):
        ours([[(0, 4, "PER")]], [[(0, 4, "PER")]], "greedy")


def test_match_scheme_on_packed_spans_lists_indices():
    # Hand-derived: gold A = [2, 5) PER, B = [6, 11) PER; predictions p0 = [0, 8) PER, p1 = [2, 5) PER.
    # Optimal strict: p1-A correct, p0-B incorrect. Greedy: p0 takes A (incorrect), p1 spurious, B missed.
    labels = {"PER": 0}
    gold = PackedSpans.from_records([[(2, 5, "PER"), (6, 11, "PER")]], labels, lambda e: e[2])
    pred = PackedSpans.from_records([[(0, 8, "PER"), (2, 5, "PER")]], labels, lambda e: e[2])
    optimal = match_scheme(gold, pred, "strict").record_lists(0)
    assert optimal == {"correct": [(0, 1)], "incorrect": [(1, 0)], "partial": [], "missed": [], "spurious": []}
    greedy = match_scheme(gold, pred, "strict", matching="nervaluate")
    assert greedy.record_lists(0) == {"correct": [], "incorrect": [(0, 0)], "partial": [], "missed": [1],
                                      "spurious": [1]}
    assert np.array_equal(greedy.counts(), [[0, 1, 0, 1, 1]])
