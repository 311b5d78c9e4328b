"""rapidscore.common.readers (issue 27): one reader for every input file, batch and streaming
alike; every format (gzipped too) gives the same rows, and errors name the file and the line."""

from __future__ import annotations

import csv
import gzip
import io
import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rapidscore.common import io as batch_io
from rapidscore.common import readers, stream_io

ROWS = [{"generated": "the cat sat", "reference": "a cat sat"},
        {"generated": "naïve, \"quoted\"", "reference": "東京"},
        {"generated": "multi\nline", "reference": ""}]
TABLE_FORMATS = ["jsonl", "json", "csv", "tsv", "parquet"]


def write_rows(path: Path, fmt: str, rows: list[dict]) -> Path:
    """``rows`` written to ``path`` in ``fmt`` (gzipped when the name ends in .gz)."""
    if fmt == "parquet":
        pq.write_table(pa.Table.from_pylist(rows), path)
        return path
    if fmt == "jsonl":
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    elif fmt == "json":
        text = json.dumps(rows, ensure_ascii=False, indent=1)
    else:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, list(rows[0]), delimiter="," if fmt == "csv" else "\t")
        writer.writeheader()
        writer.writerows(rows)
        text = buffer.getvalue()
    data = text.encode("utf-8")
    path.write_bytes(gzip.compress(data) if str(path).endswith(".gz") else data)
    return path


def table_files(tmp_path) -> list:
    files = []
    for fmt in TABLE_FORMATS:
        files.append(write_rows(tmp_path / f"rows.{fmt}", fmt, ROWS))
        if fmt != "parquet":
            files.append(write_rows(tmp_path / f"rows.{fmt}.gz", fmt, ROWS))
    return files


@pytest.mark.parametrize(("name", "fmt"), [("a.json", "json"), ("a.JSON.gz", "json"), ("a.jsonl", "jsonl"),
                                           ("a.txt.gz", "txt"), ("a.csv.gz", "csv"), ("a", "txt"), ("-", "jsonl")])
def test_one_format_detection_for_batch_and_streaming(name, fmt) -> None:  # issue 27
    assert readers.detect_format(name) == fmt
    assert readers.detect_format(name, given="csv") == "csv"
    if name != "-":
        assert batch_io.detect_format(name) == fmt  # the batch name is the same function
    with pytest.raises(ValueError, match=r"a.parquet.gz: Parquet files are compressed inside"):
        readers.detect_format("a.parquet.gz")
    assert stream_io.INPUT_FORMATS == readers.FORMATS and "json" in stream_io.INPUT_FORMATS


def test_every_format_gives_the_same_rows_in_batch_and_streaming(tmp_path) -> None:  # issue 27
    for path in table_files(tmp_path):
        name = str(path)
        batch = [row for row, _where in batch_io.read_records(path)]
        streamed = [row for row, _where in stream_io.iter_rows(name)]
        assert batch == streamed == ROWS, name
        for column in ("generated", "reference"):
            assert batch_io.read_texts(path, column) == [row[column] for row in ROWS], name
        items = list(stream_io.row_items(name, None, "generated", ["reference"]))
        assert items == [(row["generated"], [row["reference"]], None) for row in ROWS], name
        # the streaming files mode reads a table as the batch commands read it
        assert list(stream_io.file_items(name, [name], "generated", "reference")) == items, name
        assert readers.count_rows(name) == len(ROWS), name


def test_plain_texts_are_one_column_in_every_reader(tmp_path) -> None:  # issue 27
    texts = ["  first line ", "", "東京"]
    (tmp_path / "c.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    (tmp_path / "c.txt.gz").write_bytes(gzip.compress((tmp_path / "c.txt").read_bytes()))
    (tmp_path / "c.json").write_text(json.dumps([t.strip() for t in texts]), encoding="utf-8")
    refs = write_rows(tmp_path / "r.jsonl", "jsonl", ROWS)
    stripped = [t.strip() for t in texts]
    for name in ("c.txt", "c.txt.gz", "c.json"):
        path = str(tmp_path / name)
        assert batch_io.read_texts(path) == batch_io.read_texts(path, "any column") == stripped, name
        assert [row for row, _where in stream_io.iter_rows(path)] == [{"text": t} for t in stripped], name
        # a column given for every file (bertscore's --column) does not apply to plain texts,
        # in batch and streaming alike (streaming asked for --column before)
        items = list(stream_io.file_items(path, [str(refs)], "reference", "reference"))
        assert items == [(t, [row["reference"]], None) for t, row in zip(stripped, ROWS)], name


def test_json_input_streams_as_an_array_not_as_jsonl(tmp_path, monkeypatch) -> None:  # issue 27
    path = write_rows(tmp_path / "pairs.json", "json", ROWS)  # indented: one row spans lines
    assert [row for row, _ in stream_io.iter_rows(str(path))] == ROWS
    assert [where for _, where in stream_io.iter_rows(str(path))] == [f"{path}: row {i}" for i in (1, 2, 3)]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(path.read_bytes())))
    assert [row for row, _ in stream_io.iter_rows("-", "json")] == ROWS


