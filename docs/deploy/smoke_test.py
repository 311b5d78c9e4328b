"""Smoke test of a lean rapidscore runtime: no torch, models from an exported cache.

Run by docs/deploy/Dockerfile's runtime stage and by tests/encoder/test_lean_runtime.py (which
builds the same runtime in a fresh virtual environment). Checks that torch cannot be imported,
scores BERTScore and the Negative Rejection Rate, starts ``rapidscore serve`` on a free port and
checks that its answers equal the direct scores, then prints the scores as one JSON line.

Usage: RAPIDSCORE_CACHE=DIR python smoke_test.py [MODEL]   (default: all-MiniLM-L6-v2)
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request

CANDIDATES = ["A man is playing a guitar.", "The cat sat on the mat.", "Tokyo is the capital of Japan."]
REFERENCES = ["Someone plays an instrument.", "A cat was sitting on a mat.", "Paris is in France."]


def _post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def _wait_ready(url: str, server: subprocess.Popen, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"smoke test: rapidscore serve exited with {server.returncode}: {server.stderr.read()}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"smoke test: {url}/health not ready after {timeout:.0f} s")


def main() -> int:
    model = sys.argv[1] if len(sys.argv) > 1 else "all-MiniLM-L6-v2"
    try:
        import torch  # noqa: F401
    except ImportError:
        pass
    else:
        raise SystemExit("smoke test: torch is importable; the lean runtime must not have it")

    from rapidscore import BERTScore
    from rapidscore.nrr.scoring import negative_rejection

    bertscore = BERTScore(model=model).score(CANDIDATES, REFERENCES)
    nrr = negative_rejection(CANDIDATES, REFERENCES, model=model)
    scores = {"f1": [float(v) for v in bertscore.f1], "similarity": [float(v) for v in nrr.similarities]}

    server = subprocess.Popen([sys.executable, "-m", "rapidscore", "serve", "--port", "0", "--json", "--model", model],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = json.loads(server.stdout.readline())["url"]
        _wait_ready(url, server)
        served = _post(url + "/v1/bertscore", {"candidates": CANDIDATES, "references": REFERENCES})
        similar = _post(url + "/v1/similarity", {"generated": CANDIDATES, "references": REFERENCES})
    finally:
        server.terminate()
        server.wait(timeout=60)
    if served["f1"] != scores["f1"] or similar["similarities"] != scores["similarity"]:
        raise SystemExit(f"smoke test: the server's scores differ from the direct ones: {served} {similar} {scores}")
    if "torch" in sys.modules or "transformers" in sys.modules:
        raise SystemExit("smoke test: scoring imported torch or transformers")
    print(json.dumps(scores))
    return 0


if __name__ == "__main__":
    sys.exit(main())
