"""Clients that go away before their answer (issue 29 item 10), on a live loopback server: they
are counted apart in /metrics (status 499 and rapidscore_client_disconnects_total, never 500), and
their work is dropped if it was not computed yet, so the next request does not wait for it. The
checks compare the batcher's counters of computed requests and tokens, not timings."""

from __future__ import annotations

import json
import socket
import time

import pytest

pytest.importorskip("httpx", reason="the [serve] test dependencies (httpx) are not installed")
import httpx

BODY = {"candidates": ["a candidate about the weather"],
        "references": [[f"reference number {k} about rain in paris" for k in range(60)]]}


def send_and_leave(port: int, body: dict, *, send_bytes: int | None = None,
                   path: str = "/v1/bertscore") -> socket.socket:
    """A raw request (``send_bytes``: only that much of the body); the caller closes the socket."""
    payload = json.dumps(body).encode()
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\n\r\n").encode()
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(head + (payload if send_bytes is None else payload[:send_bytes]))
    return sock


def wait_until(condition, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_a_queued_request_whose_client_left_is_dropped_and_counted_apart(tiny_server, hold_worker) -> None:
    # issue 29 item 10: it was counted as a 500 and computed anyway (the next request waited 8 s)
    server = tiny_server()
    service = server.service
    gate = hold_worker(service.batcher)
    sock = send_and_leave(server.port, BODY)
    wait_until(lambda: service.batcher.queue_depth == 1, "the request was never queued")
    sock.close()
    wait_until(lambda: service.metrics.disconnects.get("/v1/bertscore") == 1, "the disconnect was not noticed")
    gate.open()
    small = {"candidates": ["the cat sat"], "references": ["a cat sat on a mat"]}
    answer = httpx.post(f"{server.url}/v1/bertscore", json=small, timeout=60)
    assert answer.status_code == 200
    stats = service.batcher.stats()
    assert stats.dropped == 1
    assert stats.requests == 2  # the gate and the small request: the dropped one was never computed
    assert stats.tokens == 1 + service.scorer("bertscore").prepare(small["candidates"], small["references"]).tokens
    text = httpx.get(f"{server.url}/metrics").text
    assert 'rapidscore_requests_total{endpoint="/v1/bertscore",status="499"} 1' in text
    assert 'rapidscore_client_disconnects_total{endpoint="/v1/bertscore"} 1' in text
    assert "rapidscore_dropped_total 1" in text
    assert 'status="500"' not in text


def test_a_request_in_pieces_whose_client_left_stops_between_pieces(tiny_server) -> None:
    # issue 29 items 7 and 10: a large request is encoded in pieces; once its client is gone the
    # remaining pieces are dropped.
    server = tiny_server(batch_tokens=64)
    service = server.service
    first_piece, release = server.hold_after_first_batch()
    sock = send_and_leave(server.port, BODY)
    assert first_piece.wait(60)
    sock.close()
    wait_until(lambda: service.metrics.disconnects.get("/v1/bertscore") == 1, "the disconnect was not noticed")
    release.set()
    answer = httpx.post(f"{server.url}/v1/bertscore", json={"candidates": ["a"], "references": ["b"]}, timeout=60)
    assert answer.status_code == 200
    stats = service.batcher.stats()
    assert (stats.pieces, stats.dropped, stats.requests) == (1, 1, 1)  # one piece ran; then only "a"/"b"


def test_a_client_that_leaves_while_sending_the_body_is_499_not_500(tiny_server) -> None:
    # issue 29 item 10
    server = tiny_server()
    sock = send_and_leave(server.port, BODY, send_bytes=20)
    time.sleep(0.2)  # the server has read the head and part of the body
    sock.close()
    wait_until(lambda: server.service.metrics.disconnects.get("/v1/bertscore") == 1, "the disconnect was not noticed")
    text = httpx.get(f"{server.url}/metrics").text
    assert 'status="500"' not in text and 'status="499"} 1' in text
    assert server.service.batcher.stats().requests == 0


def test_a_ner_request_whose_client_left_is_dropped(tiny_server, hold_worker) -> None:
    # issue 29 item 10: the same through FastAPI's routes (NER is not on the middleware's fast path)
    server = tiny_server()
    service = server.service
    gate = hold_worker(service.batcher)
    body = {"gold": [{"id": 1, "text": "Ada Lovelace", "labels": [[0, 12, "PER"]]}],
            "predictions": [{"id": 1, "text": "Ada Lovelace", "labels": [[0, 3, "PER"]]}]}
    sock = send_and_leave(server.port, body, path="/v1/ner")
    wait_until(lambda: service.batcher.queue_depth == 1, "the request was never queued")
    sock.close()
    wait_until(lambda: service.metrics.disconnects.get("/v1/ner") == 1, "the disconnect was not noticed")
    gate.open()
    assert httpx.post(f"{server.url}/v1/ner", json=body, timeout=60).status_code == 200
    stats = service.batcher.stats()
    assert (stats.dropped, stats.requests) == (1, 2)  # the gate and the second NER request
