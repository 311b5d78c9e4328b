"""The service's memory under concurrent long_texts="window" requests stays flat (issue 46, item 6):
`rapidscore serve` holds its runtime memory in one arena, flat from the moment it is ready; a
service embedded in another program keeps none and gives each batch's memory back. And HEAD
/health answers like GET /health without a body."""

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
    of another length) against a service embedded in this process (no arena: ``rapidscore
    serve``'s process settings are never made for it): the memory held once a round is answered stays
    within 128 MiB of what the server held before any of them, and does not grow over the later
    rounds. ONNX Runtime's CPU arena kept every region it grew by (300+ MiB after the first round,
    more with each new mix of shapes). And the rounds load no model: in a process whose model cache
    had dropped the workers' unpadded graphs, the window requests' encoders made second sessions of
    them, a second copy of the weights each (+175 MiB in the full test run)."""
    import sys

    from rapidscore.encoder import cache_info
    from rapidscore.serve.config import ServeConfig

    if not sys.platform.startswith("linux"):
        pytest.skip("reads /proc/self/status and glibc's malloc_trim")
    server = live_server_class(ServeConfig(model=str(minilm_path)))
    try:
        server.wait_ready()
        models = cache_info()["models_loaded"]
        before = _rss_in_use_mib()
        held: list[float] = []
        _window_rounds(server.url, 3, lambda: held.append(_rss_in_use_mib()))
        loads = cache_info()["models_loaded"] - models
    finally:
        server.stop()
    assert loads == 0, f"the rounds loaded {loads} model(s) again (the server loads its models before ready)"
    rounds = ", ".join(f"{mib:.0f}" for mib in held)
    assert max(held) - before < 128, f"held {rounds} MiB after the rounds, {before:.0f} MiB before them"
    assert held[-1] - held[0] < 48, f"grew over the later rounds: {rounds} MiB"


def _window_rounds(url: str, rounds: int, after_each) -> None:
    """``rounds`` rounds of 8 concurrent long_texts="window" requests, every text of another length;
    ``after_each()`` once each round is answered."""
    import json
    import random
    from concurrent.futures import ThreadPoolExecutor

    from rapidscore.testing import corpora

    cands, refs = corpora.long_text_pairs(40, min_words=400, max_words=700, seed=3)
    rng = random.Random(1)

    def post(index: int) -> None:
        body = {"candidates": [cands[index]], "references": [refs[index]], "long_texts": "window"}
        answer = httpx.post(f"{url}/v1/bertscore", content=json.dumps(body),
                            headers={"Content-Type": "application/json"}, timeout=300)
        assert answer.status_code == 200, answer.text
        assert answer.json()["f1"][0] > 0.5  # a paraphrase: the windows scored, not a stub

    with ThreadPoolExecutor(8) as pool:
        for _round in range(rounds):
            list(pool.map(post, rng.sample(range(len(cands)), 8)))
            after_each()


@pytest.mark.slow  # a `rapidscore serve` process on the real MiniLM, about 40 s
def test_the_server_process_is_flat_from_ready_on(tmp_path) -> None:
    """`rapidscore serve` at its defaults (a 1,024 MiB runtime arena, used up to the workers' largest
    batches before it turns ready): its RSS once ready and after each of 3 rounds of 8 concurrent
    window requests stays within 10%, and the later rounds add nothing past the allocator's
    slack. Without the arena the same rounds took single samples 1.6x apart (bench/RESULTS.md);
    with the arena growing by what each run asked, it held 0.65 GiB at ready and 1.7 GiB 7
    minutes later."""
    import json
    import os
    import subprocess
    import sys
    import time

    if not sys.platform.startswith("linux"):
        pytest.skip("reads /proc/PID/status")
    env = {key: value for key, value in os.environ.items() if not key.startswith("MALLOC_")}
    env.pop("RAPIDSCORE_API_KEY", None)
    server = subprocess.Popen([sys.executable, "-m", "rapidscore", "serve", "--port", "0", "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)

    def rss_mib() -> float:
        with open(f"/proc/{server.pid}/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024

    try:
        url = json.loads(server.stdout.readline())["url"]
        deadline = time.monotonic() + 180
        while httpx.get(f"{url}/health").status_code != 200:
            assert server.poll() is None and time.monotonic() < deadline, server.stderr.read()
            time.sleep(0.2)
        ready = rss_mib()
        held: list[float] = []
        _window_rounds(url, 3, lambda: held.append(rss_mib()))
    finally:
        server.terminate()
        server.wait(60)
    rounds = ", ".join(f"{mib:.0f}" for mib in held)
    assert max(held) <= 1.10 * ready, f"{ready:.0f} MiB when ready, then {rounds} MiB"
    assert held[-1] - held[0] < 48, f"grew over the later rounds: {rounds} MiB"
