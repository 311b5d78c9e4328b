"""BERTScore's finishing step as plain functions (``rapidscore.bertscore.finishing``, issue 27):
the functions called one by one on an encoded plan give exactly what ``BERTScore.finish`` gives,
the three paths (finish, finish_plans, the device engine) share them, and the scorer's baseline
is a public read-only property."""

from __future__ import annotations

import warnings
from collections import defaultdict

import numpy as np
import pytest

from rapidscore.bertscore import BERTScore
from rapidscore.bertscore.baselines import read_baseline
from rapidscore.bertscore.finishing import (
    best_of_references,
    call_idf,
    empty_pairs,
    finish_result,
    match_store,
    store_weights,
)
from rapidscore.errors import RapidscoreWarning

CANDS = ["the cat sat on the mat", "", "a quick brown fox", "same words here"]
REFS = [["the cat is on the mat", "a cat sat"], ["something"], ["a fast brown fox jumps", ""], ["same words here"]]


def _baseline_file(tmp_path, rows: int):
    path = tmp_path / "baseline.tsv"
    path.write_text("LAYER,P,R,F\n" + "".join(f"{i},0.{3 + i},0.{2 + i},0.{4 + i}\n" for i in range(rows)))
    return path


def test_the_functions_one_by_one_give_finish_exactly(tiny_bert, tmp_path) -> None:  # issue 27
    scorer = BERTScore(tiny_bert, 2, idf=True, rescale_with_baseline=True, baseline_path=_baseline_file(tmp_path, 5))
    plan = scorer.plan(CANDS, REFS)
    expected = scorer.finish(plan, scorer.encode(plan))

    store = scorer.encode(plan)
    options = scorer.finishing_options()
    idf = call_idf(options, None, lambda: [store.token_ids(k) for k in plan.pairs[:, 1]])
    weights, real_tokens, uniform = store_weights(store, idf, options)
    pairs = store.order[plan.pairs]
    scores = match_store(store, weights, pairs, options)
    empty = empty_pairs(real_tokens, pairs)
    got = finish_result(plan, scores, empty, options, rescale=None, truncated=store.truncated,
                        lengths=store.lengths()[store.order])

    assert uniform == 0 and empty.sum() == 2  # the empty candidate, and the empty second reference
    for name in ("precision", "recall", "f1"):
        np.testing.assert_array_equal(getattr(got, name), getattr(expected, name))
    assert got.details == expected.details and got.signature == expected.signature
    unrescaled = finish_result(plan, match_store(store, weights, pairs, options), empty, options, rescale=False,
                               truncated=0, lengths=store.lengths()[store.order])
    assert not np.array_equal(unrescaled.f1, got.f1)


def test_call_idf_takes_the_calls_then_the_scorers_then_the_references(tiny_bert) -> None:  # issue 27
    plain = BERTScore(tiny_bert, 2).finishing_options()
    assert call_idf(plain, {1: 2.0}, lambda: pytest.fail("no idf: references are not read")) is None
    given = BERTScore(tiny_bert, 2, idf=True, idf_sents=["a cat", "a dog"])
    assert call_idf(given.finishing_options(), None, list) == given.idf_dict
    assert call_idf(given.finishing_options(), {7: 1.0}, list) == {7: 1.0}
    from_references = call_idf(BERTScore(tiny_bert, 2, idf=True).finishing_options(), None,
                               lambda: [np.array([5, 6]), np.array([5, 7])])
    assert from_references is not None  # 5 is in both references, 6 in one
    assert from_references[5] == 0 and from_references[6] > 0


def test_best_of_references_is_per_score() -> None:  # issue 27
    scores = np.array([[0.1, 0.9, 0.5], [0.8, 0.2, 0.4], [0.3, 0.3, 0.3]])
    np.testing.assert_array_equal(best_of_references(scores, np.array([0, 0, 1]), 2),
                                  [[0.8, 0.9, 0.5], [0.3, 0.3, 0.3]])


def test_the_uniform_fallback_warns_once_on_every_path(tiny_bert) -> None:  # issue 27
    scorer = BERTScore(tiny_bert, 2, idf=defaultdict(float))  # every weight 0
    plan = scorer.plan(["the cat sat", "a dog"], ["the cat sat", "a dog ran"])
    with pytest.warns(RapidscoreWarning, match="uniform weights"):
        one = scorer.finish(plan, scorer.encode(plan))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        both = scorer.finish_plans([plan, plan], scorer.encode(plan), [np.arange(len(plan.texts))] * 2, [0, 0])
    assert sum("uniform weights" in str(w.message) for w in caught) == 1
    for result in both:
        np.testing.assert_array_equal(result.f1, one.f1)


def test_the_baseline_is_a_read_only_property(tiny_bert, tmp_path) -> None:  # issue 27
    path = _baseline_file(tmp_path, 5)
    scorer = BERTScore(tiny_bert, 2, rescale_with_baseline=True, baseline_path=path)
    np.testing.assert_array_equal(scorer.baseline, read_baseline(path)[2])
    with pytest.raises(AttributeError):
        scorer.baseline = None
    assert BERTScore(tiny_bert, 2).baseline is None
    with pytest.raises(ValueError, match="no baseline loaded"):
        BERTScore(tiny_bert, 2).score(["a cat"], ["a dog"], rescale=True)
    every_layer = BERTScore(tiny_bert, all_layers=True, rescale_with_baseline=True, baseline_path=path).baseline
    assert every_layer is not None and every_layer.shape == (5, 3)
