"""rapidscore's MLflow scorers inside the real ``mlflow.genai.evaluate`` (mlflow-skinny 3, a file
tracking store in a temporary folder): the per-row values MLflow stores on each row's trace and
the aggregates it logs on the run equal rapidscore's own API on the same rows."""

from __future__ import annotations

import json
import statistics
import threading

import numpy as np
import pytest

mlflow = pytest.importorskip("mlflow", reason="the MLflow adapter's tests need mlflow-skinny (the [test] extra)")
pytest.importorskip("mlflow.genai", reason="the MLflow adapter needs MLflow 3's GenAI API")

from rapidscore.errors import RapidscoreError  # noqa: E402
from rapidscore.integrations.mlflow import (  # noqa: E402
    IntegrationInputError,
    RowScores,
    bertscore_scorers,
    refusal_scorer,
    similarity_scorers,
)

ANSWERS = ["The Eiffel Tower is in Paris.", "Water boils at 100 degrees Celsius at sea level.",
           "I'm sorry, but I cannot help with that.", "Shakespeare wrote Hamlet around 1600."]
REFERENCES = ["The Eiffel Tower stands in Paris, France.", "At sea level water boils at 100 C.",
              ["The capital of Peru is Lima.", "Lima is Peru's capital."], "Hamlet is a play by William Shakespeare."]


def rows(answers=ANSWERS, references=REFERENCES) -> list[dict]:
    return [{"inputs": {"row": i}, "outputs": a, "expectations": {"expected_response": r}}
            for i, (a, r) in enumerate(zip(answers, references))]


