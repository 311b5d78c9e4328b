"""Per-request options over HTTP (issue 37 item 2, BERTScore's idf and rescaling): declared once
by the metric (``BERTScoreMetric.options`` settable per request), they are the request's fields and its
OpenAPI entry, and the answer equals the Python API's with the same keywords."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from rapidscore.common.metric import request_options

CANDS = ["a cat sat on the mat", "dogs bark at night", "the sun is bright today"]
REFS = ["the cat sat on a mat", ["a dog barked", "dogs bark loudly at night"], "it is sunny"]


def _scores(answer: httpx.Response) -> np.ndarray:
    assert answer.status_code == 200, answer.text
    document = answer.json()
    return np.array([document["precision"], document["recall"], document["f1"]], dtype=np.float32)


def _api(model: str, **options) -> tuple[np.ndarray, str]:
    from rapidscore.bertscore import BERTScore

    result = BERTScore(model, **options).score(CANDS, REFS)
    return np.array([result.precision, result.recall, result.f1], dtype=np.float32), result.signature


@pytest.fixture(scope="module")
def server(tiny_server_class, tiny_model_path):
    running = tiny_server_class(str(tiny_model_path("bert")))
    yield running
    running.stop()


def test_the_options_are_the_metrics_declaration(server):
    from rapidscore.bertscore.metric import METRIC

    schema = httpx.get(server.url + "/openapi.json", timeout=30).json()["components"]["schemas"]["BERTScoreRequest"]
    for option in request_options(METRIC):
        field = schema["properties"][option.name]
        assert field.get("default") == option.default and field["description"] == option.help  # null: omitted


@pytest.mark.parametrize("idf", [False, True])
def test_idf_over_http_equals_the_api(server, tiny_model_path, idf):
    body = {"candidates": CANDS, "references": REFS, "idf": idf}
    answer = httpx.post(server.url + "/v1/bertscore", json=body, timeout=30)
    expected, signature = _api(str(tiny_model_path("bert")), idf=idf)
    np.testing.assert_array_equal(_scores(answer), expected)
    assert answer.json()["signature"] == signature and ("idf:yes" in signature) == idf


def test_idf_requests_batched_with_plain_ones_keep_their_own_scores(server, tiny_model_path):
    from concurrent.futures import ThreadPoolExecutor

    def post(idf: bool) -> np.ndarray:
        body = {"candidates": CANDS, "references": REFS, "idf": idf}
        return _scores(httpx.post(server.url + "/v1/bertscore", json=body, timeout=30))

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(post, [k % 2 == 0 for k in range(16)]))
    model = str(tiny_model_path("bert"))
    for k, scores in enumerate(answers):
        np.testing.assert_array_equal(scores, _api(model, idf=k % 2 == 0)[0])


def test_rescaling_a_model_without_a_baseline_is_a_400_naming_it(server):
    body = {"candidates": CANDS, "references": REFS, "rescale_with_baseline": True}
    answer = httpx.post(server.url + "/v1/bertscore", json=body, timeout=30)
    assert answer.status_code == 400 and answer.json()["field"] == "rescale_with_baseline"
    assert "no baseline" in answer.json()["detail"]


def test_an_option_of_the_wrong_type_is_a_400(server):
    body = {"candidates": CANDS, "references": REFS, "idf": "yes"}
    answer = httpx.post(server.url + "/v1/bertscore", json=body, timeout=30)
    assert answer.status_code == 400 and answer.json()["field"] == "idf"


@pytest.mark.slow  # the embedded MiniLM
def test_rescaling_and_idf_over_http_equal_the_api_on_minilm(live_server_class, minilm_path):
    from rapidscore.serve.config import ServeConfig
    from rapidscore.serve.service import ScoringService

    service = ScoringService(ServeConfig(warmup=False, workers=1, ner_label_similarity="exact"))
    service.start()
    running = live_server_class(service.config, service=service, start=False)
    try:
        for options in ({"rescale_with_baseline": True}, {"rescale_with_baseline": True, "idf": True}):
            body = {"candidates": CANDS, "references": REFS, **options}
            answer = httpx.post(running.url + "/v1/bertscore", json=body, timeout=60)
            expected, signature = _api(str(minilm_path), lang="en", **options)
            np.testing.assert_array_equal(_scores(answer), expected)
            assert "rescaled:yes" in answer.json()["signature"]
    finally:
        running.stop()


def test_the_served_options_table_in_the_docs_is_the_declarations():
    import re
    from pathlib import Path

    from rapidscore.common.metric import request_option_table
    from rapidscore.metrics import get_metric

    page = (Path(__file__).resolve().parents[2] / "docs" / "serving.md").read_text(encoding="utf-8")
    tables = dict(re.findall(r"<!-- request-options: (\w+)[^\n]*-->\n(.*?)\n<!-- end request-options -->", page,
                             flags=re.S))
    assert tables, "docs/serving.md holds no generated option table"
    for name, table in tables.items():
        assert table == request_option_table(get_metric(name)), f"regenerate the {name} table in docs/serving.md"
    from rapidscore.metrics import all_metrics

    missing = [m.name for m in all_metrics() if request_options(m) and m.name not in tables]
    assert not missing, f"docs/serving.md lacks the option table of {missing}"
