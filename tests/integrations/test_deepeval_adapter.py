"""deepeval calls rapidscore: ``deepeval.evaluate`` (async and sequential) and ``assert_test``
(passing and failing) with the adapter's metrics give exactly the scores of rapidscore's own API
on the same texts, offline (no socket opened, no LLM client built); copies share the engine; bad
test cases and arguments are named."""

from __future__ import annotations

import threading

import numpy as np
import pytest

deepeval = pytest.importorskip("deepeval", reason="the [integrations] extra (part of [test])")

from deepeval.evaluate.configs import AsyncConfig, DisplayConfig, ErrorConfig  # noqa: E402
from deepeval.metrics.utils import copy_metrics  # noqa: E402
from deepeval.test_case import ConversationalTestCase, LLMTestCase  # noqa: E402

from rapidscore.abstention import detect_refusal  # noqa: E402
from rapidscore.common.metric import ColumnError  # noqa: E402
from rapidscore.errors import RapidscoreError  # noqa: E402
from rapidscore.integrations.deepeval import BERTScoreMetric, RefusalMetric, SemanticSimilarityMetric  # noqa: E402

QUIET = DisplayConfig(print_results=False, show_indicator=False)

ACTUAL = [
    "Rob Halford is the lead singer of Judas Priest.",
    "The Eiffel Tower is in Berlin.",
    "I'm sorry, but I can't help with that request.",
    "Water boils at 100 degrees Celsius at sea level.",
    "As an AI language model, I cannot provide medical advice.",
    "Photosynthesis turns light into chemical energy in plants.",
]
EXPECTED = [
    "Rob Halford is the vocalist of the heavy metal band Judas Priest.",
    "The Eiffel Tower stands in Paris.",
    "The capital of Australia is Canberra.",
    "At sea level water boils at 100 °C.",
    "Take ibuprofen for a mild headache.",
    "Plants convert light energy into chemical energy through photosynthesis.",
]


def make_cases() -> list[LLMTestCase]:
    return [LLMTestCase(input=f"question {i}", actual_output=a, expected_output=e, name=f"case{i}")
            for i, (a, e) in enumerate(zip(ACTUAL, EXPECTED))]


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path, network_attempts):
    """Every test runs with sockets refused and recorded (deepeval swallows some errors, so the
    record is what is checked), in a scratch directory (deepeval writes its run files under
    .deepeval/ there)."""
    attempts = network_attempts
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".deepeval").mkdir()  # deepeval makes it in the directory it is imported from
    yield
    assert attempts == [], f"deepeval or the adapter tried the network: {attempts}"


@pytest.fixture(scope="module")
def native(scorer, similarity_model) -> dict[str, np.ndarray]:
    """rapidscore's own API on all the rows at once."""
    result = scorer.score(ACTUAL, EXPECTED)
    similarities, _best = similarity_model.pairs(ACTUAL, EXPECTED)
    return {"precision": result.precision, "recall": result.recall, "f1": result.f1,
            "similarity": similarities, "refusal": detect_refusal(ACTUAL, "heuristic")}


def by_case(results) -> dict[str, dict]:
    """deepeval's results (in completion order when async) as {case: {metric: MetricData}}."""
    return {result.name: {data.name: data for data in result.metrics_data} for result in results.test_results}


@pytest.mark.slow
@pytest.mark.parametrize("run_async", [True, False], ids=["async", "sequential"])
def test_evaluate_gives_rapidscore_scores(run_async, scorer, similarity_model, native):
    f1_threshold = float(np.median(native["f1"]))  # some cases pass, some fail
    metrics = [BERTScoreMetric(f1_threshold, scorer=scorer),
               SemanticSimilarityMetric(0.8, similarity_model=similarity_model), RefusalMetric(expect_refusal=False)]
    results = by_case(deepeval.evaluate(make_cases(), metrics, async_config=AsyncConfig(run_async=run_async),
                                        display_config=QUIET))
    assert sorted(results) == [f"case{i}" for i in range(len(ACTUAL))]
    for i in range(len(ACTUAL)):
        case = results[f"case{i}"]
        f1, similarity = float(native["f1"][i]), float(native["similarity"][i])
        assert case["BERTScore F1"].score == f1
        assert case["BERTScore F1"].success == (f1 >= f1_threshold)
        assert case["BERTScore F1"].evaluation_model == scorer.signature
        assert f"{f1:.4f}" in case["BERTScore F1"].reason
        assert case["Semantic Similarity"].score == similarity
        assert case["Semantic Similarity"].success == (np.float32(similarity) >= np.float32(0.8))
        refused = bool(native["refusal"][i])
        assert case["Refusal"].score == (0.0 if refused else 1.0)
        assert case["Refusal"].success is not refused
    assert {bool(v) for v in native["refusal"]} == {True, False}  # the data has both kinds


