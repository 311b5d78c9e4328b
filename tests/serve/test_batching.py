"""The in-process batching scorer: many threads and coroutines, every result exactly the direct
call's; one encoder pass per batch over the distinct sentences; budgets, overload, draining."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pytest

from rapidscore.errors import OverloadedError
from rapidscore.serve import BatchingScorer, MicroBatcher

pytestmark = pytest.mark.slow  # the real all-MiniLM-L6-v2

WORDS = "the cat sat on a mat dog ran quickly over lazy fox weather in paris rain tomorrow model".split()


def make_requests(n: int, seed: int = 0) -> list[tuple[list[str], list]]:
    """Requests of 1-3 pairs; references a string or a list; texts repeat across requests."""
    rng = np.random.default_rng(seed)

    def sentence() -> str:
        return " ".join(rng.choice(WORDS, size=int(rng.integers(1, 14))))

    shared = sentence()
    requests = []
    for i in range(n):
        size = int(rng.integers(1, 4))
        cands = [sentence() if i % 5 else shared for _ in range(size)]
        refs = [[sentence(), shared] if (i + k) % 3 == 0 else sentence() for k in range(size)]
        requests.append((cands, refs))
    return requests


@pytest.fixture(scope="module")
def bertscore(minilm_path):
    from rapidscore.bertscore import BERTScore

    return BERTScore(str(minilm_path))


def assert_same_bertscore(result, direct) -> None:
    for name in ("precision", "recall", "f1"):
        assert getattr(result, name).tobytes() == getattr(direct, name).tobytes(), name
    assert result.signature == direct.signature
    assert result.details == direct.details


def assert_same_nrr(result, direct) -> None:
    assert result.similarities.tobytes() == direct.similarities.tobytes()
    assert np.array_equal(result.rejected, direct.rejected)
    assert np.array_equal(result.best_reference, direct.best_reference)
    assert (result.rate, result.threshold, result.signature) == (direct.rate, direct.threshold, direct.signature)


def test_bertscore_from_many_threads_equals_direct_calls(bertscore):
    requests = make_requests(120)
    direct = [bertscore.score(c, r) for c, r in requests]
    sizes = []
    with BatchingScorer(bertscore, on_batch=lambda n, tokens, seconds: sizes.append(n)) as batching, \
            ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda req: batching.score(*req), requests))
    for result, expected in zip(results, direct):
        assert_same_bertscore(result, expected)
    assert sum(sizes) == len(requests)


def test_bertscore_from_asyncio_equals_direct_calls(bertscore):
    requests = make_requests(80, seed=1)
    direct = [bertscore.score(c, r) for c, r in requests]

    async def main(batching):
        return await asyncio.gather(*(batching.ascore(c, r) for c, r in requests))

    with BatchingScorer(bertscore) as batching:
        results = asyncio.run(main(batching))
        stats = batching.batcher.stats()
    for result, expected in zip(results, direct):
        assert_same_bertscore(result, expected)
    assert stats.requests == len(requests) and stats.batches < len(requests)  # some were merged


def test_similarity_and_refusal_share_a_batcher_and_equal_direct_calls(similarity_model):
    from rapidscore.abstention import detect_refusal, get_detector
    from rapidscore.nrr import negative_rejection

    requests = make_requests(60, seed=2)
    responses = [["I'm sorry, I can't help with that.", c[0]] for c, _ in requests]
    with MicroBatcher() as batcher:
        sims = BatchingScorer(similarity_model, batcher=batcher)
        refusal = BatchingScorer(get_detector("heuristic"), batcher=batcher)
        with ThreadPoolExecutor(12) as pool:
            sim_futures = [pool.submit(sims.score, c, r, threshold=0.6) for c, r in requests]
            refusal_futures = [pool.submit(refusal.score, texts) for texts in responses]
            sim_results = [f.result() for f in sim_futures]
            refusal_results = [f.result() for f in refusal_futures]
    for (cands, refs), result in zip(requests, sim_results):
        assert_same_nrr(result, negative_rejection(cands, refs, 0.6, similarity_model=similarity_model))
    for texts, result in zip(responses, refusal_results):
        assert np.array_equal(result, detect_refusal(texts))


def test_one_encoder_pass_over_the_distinct_sentences_of_a_batch(bertscore, monkeypatch, hold_worker):
    encoded: list[int] = []
    real = bertscore.encoder.embed_ids

    def counting(ids, **kwargs):
        encoded.append(len(ids))
        return real(ids, **kwargs)

    monkeypatch.setattr(bertscore.encoder, "embed_ids", counting)
    with BatchingScorer(bertscore) as batching:
        gate = hold_worker(batching.batcher)
        futures = [batching.submit([f"candidate number {i}"], ["the one shared reference"]) for i in range(10)]
        gate.open()
        results = [f.result(30) for f in futures]
    assert encoded == [11]  # 10 candidates + 1 shared reference, one pass
    for i, result in enumerate(results):
        assert_same_bertscore(result, bertscore.score([f"candidate number {i}"], ["the one shared reference"]))


def test_a_lone_request_runs_at_once_and_the_token_budget_splits_batches(bertscore, hold_worker):
    batches: list[tuple[int, int]] = []
    with BatchingScorer(bertscore, batch_tokens=40,
                        on_batch=lambda n, tokens, seconds: batches.append((n, tokens))) as batching:
        batching.score(["alone"], ["by itself"])
        assert batches == [(1, batching.prepare(["alone"], ["by itself"]).tokens)]
        gate = hold_worker(batching.batcher)
        futures = [batching.submit([f"request {i} of many"], [f"reference {i}"]) for i in range(12)]
        gate.open()
        for f in futures:
            f.result(30)
    scoring = batches[2:]  # after the lone request and the gate
    assert sum(n for n, _ in scoring) == 12
    assert all(tokens <= 40 for _, tokens in scoring) and len(scoring) > 1
    assert max(n for n, _ in scoring) > 1


def test_a_request_over_the_budget_still_runs_alone(bertscore):
    with BatchingScorer(bertscore, batch_tokens=1) as batching:
        assert_same_bertscore(batching.score(["a longer candidate"], ["and its reference"]),
                              bertscore.score(["a longer candidate"], ["and its reference"]))


def test_full_queue_fails_at_once_and_accepted_requests_complete(bertscore, hold_worker):
    with BatchingScorer(bertscore, max_queue=3) as batching:
        gate = hold_worker(batching.batcher)
        accepted = [batching.submit([f"c{i}"], [f"r{i}"]) for i in range(3)]
        with pytest.raises(OverloadedError, match="queue is full") as caught:
            batching.submit(["one too many"], ["r"])
        assert caught.value.retry_after >= 1
        gate.open()
        for i, f in enumerate(accepted):
            assert_same_bertscore(f.result(30), bertscore.score([f"c{i}"], [f"r{i}"]))
        assert batching.batcher.stats().rejected == 1


def test_close_drains_the_queue_then_refuses(bertscore, hold_worker):
    batching = BatchingScorer(bertscore)
    gate = hold_worker(batching.batcher)
    futures = [batching.submit([f"queued {i}"], ["before shutdown"]) for i in range(6)]
    closer = threading.Thread(target=batching.close)
    closer.start()
    with pytest.raises(OverloadedError, match="shutting down"):
        for _ in range(1000):  # close() flips the flag at once; this loop waits for it
            batching.submit(["after"], ["shutdown"]).cancel()
    gate.open()
    closer.join(30)
    assert not closer.is_alive()
    for i, f in enumerate(futures):
        assert_same_bertscore(f.result(0), bertscore.score([f"queued {i}"], ["before shutdown"]))


def test_close_without_draining_fails_the_queued_requests(bertscore, hold_worker):
    batching = BatchingScorer(bertscore)
    gate = hold_worker(batching.batcher)
    futures = [batching.submit([f"queued {i}"], ["x"]) for i in range(3)]
    closer = threading.Thread(target=batching.close, kwargs={"drain": False})
    closer.start()
    gate.open()
    closer.join(30)
    for f in futures:
        with pytest.raises(OverloadedError, match="shut down"):
            f.result(0)


def test_bad_input_raises_in_the_caller_and_is_not_queued(bertscore):
    with BatchingScorer(bertscore) as batching:
        with pytest.raises(TypeError, match=r"cands\[1\] must be a str"):
            batching.submit(["fine", 3], ["a", "b"])
        with pytest.raises(ValueError, match="Different number"):
            batching.submit(["a"], ["b", "c"])
        assert batching.batcher.stats().requests == 0


def test_a_cancelled_request_is_skipped(bertscore, hold_worker):
    with BatchingScorer(bertscore) as batching:
        gate = hold_worker(batching.batcher)
        cancelled = batching.submit(["never"], ["run"])
        kept = batching.submit(["kept"], ["run"])
        assert cancelled.cancel()
        gate.open()
        assert_same_bertscore(kept.result(30), bertscore.score(["kept"], ["run"]))
        assert batching.batcher.stats().requests == 2  # the gate and the kept request


class _FailsOn:
    """A task whose merged run fails when any payload is "bad"."""

    def run(self, payloads, alone):
        if "bad" in payloads:
            raise RuntimeError("bad payload")
        return [p.upper() for p in payloads]


def test_one_failing_request_fails_alone(hold_worker):
    from rapidscore.serve.batching import Job

    with MicroBatcher() as batcher:
        gate = hold_worker(batcher)
        task = _FailsOn()
        futures: list[Future] = [batcher.put(Job(task=task, payload=p, tokens=1)) for p in ("a", "bad", "c")]
        gate.open()
        assert futures[0].result(30) == "A" and futures[2].result(30) == "C"
        with pytest.raises(RuntimeError, match="bad payload"):
            futures[1].result(30)


class _RecordsBatches:
    """A task that records the size of each merged run."""

    def __init__(self):
        self.sizes: list[int] = []

    def run(self, payloads, alone):
        self.sizes.append(len(payloads))
        return payloads


def test_while_another_worker_is_busy_a_worker_takes_a_fair_share(hold_worker):
    """Two workers: with one busy on a batch of r requests and q queued, the other takes
    ceil((q + r) / 2), so that batch sizes stay alike instead of one worker taking everything."""
    from rapidscore.serve.batching import Job

    with MicroBatcher(workers=2) as batcher:
        busy = hold_worker(batcher)  # one worker runs a batch of 1 request
        other = hold_worker(batcher)  # the other worker, held too while the queue fills
        task = _RecordsBatches()
        futures = [batcher.put(Job(task=task, payload=k, tokens=1)) for k in range(12)]
        other.open()
        assert [f.result(30) for f in futures] == list(range(12))
        assert task.sizes == [7, 3, 2]  # ceil((12 + 1) / 2), ceil((5 + 1) / 2), ceil((2 + 1) / 2)
        busy.open()


def test_batcher_arguments_are_checked():
    with pytest.raises(ValueError, match="max_queue must be a positive int"):
        MicroBatcher(max_queue=0)
    with pytest.raises(TypeError, match="BatchingScorer takes"):
        BatchingScorer(object())


def _spy(monkeypatch, scorer, calls: list, name: str) -> None:
    real = scorer.encoder.embed_ids

    def counting(ids, **kwargs):
        calls.append(name)
        return real(ids, **kwargs)

    monkeypatch.setattr(scorer.encoder, "embed_ids", counting)


def test_lone_batches_run_on_the_solo_scorer_and_results_stay_exact(minilm_path, bertscore, monkeypatch):
    """Two workers with one runtime thread each; a batch that runs while the other worker is idle
    takes the solo scorer (two threads). Every result equals the direct call's either way."""
    from rapidscore.bertscore import BERTScore

    narrow, solo = BERTScore(str(minilm_path), num_threads=1), BERTScore(str(minilm_path), num_threads=2)
    calls: list[str] = []
    _spy(monkeypatch, narrow, calls, "narrow")
    _spy(monkeypatch, solo, calls, "solo")
    requests = make_requests(150, seed=5)
    direct = [bertscore.score(c, r) for c, r in requests]
    with BatchingScorer(narrow, solo=solo, workers=2) as batching:
        lone = batching.score(*requests[0], timeout=60)
        assert calls == ["solo"]
        with ThreadPoolExecutor(16) as pool:
            results = list(pool.map(lambda req: batching.score(*req), requests))
    assert_same_bertscore(lone, direct[0])
    for result, expected in zip(results, direct):
        assert_same_bertscore(result, expected)
    assert "narrow" in calls  # under load the two workers overlapped


