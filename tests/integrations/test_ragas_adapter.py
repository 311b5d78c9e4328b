"""ragas calls rapidscore: ``ragas.evaluate`` on an ``EvaluationDataset`` with the adapter's
metrics gives exactly the scores of rapidscore's own API on the same rows, offline and without an
LLM (no socket opened, no OpenAI client built, no key set); rows waiting together are scored in
one call, and batching changes no score; bad samples and arguments are named."""

from __future__ import annotations

import asyncio
import math
import threading

import numpy as np
import pytest

ragas = pytest.importorskip("ragas", reason="the [integrations] extra (part of [test])")

from ragas import EvaluationDataset  # noqa: E402
from ragas.dataset_schema import MultiTurnSample, SingleTurnSample  # noqa: E402
from ragas.messages import HumanMessage  # noqa: E402
from ragas.run_config import RunConfig  # noqa: E402

from rapidscore.common.metric import ColumnError  # noqa: E402
from rapidscore.errors import RapidscoreError  # noqa: E402
from rapidscore.integrations.ragas import AnswerSimilarity, BERTScoreF1  # noqa: E402

# ragas 0.4 announces its @experiment API on every evaluate() call
pytestmark = pytest.mark.filterwarnings(r"ignore:a?evaluate\(\) is deprecated:DeprecationWarning")

N = 12
RESPONSES = [f"The {'red ' * (i % 3)}fox number {i} jumps over the lazy dog." for i in range(N - 2)] + [
    "Paris is the capital of France.", "I don't know."]
REFERENCES = [f"A {'quick ' * (i % 2)}brown fox {i % 5} leaps over a sleeping dog." for i in range(N - 2)] + [
    "The capital of France is Paris.", "Canberra is the capital of Australia."]


def rows() -> list[dict]:
    return [{"user_input": f"question {i}", "response": response, "reference": reference}
            for i, (response, reference) in enumerate(zip(RESPONSES, REFERENCES))]


@pytest.fixture(autouse=True)
def offline(monkeypatch, network_attempts):
    """Sockets refused and recorded; OpenAI clients recorded (ragas builds one for a metric that
    needs an LLM); no OpenAI key, so such a client could not work anyway."""
    attempts = network_attempts
    import openai

    for client in (openai.OpenAI, openai.AsyncOpenAI):
        monkeypatch.setattr(client, "__init__", lambda self, *args, **kwargs: attempts.append(type(self).__name__))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    yield
    assert attempts == [], f"ragas or the adapter tried the network or an LLM client: {attempts}"


@pytest.fixture(scope="module")
def native(scorer, similarity_model) -> dict[str, np.ndarray]:
    """rapidscore's own API on all the rows at once."""
    similarities, _best = similarity_model.pairs(RESPONSES, REFERENCES)
    return {"f1": scorer.score(RESPONSES, REFERENCES).f1, "similarity": similarities}


def as_floats(values) -> list[float]:
    return [float(value) for value in values]


@pytest.mark.slow
def test_evaluate_gives_rapidscore_scores(scorer, similarity_model, native):
    metrics = [AnswerSimilarity(similarity_model=similarity_model), BERTScoreF1(scorer=scorer),
               AnswerSimilarity(name="captured", threshold=0.5, similarity_model=similarity_model)]
    result = ragas.evaluate(EvaluationDataset.from_list(rows()), metrics=metrics, show_progress=False,
                            raise_exceptions=True)
    frame = result.to_pandas()
    assert list(frame["answer_similarity"]) == as_floats(native["similarity"])
    assert list(frame["bertscore_f1"]) == as_floats(native["f1"])
    kept = native["similarity"] >= np.float32(0.5)
    assert list(frame["captured"]) == [1.0 if k else 0.0 for k in kept] and 0 < kept.sum() < N
    for metric in metrics:  # evaluate gave them nothing to call
        assert not hasattr(metric, "llm") and not hasattr(metric, "embeddings")


@pytest.mark.slow
def test_rows_waiting_together_are_scored_in_one_call_and_batching_changes_no_score(minilm_path, monkeypatch):
    from rapidscore.nrr import SentenceSimilarity

    model = SentenceSimilarity(str(minilm_path))
    batches: list[int] = []
    pairs = model.pairs
    monkeypatch.setattr(model, "pairs", lambda generated, groups: (batches.append(len(generated)),
                                                                   pairs(generated, groups))[1])
    metric = AnswerSimilarity(similarity_model=model)
    dataset = EvaluationDataset.from_list(rows())
    batched = ragas.evaluate(dataset, metrics=[metric], show_progress=False, raise_exceptions=True,
                             run_config=RunConfig(max_workers=8)).to_pandas()
    assert sum(batches) == N and max(batches) == 8 and len(batches) < N
    batches.clear()
    alone = ragas.evaluate(dataset, metrics=[metric], show_progress=False, raise_exceptions=True,
                           run_config=RunConfig(max_workers=1)).to_pandas()
    assert batches == [1] * N
    assert list(batched["answer_similarity"]) == list(alone["answer_similarity"])


