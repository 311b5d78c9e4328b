"""Per-request limits and fairness (issue 29 item 7): a request is bounded by its texts and its
tokens (RequestTooLargeError in process, 413 over HTTP, naming the limit and the count), and a
large request that is allowed is encoded in pieces between other requests' batches, so that small
requests sent while it runs finish first; its scores equal a direct call's."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from rapidscore.bertscore import BERTScore
from rapidscore.nrr import SentenceSimilarity
from rapidscore.serve import BatchingScorer, MicroBatcher

WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "quickly", "over", "lazy", "fox", "weather", "in",
         "paris", "rain", "tomorrow"]


def sentences(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(2, 9)))) for _ in range(n)]


@pytest.fixture(scope="module")
def tiny_bertscore(tiny_models_root) -> BERTScore:
    from rapidscore.testing import tiny_models

    return BERTScore(str(tiny_models.tiny_model_dir("bert", tiny_models_root)), num_threads=1)


@pytest.fixture(scope="module")
def tiny_similarity(tiny_models_root) -> SentenceSimilarity:
    from rapidscore.testing import tiny_models

    return SentenceSimilarity(str(tiny_models.tiny_model_dir("bert", tiny_models_root)), num_threads=1)


def finish_order(futures: dict) -> list[str]:
    """Names of ``futures`` in the order they finished (recorded by done callbacks)."""
    order: list[str] = []
    lock = threading.Lock()
    for name, future in futures.items():
        def record(_, name=name) -> None:
            with lock:
                order.append(name)
        future.add_done_callback(record)
    for future in futures.values():
        future.result(60)
    return order


def test_a_large_bertscore_request_runs_in_pieces_and_small_ones_pass_it(tiny_bertscore, hold_worker) -> None:
    # issue 29 item 7: 1 candidate x many references used to run whole, ahead of everything queued
    # behind it; now it is encoded in pieces within the budget and a small request finishes first.
    large = (["a candidate sentence about the weather"], [sentences(120)])
    small = (["the cat sat"], ["a cat sat on the mat"])
    batches: list[tuple[int, int]] = []
    with BatchingScorer(tiny_bertscore, batch_tokens=64,
                        on_batch=lambda n, tokens, seconds: batches.append((n, tokens))) as batching:
        gate = hold_worker(batching.batcher)
        futures = {"large": batching.submit(*large), "small": batching.submit(*small)}
        gate.open()
        assert finish_order(futures) == ["small", "large"]
        stats = batching.batcher.stats()
    assert stats.pieces > 10 and stats.requests == 3  # the gate, small, large (counted once, when done)
    assert all(tokens <= 64 for _, tokens in batches[1:])
    for name, (cands, refs) in (("large", large), ("small", small)):
        direct = tiny_bertscore.score(cands, refs)
        result = futures[name].result()
        for metric in ("precision", "recall", "f1"):
            assert getattr(result, metric).tobytes() == getattr(direct, metric).tobytes(), (name, metric)
        assert result.details == direct.details and result.signature == direct.signature


def test_requests_that_arrive_while_a_large_one_runs_go_between_its_pieces(tiny_bertscore) -> None:
    # issue 29 item 7: the small request is sent once the large one has started; it is answered
    # after at most the piece that was running, not after the whole large request.
    large = ([f"candidate {k}" for k in range(3)], [sentences(80, seed=k) for k in range(3)])
    started = threading.Event()
    release = threading.Event()

    def on_batch(n: int, tokens: int, seconds: float) -> None:
        if not started.is_set():
            started.set()
            release.wait(60)  # the worker waits here after the first piece until the small one is queued

    with BatchingScorer(tiny_bertscore, batch_tokens=128, on_batch=on_batch) as batching:
        big = batching.submit(*large)
        assert started.wait(60)
        small = batching.submit(["the dog ran"], ["a dog was running"])
        release.set()
        assert finish_order({"large": big, "small": small}) == ["small", "large"]
    direct = tiny_bertscore.score(*large)
    assert big.result().f1.tobytes() == direct.f1.tobytes()


def test_two_workers_never_run_pieces_of_one_request_at_once(tiny_bertscore) -> None:
    # issue 29 item 7: a request holds at most one worker (its next piece is queued only once the
    # previous one is done), so the other worker stays free for other requests.
    running = []
    peak = [0]
    lock = threading.Lock()
    real = tiny_bertscore.encoder.embed_ids

    def counting(ids, **kwargs):
        with lock:
            running.append(1)
            peak[0] = max(peak[0], len(running))
        try:
            return real(ids, **kwargs)
        finally:
            with lock:
                running.pop()

    large = (["one candidate"], [sentences(150, seed=3)])
    tiny_bertscore.encoder.embed_ids = counting
    try:
        with BatchingScorer(tiny_bertscore, batch_tokens=48, workers=2) as batching:
            result = batching.score(*large, timeout=60)
            assert batching.batcher.stats().pieces > 10
    finally:
        del tiny_bertscore.encoder.embed_ids
    assert peak[0] == 1
    assert result.f1.tobytes() == tiny_bertscore.score(*large).f1.tobytes()


def test_similarity_and_refusal_in_pieces_equal_direct_calls(tiny_similarity, hold_worker) -> None:
    from rapidscore.abstention.detectors import get_detector
    from rapidscore.nrr import negative_rejection

    generated = sentences(40, seed=5)
    references = [[a, b] for a, b in zip(sentences(40, seed=6), sentences(40, seed=7))]
    responses = ["I'm sorry, I can't help with that."] * 30 + sentences(60, seed=8)
    detector = get_detector("heuristic")
    with MicroBatcher(batch_tokens=40) as batcher:
        similarity = BatchingScorer(tiny_similarity, batcher=batcher)
        refusal = BatchingScorer(detector, batcher=batcher)
        gate = hold_worker(batcher)
        nrr = similarity.submit(generated, references, threshold=0.5)
        decisions = refusal.submit(responses)
        gate.open()
        result, refused = nrr.result(60), decisions.result(60)
        assert batcher.stats().pieces > 10
    direct = negative_rejection(generated, references, 0.5, similarity_model=tiny_similarity)
    assert result.similarities.tobytes() == direct.similarities.tobytes()
    assert np.array_equal(result.best_reference, direct.best_reference) and result.rate == direct.rate
    assert refused.tolist() == detector(responses).tolist()


def test_a_cancelled_large_request_drops_its_remaining_pieces(tiny_bertscore) -> None:
    # issue 29 item 10: cancelling a request that already started (its client went away) drops
    # the pieces not yet encoded; the next request does not wait for them.
    release = threading.Event()
    first = threading.Event()

    def on_batch(n: int, tokens: int, seconds: float) -> None:
        if not first.is_set():
            first.set()
            release.wait(60)

    with BatchingScorer(tiny_bertscore, batch_tokens=32, on_batch=on_batch) as batching:
        big = batching.submit(["one candidate"], [sentences(100, seed=9)])
        assert first.wait(60)
        assert not big.cancel()  # running: not cancelled, but abandoned
        release.set()
        with pytest.raises(Exception) as caught:
            big.result(60)
        assert type(caught.value).__name__ == "CancelledError"
        batching.score(["after"], ["it"], timeout=60)
        stats = batching.batcher.stats()
    assert stats.dropped == 1 and stats.pieces == 1 and stats.requests == 1  # one piece, then only "after"


def test_requests_over_the_texts_or_tokens_limit_are_refused_before_queueing(tiny_bertscore, tiny_similarity) -> None:
    # issue 29 item 7: the limits count every text (candidates and all references) and the tokens.
    from rapidscore.serve.batching import RequestTooLargeError

    with BatchingScorer(tiny_bertscore, max_request_texts=10, max_request_tokens=150) as batching:
        with pytest.raises(RequestTooLargeError, match=r"references: the request holds 11 texts .*max_texts") as caught:
            batching.submit(["one"], [sentences(10)])
        assert (caught.value.limit, caught.value.value, caught.value.maximum) == ("max_texts", 11, 10)
        with pytest.raises(RequestTooLargeError, match=r"tokens .*over the limit of 150 per request \(max_tokens\)"):
            batching.submit(["one"], [[" ".join(WORDS) + f" {k}" for k in range(8)]])
        assert batching.score(["one"], [sentences(9)], timeout=60).f1.shape == (1,)  # 10 texts: allowed
        assert batching.batcher.stats().requests == 1
    with BatchingScorer(tiny_similarity, max_request_texts=4) as batching, \
            pytest.raises(RequestTooLargeError, match="holds 5 texts"):
        batching.submit(["a", "b"], [["c", "d"], "e"])
    with pytest.raises(ValueError, match="max_request_tokens must be a positive int"):
        BatchingScorer(tiny_bertscore, max_request_tokens=0)


# --- over HTTP ----------------------------------------------------------------------------------

def test_http_requests_over_the_texts_or_tokens_limit_get_413_naming_it(tiny_server) -> None:
    # issue 29 item 7: the limits counted candidates only (1 x 90,000 references was accepted)
    import httpx

    server = tiny_server(max_texts=20, max_tokens=300, max_items=64)
    many = {"candidates": ["one"], "references": [sentences(20)]}  # 21 texts
    answer = httpx.post(f"{server.url}/v1/bertscore", json=many)
    assert answer.status_code == 413, answer.text
    assert answer.json()["field"] == "references"
    assert "21 texts" in answer.json()["detail"] and "max_texts" in answer.json()["detail"]
    long = {"generated": ["one"], "references": [[" ".join(WORDS) + f" {k}" for k in range(15)]]}
    answer = httpx.post(f"{server.url}/v1/similarity", json=long)
    assert answer.status_code == 413 and answer.json()["field"] == "references"
    assert "max_tokens" in answer.json()["detail"] and "limit of 300" in answer.json()["detail"]
    answer = httpx.post(f"{server.url}/v1/refusal", json={"responses": sentences(21)})
    assert answer.status_code == 413 and answer.json()["field"] == "responses"
    assert httpx.post(f"{server.url}/v1/bertscore",
                      json={"candidates": ["one"], "references": [sentences(19)]}).status_code == 200
    assert server.service.batcher.stats().requests == 1  # the refused ones were never queued


def test_http_a_small_request_is_answered_while_a_large_one_is_in_pieces(tiny_server) -> None:
    # issue 29 item 7: two requests of 1 x 8,000 references made a 1-pair request wait 51 s. The
    # large request below is held after its first piece until the small one is queued; the small
    # one must then be answered before the large one.
    import asyncio

    import httpx

    server = tiny_server(batch_tokens=64)
    service = server.service
    first_piece, release = server.hold_after_first_batch()
    large = {"candidates": ["a candidate about the weather"], "references": [sentences(150, seed=4)]}
    small = {"candidates": ["the cat sat"], "references": ["a cat sat on a mat"]}

    async def main() -> list[str]:
        order: list[str] = []
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
            async def post(name: str, body: dict) -> httpx.Response:
                answer = await client.post("/v1/bertscore", json=body)
                order.append(name)
                return answer

            big = asyncio.ensure_future(post("large", large))
            while not first_piece.is_set():
                await asyncio.sleep(0.01)
            little = asyncio.ensure_future(post("small", small))
            while service.batcher.queue_depth < 1:  # the small request is queued behind the running piece
                await asyncio.sleep(0.01)
            release.set()
            answers = await asyncio.gather(big, little)
        assert [a.status_code for a in answers] == [200, 200]
        return order

    assert asyncio.run(main()) == ["small", "large"]
    assert service.batcher.stats().pieces > 5


def test_http_a_large_request_is_tokenised_off_the_event_loop(tiny_server) -> None:
    # issue 29 item 7: tokenising the largest request allowed took 0.19 s in the event loop,
    # during which no other connection was served; small requests stay inline.
    import httpx

    server = tiny_server()
    task = server.service.scorer("bertscore")._task
    prepare = task.prepare
    on_loop: list[bool] = []

    def recording(*args, **kwargs):
        on_loop.append(threading.current_thread() is server.thread)
        return prepare(*args, **kwargs)

    task.prepare = recording
    small = {"candidates": ["the cat sat"], "references": ["a cat sat on a mat"]}
    large = {"candidates": ["the cat sat"], "references": [sentences(400, seed=2) * 2]}  # ~40,000 characters
    for body in (small, large):
        assert httpx.post(f"{server.url}/v1/bertscore", json=body, timeout=60).status_code == 200
    assert on_loop == [True, False]
