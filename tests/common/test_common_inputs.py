"""rapidscore.common.inputs: every text container normalises to list[str], one error style."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from rapidscore.common.inputs import as_list, as_texts, normalize_inputs

TEXTS = ["a cat", "", "naïve 東京"]

CONTAINERS = {
    "list": lambda t: list(t),
    "tuple": lambda t: tuple(t),
    "numpy str": lambda t: np.array(t),
    "numpy object": lambda t: np.array(t, dtype=object),
    "pandas Series": lambda t: pd.Series(t),
    "pandas string dtype": lambda t: pd.Series(t, dtype="string"),
    "pyarrow Array": lambda t: pa.array(t),
    "pyarrow ChunkedArray": lambda t: pa.chunked_array([t[:1], t[1:]]),
}


@pytest.mark.parametrize("make", CONTAINERS.values(), ids=CONTAINERS)
def test_every_container_gives_a_plain_list_of_str(make):
    texts = as_texts(make(TEXTS), "cands")
    assert texts == TEXTS
    assert type(texts) is list and all(type(t) is str for t in texts)


@pytest.mark.parametrize("values, message", [
    ([1, "b"], r"^cands\[0\] must be a str, got int: 1$"),
    (["a", "b", "c", 5], r"^cands\[3\] must be a str, got int: 5$"),
    (pd.Series(["a", None], dtype=object), r"^cands\[1\] must be a str, got NoneType: None$"),
    (pd.Series(["a", np.nan]), r"^cands\[1\] must be a str, got float: nan$"),
    (pa.array(["a", None]), r"^cands\[1\] must be a str, got NoneType: None$"),
    (np.array([1, 2]), r"^cands\[0\] must be a str, got int: 1$"),
])
def test_bad_items_name_the_argument_and_first_bad_index(values, message):
    with pytest.raises(TypeError, match=message):
        as_texts(values, "cands")


@pytest.mark.parametrize("values, kind", [
    ("one string", "str"), (b"bytes", "bytes"), ({"a": 1}, "dict"), (5, "int"),
    (np.array([["a"], ["b"]]), "a 2-D numpy array"), (pd.DataFrame({"a": ["x"]}), "DataFrame"),
    (pa.table({"a": ["x"]}), "Table"),
])
def test_non_containers_are_rejected(values, kind):
    with pytest.raises(TypeError, match=f"^texts must be a list of strings, got {kind}$"):
        as_texts(values, "texts")


def test_as_list_keeps_items_unchecked():
    assert as_list(pa.array([[1, 2], None]), "x") == [[1, 2], None]


@pytest.mark.parametrize("make", CONTAINERS.values(), ids=CONTAINERS)
def test_normalize_inputs_accepts_every_container(make):
    cands, groups = normalize_inputs(make(TEXTS), make(TEXTS))
    assert cands == TEXTS and groups == [[t] for t in TEXTS]


def test_reference_cells_may_hold_several_references():
    expected = [["r1", "r2"], ["r3"]]
    for refs in ([["r1", "r2"], ("r3",)], [np.array(["r1", "r2"]), "r3"],
                 pd.Series([np.array(["r1", "r2"]), ["r3"]]), pa.array([["r1", "r2"], ["r3"]])):
        assert normalize_inputs(["c1", "c2"], refs)[1] == expected


@pytest.mark.parametrize("cands, refs, error, message", [
    ("a", ["a"], TypeError, "^cands must be a list of strings, got str$"),
    (["a"], "a", TypeError, "^refs must be a list of strings or of lists of strings, got str$"),
    (["a", "b"], ["a"], ValueError, r"^Different number of candidates and references: 2 != 1$"),
    (np.array(["a", "b"]), pd.Series([["x"], []]), ValueError, r"^refs\[1\] is an empty list of references$"),
    (["a"], [b"x"], TypeError, r"^refs\[0\] must be a str or a list of str, got bytes: b'x'$"),
    (["a"], pa.array([["x", None]]), TypeError, r"^refs\[0\]\[1\] must be a str, got NoneType: None$"),
])
def test_normalize_inputs_errors(cands, refs, error, message):
    with pytest.raises(error, match=message):
        normalize_inputs(cands, refs)


def test_argument_names_in_errors_follow_the_caller():
    with pytest.raises(TypeError, match=r"^generated\[0\] must be a str"):
        normalize_inputs([3], ["r"], names=("generated", "references"))
    with pytest.raises(TypeError, match=r"^references\[0\]\[0\] must be a str"):
        normalize_inputs(["g"], [[3]], names=("generated", "references"))


def test_refusal_detectors_take_any_container():
    from rapidscore.abstention import detect_refusal

    responses = ["I'm sorry, I can't help with that.", "Paris is the capital of France."]
    expected = detect_refusal(responses).tolist()
    for container in (np.array(responses), pd.Series(responses), pa.array(responses)):
        assert detect_refusal(container).tolist() == expected
    with pytest.raises(TypeError, match="not a single response"):
        detect_refusal("I'm sorry")
