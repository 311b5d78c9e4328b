"""Slow and idle clients on a live loopback server (issue 29 item 8): a request head or body that
does not arrive in time is answered 408 and closed, open connections are capped, and /health
still answers at the cap. No model is loaded: the service is marked ready by hand, so /health
answers 200 and nothing else needs the encoder."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

httpx = pytest.importorskip("httpx", reason="the [serve] test dependencies (httpx) are not installed")
pytest.importorskip("fastapi", reason="the [serve] extra (fastapi) is not installed")

from rapidscore.serve.config import ServeConfig  # noqa: E402
from rapidscore.serve.server import HEALTH_RESERVE  # noqa: E402

HEADER_TIMEOUT = 0.6
BODY_TIMEOUT = 0.6
MAX_CONNECTIONS = 12


@pytest.fixture
def server(live_server_class) -> Iterator:
    live = live_server_class(ServeConfig(header_timeout=HEADER_TIMEOUT, body_timeout=BODY_TIMEOUT,
                                         max_connections=MAX_CONNECTIONS), start=False, ready=True)
    yield live
    live.stop()


def connect(address: tuple, data: bytes = b"") -> socket.socket:
    sock = socket.create_connection(address, timeout=10)
    if data:
        sock.sendall(data)
    return sock


def read_until_closed(sock: socket.socket, timeout: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and when it closed (seconds
    from now); fails if it is still open after ``timeout``."""
    started = time.monotonic()
    sock.settimeout(timeout)
    received = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return received, time.monotonic() - started
            received += chunk
    except socket.timeout:
        pytest.fail(f"the server kept a slow connection open for {timeout} s (received {received[:80]!r})")
    except ConnectionResetError:
        return received, time.monotonic() - started