def test_reference_cells_may_hold_lists_in_both_modes(tmp_path) -> None:  # issue 27
    expected = [("a", ["r1", "r2"]), ("b", ["r3"])]
    for fmt in ("jsonl", "json", "parquet"):
        # a Parquet column holds lists or strings, not both
        rows = [{"generated": "a", "reference": ["r1", "r2"]}, {"generated": "b", "reference": ["r3"]}]
        if fmt != "parquet":
            rows[1]["reference"] = "r3"
        path = str(write_rows(tmp_path / f"lists.{fmt}", fmt, rows))
        assert [(t, refs) for t, refs, _ in readers.parallel_items(path, [path], "generated", "reference")] == expected
        assert [(t, refs) for t, refs, _ in stream_io.row_items(path, None, "generated", ["reference"])] == expected


def test_bad_json_names_the_file_and_the_line(tmp_path) -> None:  # issue 27
    jsonl = tmp_path / "bad.jsonl"
    jsonl.write_text('{"generated": "a", "reference": "b"}\n\n{not json\n', encoding="utf-8")
    for read in (lambda: batch_io.read_texts(jsonl, "generated"), lambda: list(stream_io.iter_rows(str(jsonl))),
                 lambda: list(stream_io.row_items(str(jsonl), None, "generated", ["reference"]))):
        with pytest.raises(ValueError, match=rf"^{jsonl}:3: not valid JSON: "):
            read()
    array = tmp_path / "bad.json"
    array.write_text('[\n {"generated": "a"},\n {"generated": "b",}\n]\n', encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{array}:3: invalid JSON \(truncated file\?\): Expecting property name"):
        batch_io.read_texts(array, "generated")
    array.write_text('{"generated": "a"}\n{"generated": "b"}\n', encoding="utf-8")  # JSONL named .json
    with pytest.raises(ValueError, match=rf"^{array}:2: invalid JSON: Extra data at column 1 .*name the file \.jsonl"):
        list(stream_io.iter_rows(str(array)))
    array.write_text('{"generated": ["a", "b"]}', encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{array}: a JSON input must hold a top-level array .* got dict"):
        batch_io.read_column(array, "generated")
    array.write_text('[{"generated": "a"}, 3]', encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{array}: row 2: each item of the JSON array must be an object"):
        batch_io.read_column(array, "generated")
    array.write_text('[{"generated": "a"}, "b"]', encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{array}: row 2: the JSON array mixes rows"):
        batch_io.read_column(array, "generated")


def test_a_missing_column_names_the_file_line_and_columns(tmp_path) -> None:  # issue 27
    for fmt in ("csv", "tsv"):
        path = write_rows(tmp_path / f"t.{fmt}.gz", fmt, ROWS)
        columns = r"\(columns: \['generated', 'reference'\]\)"
        with pytest.raises(ValueError, match=rf"^{path}:1: no column 'text' {columns}$"):
            batch_io.read_column(path, "text")
        with pytest.raises(ValueError, match=rf"^{path}:2: no value in column 'text' \(columns: \['generated', "):
            list(stream_io.row_items(str(path), None, "text", ["reference"]))
    path = write_rows(tmp_path / "t.json", "json", ROWS)
    with pytest.raises(ValueError, match=rf"^{path}: row 1: no key 'text'$"):
        batch_io.read_column(path, "text")
    with pytest.raises(ValueError, match=rf"^{path}: JSON input of rows needs a column name"):
        batch_io.read_column(path)
    with pytest.raises(ValueError, match=rf"^{path}: row 1: no value in column 'text' \(columns: "):
        list(stream_io.row_items(str(path), None, "text", ["reference"]))


def test_a_short_file_is_named(tmp_path) -> None:  # issue 27
    cands = tmp_path / "c.txt"
    cands.write_text("a\nb\nc\n", encoding="utf-8")
    short = write_rows(tmp_path / "r.jsonl.gz", "jsonl", ROWS[:2])
    full = write_rows(tmp_path / "r.csv", "csv", ROWS)
    with pytest.raises(ValueError, match=rf"^{short} ended after 2 rows, before {cands}: the files must have the "
                                         "same number of rows$"):
        list(readers.parallel_items(str(cands), [str(full), str(short)], None, "reference"))
    with pytest.raises(ValueError, match=rf"^{short} ended after 2 rows, before {full}"):
        list(stream_io.file_items(str(short), [str(full)], "generated", "reference"))
    with pytest.raises(FileNotFoundError, match=f"no such file: {tmp_path / 'none.txt'}"):
        list(readers.parallel_items(str(cands), [str(tmp_path / "none.txt")]))


@pytest.mark.parametrize("fmt", ["txt", "jsonl", "json", "csv", "tsv"])
def test_undecodable_bytes_and_truncated_gzip_name_the_line(tmp_path, fmt) -> None:  # issue 27
    good = write_rows(tmp_path / f"good.{fmt}", fmt if fmt != "txt" else "csv", ROWS[:1])
    content = good.read_bytes().rstrip(b"\n") + b"\ncaf\xe9\n"
    path = tmp_path / f"latin1.{fmt}.gz"
    path.write_bytes(gzip.compress(content))
    line = content.count(b"\n")
    with pytest.raises(ValueError, match=rf"^{path}:{line}: not valid UTF-8 text: byte 0xe9 at column 4"):
        list(stream_io.iter_rows(str(path)))
    with pytest.raises(ValueError, match=rf"^{path}:{line}: not valid UTF-8 text"):
        batch_io.read_column(path, None if fmt == "txt" else "generated")
    truncated = tmp_path / f"cut.{fmt}.gz"
    truncated.write_bytes(gzip.compress(good.read_bytes())[:-4])  # without the length of its trailer
    with pytest.raises(ValueError, match=rf"^{truncated}:\d+: cannot read the compressed data \(truncated"):
        list(readers.iter_rows(str(truncated)))


def test_whole_file_json_reads_name_the_file_and_line(tmp_path) -> None:  # issue 27: abstention's results reader
    path = tmp_path / "doc.json.gz"
    path.write_bytes(gzip.compress(b'{"a":\n 1,\n oops}\n'))
    raw = readers.read_bytes(str(path))
    assert raw == b'{"a":\n 1,\n oops}\n'
    with pytest.raises(ValueError, match=rf"^{path}:3: invalid JSON"):
        readers.parse_json(str(path), raw)
    path.write_bytes(gzip.compress(b'{"a": 1}' * 100)[:30])
    with pytest.raises(ValueError, match=rf"^{path}:1: cannot read the compressed data"):
        readers.read_bytes(str(path))


@pytest.mark.slow  # builds and exports the tiny BERT (~10 s on 2 cores when it is the first to)
def test_json_files_score_alike_in_batch_and_streaming(tiny_model_path, tmp_path, capsys) -> None:  # issue 27
    from rapidscore.cli import main

    model = str(tiny_model_path("bert"))
    cands = ["the cat sat on the mat", "a dog barked", "東京 is big"]
    refs = ["a cat sat on a mat", "the dog barked loudly", "Tokyo is large"]
    (tmp_path / "c.txt").write_text("\n".join(cands) + "\n", encoding="utf-8")
    (tmp_path / "r.txt").write_text("\n".join(refs) + "\n", encoding="utf-8")
    (tmp_path / "c.json").write_text(json.dumps(cands), encoding="utf-8")
    (tmp_path / "r.json").write_text(json.dumps(refs), encoding="utf-8")
    write_rows(tmp_path / "pairs.json", "json", [{"candidate": c, "reference": r} for c, r in zip(cands, refs)])
    common = ["-m", model, "-l", "2", "-q"]

    def batch_f1(cand_file: str, ref_file: str) -> list[float]:
        assert main(["bertscore", "-c", str(tmp_path / cand_file), "-r", str(tmp_path / ref_file), "--json",
                     *common]) == 0
        return json.loads(capsys.readouterr().out)["f1"]

    def streamed_f1(*inputs: str) -> list[float]:
        out = tmp_path / "out.jsonl"
        assert main(["bertscore", *inputs, "--output", str(out), *common]) == 0, capsys.readouterr().err
        return [json.loads(line)["f1"] for line in out.read_text(encoding="utf-8").splitlines()]

    expected = batch_f1("c.txt", "r.txt")
    assert batch_f1("c.json", "r.json") == expected
    # streaming read a .json file as JSONL: "not valid JSON" on its first line
    assert streamed_f1("--input", str(tmp_path / "pairs.json")) == expected
    assert streamed_f1("-c", str(tmp_path / "c.json"), "-r", str(tmp_path / "r.json")) == expected


def test_abstention_flat_tables_read_every_table_format(tmp_path) -> None:  # issue 27
    from rapidscore.abstention.results import ResultsError, load_flat_table

    rows = [dict(model="m", technique="t", eval_type="abstention", seed="1", concept=f"c{i}", question="q",
                 response=f"answer {i}") for i in range(3)]
    expected = load_flat_table(rows).records
    for fmt in TABLE_FORMATS:
        path = write_rows(tmp_path / f"flat.{fmt}{'' if fmt == 'parquet' else '.gz'}", fmt, rows)
        assert load_flat_table(path).records == expected, path
    bad = write_rows(tmp_path / "flat.tsv", "tsv", [rows[0], {**rows[1], "concept": ""}])
    with pytest.raises(ResultsError, match=rf"^{bad}: row 3: missing key\(s\) \['concept'\]$"):
        load_flat_table(bad)
