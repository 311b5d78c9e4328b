"""Shared data of the Ray tests: pairs with several references, NER records, responses."""

from __future__ import annotations

import os
import socket

import pytest

# Ray on 127.0.0.1 only: with this switch every Ray process, the driver included, takes the
# loopback address (``_node_ip_address`` alone leaves GCS clients on the machine's address). Ray
# reads it when it is imported, so it is set here, before the test modules import Ray.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

N = 40
CANDS = [f"candidate {i}: the {'quick ' * (i % 4)}brown fox {i % 7} jumps over a lazy dog" for i in range(N)]
REFS = [[f"reference {i}: a red fox {i % 5} sleeps", CANDS[(i + 1) % N]] if i % 3 == 0
        else [f"reference {i}: a {'slow ' * (i % 3)}red fox {i % 5} sleeps under the tree"] for i in range(N)]
RESPONSES = ["I'm sorry, I can't help with that." if i % 4 == 0 else f"The answer is {i}." for i in range(N)]


@pytest.fixture(scope="session")
def ray_rows() -> list[dict]:
    return [{"id": f"r{i}", "candidate": c, "reference": r, "response": s}
            for i, (c, r, s) in enumerate(zip(CANDS, REFS, RESPONSES))]


@pytest.fixture(scope="session")
def ner_rows() -> list[dict]:
    rows = []
    for i in range(N):
        text = " ".join(f"w{i}x{k}" for k in range(8))
        spans = [(text.index(f"w{i}x{k} "), text.index(f"w{i}x{k} ") + len(f"w{i}x{k}")) for k in range(7)]
        gold = [{"start": s, "end": e, "label": ("person", "org", "date")[(i + k) % 3]}
                for k, (s, e) in enumerate(spans) if (i + k) % 2 == 0]
        pred = [{"start": s, "end": e + (k % 2), "label": ("person", "fullname", "date")[(i * k) % 3]}
                for k, (s, e) in enumerate(spans) if (i + 2 * k) % 3 != 0]
        rows.append({"id": f"doc{i}", "text": text, "gold": gold, "predicted": pred})
    return rows


@pytest.fixture(scope="session")
def ray_model(tiny_model_path) -> str:
    from rapidscore.bertscore import BERTScore

    path = str(tiny_model_path("bert"))
    BERTScore(path)  # exported once here; Ray workers find it in the session's RAPIDSCORE_CACHE
    return path



@pytest.fixture
def network_attempts(monkeypatch) -> list:
    """Sockets refused and every attempt recorded (frameworks swallow some errors, so the
    record is what the framework tests check at the end)."""
    attempts: list = []

    def refuse(sock, address, *args):
        attempts.append(address)
        raise OSError(f"network use in an offline test: {address!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, *args, **kwargs: refuse(None, host))
    return attempts


@pytest.fixture(scope="module")
def scorer(minilm_path):
    """rapidscore's BERTScore on the embedded MiniLM, shared by a module's adapter tests."""
    from rapidscore.bertscore import BERTScore

    return BERTScore(str(minilm_path))
