"""Tables as inputs (issue 28): a Hugging Face Dataset, an IterableDataset, a pandas DataFrame
and a pyarrow Table of the same rows give every metric's own list API's numbers, by column names;
a missing column or an object that is no table is named in the error."""

from __future__ import annotations

import subprocess
import sys

import datasets
import pandas as pd
import pyarrow as pa
import pytest

import rapidscore
from rapidscore.common.metric import ColumnError
from rapidscore.common.tables import TableError, metric_columns, table_column
from rapidscore.errors import RapidscoreError
from rapidscore.metrics import get_metric
from rapidscore.streaming import score_stream, score_table

# a reference cell is a list (one or several references): Arrow columns hold one type
ROWS = {
    "response": ["a cat sat on the mat", "dogs bark at night", "I'm sorry, I can't help with that.", ""],
    "truth": [["a cat sat down on the mat"], ["cats meow", "dogs bark loudly at night"],
              ["I cannot answer this question."], ["anything"]],
}
TEXT = "Emily Brown works for Microsoft in Seattle"
NER_ROWS = {
    "doc": [TEXT, TEXT, TEXT],
    "gold": [[{"start": 0, "end": 11, "label": "person"}, {"start": 22, "end": 31, "label": "org"}],
             [{"start": 35, "end": 42, "label": "city"}],
             []],
    "pred": [[{"start": 0, "end": 5, "label": "person"}, {"start": 22, "end": 31, "label": "company"}],
             [{"start": 35, "end": 42, "label": "city"}, {"start": 0, "end": 11, "label": "person"}],
             [{"start": 22, "end": 31, "label": "org"}]],
}
FORMS = ["dataset", "iterable_dataset", "pandas", "pandas_from_arrow", "arrow", "dict"]


def as_form(rows: dict, form: str):
    """The rows as a table of the kind ``form`` (pandas from Arrow holds numpy arrays in cells,
    as a DataFrame read from Parquet does)."""
    if form == "dataset":
        return datasets.Dataset.from_dict(rows)
    if form == "iterable_dataset":
        return datasets.Dataset.from_dict(rows).to_iterable_dataset(num_shards=2)
    if form == "pandas":
        return pd.DataFrame(rows)
    if form == "pandas_from_arrow":
        return pa.table(rows).to_pandas()
    if form == "arrow":
        return pa.table(rows)
    return dict(rows)


@pytest.fixture(scope="module")
def model(tiny_model_path) -> str:
    return str(tiny_model_path("bert"))


@pytest.mark.parametrize("form", FORMS)
def test_bertscore_of_a_table_equals_the_list_api(form, model):
    from rapidscore.bertscore import BERTScore

    expected = BERTScore(model).score(ROWS["response"], ROWS["truth"])
    out = score_table(as_form(ROWS, form), "bertscore", columns={"candidate": "response", "reference": "truth"},
                      model=model, chunk_size=3)
    assert out["precision"] == expected.precision.tolist()
    assert out["recall"] == expected.recall.tolist()
    assert out["f1"] == expected.f1.tolist()


@pytest.mark.parametrize("form", FORMS)
def test_nrr_of_a_table_equals_the_list_api(form, model):
    from rapidscore.nrr import SentenceSimilarity, negative_rejection

    sims, best = SentenceSimilarity(model).pairs(ROWS["response"], ROWS["truth"])
    decided = negative_rejection(ROWS["response"], ROWS["truth"], model=model, threshold=0.5)
    out = score_table(as_form(ROWS, form), "similarity", columns={"generated": "response", "reference": "truth"},
                      model=model, threshold=0.5)
    assert out["similarity"] == sims.tolist() and out["best_reference"] == best.tolist()
    assert out["rejected"] == decided.rejected.tolist()


@pytest.mark.parametrize("form", FORMS)
def test_ner_of_a_table_equals_the_list_api(form):
    from rapidscore.ner import evaluate

    records = evaluate(NER_ROWS["gold"], NER_ROWS["pred"], texts=NER_ROWS["doc"], ids=[0, 1, 2],
                       label_similarity="exact").records
    out = score_table(as_form(NER_ROWS, form), "ner", columns={"gold": "gold", "predicted": "pred", "text": "doc"},
                      label_similarity="exact")
    for key in ("n_gold", "n_pred", "precision", "recall", "score"):
        assert out[key] == [record[key] for record in records], key
    for scheme in ("strict", "exact", "partial", "type"):
        for count in ("correct", "incorrect", "partial", "missed", "spurious"):
            assert out[f"{scheme}_{count}"] == [record["semeval"][scheme][count] for record in records]


@pytest.mark.parametrize("form", FORMS)
def test_refusal_of_a_table_equals_the_list_api(form):
    from rapidscore.abstention import detect_refusal

    out = score_table(as_form(ROWS, form), "refusal", columns={"response": "response"})
    assert out["refusal"] == detect_refusal(ROWS["response"]).tolist()
    assert any(out["refusal"]) and not all(out["refusal"])  # the rows hold both decisions


@pytest.mark.parametrize("form", ["dataset", "iterable_dataset", "pandas", "arrow"])
def test_a_registered_metric_reads_tables_by_its_own_column_names(form, toy_metric):
    table = as_form({"text": ["ab", "cde"]}, form)
    assert score_table(table, "toy", suffix="?") == {"length": [3, 4], "shout": ["AB?", "CDE?"]}
    assert list(score_stream("shout", table, suffix="?")) == [{"length": 3, "shout": "AB?"},
                                                             {"length": 4, "shout": "CDE?"}]