@pytest.mark.slow
def test_default_model_is_the_embedded_minilm(scorer, similarity_model):
    sample = SingleTurnSample(**rows()[0])
    assert BERTScoreF1().single_turn_score(sample) == float(scorer.score(RESPONSES[:1], REFERENCES[:1]).f1[0])
    sims, _best = similarity_model.pairs(RESPONSES[:1], REFERENCES[:1])
    assert AnswerSimilarity().single_turn_score(sample) == float(sims[0])


@pytest.mark.slow
def test_one_metric_scores_from_several_threads_and_event_loops(scorer, native):
    """Each thread runs its own event loop over every row; the metric object is shared."""
    metric = BERTScoreF1(scorer=scorer)
    samples = [SingleTurnSample(**row) for row in rows()]
    scores: dict[int, list] = {}

    async def score_all() -> list[float]:
        return list(await asyncio.gather(*(metric.single_turn_ascore(sample) for sample in samples)))

    def work(worker: int) -> None:
        scores[worker] = asyncio.run(score_all())

    threads = [threading.Thread(target=work, args=(worker,)) for worker in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert scores == {worker: as_floats(native["f1"]) for worker in range(3)}


@pytest.mark.slow
def test_a_missing_reference_is_named(similarity_model, native):
    metric = AnswerSimilarity(similarity_model=similarity_model)
    without = [{"user_input": row["user_input"], "response": row["response"]} for row in rows()]
    with pytest.raises(ValueError, match=r"\[answer_similarity\] .* requires .* \['reference'\]"):
        ragas.evaluate(EvaluationDataset.from_list(without), metrics=[metric], show_progress=False)
    one_missing = rows()
    one_missing[3]["reference"] = None
    dataset = EvaluationDataset.from_list(one_missing)
    with pytest.raises(ColumnError, match=r"the sample with user_input 'question 3' has no reference: "
                                          "answer_similarity compares response with reference") as caught:
        ragas.evaluate(dataset, metrics=[metric], show_progress=False, raise_exceptions=True)
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, RapidscoreError)
    # ragas's default: the failed row is NaN, the others are scored (and still exact)
    scores = list(ragas.evaluate(dataset, metrics=[metric], show_progress=False).to_pandas()["answer_similarity"])
    assert math.isnan(scores[3])
    assert scores[:3] + scores[4:] == as_floats(np.delete(native["similarity"], 3))
    with pytest.raises(ColumnError, match=r"a sample has no response"):
        metric.single_turn_score(SingleTurnSample(reference="a reference"))


@pytest.mark.slow
def test_wrong_samples_are_named(similarity_model):
    metric = AnswerSimilarity(similarity_model=similarity_model)
    with pytest.raises(TypeError, match=r"answer_similarity scores a ragas SingleTurnSample, got dict"):
        metric.single_turn_score(rows()[0])
    with pytest.raises(TypeError, match=r"scores a ragas SingleTurnSample, got MultiTurnSample"):
        asyncio.run(metric.single_turn_ascore(MultiTurnSample(user_input=[HumanMessage(content="hi")])))
    conversation = EvaluationDataset(samples=[MultiTurnSample(user_input=[HumanMessage(content="hi")],
                                                              reference="hello")])
    with pytest.raises(ValueError, match=r"The metric 'answer_similarity' does not support the sample type"):
        ragas.evaluate(conversation, metrics=[metric], show_progress=False)


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match=r"scorer must be a rapidscore\.bertscore\.BERTScore, got str"):
        BERTScoreF1(scorer="all-MiniLM-L6-v2")
    with pytest.raises(ValueError, match=r"threshold must be in \[-1, 1\]"):
        AnswerSimilarity(threshold=2.0)
    with pytest.raises(TypeError, match=r"threshold must be a number"):
        AnswerSimilarity(threshold="high")
    with pytest.raises(TypeError, match=r"similarity_model must be a rapidscore\.nrr\.SentenceSimilarity, got list"):
        AnswerSimilarity(similarity_model=[])


@pytest.mark.slow
def test_an_engine_and_engine_options_are_not_both_given(scorer, similarity_model):
    with pytest.raises(ValueError, match=r"give model, lang and rescale_with_baseline to BERTScore\(...\)"):
        BERTScoreF1(scorer=scorer, rescale_with_baseline=True)
    with pytest.raises(ValueError, match=r"pass model or similarity_model, not both"):
        AnswerSimilarity(model="all-MiniLM-L6-v2", similarity_model=similarity_model)
