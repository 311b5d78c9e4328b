"""Taxonomy relations and metrics on hand-made cases (answers derivable by hand), Student-t and
Spearman against scipy."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from rapidscore.abstention import rates
from rapidscore.abstention.results import Record
from rapidscore.abstention.taxonomy import Taxonomy, TaxonomyError, load_compositions

# SELECT's published taxonomy is not part of this repository; the project's shared data sits in
# ../shared beside the checkout (issue 29 item 17: an absolute path failed in any other location)
SELECT_TAXONOMY = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "select" / "taxonomy.json"


def nested(spec):
    """{"a": {"b": {}}} -> SELECT-shaped nested taxonomy."""
    return {k: {"name": k.upper(), "children": nested(v)} for k, v in spec.items()}


def test_chain():
    tax = Taxonomy.from_nested(nested({"a": {"b": {"c": {"d": {}}}}}))
    assert tax.ancestors("d") == ["a", "b", "c"]
    assert tax.descendants("a") == ["b", "c", "d"]
    assert tax.siblings("c") == []
    assert [tax.depth(c) for c in "abcd"] == [0, 1, 2, 3]
    assert tax.path("c") == ["a", "b", "c"] and tax.name("b") == "B"
    assert tax.is_leaf("d") and not tax.is_leaf("a")


def test_wide_tree_and_leaf_and_roots():
    tax = Taxonomy.from_nested(nested({"r": {"x": {}, "y": {"y1": {}, "y2": {}}, "z": {}}, "s": {}}))
    assert tax.roots == ["r", "s"] and tax.siblings("r") == ["s"]  # top-level concepts are siblings
    assert tax.siblings("y") == ["x", "z"] and tax.siblings("y2") == ["y1"]
    assert tax.descendants("r") == ["x", "y", "y1", "y2", "z"]
    assert tax.descendants("x") == [] and tax.ancestors("y2") == ["r", "y"]
    assert list(tax) == ["r", "x", "y", "y1", "y2", "z", "s"] and len(tax) == 7


def test_single_root():
    tax = Taxonomy.from_nested(nested({"only": {}}))
    assert tax.ancestors("only") == [] and tax.descendants("only") == [] and tax.siblings("only") == []
    assert tax.depth("only") == 0
    with pytest.raises(KeyError, match="missing"):
        tax.ancestors("missing")


def test_duplicates_and_cycles_rejected(tmp_path):
    with pytest.raises(TaxonomyError, match="duplicate concept id 'b'"):
        Taxonomy.from_nested(nested({"a": {"b": {}}, "c": {"b": {}}}))
    csv_path = tmp_path / "edges.csv"
    csv_path.write_text("parent,child\n,a\na,b\nb,c\nc,b2\nb2,c\n")
    with pytest.raises(TaxonomyError, match="duplicate concept id 'c'"):
        Taxonomy.from_edges_csv(csv_path)
    csv_path.write_text("parent,child\nb,a\na,b\n")
    with pytest.raises(TaxonomyError, match="cycle"):
        Taxonomy.from_edges_csv(csv_path)
    csv_path.write_text("parent,child,name\n,a,Alpha\na,b,\na,c,\n")
    tax = Taxonomy.load(csv_path)
    assert tax.siblings("b") == ["c"] and tax.name("a") == "Alpha"


@pytest.mark.skipif(not SELECT_TAXONOMY.is_file(), reason=f"SELECT's taxonomy release is not in the repository and "
                    f"{SELECT_TAXONOMY} (../shared beside the checkout) is absent")
def test_select_taxonomy_loads():
    # issue 29 item 17
    tax = Taxonomy.load(SELECT_TAXONOMY)
    with open(SELECT_TAXONOMY) as handle:
        raw = json.load(handle)

    def count(tree):
        return sum(1 + count(node["children"]) for node in tree.values())

    assert len(tax) == count(raw)
    assert tax.roots == list(raw)
    assert tax.ancestors("schema:Airline") == ["schema:Organization", "schema:Corporation"]
    assert "schema:Airline" in tax.descendants("schema:Organization")
    assert tax.siblings("schema:Airline") == ["yago:Factory", "yago:Business_enterprise", "yago:Law_firm"]


def test_compositions(tmp_path):
    path = tmp_path / "taxonomy.compose.json"
    path.write_text(json.dumps({"about": nested({"books#people": {"novels#people": {}}})}))
    comps = load_compositions(path)
    assert comps["about"].descendants("books#people") == ["novels#people"]


@pytest.mark.parametrize("df", [1, 2, 3, 4, 7, 10, 29, 100, 393, 2.5])
@pytest.mark.parametrize("p", [0.975, 0.95, 0.6, 0.025, 0.999])
def test_student_t_ppf_matches_scipy(df, p):
    assert rates.student_t_ppf(p, df) == pytest.approx(scipy.stats.t.ppf(p, df), rel=1e-10, abs=1e-12)


def test_aggregate_matches_scipy_interval():
    x = [0.2, 0.9, 0.55, 0.7, 1.0, 0.0, 0.35]
    agg = rates.aggregate(x)
    lo, hi = scipy.stats.t.interval(0.95, len(x) - 1, loc=np.mean(x), scale=scipy.stats.sem(x))
    assert agg.mean == pytest.approx(np.mean(x)) and agg.half_width == pytest.approx((hi - lo) / 2, rel=1e-10)
    assert math.isnan(rates.aggregate([0.5]).half_width) and rates.aggregate([]).n == 0


def test_spearman_matches_scipy():
    rng = np.random.default_rng(0)
    for _ in range(20):
        a = rng.integers(0, 5, size=12).astype(float)  # many ties
        b = rng.random(12)
        assert rates.spearman(a, b) == pytest.approx(scipy.stats.spearmanr(a, b).statistic, abs=1e-12)
    assert math.isnan(rates.spearman([1, 1, 1], [1, 2, 3]))


def _records(rows):
    return [Record("m", t, e, s, c, "x") for (t, e, s, c) in rows]


def test_metrics_hand_made():
    tax = Taxonomy.from_nested(nested({"a": {"b": {}, "c": {}}}))
    rows, refused = [], []

    def add(technique, eval_type, seed, concept, decisions):
        for d in decisions:
            rows.append((technique, eval_type, seed, concept))
            refused.append(d)

    # abstention: a = (1 + 0.5)/2 seeds = 0.75; b = 1.0; c = 0.5
    add("t", "abstention", "1", "a", [1, 1])
    add("t", "abstention", "2", "a", [1, 0])
    add("t", "abstention", "1", "b", [1, 1, 1, 1])
    add("t", "abstention", "1", "c", [0, 1])
    # generalization: only "a" has children; leaves b/c are not scored even if present
    add("t", "generalization", "1", "a", [1, 0, 0, 0])
    add("t", "generalization", "1", "b", [1])
    # specificity = fraction NOT refused: a = 1.0, b = 0.5, c = 0.0
    add("t", "specificity", "1", "a", [0, 0])
    add("t", "specificity", "1", "b", [1, 0])
    add("t", "specificity", "1", "c", [1])
    records = _records(rows)
    scores = rates.concept_scores(records, refused, taxonomy=tax)
    assert scores[("m", "t", "abstention")] == {(None, "a"): 0.75, (None, "b"): 1.0, (None, "c"): 0.5}
    assert scores[("m", "t", "generalization")] == {(None, "a"): 0.25}
    assert scores[("m", "t", "specificity")] == {(None, "a"): 1.0, (None, "b"): 0.5, (None, "c"): 0.0}
    summary = rates.summarize(records, refused, taxonomy=tax)[("m", "t")]
    assert summary["abstention"].mean == pytest.approx(0.75) and summary["abstention"].n == 3
    assert summary["specificity"].mean == pytest.approx(0.5)
    assert summary["performance"].mean == pytest.approx(2 * 0.75 * 0.5 / 1.25)
    levels = rates.by_level(records, refused, tax)[("m", "t", "abstention")]
    assert levels[0].mean == 0.75 and levels[1].mean == pytest.approx(0.75) and levels[1].n == 2
    with pytest.raises(KeyError, match="'zz'.*not in taxonomy"):
        rates.concept_scores(_records([("t", "abstention", "1", "zz")]), [True], taxonomy=tax)
    with pytest.raises(ValueError):
        rates.concept_scores(records, refused[:-1])


def test_compositions_grouped_by_relation_and_correlations():
    recs = [Record("m", t, "abstention", "1", c, "x", relation=r)
            for t in ("p", "q") for r, c in (("about", "x#y"), ("about", "x#z"), ("in", "u#v"))]
    refused = [1, 0, 1, 1, 1, 0]
    groups = rates.by_relation(recs, refused)
    assert groups[("m", "p", "abstention")]["about"].mean == 0.5
    assert groups[("m", "q", "abstention")]["in"].mean == 0.0
    scores = rates.concept_scores(recs, refused)
    techniques, matrix = rates.technique_correlations(scores, "m", "abstention")
    assert techniques == ["p", "q"] and matrix[0, 0] == pytest.approx(1.0)
    assert matrix[0, 1] == pytest.approx(scipy.stats.spearmanr([1, 0, 1], [1, 1, 0]).statistic)
    assert rates.performance_score(0.0, 0.0) == 0.0
