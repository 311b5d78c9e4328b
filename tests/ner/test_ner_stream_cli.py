"""`rapidscore ner --input FILE --output FILE`: NER's streamed, resumable mode (the resume matrix,
tests/hardening/test_resume_matrix.py, holds its resumes). Each output row and the corpus totals
equal the batch command's (`--gold --pred`, one JSON document) on the same records, with a
model's label similarity (a tiny BERT's: other labels, other cosines) and with exact labels."""

from __future__ import annotations

import json

import pytest

from rapidscore.cli import main

SEMEVAL = ("correct", "incorrect", "partial", "missed", "spurious")


def _records(n: int = 23) -> tuple[list[dict], list[dict]]:
    gold, predicted = [], []
    for i in range(n):
        text = f"Ada Lovelace met Charles Babbage in London on day {i}."
        gold.append({"id": i, "text": text, "labels": [[0, 12, "PER"], [17, 32, "PER"], [36, 42, "LOC"]]})
        labels = [[0, 12, "person"], [17, 24, "PER"]] if i % 2 else [[36, 42, "city"], [0, 3, "ORG"]]
        predicted.append({"id": i, "text": text, "labels": labels[: i % 3]})
    return gold, predicted


def _jsonl(path, rows) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("similarity", ["exact", pytest.param("embedding", marks=pytest.mark.slow)])  # ~3 s
def test_streamed_rows_and_totals_equal_the_batch_command(similarity, tiny_bert, tmp_path, capsys) -> None:
    gold, predicted = _records()
    gold_file, pred_file = _jsonl(tmp_path / "gold.jsonl", gold), _jsonl(tmp_path / "pred.jsonl", predicted)
    both = _jsonl(tmp_path / "both.jsonl", [{"gold": g, "predicted": p} for g, p in zip(gold, predicted)])
    options = ["--label-similarity", similarity, "-q", *(["--label-model", tiny_bert] if similarity == "embedding"
                                                          else [])]

    assert main(["ner", "--gold", gold_file, "--pred", f"m={pred_file}", "--json", *options]) == 0
    batch = json.loads(capsys.readouterr().out)["m"]
    out = tmp_path / "scores.jsonl"
    assert main(["ner", "--input", both, "--output", str(out), "--chunk-size", "5", "--json", *options]) == 0
    totals = json.loads(capsys.readouterr().out)

    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row["index"] for row in rows] == list(range(len(gold)))
    for row, record in zip(rows, batch["records"]):
        assert {k: row[k] for k in ("n_gold", "n_pred", "precision", "recall", "score")} == \
            {k: record[k] for k in ("n_gold", "n_pred", "precision", "recall", "score")}
        assert {f"{scheme}_{count}": row[f"{scheme}_{count}"] for scheme in record["semeval"] for count in SEMEVAL} \
            == {f"{scheme}_{count}": record["semeval"][scheme][count] for scheme in record["semeval"]
                for count in SEMEVAL}
    assert totals["n_records"] == batch["n_records"] == len(gold)
    assert totals["dmberta"] == pytest.approx(batch["dmberta"], abs=1e-12)  # sums in another order
    assert totals["semeval"] == batch["semeval"]
    assert totals["signature"] == batch["signature"]


def test_entity_columns_with_a_text_column_and_a_mapping(tmp_path, capsys) -> None:
    gold, predicted = _records(6)
    rows = [{"g": g["labels"], "p": p["labels"], "sentence": g["text"], "key": f"doc-{g['id']}"}
            for g, p in zip(gold, predicted)]
    source = _jsonl(tmp_path / "entities.jsonl", rows)
    out = tmp_path / "scores.csv"
    assert main(["ner", "--input", source, "--output", str(out), "--column", "gold=g", "--column", "predicted=p",
                 "--column", "text=sentence", "--id-column", "key", "--label-similarity", "exact"]) == 0
    err = capsys.readouterr().err
    assert "ner: 6 records, DMBertA mean" in err and "SemEval F1 strict" in err
    lines = out.read_text().splitlines()
    assert lines[0].startswith("index,id,n_gold,n_pred,precision") and lines[1].startswith("0,doc-0,3,0,")


@pytest.mark.parametrize(("argv", "message"), [
    (["--input", "IN", "--output", "OUT", "--gold", "IN"], "--gold: not with --input/--output"),
    (["--input", "IN", "--output", "OUT", "--plot", "f.png"], "--plot: not with --input/--output"),
    (["--input", "IN"], "needs both --input FILE and --output FILE"),
    (["--gold", "IN", "--resume"], "belong to the streamed mode"),
    (["--gold", "IN", "--chunk-size", "3"], "belong to the streamed mode"),
    ([], "give --gold FILE"),
    (["--input", "IN", "--output", "-", "--json"], "--json prints the totals on stdout"),
])
def test_mixed_modes_are_refused_naming_the_option(argv, message, tmp_path, capsys) -> None:
    source = _jsonl(tmp_path / "in.jsonl", [{"gold": [], "predicted": []}])
    argv = [source if a == "IN" else str(tmp_path / "out.jsonl") if a == "OUT" else a for a in argv]
    assert main(["ner", *argv, "--label-similarity", "exact"]) == 2
    assert message in capsys.readouterr().err


def test_a_missing_column_names_the_row_and_the_mapping(tmp_path, capsys) -> None:
    source = _jsonl(tmp_path / "in.jsonl", [{"gold": [], "predicted": []}, {"gold": []}])
    assert main(["ner", "--input", source, "--output", str(tmp_path / "o.jsonl"), "--label-similarity", "exact"]) == 2
    err = capsys.readouterr().err
    assert "no column 'predicted'" in err and "--column predicted=COLUMN" in err
    assert not (tmp_path / "o.jsonl").exists()