@pytest.fixture
def tracking(tmp_path, monkeypatch):
    """A file tracking store in tmp_path (MLflow 3 wants MLFLOW_ALLOW_FILE_STORE for it; its sqlite
    store needs alembic, which mlflow-skinny does not install)."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(tmp_path.as_uri())
    mlflow.set_experiment("rapidscore-tests")
    yield tmp_path
    mlflow.set_tracking_uri(previous)


def logged(run_id: str) -> tuple[dict, dict[int, dict]]:
    """What the run holds, read back from the store: its metrics, and per row (by the row's
    ``inputs["row"]``) the name -> value of each scorer assessment (or its error message)."""
    metrics = mlflow.MlflowClient().get_run(run_id).data.metrics
    per_row: dict[int, dict] = {}
    for trace in mlflow.search_traces(run_id=run_id, return_type="list"):
        row = json.loads(trace.info.request_preview)["row"]
        values = per_row.setdefault(row, {})
        for assessment in trace.info.assessments:
            if assessment.source.source_type != "CODE":
                continue  # the expectations
            error = assessment.feedback.error
            values[assessment.name] = error.error_message if error is not None else assessment.feedback.value
    return metrics, per_row


def expected_aggregates(name: str, values) -> dict[str, float]:
    """The aggregates by the statistics module (independent of numpy and MLflow's code)."""
    values = [float(v) for v in values]
    return {f"{name}/mean": statistics.fmean(values), f"{name}/min": min(values), f"{name}/max": max(values),
            f"{name}/median": statistics.median(values), f"{name}/variance": statistics.pvariance(values),
            f"{name}/p90": statistics.quantiles(values, n=10, method="inclusive")[8]}


def in_four_threads(items: list, score) -> dict[int, list]:
    """``score`` of every 4th item from offset k, in thread k (four threads at once)."""
    results: dict[int, list] = {}

    def work(k: int) -> None:
        results[k] = [score(item) for item in items[k::4]]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


@pytest.mark.slow
def test_bertscore_scorer_logs_bertscores_per_row_and_aggregated(tracking, minilm_path):
    from rapidscore import BERTScore

    result = mlflow.genai.evaluate(data=rows(), scorers=bertscore_scorers(model=str(minilm_path)))
    metrics, per_row = logged(result.run_id)
    native = BERTScore(str(minilm_path)).score(ANSWERS, REFERENCES)
    assert sorted(per_row) == list(range(len(ANSWERS)))
    for output in ("precision", "recall", "f1"):
        values = getattr(native, output).astype(np.float64)
        got = [per_row[i][f"bertscore_{output}"] for i in range(len(ANSWERS))]
        np.testing.assert_allclose(got, values, rtol=0, atol=1e-6)  # one row per call vs one batch: float32 sums
        for key, value in expected_aggregates(f"bertscore_{output}", values).items():
            assert metrics[key] == pytest.approx(value, abs=1e-6), key


@pytest.mark.slow
def test_similarity_scorer_gives_the_similarity_and_nrr(tracking, minilm_path):
    from rapidscore import negative_rejection

    scorers = similarity_scorers(threshold=0.8, model=str(minilm_path), aggregations=["mean", "min"])
    result = mlflow.genai.evaluate(data=rows(), scorers=scorers)
    metrics, per_row = logged(result.run_id)
    native = negative_rejection(ANSWERS, REFERENCES, threshold=0.8, model=str(minilm_path))
    got = [per_row[i]["similarity"] for i in range(len(ANSWERS))]
    np.testing.assert_allclose(got, native.similarities.astype(np.float64), rtol=0, atol=1e-6)
    assert [per_row[i]["similarity_rejected"] for i in range(len(ANSWERS))] == native.rejected.astype(float).tolist()
    assert 0 < native.n_rejected < len(ANSWERS)  # the rows exercise both decisions
    assert metrics["similarity_rejected/mean"] == pytest.approx(native.rate, abs=1e-12)
    assert metrics["similarity/mean"] == pytest.approx(statistics.fmean(native.similarities.tolist()), abs=1e-6)
    assert metrics["similarity/min"] == pytest.approx(min(native.similarities.tolist()), abs=1e-6)


def test_refusal_scorer_equals_detect_refusal(tracking):
    from rapidscore.abstention import detect_refusal

    responses = [*ANSWERS, "Abstained.",
                 {"complete": "Let me think. I cannot answer that.", "answer": "I can't answer."},
                 "I'd be glad to explain the theory of relativity."]
    result = mlflow.genai.evaluate(data=rows(responses, ["-"] * len(responses)),
                                   scorers=[refusal_scorer(), refusal_scorer("arditi", name="arditi")])
    metrics, per_row = logged(result.run_id)
    for method in ("heuristic", "arditi"):
        native = detect_refusal(responses, method=method)
        name = "refusal" if method == "heuristic" else "arditi"
        assert [per_row[i][name] for i in range(len(responses))] == native.tolist(), method
        assert metrics[f"{name}/mean"] == pytest.approx(native.mean(), abs=1e-12)
    assert 0 < detect_refusal(responses).sum() < len(responses)


def test_a_bad_row_is_an_error_naming_it_and_is_left_out_of_the_aggregates(tracking):
    data = rows(["I cannot help.", ["not", "text"], "Sure: Paris."], ["-"] * 3)
    result = mlflow.genai.evaluate(data=data, scorers=[refusal_scorer()])
    metrics, per_row = logged(result.run_id)
    assert per_row[0]["refusal"] is True and per_row[2]["refusal"] is False
    assert "refusal: outputs must be a str or a {'complete', 'answer'} dict, got list" in per_row[1]["refusal"]
    assert metrics["refusal/mean"] == 0.5


@pytest.mark.slow
def test_bad_rows_raise_errors_naming_the_field(minilm_path):
    [scorer] = similarity_scorers(model=str(minilm_path))
    with pytest.raises(IntegrationInputError, match=r"similarity: outputs must be a str, got int: 5"):
        scorer(outputs=5, expectations={"expected_response": "x"})
    with pytest.raises(IntegrationInputError, match=r"no expectation 'expected_response' .*\['answer'\]"):
        scorer(outputs="x", expectations={"answer": "y"})
    with pytest.raises(IntegrationInputError, match=r"expectations\['expected_response'\] must be a str or a non-empty"):
        scorer(outputs="x", expectations={"expected_response": []})
    with pytest.raises(IntegrationInputError, match=r"outputs must be a dict with the key 'text'"):
        similarity_scorers(model=str(minilm_path), output_key="text")[0](outputs="x",
                                                                         expectations={"expected_response": "y"})
    with pytest.raises(IntegrationInputError, match="pass output_key="):
        scorer(outputs={"text": "x"}, expectations={"expected_response": "y"})
    [read_key] = similarity_scorers(model=str(minilm_path), output_key="text", reference_key="truth")
    assert read_key.name == "similarity"
    assert read_key(outputs={"text": "a cat"}, expectations={"truth": "a cat"}) == pytest.approx(1.0, abs=1e-6)
    assert issubclass(IntegrationInputError, RapidscoreError) and issubclass(IntegrationInputError, ValueError)


def test_bad_options_raise_when_the_scorer_is_made():
    with pytest.raises(ValueError, match=r"outputs must name some of .*'fscore'"):
        bertscore_scorers(outputs=["fscore"])
    with pytest.raises(ValueError, match="unknown refusal method 'polite'"):
        refusal_scorer("polite")
    with pytest.raises(TypeError, match="aggregations must be a list of names, got one str 'mean'"):
        refusal_scorer(aggregations="mean")
    with pytest.raises(ValueError, match="threshold"):
        similarity_scorers(threshold=2.0)


def test_a_scorer_is_thread_safe():
    from rapidscore.abstention import detect_refusal

    scorer = refusal_scorer()
    responses = [f"I cannot answer question {i}." if i % 3 else f"Answer {i}: yes." for i in range(60)]
    expected = [scorer(outputs=r) for r in responses]
    results = in_four_threads(responses, lambda r: scorer(outputs=r))
    for k in range(4):
        assert results[k] == expected[k::4]
    assert expected == detect_refusal(responses).tolist()


def test_the_shared_row_memo_from_several_threads():
    from rapidscore.abstention import detect_refusal
    from rapidscore.metrics import get_metric

    rows = RowScores("refusal", get_metric("refusal").build(), capacity=7)  # a small memo: it fills and clears
    responses = [f"I cannot answer question {i % 11}." if i % 3 else f"Answer {i % 11}: yes." for i in range(80)]
    expected = detect_refusal(responses).tolist()
    results = in_four_threads(responses, lambda r: bool(rows.row({"response": r}, "refusal")["refusal"]))
    for k in range(4):
        assert results[k] == expected[k::4]