def wait_until(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def test_request_line_only_is_closed_with_408_after_the_header_timeout(server) -> None:
    # issue 29 item 8: sockets sending only a request line stayed open forever (fd exhaustion)
    slow = [connect(server.address, b"GET /health HTTP/1.1\r\n") for _ in range(4)]
    started = time.monotonic()
    for sock in slow:
        received, _ = read_until_closed(sock, timeout=HEADER_TIMEOUT + 5)
        assert received.startswith(b"HTTP/1.1 408 "), received
        assert b"request head not received within" in received
        sock.close()
    assert time.monotonic() - started >= HEADER_TIMEOUT * 0.9
    assert httpx.get(f"{server.url}/health").json() == {"status": "ok"}


def test_idle_connection_is_closed_silently_after_the_header_timeout(server) -> None:
    # issue 29 item 8: a connection that never sends a byte is closed too (no 408 to nobody)
    sock = connect(server.address)
    received, waited = read_until_closed(sock, timeout=HEADER_TIMEOUT + 5)
    assert received == b"" and waited >= HEADER_TIMEOUT * 0.8
    sock.close()


def test_slow_body_is_answered_408_after_the_body_timeout(server) -> None:
    # issue 29 item 8: a body that stops half-way holds the request no longer than body_timeout
    head = (b"POST /v1/bertscore HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
            b"content-length: 100\r\n\r\n")
    sock = connect(server.address, head + b'{"candidates": ')
    received, waited = read_until_closed(sock, timeout=BODY_TIMEOUT + 5)
    assert received.startswith(b"HTTP/1.1 408 "), received
    assert b"request body not received within" in received and waited >= BODY_TIMEOUT * 0.8
    sock.close()


def test_many_slow_clients_are_capped_and_health_still_answers(server) -> None:
    # issue 29 item 8: ~20,000 request-line-only sockets exhausted file descriptors and health
    # probes timed out. Here 5x the cap: the oldest idle ones are closed to make room, open
    # connections stay within the cap, and a health probe is answered at once.
    slow = [connect(server.address, b"GET /health HTTP/1.1\r\n") for _ in range(5 * MAX_CONNECTIONS)]
    wait_until(lambda: server.server.connection_guard.evicted >= 4 * MAX_CONNECTIONS)
    started = time.monotonic()
    answer = httpx.get(f"{server.url}/health", timeout=5)
    assert answer.status_code == 200 and time.monotonic() - started < HEADER_TIMEOUT
    assert server.open_connections() <= MAX_CONNECTIONS
    for sock in slow:
        read_until_closed(sock, timeout=HEADER_TIMEOUT + 5)  # every one closed: evicted or timed out
        sock.close()
    wait_until(lambda: server.open_connections() == 0)


def test_health_answers_when_every_connection_holds_a_request(server) -> None:
    # issue 29 item 8: with the cap taken by requests in progress (none can be closed to make
    # room), a few connections beyond it still answer /health; other paths get 503; beyond
    # those the server answers 503 and closes at once.
    head = (b"POST /v1/bertscore HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
            b"content-length: 100\r\n\r\n{")
    busy = [connect(server.address, head) for _ in range(MAX_CONNECTIONS)]
    wait_until(lambda: server.open_connections() == MAX_CONNECTIONS)
    with httpx.Client(base_url=server.url, timeout=5) as client:
        answer = client.get("/health")
        assert answer.status_code == 200 and answer.headers["connection"] == "close"
    with httpx.Client(base_url=server.url, timeout=5) as client:
        answer = client.post("/v1/bertscore", json={"candidates": ["a"], "references": ["b"]})
        assert answer.status_code == 503 and "open connections" in answer.json()["detail"]
        assert answer.headers["retry-after"] == "1"
    reserve = [connect(server.address) for _ in range(HEALTH_RESERVE)]
    wait_until(lambda: server.open_connections() == MAX_CONNECTIONS + HEALTH_RESERVE)
    refused = connect(server.address)
    received, waited = read_until_closed(refused, timeout=5)
    assert received.startswith(b"HTTP/1.1 503 ") and waited < HEADER_TIMEOUT
    assert server.open_connections() <= MAX_CONNECTIONS + HEALTH_RESERVE
    for sock in busy + reserve + [refused]:
        sock.close()


def test_a_body_sent_after_an_early_answer_is_bounded_too(live_server_class) -> None:
    # issue 29 item 8: a body over the limit is answered 413 from its Content-Length at once; the
    # client may keep sending it (bounded by body_timeout), and once it ends the connection is
    # idle and closed (uvicorn's keep-alive timer was cancelled by the body's bytes)
    live = live_server_class(ServeConfig(header_timeout=HEADER_TIMEOUT, body_timeout=BODY_TIMEOUT, max_body_bytes=10),
                             start=False, ready=True)
    try:
        head = (b"POST /v1/bertscore HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
                b"content-length: 40\r\n\r\n")
        for rest in (b"", b"x" * 20):  # the body never ends; the body ends after the answer
            sock = connect(live.address, head + b"y" * 20)
            if rest:
                time.sleep(0.1)
                sock.sendall(rest)
            received, waited = read_until_closed(sock, timeout=BODY_TIMEOUT + HEADER_TIMEOUT + 5)
            assert received.startswith(b"HTTP/1.1 413 ") and received.count(b"HTTP/1.1") == 1, received
            assert waited < BODY_TIMEOUT + HEADER_TIMEOUT + 1
            sock.close()
        wait_until(lambda: live.open_connections() == 0)
    finally:
        live.stop()


def test_an_endless_request_head_is_cut_at_max_header_bytes(live_server_class) -> None:
    # issue 29 item 8: the head's size was not bounded either (100 MB of headers sent within the
    # header timeout were held in memory); beyond max_header_bytes: 431 and closed
    live = live_server_class(ServeConfig(max_header_bytes=4096), start=False, ready=True)
    try:
        # Just over the limit, then nothing: the server reads every byte before it closes (bytes
        # left unread would make the close a reset, which may discard the answer before it is read).
        sock = connect(live.address, b"GET /health HTTP/1.1\r\n" + (b"x-filler: " + b"a" * 1000 + b"\r\n") * 5)
        received, _ = read_until_closed(sock, timeout=5)
        assert received.startswith(b"HTTP/1.1 431 ") and b"request head over 4096 bytes" in received
        sock.close()
        with httpx.Client(base_url=live.url) as client:  # a head under the limit passes
            assert client.get("/health", headers={"x-filler": "a" * 3000}).status_code == 200
    finally:
        live.stop()