def test_solo_similarity_equals_direct_calls(minilm_path, similarity_model):
    from rapidscore.nrr import SentenceSimilarity, negative_rejection

    narrow = SentenceSimilarity(str(minilm_path), num_threads=1)
    solo = SentenceSimilarity(str(minilm_path), num_threads=2)
    requests = make_requests(40, seed=6)
    with BatchingScorer(narrow, solo=solo, workers=2) as batching, ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda req: batching.score(*req, threshold=0.7), requests))
    for (cands, refs), result in zip(requests, results):
        assert_same_nrr(result, negative_rejection(cands, refs, 0.7, similarity_model=similarity_model))


def test_solo_must_match_the_scorer(minilm_path, bertscore, similarity_model):
    from rapidscore.abstention import get_detector
    from rapidscore.bertscore import BERTScore

    with pytest.raises(ValueError, match="same kind and options"):
        BatchingScorer(bertscore, solo=similarity_model)
    with pytest.raises(ValueError, match="same kind and options"):
        BatchingScorer(bertscore, solo=BERTScore(str(minilm_path), idf=True))
    with pytest.raises(ValueError, match="solo applies to BERTScore and SentenceSimilarity"):
        BatchingScorer(get_detector("heuristic"), solo=get_detector("heuristic"))


def test_the_server_builds_solo_scorers_only_where_they_help():
    from rapidscore.serve.config import ServeConfig
    from rapidscore.threads import thread_budget

    budget = thread_budget()
    default = ServeConfig()
    assert default.encoder_options["num_threads"] == max(1, budget // 2)
    expected = None if budget == max(1, budget // 2) else budget
    assert (default.solo_encoder_options or {}).get("num_threads") == expected
    assert ServeConfig(solo_threads=0).solo_encoder_options is None
    assert ServeConfig(workers=1).solo_encoder_options is None
    assert ServeConfig(num_threads=1).solo_encoder_options is None
    assert ServeConfig(device="cuda").solo_encoder_options is None
    assert ServeConfig(solo_threads=3).solo_encoder_options["num_threads"] == 3
    with pytest.raises(ValueError, match="solo_threads"):
        ServeConfig(solo_threads=-1)


@pytest.mark.filterwarnings("ignore::rapidscore.RapidscoreWarning")  # idf of one reference: uniform weights
@pytest.mark.parametrize("options", [dict(idf=True), dict(idf=True, idf_sents=["the cat sat", "a dog ran"])])
def test_idf_scorers_batched_equal_direct_calls(minilm_path, options):
    """idf from each call's references cannot share a matching pass (each request is finished on
    its own rows); idf weights fixed at construction can (one pass for the batch)."""
    from rapidscore.bertscore import BERTScore

    scorer = BERTScore(str(minilm_path), **options)
    assert scorer.weights_fixed == ("idf_sents" in options)
    requests = make_requests(60, seed=7)
    direct = [scorer.score(c, r) for c, r in requests]
    with BatchingScorer(scorer) as batching, ThreadPoolExecutor(12) as pool:
        results = list(pool.map(lambda req: batching.score(*req), requests))
    for result, expected in zip(results, direct):
        assert_same_bertscore(result, expected)


def test_finish_plans_refuses_weights_of_the_call(minilm_path):
    from rapidscore.bertscore import BERTScore

    scorer = BERTScore(str(minilm_path), idf=True)
    plan = scorer.plan(["a cat"], ["the cat"])
    with pytest.raises(ValueError, match="finish_plans needs weights that do not depend on the call"):
        scorer.finish_plans([plan], scorer.encode(plan), [np.arange(len(plan.texts))], [0])
