"""Every invalid value is a 400 naming the field (issue 29 items 9 and 6): NER offsets beyond
the 64-bit range (and up to it) in the Python API and over HTTP, booleans where numbers are
expected, ints at the 64-bit edges anywhere in a request (hypothesis-driven)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rapidscore.ner import evaluate
from rapidscore.ner.formats import MAX_OFFSET, Entity

EDGES = (0, 1, -1, 2**31 - 1, 2**31, 2**53, MAX_OFFSET, MAX_OFFSET + 1, 2**63 - 1, 2**63, 2**64, 2**70,
         -(2**63), -(2**63) - 1, -(2**70))
TEXT = "Ada Lovelace lived in London"


@pytest.mark.parametrize("gold", [
    [[[0, 2**70, "PER"]]],
    [[[2**63 - 1, 2**63 - 1, "PER"]]],
    [[[MAX_OFFSET + 1, MAX_OFFSET + 2, "PER"]]],
    [{f"Ada:0:{2**70}": "PER"}],
    [[{"entity_group": "PER", "start": 0, "end": 2**64}]],
    [[Entity(0, 2**70, "PER")]],
])
def test_offsets_beyond_the_largest_are_a_value_error_naming_the_record(gold) -> None:
    # issue 29 item 9: the Python API raised a bare OverflowError (int too large to convert to C long)
    with pytest.raises(ValueError, match=r"record 0: entity .* offset beyond the largest supported"):
        evaluate(gold, [[[0, 3, "PER"]]], label_similarity="exact")


def test_the_largest_offset_is_scored_and_a_huge_score_is_a_value_error() -> None:
    # issue 29 item 9
    result = evaluate([[[0, MAX_OFFSET, "PER"]]], [[[0, MAX_OFFSET, "PER"]]], label_similarity="exact")
    assert result.dmberta["f1"] == 1.0
    with pytest.raises(ValueError, match="record 0: entity score must be a number"):
        evaluate([[[0, 3, "PER", 10**400]]], [[[0, 3, "PER"]]], label_similarity="exact")


# --- over HTTP ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def server(tiny_models_root, tiny_server_class) -> Iterator:
    """One tiny-model server for the module (the ``tiny_server`` fixture is per test)."""
    pytest.importorskip("fastapi", reason="the [serve] extra (fastapi) is not installed")
    pytest.importorskip("httpx", reason="the [serve] test dependencies (httpx) are not installed")
    from rapidscore.testing import tiny_models

    live = tiny_server_class(str(tiny_models.tiny_model_dir("bert", tiny_models_root)), max_items=16)
    yield live
    live.stop()


def post(server, path: str, body: object) -> Any:
    import httpx

    return httpx.post(f"{server.url}{path}", json=body, timeout=60)


def record(labels: list) -> dict:
    return {"id": 1, "text": TEXT, "labels": labels}


@pytest.mark.parametrize("body, field", [
    ({"gold": [record([[0, 2**70, "PER"]])], "predictions": [record([[0, 3, "PER"]])]}, "gold[0]"),
    ({"gold": [record([[0, 3, "PER"]])], "predictions": [record([[2**63, 2**63 + 3, "PER"]])]}, "predictions[0]"),
    ({"gold": [record([[-(2**63) - 1, 3, "PER"]])], "predictions": [record([])]}, "gold[0]"),
    ({"gold": [[[0, 3, "PER"]], [[0, 2**64, "PER"]]], "predictions": [[], []]}, "gold[1]"),
    ({"gold": [record([[0, 3, "PER", 10**400]])], "predictions": [record([])]}, "gold[0]"),
    ({"gold": [record([])], "predictions": [record([])], "format": "bogus"}, "format"),
    ({"gold": [record([])], "predictions": [record([])], "min_jaccard": True}, "min_jaccard"),
    ({"gold": [record([])], "predictions": [record([])], "records": "yes"}, "records"),
])
def test_ner_bad_values_are_400_naming_the_field(server, body, field) -> None:
    # issue 29 item 9: /v1/ner with an offset of 2**70 answered 500
    answer = post(server, "/v1/ner", body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["field"] == field
    assert answer.json()["detail"].startswith(field)


@pytest.mark.parametrize("value", [True, False, "0.5", 2**70, -(2**63) - 1])
def test_a_threshold_that_is_not_a_number_in_range_is_400(server, value) -> None:
    # issue 29 item 6: "threshold": true was taken as 1.0
    answer = post(server, "/v1/similarity", {"generated": ["a"], "references": ["b"], "threshold": value})
    assert answer.status_code == 400, answer.text
    assert answer.json()["field"] == "threshold"


def test_a_threshold_of_an_integer_in_range_is_a_number(server) -> None:
    answer = post(server, "/v1/similarity", {"generated": ["a"], "references": ["b"], "threshold": 1})
    assert answer.status_code == 200 and answer.json()["threshold"] == 1.0


def _replace_ints(value: object, edge: int) -> object:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return edge
    if isinstance(value, list):
        return [_replace_ints(item, edge) for item in value]
    if isinstance(value, dict):
        return {key: _replace_ints(item, edge) for key, item in value.items()}
    return value


ENTITY = st.one_of(
    st.tuples(st.sampled_from(EDGES) | st.integers(), st.sampled_from(EDGES) | st.integers(), st.just("PER")).map(list),
    st.fixed_dictionaries({"start": st.sampled_from(EDGES), "end": st.sampled_from(EDGES), "label": st.just("LOC"),
                           "score": st.sampled_from(EDGES)}),
)
NER_BODY = st.fixed_dictionaries({
    "gold": st.lists(st.fixed_dictionaries({"id": st.sampled_from(EDGES), "text": st.just(TEXT),
                                            "labels": st.lists(ENTITY, max_size=3)}), min_size=1, max_size=2),
    "predictions": st.lists(st.lists(ENTITY, max_size=3), min_size=1, max_size=2),
    "min_overlap_percent": st.sampled_from(EDGES),
})


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(body=NER_BODY)
def test_ner_ints_at_the_64_bit_edges_never_give_a_server_error(server, body) -> None:
    # issue 29 item 9: offsets, ids, scores and numeric options at and beyond the 64-bit edges
    answer = post(server, "/v1/ner", body)
    assert answer.status_code in (200, 400), (body, answer.text)
    if answer.status_code == 400:
        assert answer.json()["field"], (body, answer.text)


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(edge=st.sampled_from(EDGES), path=st.sampled_from(["/v1/similarity", "/v1/bertscore", "/v1/refusal"]))
def test_every_endpoint_answers_ints_at_the_64_bit_edges_without_a_server_error(server, edge, path) -> None:
    # issue 29 item 9: a number where a string is expected, or a threshold at the edges
    bodies = {"/v1/similarity": {"generated": ["a"], "references": ["b"], "threshold": 0},
              "/v1/bertscore": {"candidates": ["a", 0], "references": ["b", "c"]},
              "/v1/refusal": {"responses": [0]}}
    answer = post(server, path, _replace_ints(bodies[path], edge))
    assert answer.status_code in (200, 400), answer.text
    if answer.status_code == 400:
        assert answer.json()["field"]