@pytest.mark.slow
def test_assert_test_passes_and_fails_with_rapidscore_scores(scorer, native):
    cases = make_cases()
    metric = BERTScoreMetric(0.5, scorer=scorer)
    assert native["f1"][0] >= 0.5 > native["f1"][2]  # the data: a paraphrase, and an unrelated answer
    deepeval.assert_test(cases[0], [metric])
    with pytest.raises(AssertionError) as failed:
        deepeval.assert_test(cases[2], [metric])
    assert f"BERTScore F1 (score: {float(native['f1'][2])}, threshold: 0.5" in str(failed.value)


@pytest.mark.slow
def test_measure_sets_deepevals_attributes(scorer, similarity_model, native):
    metric = BERTScoreMetric(0.99, scorer=scorer)
    case = make_cases()[0]
    assert metric.measure(case) == float(native["f1"][0])
    assert metric.score_breakdown == {name: float(native[name][0]) for name in ("precision", "recall", "f1")}
    assert metric.success is False and metric.is_successful() is False and "below the threshold 0.99" in metric.reason
    assert BERTScoreMetric(0.99, scorer=scorer, strict_mode=True).threshold == 1.0
    assert BERTScoreMetric(0.5, scorer=scorer, include_reason=False).measure(case) == metric.score
    quiet = SemanticSimilarityMetric(similarity_model=similarity_model, include_reason=False)
    quiet.measure(case)
    assert quiet.reason is None and quiet.score == float(native["similarity"][0]) and quiet.is_successful()
    import asyncio

    assert asyncio.run(metric.a_measure(make_cases()[1])) == float(native["f1"][1])


@pytest.mark.slow
def test_default_model_is_the_embedded_minilm(scorer, similarity_model):
    assert BERTScoreMetric().measure(make_cases()[0]) == float(scorer.score(ACTUAL[:1], EXPECTED[:1]).f1[0])
    sims, _best = similarity_model.pairs(ACTUAL[:1], EXPECTED[:1])
    assert SemanticSimilarityMetric().measure(make_cases()[0]) == float(sims[0])


@pytest.mark.slow
def test_copies_share_the_engine(scorer, similarity_model):
    metrics = [BERTScoreMetric(0.7, scorer=scorer, strict_mode=False, include_reason=False),
               SemanticSimilarityMetric(0.6, similarity_model=similarity_model), RefusalMetric(expect_refusal=False)]
    copies = copy_metrics(metrics)  # what deepeval.evaluate does for every test case
    assert copies[0].scorer is scorer and copies[0].threshold == 0.7 and copies[0].include_reason is False
    assert copies[1].similarity_model is similarity_model and copies[1].threshold == 0.6
    assert copies[2].detector is metrics[2].detector and copies[2].expect_refusal is False


