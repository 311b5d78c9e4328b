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


class LiveServer:
    """The real server (``make_server``: its protocol, timers and connection cap) in a thread on a
    free loopback port: ``url``, ``address``, ``service``, ``server``, ``stop()``.

    ``app``: an app made already; otherwise ``create_app`` around ``service`` (or a new
    ``ScoringService(config)``), loading the models when ``start``. ``ready``: mark the service
    ready without loading anything (/health answers 200)."""

    def __init__(self, config, *, app=None, service=None, start: bool = True, ready: bool = False,
                 **app_options):
        import socket
        import time

        from rapidscore.serve.app import create_app
        from rapidscore.serve.server import make_server
        from rapidscore.serve.service import ScoringService

        if app is None:
            app = create_app(service=service or ScoringService(config), start=start, **app_options)
        self.service = app.state.service
        if ready:
            self.service.ready.set()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.address = self.sock.getsockname()
        self.port = self.address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = make_server(config, app=app)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.02)

    def wait_ready(self) -> None:
        import time

        import httpx

        deadline = time.monotonic() + 120
        while httpx.get(f"{self.url}/health").status_code != 200:
            assert time.monotonic() < deadline, f"not ready: {self.service.load_error}"
            time.sleep(0.1)

    def open_connections(self) -> int:
        return len(self.server.server_state.connections)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(60)
        assert not self.thread.is_alive()


class TinyServer(LiveServer):
    """The HTTP service on a tiny model, loaded before it listens (one worker, no warm-up, exact
    NER labels unless ``settings`` say otherwise)."""

    def __init__(self, model: str, **settings):
        from rapidscore.serve.config import ServeConfig
        from rapidscore.serve.service import ScoringService

        settings = {"warmup": False, "workers": 1, "ner_label_similarity": "exact", **settings}
        service = ScoringService(ServeConfig(model=model, **settings))
        service.start()
        super().__init__(service.config, service=service, start=False)

    def hold_after_first_batch(self) -> tuple[threading.Event, threading.Event]:
        """``(first, release)``: the worker stops after its next batch (``first`` is set) until
        ``release`` is set, so that a test can act between the pieces of a large request."""
        first, release = threading.Event(), threading.Event()
        observe = self.service.metrics.observe_batch

        def holding(n: int, tokens: int, seconds: float) -> None:
            observe(n, tokens, seconds)
            if not first.is_set():
                first.set()
                release.wait(60)

        self.service.batcher.on_batch = holding
        return first, release


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


@pytest.fixture(scope="session")
def live_server_class() -> type:
    """``LiveServer`` itself (test modules do not import each other or conftest)."""
    pytest.importorskip("fastapi", reason="the [serve] extra (fastapi) is not installed")
    return LiveServer