def test_score_stream_reads_an_iterable_dataset_lazily_with_totals(model):
    from rapidscore.bertscore import BERTScore

    stream = as_form(ROWS, "iterable_dataset")
    metric = get_metric("bertscore")
    totals = metric.totals()
    rows = list(score_stream("bertscore", stream, columns={"candidate": "response", "reference": "truth"},
                             model=model, chunk_size=2, totals=totals))
    expected = BERTScore(model).score(ROWS["response"], ROWS["truth"])
    assert [row["f1"] for row in rows] == expected.f1.tolist()
    assert totals.summary()["n"] == 4
    # dict rows of any iterable, with columns
    dict_rows = [{"response": c, "truth": r} for c, r in zip(ROWS["response"], ROWS["truth"])]
    again = score_stream("bertscore", iter(dict_rows), columns={"candidate": "response", "reference": "truth"},
                         model=model)
    assert [row["f1"] for row in again] == expected.f1.tolist()


def test_a_dataset_column_is_a_text_list(model):
    from rapidscore.bertscore import BERTScore
    from rapidscore.nrr import negative_rejection, negative_rejection_frame

    dataset = datasets.Dataset.from_dict(ROWS)
    assert type(dataset["response"]).__module__.startswith("datasets")  # a Column object, not a list
    scorer = BERTScore(model)
    assert scorer.score(dataset["response"], dataset["truth"]).f1.tolist() == \
        scorer.score(ROWS["response"], ROWS["truth"]).f1.tolist()
    expected = negative_rejection(ROWS["response"], ROWS["truth"], model=model, threshold=0.5)
    for table in (dataset, dataset.with_format("numpy"), pa.table(ROWS), pd.DataFrame(ROWS)):
        got = negative_rejection_frame(table, "response", "truth", model=model, threshold=0.5)
        assert got.similarities.tolist() == expected.similarities.tolist()


def test_optional_input_is_read_under_its_own_name_or_when_named():
    table = datasets.Dataset.from_dict({"gold": [[]], "predicted": [[]], "text": ["x"]})
    metric = get_metric("ner")
    assert metric_columns(metric, table)["text"] == ["x"]
    assert "text" not in metric_columns(metric, table, {"text": None})
    assert "text" not in metric_columns(metric, table.remove_columns("text"))


@pytest.mark.parametrize("form", ["dataset", "pandas", "arrow", "dict"])
def test_a_missing_column_is_named_with_the_columns_present(form):
    with pytest.raises(ColumnError, match=r"no column 'answer' \(its columns: \['response', 'truth'\]\)") as caught:
        score_table(as_form(ROWS, form), "refusal", columns={"response": "answer"})
    assert isinstance(caught.value, RapidscoreError) and isinstance(caught.value, ValueError)
    with pytest.raises(ColumnError, match="no column 'candidate'"):
        score_table(as_form(ROWS, form), "bertscore", engine=object())  # the metric's own names by default


def test_a_missing_column_of_a_stream_is_named():
    stream = as_form(ROWS, "iterable_dataset")
    with pytest.raises(ColumnError, match=r"no column 'answer' \(its columns: \['response', 'truth'\]\)"):
        score_stream("refusal", stream, columns={"response": "answer"})
    rows = iter([{"response": "fine"}, {"reply": "no"}])
    with pytest.raises(ColumnError, match=r"row 1 has no column 'response' \(its columns: \['reply'\]\)"):
        list(score_stream("refusal", rows, columns={"response": "response"}))


def test_columns_naming_no_input_of_the_metric_are_refused():
    with pytest.raises(ColumnError, match=r"refusal has no input column\(s\) \['cands'\] \(its inputs: "
                                          r"\['response'\]\)"):
        score_table(as_form(ROWS, "dataset"), "refusal", columns={"cands": "response"})
    with pytest.raises(TableError, match=r"columns\['response'\] must be a column name"):
        score_table(as_form(ROWS, "dataset"), "refusal", columns={"response": 3})


def test_objects_that_are_no_table_are_named():
    with pytest.raises(TableError, match="rows must be a table or an iterable of dict rows, got int"):
        score_table(5, "refusal")
    with pytest.raises(TableError, match=r"row 0 must be a dict of columns .* got str"):
        score_table(["I can't."], "refusal")
    with pytest.raises(TableError, match=r"a table must be a pandas DataFrame.*got list"):
        metric_columns(get_metric("refusal"), [["a"]])
    with pytest.raises(TableError, match="IterableDataset is a stream of rows"):
        metric_columns(get_metric("refusal"), as_form(ROWS, "iterable_dataset"))
    with pytest.raises(TableError, match="IterableDataset is a stream of rows"):
        table_column(as_form(ROWS, "iterable_dataset"), "response")
    assert issubclass(TableError, RapidscoreError) and issubclass(TableError, TypeError)


def test_a_whole_table_given_as_a_text_list_is_named(model):
    from rapidscore.bertscore import BERTScore

    dataset = datasets.Dataset.from_dict(ROWS)
    for table in (dataset, pd.DataFrame(ROWS), pa.table(ROWS)):
        with pytest.raises(TypeError, match=r"^cands must be a list of strings, got (Dataset|DataFrame|Table)$"):
            BERTScore(model).score(table, ROWS["truth"])


def test_score_table_is_public_and_importing_it_loads_no_table_library():
    assert rapidscore.score_table is score_table
    code = ("import sys, rapidscore, rapidscore.streaming, rapidscore.common.tables; "
            "loaded = [m for m in ('datasets', 'pandas', 'pyarrow', 'torch') if m in sys.modules]; "
            "assert not loaded, loaded")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
