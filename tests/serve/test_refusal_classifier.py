"""/v1/refusal with a classifier loaded at start (issue 41): ``ServeConfig(refusal_model=...,
refusal_method="classifier")`` answers as ``detect_refusal(..., method="classifier")``; a request
for the classifier on a server without one is a 400 naming ``method``."""

from __future__ import annotations

import pytest

from rapidscore.testing.tiny_classifiers import tiny_classifier_dir

httpx = pytest.importorskip("httpx", reason="the [serve] test dependencies (httpx) are not installed")

RESPONSES = ["I'm sorry, but I can't help with that.", "The capital of France is Paris.", "Abstained.",
             "Sure! Mix flour, eggs and milk, then fry."]


def test_the_service_answers_as_detect_refusal(tiny_server, tiny_models_root):
    from rapidscore.abstention import detect_refusal

    model = str(tiny_classifier_dir("bert", 2, tiny_models_root))
    server = tiny_server(refusal_model=model, refusal_method="classifier")
    answer = httpx.post(server.url + "/v1/refusal", json={"responses": RESPONSES}, timeout=60)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"refusal": detect_refusal(RESPONSES, "classifier", model=model).tolist(),
                             "method": "classifier"}
    heuristic = httpx.post(server.url + "/v1/refusal", json={"responses": RESPONSES, "method": "heuristic"},
                           timeout=60)
    assert heuristic.json()["refusal"] == detect_refusal(RESPONSES).tolist()


def test_classifier_requests_without_a_served_classifier_get_400(tiny_server):
    server = tiny_server()
    answer = httpx.post(server.url + "/v1/refusal", json={"responses": RESPONSES, "method": "classifier"},
                        timeout=60)
    assert answer.status_code == 400, answer.text
    assert "method" in answer.text and "refusal-model" in answer.text
