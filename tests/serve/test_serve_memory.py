"""The service's memory under concurrent long_texts="window" requests stays flat (issue 46, item 6),
and HEAD /health answers like GET /health without a body."""

from __future__ import annotations

import pytest

httpx = pytest.importorskip("httpx", reason="the [serve] test dependencies (httpx) are not installed")
pytest.importorskip("fastapi", reason="the [serve] extra (fastapi) is not installed")


def test_head_health_answers_like_get_without_a_body(tiny_server) -> None:
    server = tiny_server()
    get = httpx.get(f"{server.url}/health")
    head = httpx.head(f"{server.url}/health")
    assert get.status_code == 200, get.text
    assert head.status_code == 200, head.text
    assert head.content == b""
    assert head.headers["content-type"] == get.headers["content-type"]


def test_head_health_before_ready_is_503(tiny_model_path, live_server_class) -> None:
    from rapidscore.serve.config import ServeConfig

    server = live_server_class(ServeConfig(model=str(tiny_model_path("bert")), warmup=False), start=False)
    try:
        head = httpx.head(f"{server.url}/health")
        assert head.status_code == 503
        assert head.content == b""
        assert head.headers["retry-after"] == "1"
    finally:
        server.stop()


def _rss_in_use_mib() -> float:
    """This process's RSS once glibc has given back its free lists (``malloc_trim``): the memory
    still allocated, without what the allocator keeps cached for reuse."""
    import ctypes
    import ctypes.util

    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc_trim(0)
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024


@pytest.mark.slow  # the real MiniLM, about 30 s
def test_concurrent_window_requests_give_their_memory_back(minilm_path, live_server_class) -> None:
    """Rounds of 8 concurrent long_texts="window" requests (texts of 2-3 windows each, every one
    of another length) against the live server: the memory held once a round is answered stays
    within 128 MiB of what the server held before any of them, and does not grow over the later
    rounds. ONNX Runtime's CPU arena kept every region it grew by (300+ MiB after the first round,
    more with each new mix of shapes)."""
    import json
    import random
    import sys
    from concurrent.futures import ThreadPoolExecutor

    from rapidscore.serve.config import ServeConfig
    from rapidscore.testing import corpora

    if not sys.platform.startswith("linux"):
        pytest.skip("reads /proc/self/status and glibc's malloc_trim")
    server = live_server_class(ServeConfig(model=str(minilm_path)))
    try:
        server.wait_ready()
        cands, refs = corpora.long_text_pairs(40, min_words=400, max_words=700, seed=3)
        rng = random.Random(1)

        def post(index: int) -> None:
            body = {"candidates": [cands[index]], "references": [refs[index]], "long_texts": "window"}
            answer = httpx.post(f"{server.url}/v1/bertscore", content=json.dumps(body),
                                headers={"Content-Type": "application/json"}, timeout=300)
            assert answer.status_code == 200, answer.text
            assert answer.json()["f1"][0] > 0.5  # a paraphrase: the windows scored, not a stub

        before = _rss_in_use_mib()
        held = []
        with ThreadPoolExecutor(8) as pool:
            for _round in range(3):
                list(pool.map(post, rng.sample(range(len(cands)), 8)))
                held.append(_rss_in_use_mib())
    finally:
        server.stop()
    rounds = ", ".join(f"{mib:.0f}" for mib in held)
    assert max(held) - before < 128, f"held {rounds} MiB after the rounds, {before:.0f} MiB before them"
    assert held[-1] - held[0] < 48, f"grew over the later rounds: {rounds} MiB"