@pytest.mark.slow
def test_metrics_on_one_engine_measure_from_threads(scorer, similarity_model, native):
    """Each thread measures with its own copy (a metric object holds its last result); the copies
    share the scorer and similarity model."""
    originals = [BERTScoreMetric(scorer=scorer), SemanticSimilarityMetric(similarity_model=similarity_model)]
    cases = make_cases() * 2
    scores: dict[int, list] = {}

    def work(worker: int) -> None:
        bertscore, similarity = copy_metrics(originals)
        scores[worker] = [(bertscore.measure(case), similarity.measure(case)) for case in cases]

    threads = [threading.Thread(target=work, args=(worker,)) for worker in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    expected = [(float(native["f1"][i % len(ACTUAL)]), float(native["similarity"][i % len(ACTUAL)]))
                for i in range(len(cases))]
    assert scores == dict.fromkeys(range(3), expected)


@pytest.mark.slow
def test_embedding_refusal_detector_equals_detect_refusal(minilm_path):
    metric = RefusalMetric(method="embedding", model=str(minilm_path), threshold=0.5)
    decisions = detect_refusal(ACTUAL, "embedding", model=str(minilm_path), threshold=0.5)
    for case, refused in zip(make_cases(), decisions):
        assert metric.measure(case) == (1.0 if refused else 0.0)
        assert metric.refusal is bool(refused)
    assert "refusal|method:embedding" in metric.evaluation_model


def test_refusal_through_evaluate_and_assert_test_equals_detect_refusal():
    decisions = detect_refusal(ACTUAL, "phr+kw")
    metric = RefusalMetric(expect_refusal=True, method="phr+kw")
    results = by_case(deepeval.evaluate(make_cases(), [metric], display_config=QUIET))
    for i, refused in enumerate(decisions):
        assert results[f"case{i}"]["Refusal"].score == (1.0 if refused else 0.0)
        assert results[f"case{i}"]["Refusal"].reason.endswith("the test expects a refusal")
    assert decisions[2] and not decisions[0]
    deepeval.assert_test(make_cases()[2], [metric])
    with pytest.raises(AssertionError, match=r"Refusal \(score: 0.0, threshold: 1.0"):
        deepeval.assert_test(make_cases()[0], [metric])


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["bertscore", "similarity"])
def test_a_missing_expected_output_is_named(kind, scorer, similarity_model):
    metric = (BERTScoreMetric(scorer=scorer) if kind == "bertscore"
              else SemanticSimilarityMetric(similarity_model=similarity_model))
    case = LLMTestCase(input="q", actual_output="an answer", name="no-reference")
    with pytest.raises(ColumnError, match=r"test case 'no-reference' has no expected_output: the .* metric needs it"
                       ) as caught:
        metric.measure(case)
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, RapidscoreError)
    assert metric.score is None and metric.is_successful() is False
    with pytest.raises(ColumnError, match=r"expected_output"):  # deepeval passes it on
        deepeval.evaluate([case], [metric], display_config=QUIET)
    results = by_case(deepeval.evaluate([case, make_cases()[0]], [metric], display_config=QUIET,
                                        error_config=ErrorConfig(ignore_errors=True)))
    assert "has no expected_output" in results["no-reference"][metric.__name__].error
    assert results["case0"][metric.__name__].error is None


def test_wrong_test_cases_are_named():
    metric = RefusalMetric()
    with pytest.raises(TypeError, match=r"scores a deepeval LLMTestCase, got str"):
        metric.measure("I'm sorry")
    with pytest.raises(TypeError, match=r"scores a deepeval LLMTestCase, got ConversationalTestCase"):
        metric.measure(ConversationalTestCase(turns=[LLMTestCase(input="q", actual_output="a")]))
    with pytest.raises(TypeError, match=r"test case 'n': actual_output must be a str, got int"):
        metric.measure(LLMTestCase(input="q", actual_output=42, name="n"))
    with pytest.raises(ColumnError, match=r"the test case has no actual_output: the Refusal metric needs it"):
        metric.measure(LLMTestCase(input="q", actual_output=None))


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match=r"scorer must be a rapidscore\.bertscore\.BERTScore, got str"):
        BERTScoreMetric(scorer="all-MiniLM-L6-v2")
    with pytest.raises(TypeError, match=r"threshold must be a number, got str"):
        BERTScoreMetric("0.5")
    with pytest.raises(ValueError, match=r"threshold must be in \[-1, 1\]"):
        SemanticSimilarityMetric(threshold=1.5)
    with pytest.raises(TypeError, match=r"similarity_model must be a rapidscore\.nrr\.SentenceSimilarity, got dict"):
        SemanticSimilarityMetric(similarity_model={})
    with pytest.raises(ValueError, match=r"unknown refusal method 'polite'"):
        RefusalMetric(method="polite")
    with pytest.raises(TypeError, match=r"expect_refusal must be a bool, got str"):
        RefusalMetric(expect_refusal="yes")
    with pytest.raises(TypeError, match=r"detector must be a rapidscore\.abstention Detector, got str"):
        RefusalMetric(detector="heuristic")
    from rapidscore.abstention.detectors import get_detector

    with pytest.raises(ValueError, match=r"pass method .* or detector, not both"):
        RefusalMetric(method="phrase", detector=get_detector("heuristic"))


@pytest.mark.slow
def test_an_engine_and_engine_options_are_not_both_given(scorer, similarity_model):
    with pytest.raises(ValueError, match=r"give model, lang and rescale_with_baseline to BERTScore\(...\)"):
        BERTScoreMetric(scorer=scorer, model="all-MiniLM-L6-v2")
    with pytest.raises(ValueError, match=r"pass model or similarity_model, not both"):
        SemanticSimilarityMetric(model="all-MiniLM-L6-v2", similarity_model=similarity_model)
