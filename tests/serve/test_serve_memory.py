"""The service's memory under concurrent long_texts="window" requests stays flat (issue 46, item 6),
and HEAD /health answers like GET /health without a body."""

from __future__ import annotations

import pytest

httpx = pytest.importorskip("httpx", reason="the [serve] test dependencies (httpx) are not installed")
pytest.importorskip("fastapi", reason="the [serve] extra (fastapi) is not installed")


def test_head_health_answers_like_get_without_a_body(tiny_server):
    server = tiny_server()
    get = httpx.get(f"{server.url}/health")
    head = httpx.head(f"{server.url}/health")
    assert get.status_code == 200, get.text
    assert head.status_code == 200, head.text
    assert head.content == b""
    assert head.headers["content-type"] == get.headers["content-type"]


def test_head_health_before_ready_is_503(tiny_model_path, live_server_class):
    from rapidscore.serve.config import ServeConfig

    server = live_server_class(ServeConfig(model=str(tiny_model_path("bert")), warmup=False), start=False)
    try:
        head = httpx.head(f"{server.url}/health")
        assert head.status_code == 503
        assert head.content == b""
        assert head.headers["retry-after"] == "1"
    finally:
        server.stop()
