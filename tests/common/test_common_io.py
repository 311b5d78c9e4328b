"""rapidscore.common.io: one reader for txt, JSONL, CSV/TSV and Parquet, errors as path:line."""

from __future__ import annotations

import gzip
import json
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rapidscore.common.io import detect_format, read_column, read_records, read_texts

ROWS = [{"generated": "the cat sat", "reference": "a cat sat"},
        {"generated": "naïve, \"quoted\"", "reference": "東京"},
        {"generated": "  padded  ", "reference": ""}]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("name, fmt", [("a.txt", "txt"), ("a", "txt"), ("a.JSONL", "jsonl"), ("a.jsonl.gz", "jsonl"),
                                       ("a.csv", "csv"), ("a.tsv.gz", "tsv"), ("a.parquet", "parquet")])
def test_format_from_extension(name, fmt):
    assert detect_format(name) == fmt


def test_text_lines_are_stripped_and_blank_lines_kept(tmp_path):
    path = tmp_path / "cands"
    path.write_text("  first line \r\n\nlast\t\n", encoding="utf-8")
    assert read_column(path) == ["first line", "", "last"]  # bert-score's CLI: [l.strip() for l in f]
    gz = tmp_path / "cands.txt.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert read_texts(gz) == ["first line", "", "last"]


def test_jsonl_csv_tsv_parquet_give_the_same_column(tmp_path):
    write_jsonl(tmp_path / "t.jsonl", ROWS)
    (tmp_path / "t.jsonl.gz").write_bytes(gzip.compress((tmp_path / "t.jsonl").read_bytes()))
    pq.write_table(pa.Table.from_pylist(ROWS), tmp_path / "t.parquet")
    import csv

    for name, delimiter in (("t.csv", ","), ("t.tsv", "\t")):
        with open(tmp_path / name, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, ["generated", "reference"], delimiter=delimiter)
            writer.writeheader()
            writer.writerows(ROWS)
    for name in ("t.jsonl", "t.jsonl.gz", "t.csv", "t.tsv", "t.parquet"):
        for column in ("generated", "reference"):
            assert read_texts(tmp_path / name, column) == [r[column] for r in ROWS], name


def test_parquet_round_trip_keeps_lists_and_one_column_needs_no_name(tmp_path):
    path = tmp_path / "refs.parquet"
    refs = [["r1", "r2"], ["r3"]]
    pq.write_table(pa.table({"reference": refs}), path)
    assert read_column(path) == refs
    assert read_column(path, "reference") == refs
    assert [record for record, _where in read_records(path)] == [{"reference": r} for r in refs]
    with pytest.raises(ValueError, match=r"refs.parquet: row 1: expected a string, got list"):
        read_texts(path)


def test_records_from_jsonl_and_parquet(tmp_path):
    write_jsonl(tmp_path / "r.jsonl", ROWS)
    pq.write_table(pa.Table.from_pylist(ROWS), tmp_path / "r.parquet")
    jsonl = list(read_records(tmp_path / "r.jsonl"))
    assert [r for r, _ in jsonl] == ROWS and jsonl[2][1] == f"{tmp_path / 'r.jsonl'}:3"
    assert [r for r, _ in read_records(tmp_path / "r.parquet")] == ROWS


def test_errors_name_path_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"generated": "a"}\n\n{"generated": 5}\n{"other": "x"}\n[1]\n{not json\n', encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{path}:3: expected a string, got int: 5$"):
        read_texts(path, "generated")
    path.write_text('{"generated": "a"}\n\n{"other": "x"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{path}:3: no key 'generated'$"):
        read_column(path, "generated")
    path.write_text('{"generated": "a"}\n[1]\n', encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{path}:2: each line must be a JSON object, got list$"):
        read_column(path, "generated")
    path.write_text('{"generated": "a"}\n{not json\n', encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{path}:2: not valid JSON: "):
        read_column(path, "generated")
    with pytest.raises(ValueError, match="JSONL input needs a column name"):
        read_column(path)


def test_csv_errors(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("a,b\nx,y\n\"multi\nline\",z\nshort\n", encoding="utf-8")
    assert read_column(path, "a") == ["x", "multi\nline", "short"]
    with pytest.raises(ValueError, match=rf"^{path}:5: no value in column 'b'$"):
        read_column(path, "b")
    with pytest.raises(ValueError, match=rf"^{path}:1: no column 'c' \(columns: \['a', 'b'\]\)$"):
        read_column(path, "c")
    with pytest.raises(ValueError, match="CSV input needs a column name"):
        read_column(path)


def test_missing_files_and_missing_parquet_columns(tmp_path):
    for name in ("none.txt", "none.jsonl", "none.csv", "none.parquet"):
        with pytest.raises(FileNotFoundError, match=f"no such file: .*{name}"):
            read_column(tmp_path / name, "x")
    pq.write_table(pa.table({"a": ["x"], "b": ["y"]}), tmp_path / "t.parquet")
    with pytest.raises(ValueError, match=r"t.parquet: no column 'c' \(columns: \['a', 'b'\]\)"):
        read_column(tmp_path / "t.parquet", "c")
    with pytest.raises(ValueError, match="Parquet input needs a column name"):
        read_column(tmp_path / "t.parquet")


def test_parquet_without_pyarrow_says_what_to_install(tmp_path, monkeypatch):
    pq.write_table(pa.table({"a": ["x"]}), tmp_path / "t.parquet")
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)  # import of it now fails
    with pytest.raises(ImportError, match="pip install pyarrow"):
        read_column(tmp_path / "t.parquet", "a")
