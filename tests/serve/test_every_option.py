"""Every request option of every metric over HTTP equals the Python API on the same rows (issue 37
item 2): the routes, their request models and their options come from the metrics'
declarations (the options each metric declares settable per request), and a server started with two models, two layers
and an idf file answers each choice as the API does with the same keywords."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rapidscore.common.metric import request_options

httpx = pytest.importorskip("httpx", reason="the [serve] test dependencies (httpx) are not installed")

CANDS = ["a cat sat on the mat", "dogs bark at night", "the sun is bright today", ""]
REFS = ["the cat sat on a mat", ["a dog barked", "dogs bark loudly at night"], "it is sunny", "nothing"]
LONG = " ".join(f"word{k} and the cat number {k} sat on the mat" for k in range(60))  # past the tiny models' 128


@pytest.fixture(scope="module")
def models(tiny_model_path) -> tuple[str, str]:
    return str(tiny_model_path("bert")), str(tiny_model_path("roberta"))


@pytest.fixture(scope="module")
def idf_path(models, tmp_path_factory) -> str:
    from rapidscore.bertscore import BERTScore

    path = tmp_path_factory.mktemp("idf") / "wiki.json"
    corpus = [("", ref) for ref in ["a cat sat", "the dog barked", "the sun", "a cat and a dog", "bright day"]]
    BERTScore(models[0], idf=True).document_frequencies(corpus).save(path)
    return str(path)


@pytest.fixture(scope="module")
def server(tiny_server_class, models, idf_path):
    running = tiny_server_class(models, layer=(2, 1), idf_file=(idf_path,), ner_label_similarity="exact")
    yield running
    running.stop()


def post(server, path: str, body: dict) -> dict:
    answer = httpx.post(server.url + path, json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer.json()


def bertscore_api(model: str, cands=CANDS, refs=REFS, *, reference_batch_size=None, **options) -> dict:
    from rapidscore.bertscore import BERTScore

    result = BERTScore(model, **options).score(cands, refs, reference_batch_size=reference_batch_size)
    return {"precision": result.precision.tolist(), "recall": result.recall.tolist(), "f1": result.f1.tolist(),
            "signature": result.signature}


@pytest.mark.filterwarnings("ignore::rapidscore.RapidscoreWarning")  # idf of few references: uniform weights
def test_every_bertscore_option_equals_the_api(server, models, idf_path):
    bert, roberta = models
    body = {"candidates": CANDS, "references": REFS}
    cases = [
        ({}, dict(model=bert, layer=2)),
        ({"idf": True}, dict(model=bert, layer=2, idf=True)),
        ({"idf_file": "wiki"}, dict(model=bert, layer=2, idf=idf_path)),
        ({"idf_file": "wiki", "idf": True}, dict(model=bert, layer=2, idf=idf_path)),  # the file implies idf
        ({"model": roberta}, dict(model=roberta, layer=2)),
        ({"num_layers": 1}, dict(model=bert, layer=1)),
        ({"model": roberta, "num_layers": 1, "idf": True}, dict(model=roberta, layer=1, idf=True)),
        ({"reference_batch_size": 2}, dict(model=bert, layer=2, reference_batch_size=2)),
        ({"long_texts": "window"}, dict(model=bert, layer=2, long_texts="window")),
    ]
    for options, api in cases:
        got = post(server, "/v1/bertscore", {**body, **options})
        assert got == bertscore_api(**api), options
    long_body = {"candidates": [LONG, "short"], "references": [LONG[::-1], LONG]}
    for long_texts in ("truncate", "window"):
        got = post(server, "/v1/bertscore", {**long_body, "long_texts": long_texts})
        assert got == bertscore_api(bert, [LONG, "short"], [LONG[::-1], LONG], layer=2, long_texts=long_texts)
    assert "long_texts:window" in got["signature"]


@pytest.mark.parametrize(("options", "field", "message"), [
    ({"model": "bert-base-uncased"}, "model", "is not served here; the served models"),
    ({"num_layers": 0}, "num_layers", "is not a layer served for"),
    ({"idf_file": "other"}, "idf_file", "is not an idf file this server loaded; loaded: ['wiki']"),
    ({"rescale_with_baseline": True}, "rescale_with_baseline", "no baseline"),
    ({"long_texts": "slide"}, "long_texts", "Input should be 'truncate' or 'window'"),
    ({"reference_batch_size": 0}, "reference_batch_size", "greater than or equal to 1"),
    ({"idf": 1}, "idf", "valid boolean"),
    ({"bogus": 1}, "bogus", "Extra inputs are not permitted"),
])
def test_a_bertscore_option_the_server_cannot_apply_is_a_400_naming_it(server, options, field, message):
    answer = httpx.post(server.url + "/v1/bertscore", json={"candidates": ["a"], "references": ["b"], **options},
                        timeout=60)
    assert answer.status_code == 400 and answer.json()["field"] == field, answer.text
    assert message in answer.json()["detail"]


def test_every_nrr_option_equals_the_api(server, models):
    from rapidscore.nrr import SentenceSimilarity

    generated, references = CANDS[:3], REFS[:3]
    for options, model, threshold in (({}, models[0], 0.8), ({"threshold": 0.5}, models[0], 0.5),
                                      ({"model": models[1], "threshold": -0.25}, models[1], -0.25)):
        got = post(server, "/v1/nrr", {"generated": generated, "references": references, **options})
        sims, best = SentenceSimilarity(models[0] if model == models[0] else model).pairs(generated, references)
        assert got["similarities"] == sims.tolist() and got["best_reference"] == best.tolist()
        assert got["rejected"] == (sims < threshold).tolist() and got["threshold"] == threshold
        assert got["rate"] == float(np.mean(sims < threshold))


GOLD = [{"id": "a", "text": "Ada Lovelace met Charles Babbage in London",
         "labels": [[0, 12, "PER"], [17, 32, "PER"], [36, 42, "LOC"]]},
        {"id": "b", "text": "Paris is in France", "labels": [[0, 5, "LOC"], [12, 18, "LOC"]]}]
PRED = [{"id": "a", "text": "Ada Lovelace met Charles Babbage in London",
         "labels": [[0, 3, "person"], [17, 32, "PERSON"], [36, 42, "city"]]},
        {"id": "b", "text": "Paris is in France", "labels": [[0, 5, "GPE"], [9, 18, "country"]]}]


def test_every_ner_option_equals_the_api(server, models):
    from rapidscore.ner import evaluate

    cases = [
        ({}, dict(label_similarity="exact")),
        ({"label_similarity": "embedding"}, dict(label_similarity="embedding", label_model=models[0])),
        ({"label_similarity": "embedding", "label_model": models[1]},
         dict(label_similarity="embedding", label_model=models[1])),
        ({"min_jaccard": 0.5, "min_overlap_percent": 50.0, "semeval_matching": "nervaluate", "records": True},
         dict(label_similarity="exact", min_jaccard=0.5, min_overlap_percent=50.0, semeval_matching="nervaluate")),
        ({"format": "tuples", "gold_format": "tuples"},
         dict(label_similarity="exact", format="tuples", gold_format="tuples")),
    ]
    for options, api in cases:
        got = post(server, "/v1/ner", {"gold": GOLD, "predictions": PRED, **options})
        expected = evaluate(GOLD, PRED, **api).to_dict(records=bool(options.get("records")))
        assert got == json.loads(json.dumps(expected, default=str)), options


def test_every_refusal_method_equals_the_api(server, models):
    from rapidscore.abstention import detect_refusal
    from rapidscore.abstention.methods import METHODS

    responses = ["I'm sorry, but I can't help with that.", "Sure! Here is the answer.", "As an AI, I cannot.",
                 {"complete": "<think>hmm</think> I won't", "answer": "I won't do that."}]
    for method in METHODS:
        if method == "classifier":  # needs a model loaded at start (tests/serve/test_refusal_classifier.py)
            answer = httpx.post(server.url + "/v1/refusal", json={"responses": responses, "method": method},
                                timeout=60)
            assert answer.status_code == 400 and answer.json()["field"] == "method", answer.text
            continue
        got = post(server, "/v1/refusal", {"responses": responses, "method": method})
        options = {"model": models[0]} if method == "embedding" else {}
        assert got == {"refusal": detect_refusal(responses, method=method, **options).tolist(), "method": method}


def test_the_openapi_entries_are_the_declarations(server):
    from rapidscore.metrics import all_metrics

    document = httpx.get(server.url + "/openapi.json", timeout=30).json()
    for metric in all_metrics():
        for path in (metric.name, *metric.front_ends.aliases):
            entry = document["paths"][f"/v1/{path}"]["post"]
            reference = entry["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        schema = document["components"]["schemas"][reference.rsplit("/", 1)[-1]]
        assert list(schema["properties"]) == [c.field for c in metric.inputs] + [o.name for o in request_options(metric)]
        assert schema["required"] == [c.field for c in metric.inputs if not c.optional]
        assert schema["additionalProperties"] is False  # strict: an unknown field is a 400
        for option in request_options(metric):
            field = schema["properties"][option.name]
            assert field.get("default") == option.default and field["description"] == option.help


def test_a_registered_metric_gets_a_typed_route_with_its_options(tiny_server):
    """A metric registered at run time: its route, request model, options and OpenAPI entry come
    from its declaration, with no library file changed."""
    from rapidscore.common.metric import Column, Metric, RequestOption
    from rapidscore.metrics import register, unregister

    class Echo(Metric):
        name = "echo"
        summary = "texts repeated"
        inputs = (Column("text", "text", "any text", request_field="texts"),)
        outputs = ("echoed",)
        request_options = (RequestOption("times", int, 2, "how many times", minimum=1, maximum=5),
                           RequestOption("sep", str, "", "between the copies", per_request=False))

        def build(self, *, times: int = 2, sep: str = ""):
            return {"times": times, "sep": sep}

        def score(self, engine, columns, names=None):
            return {"echoed": [engine["sep"].join([t] * engine["times"]) for t in columns["text"]]}

    register(Echo())
    try:
        server = tiny_server(metrics=("echo",))
        document = httpx.get(server.url + "/openapi.json", timeout=30).json()
        schema = document["components"]["schemas"]["EchoRequest"]
        assert schema["properties"]["times"]["maximum"] == 5 and schema["properties"]["sep"]["default"] == ""
        assert "/v1/echo" in document["paths"]
        got = post(server, "/v1/echo", {"texts": ["ab", "c"], "times": 3, "sep": "-"})
        assert got == {"echoed": ["ab-ab-ab", "c-c-c"], "signature": "echo|rapidscore"}
        assert post(server, "/v1/echo", {"texts": ["x"]})["echoed"] == ["xx"]
        answer = httpx.post(server.url + "/v1/echo", json={"texts": ["x"], "times": 9}, timeout=30)
        assert answer.status_code == 400 and answer.json()["field"] == "times"
    finally:
        unregister("echo")


def test_engine_variants_are_bounded(server):
    """Clients naming ever new option values (each `sep`-like value an engine) cannot grow the
    table without bound: the least recently used variants beyond MAX_ENGINE_VARIANTS go."""
    from rapidscore.serve.service import MAX_ENGINE_VARIANTS

    service = server.service
    for k in range(MAX_ENGINE_VARIANTS + 5):
        service.scorer("bertscore", lang=f"x{k}")
    variants = [key for key in service._scorers if key not in service._preloaded]
    assert len(variants) == MAX_ENGINE_VARIANTS
