"""Strict request schemas (issue 37 item 3): a field the server does not know is a 400 naming it,
on every route and on both of the middleware's paths, never a 200 computed without it (the
HTTP service used to answer a request for rescaled, idf-weighted scores with unrescaled ones)."""

from __future__ import annotations

import httpx
import pytest

VALID = {
    "/v1/bertscore": {"candidates": ["a cat sat"], "references": ["the cat sat"]},
    "/v1/nrr": {"generated": ["a cat sat"], "references": ["the cat sat"]},
    "/v1/similarity": {"generated": ["a cat sat"], "references": ["the cat sat"]},
    "/v1/ner": {"gold": [[[0, 3, "PER"]]], "predictions": [[[0, 3, "PER"]]], "label_similarity": "exact"},
    "/v1/refusal": {"responses": ["I cannot help with that."]},
}


@pytest.fixture(scope="module")
def server(tiny_server_class, tiny_model_path):
    running = tiny_server_class(str(tiny_model_path("bert")))
    yield running
    running.stop()


@pytest.mark.parametrize("path", sorted(VALID))
def test_a_valid_request_is_answered(server, path):
    answer = httpx.post(server.url + path, json=VALID[path], timeout=30)
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize("path", sorted(VALID))
@pytest.mark.parametrize("content_type", ["application/json", "application/json; charset=utf-8"])
def test_an_unknown_field_is_a_400_naming_it(server, path, content_type):
    import json

    body = json.dumps({**VALID[path], "bogus": 1})
    answer = httpx.post(server.url + path, content=body, headers={"content-type": content_type}, timeout=30)
    assert answer.status_code == 400, answer.text
    assert answer.json() == {"detail": "bogus: Extra inputs are not permitted", "field": "bogus"}


@pytest.mark.parametrize("option", ["lang", "model", "num_layers", "baseline_path"])
def test_bertscore_options_this_server_does_not_apply_are_refused(server, option):
    answer = httpx.post(server.url + "/v1/bertscore", json={**VALID["/v1/bertscore"], option: True}, timeout=30)
    assert answer.status_code == 400 and answer.json()["field"] == option


def test_a_nested_record_is_strict_too(server):
    body = {"responses": [{"answer": "I cannot.", "complete": "Thinking. I cannot.", "bogus": 1}]}
    answer = httpx.post(server.url + "/v1/refusal", json=body, timeout=30)
    # a string or a record: the union's member names are left out of the field
    assert answer.status_code == 400 and answer.json()["field"] == "responses[0]"
    assert "Extra inputs are not permitted" in answer.json()["detail"]


def test_config_fields_are_strictly_typed():
    from rapidscore.serve.config import ServeConfig

    with pytest.raises(ValueError, match="warmup must be true or false, got 'no'"):
        ServeConfig(warmup="no")


def test_the_entity_formats_over_http_are_ners():
    from rapidscore.ner.formats import FORMATS
    from rapidscore.serve.app import create_app
    from rapidscore.serve.config import ServeConfig

    schema = create_app(ServeConfig(), start=False).openapi()["components"]["schemas"]["NERRequest"]
    assert tuple(schema["properties"]["format"]["enum"]) == FORMATS
    assert "tags" in FORMATS
