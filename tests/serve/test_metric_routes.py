"""The service's routes from the metric registry (issues 27, 37): a metric added with
``rapidscore.metrics.register`` is served at ``/v1/{name}`` (and its aliases) with a typed
request model from its declaration, like the built-in ones; ``ServeConfig.metrics`` narrows the
served set; /v1/nrr is the NRR metric's name, /v1/similarity its older one."""

from __future__ import annotations

import pytest

httpx = pytest.importorskip("httpx", reason="the [serve] test dependencies (httpx) are not installed")


def test_a_registered_metric_is_served_at_its_name(toy_metric, tiny_server):
    server = tiny_server(metrics=("shout",))  # an alias names it too
    assert server.service.config.metrics == ("toy",)
    body = {"text": ["ab", "c"]}
    for path in ("/v1/toy", "/v1/shout"):
        answer = httpx.post(server.url + path, json=body, timeout=30)
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"length": [3, 2], "shout": ["AB!", "C!"], "signature": "toy|rapidscore"}
    # a "text" column is typed: a row that is not a string is a 400 naming it, before any work
    answer = httpx.post(server.url + "/v1/toy", json={"text": ["a", 3]}, timeout=30)
    assert answer.status_code == 400 and answer.json() == {"detail": "text[1]: Input should be a valid string",
                                                           "field": "text[1]"}
    answer = httpx.post(server.url + "/v1/toy", json={"text": ["a"], "words": ["a"]}, timeout=30)
    assert answer.status_code == 400 and answer.json() == {"detail": "words: Extra inputs are not permitted",
                                                           "field": "words"}
    answer = httpx.post(server.url + "/v1/toy", json={}, timeout=30)
    assert answer.status_code == 400 and answer.json() == {"detail": "text: Field required", "field": "text"}
    answer = httpx.post(server.url + "/v1/bleu", json=body, timeout=30)
    assert answer.status_code == 404 and "no metric 'bleu' on this server" in answer.json()["detail"]
    answer = httpx.post(server.url + "/v1/bertscore", json={"candidates": ["a"], "references": ["a"]}, timeout=30)
    assert answer.status_code == 404, "only the listed metrics are served"


def test_nrr_is_served_at_its_name_and_its_older_one(tiny_server):
    server = tiny_server()
    body = {"generated": ["a cat sat", "dogs"], "references": ["a cat sat down", ["cats", "dogs bark"]]}
    answers = [httpx.post(server.url + path, json=body, timeout=30) for path in ("/v1/nrr", "/v1/similarity")]
    assert [a.status_code for a in answers] == [200, 200]
    assert answers[0].json() == answers[1].json()


def test_only_registered_metrics_can_be_listed():
    from rapidscore.serve.config import ServeConfig

    with pytest.raises(ValueError, match="unknown metric 'bleu'"):
        ServeConfig(metrics=("bleu",))
    assert ServeConfig(metrics=("similarity", "nrr")).metrics == ("nrr",)  # aliases resolve, once each


def test_the_toy_metric_gets_a_typed_route_with_its_options(toy_metric, tiny_server):
    """tests/conftest.py's toy, registered in the test: its route's request model and its option
    (``suffix``) are in /openapi.json, and the option reaches its engine, with no library change."""
    server = tiny_server(metrics=("toy",))
    document = httpx.get(server.url + "/openapi.json", timeout=30).json()
    schema = document["components"]["schemas"]["ShoutRequest"]
    assert schema["properties"]["suffix"]["default"] == "!" and schema["required"] == ["text"]
    assert {"/v1/toy", "/v1/shout"} <= set(document["paths"])
    answer = httpx.post(server.url + "/v1/toy", json={"text": ["ab"], "suffix": "?"}, timeout=30)
    assert answer.status_code == 200 and answer.json()["shout"] == ["AB?"]
    answer = httpx.post(server.url + "/v1/toy", json={"text": ["ab"], "suffix": 3}, timeout=30)
    assert answer.status_code == 400 and answer.json()["field"] == "suffix"
