"""Fixtures of the serving tests."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest


class Gate:
    """Holds a batcher's worker busy until opened, so that requests queue up deterministically."""

    def __init__(self, batcher) -> None:
        self.event = threading.Event()
        started = threading.Event()

        def hold() -> None:
            started.set()
            self.event.wait(60)

        self.future = batcher.call(hold)
        assert started.wait(60), "the worker never took the gate"

    def open(self) -> None:
        self.event.set()


@pytest.fixture
def hold_worker() -> Iterator:
    """``hold_worker(batcher) -> Gate``: the worker (of a one-worker batcher) waits until
    ``gate.open()``; every gate opens at teardown, so a failing test leaves no worker stuck."""
    gates: list[Gate] = []

    def hold(batcher) -> Gate:
        gates.append(Gate(batcher))
        return gates[-1]

    yield hold
    for gate in gates:
        gate.open()


class TinyServer:
    """The HTTP service on a tiny model (uvicorn in a thread, a free loopback port), loaded
    before it listens: ``url``, ``service`` (its ScoringService), ``stop()``."""

    def __init__(self, model: str, **settings):
        import socket
        import time

        from rapidscore.serve.app import create_app
        from rapidscore.serve.config import ServeConfig
        from rapidscore.serve.server import make_server
        from rapidscore.serve.service import ScoringService

        settings = {"warmup": False, "workers": 1, "ner_label_similarity": "exact", **settings}
        self.service = ScoringService(ServeConfig(model=model, **settings))
        self.service.start()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        # the real server's protocol: its timers and connection cap
        self.server = make_server(self.service.config, app=create_app(service=self.service, start=False))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(60)


@pytest.fixture
def tiny_server(tiny_model_path) -> Iterator:
    """``tiny_server(**ServeConfig settings) -> TinyServer`` on the tiny BERT model (one worker, no
    warm-up, exact NER labels unless given), stopped at teardown."""
    pytest.importorskip("fastapi", reason="the [serve] extra (fastapi) is not installed")
    pytest.importorskip("httpx", reason="the [serve] test dependencies (httpx) are not installed")
    servers: list[TinyServer] = []

    def start(**settings) -> TinyServer:
        servers.append(TinyServer(str(tiny_model_path("bert")), **settings))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="session")
def tiny_server_class() -> type:
    """``TinyServer`` itself, for fixtures of a wider scope than ``tiny_server``'s."""
    return TinyServer
