"""Issue 36, rows 6 and 10: the readers bound what they hold of a file at once (a line, a CSV
record or field, a whole JSON document), and every reader error names the file.

A gzip "bomb" (a small .gz holding gigabytes without a newline) was read whole and ended in "out
of memory"; now reading stops at the bound with a ValueError naming the file, the line and the
bound, and saying how to raise it. Most tests lower the bounds (RAPIDSCORE_MAX_RECORD_BYTES /
RAPIDSCORE_MAX_DOCUMENT_BYTES) so that a few MiB exceed them; one slow test reads a real 4 GiB bomb
and checks the peak memory of the process.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import subprocess
import sys
import textwrap
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from rapidscore.cli import main
from rapidscore.common import readers

MiB = 1 << 20
GiB = 1 << 30


def gzip_bomb(path: Path, size: int, *, prefix: bytes = b"", suffix: bytes = b"", byte: bytes = b"a") -> Path:
    """``prefix + byte * size + suffix`` gzipped into ``path``, compressed piece by piece (never
    held whole: 4 GiB of one byte compresses to ~4 MB)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: a gzip member
    piece = byte * (16 * MiB // len(byte))
    with open(path, "wb") as handle:
        handle.write(compressor.compress(prefix))
        left = size
        while left > 0:
            chunk = piece if left >= len(piece) else piece[:left]
            handle.write(compressor.compress(chunk))
            left -= len(chunk)
        handle.write(compressor.compress(suffix))
        handle.write(compressor.flush())
    return path


@pytest.fixture
def small_bounds(monkeypatch) -> Iterator[None]:
    """Bounds of 1 MiB per line/record and 4 MiB per document for one test (the environment
    variables are read at each file opened, so the in-process commands see them)."""
    monkeypatch.setenv(readers.MAX_RECORD_ENV, "1M")
    monkeypatch.setenv(readers.MAX_DOCUMENT_ENV, "4M")
    readers.set_max_record_bytes(None)
    readers.set_max_document_bytes(None)
    yield
    readers.set_max_record_bytes(None)
    readers.set_max_document_bytes(None)


def run_cli(capsys, argv: list[str]) -> tuple[int, str]:
    status = main([str(arg) for arg in argv])
    err = capsys.readouterr().err
    assert "Traceback" not in err and "unexpected" not in err, err
    return status, err


def refusal(path, out: Path, *extra: str) -> list[str]:
    return ["refusal", "--input", path, "--set", "method=keyword", "-q", "-o", out, *extra]


def assert_line_bound_error(err: str, where: str, bound: str = "1 MiB") -> None:
    assert f"{where}: line longer than {bound}" in err, err
    assert "--max-record-bytes" in err and readers.MAX_RECORD_ENV in err, err


# -- the option and the settings ----------------------------------------------------------------

@pytest.mark.parametrize(("text", "value"), [("512M", 512 * MiB), ("2G", 2 * GiB), ("2GiB", 2 * GiB), ("64k", 64 << 10),
                                             ("1000", 1000), ("1.5G", 3 * GiB // 2), (" 3 MB ", 3 * MiB)])
def test_sizes_read_with_binary_suffixes(text, value) -> None:
    assert readers.parse_size(text) == value


@pytest.mark.parametrize("text", ["", "0", "-1M", "12X", "M", "1e3", "nan"])
def test_bad_sizes_are_refused(text) -> None:
    with pytest.raises(ValueError, match="size"):
        readers.parse_size(text)


def test_every_command_has_the_max_record_bytes_option() -> None:
    from rapidscore.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, command in commands.choices.items():
        options = {option for action in command._actions for option in action.option_strings}
        assert "--max-record-bytes" in options, name
    args = parser.parse_args(["refusal", "--input", "x.jsonl", "--max-record-bytes", "512M"])
    assert args.max_record_bytes == 512 * MiB
    assert parser.parse_args(["refusal", "--input", "x.jsonl"]).max_record_bytes is None


def test_a_bad_max_record_bytes_is_the_parsers_error(capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["refusal", "--input", "x.jsonl", "--max-record-bytes", "lots"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --max-record-bytes: expected a size in bytes such as 1000, 512M or 2G, got 'lots'" in err, err


def test_the_bounds_come_from_the_setter_else_the_environment_else_the_default(monkeypatch) -> None:
    monkeypatch.delenv(readers.MAX_RECORD_ENV, raising=False)
    monkeypatch.delenv(readers.MAX_DOCUMENT_ENV, raising=False)
    try:
        assert readers.max_record_bytes() == readers.DEFAULT_MAX_RECORD_BYTES == 256 * MiB
        assert readers.max_document_bytes() == readers.DEFAULT_MAX_DOCUMENT_BYTES == 2 * GiB
        monkeypatch.setenv(readers.MAX_RECORD_ENV, "8M")
        assert readers.max_record_bytes() == 8 * MiB
        readers.set_max_record_bytes("16M")
        assert readers.max_record_bytes() == 16 * MiB
        readers.set_max_record_bytes(4 * GiB)  # a record bound above the document bound raises it too
        assert readers.max_document_bytes() == 4 * GiB
        monkeypatch.setenv(readers.MAX_DOCUMENT_ENV, "bogus")
        readers.set_max_record_bytes(None)
        with pytest.raises(ValueError, match=readers.MAX_DOCUMENT_ENV):
            readers.max_document_bytes()
        with pytest.raises(ValueError, match="size"):
            readers.set_max_record_bytes(0)
    finally:
        readers.set_max_record_bytes(None)
        readers.set_max_document_bytes(None)


def test_a_huge_bound_still_sets_the_csv_field_limit(tmp_path) -> None:
    """csv.field_size_limit takes a C long: a bound past it (a 32-bit long on Windows) is clamped."""
    path = tmp_path / "t.csv"
    path.write_text("text\nhello\n", encoding="utf-8")
    try:
        readers.set_max_record_bytes(1 << 70)
        assert [row for row, _ in readers.iter_rows(str(path))] == [{"text": "hello"}]
        assert csv.field_size_limit() >= (1 << 31) - 1
    finally:
        readers.set_max_record_bytes(None)


# -- reproducer 1: a line / record over the bound -------------------------------------------------

@pytest.mark.parametrize("name", ["bomb.jsonl.gz", "bomb.txt.gz", "bomb.csv.gz", "bomb.tsv.gz"])
def test_a_gzip_bomb_without_a_newline_is_an_error_at_the_bound(tmp_path, capsys, small_bounds, name) -> None:
    header = b"response\n" if ".csv" in name or ".tsv" in name else b""
    bomb = gzip_bomb(tmp_path / name, 8 * MiB, prefix=header)
    status, err = run_cli(capsys, refusal(bomb, tmp_path / "out.jsonl", "--column", "response=text")
                          if "txt" in name else refusal(bomb, tmp_path / "out.jsonl"))
    assert status == 2
    assert_line_bound_error(err, f"{bomb}:{2 if header else 1}")


@pytest.mark.slow  # builds and exports the tiny BERT (~10 s on 2 cores when it is the first to)
@pytest.mark.parametrize("command", ["bertscore --input", "bertscore -c", "nrr --input", "nrr --generated"])
def test_a_gzip_bomb_given_to_a_model_command(tiny_model_path, tmp_path, capsys, small_bounds, command) -> None:
    model = str(tiny_model_path("bert"))
    (tmp_path / "r.txt").write_text("a reference\n", encoding="utf-8")
    name, option = command.split()
    bomb = gzip_bomb(tmp_path / ("in.jsonl.gz" if option == "--input" else "c.txt.gz"), 8 * MiB)
    references = {"-c": ["-r", tmp_path / "r.txt"], "--generated": ["--references", tmp_path / "r.txt"]}
    inputs = [option, bomb, *references.get(option, [])]
    outputs = ["--output", tmp_path / "out.jsonl"] if option == "--input" else []
    models = ["-m", model, "-l", "2"] if name == "bertscore" else ["--model", model]
    status, err = run_cli(capsys, [name, *inputs, *models, *outputs, "-q"])
    assert status == 2
    assert_line_bound_error(err, f"{bomb}:1")


def test_the_readers_stop_at_the_bound_for_every_caller(tmp_path, small_bounds) -> None:
    bomb = gzip_bomb(tmp_path / "bomb.txt.gz", 8 * MiB, prefix=b'{"response": "short"}\n')
    for read in (lambda: list(readers.iter_lines(str(bomb))), lambda: readers.read_texts(bomb),
                 lambda: readers.count_rows(str(bomb)), lambda: list(readers.iter_rows(bomb, "jsonl"))):
        with pytest.raises(ValueError, match=rf"^{bomb}:2: line longer than 1 MiB \(the bound"):
            read()
    exact = tmp_path / "exact.txt"
    exact.write_bytes(b"a" * MiB + b"\r\n" + b"b" * MiB)  # at the bound exactly, with or without a line ending
    assert [len(line) for line in readers.iter_lines(str(exact))] == [MiB + 2, MiB]
    exact.write_bytes(b"a" * (MiB + 1) + b"\n")
    with pytest.raises(ValueError, match=rf"^{exact}:1: line longer than 1 MiB"):
        list(readers.iter_lines(str(exact)))


def test_a_bomb_as_an_abstention_flat_table(tmp_path, capsys, small_bounds) -> None:
    bomb = gzip_bomb(tmp_path / "results.jsonl.gz", 8 * MiB)
    status, err = run_cli(capsys, ["abstention", bomb, "-q"])
    assert status == 2
    assert_line_bound_error(err, f"{bomb}:1")


def test_a_bomb_as_a_results_file_of_a_tree(tmp_path, capsys, small_bounds) -> None:
    folder = tmp_path / "tree" / "model" / "abstention"
    folder.mkdir(parents=True)
    bomb = gzip_bomb(folder / "t.json.gz", 16 * MiB, prefix=b'{"1": {"c": {"a": {"response": "')
    status, err = run_cli(capsys, ["abstention", tmp_path / "tree", "-q"])
    assert status == 2
    assert f"{bomb}: over 4 MiB of JSON (the bound on one whole document" in err, err
    assert "--max-record-bytes" in err and readers.MAX_DOCUMENT_ENV in err, err
    from rapidscore.abstention.results import ResultsError, load_select_file

    with pytest.raises(ResultsError, match=rf"^{bomb}: over 4 MiB of JSON"):
        load_select_file(bomb)


def test_a_json_array_bomb_is_an_error_at_the_document_bound(tmp_path, capsys, small_bounds) -> None:
    bomb = gzip_bomb(tmp_path / "rows.json.gz", 16 * MiB, prefix=b'[{"response": "')
    status, err = run_cli(capsys, refusal(bomb, tmp_path / "out.jsonl"))
    assert status == 2
    assert f"{bomb}: over 4 MiB of JSON (the bound on one whole document" in err, err
    with pytest.raises(ValueError, match=rf"^{bomb}: over 4 MiB of JSON"):
        readers.load_json(bomb)
    plain = tmp_path / "rows.json"  # not gzipped: refused from its size, before it is read
    plain.write_bytes(b"[" + b" " * (5 * MiB) + b"]")
    with pytest.raises(ValueError, match=rf"^{plain}: over 4 MiB of JSON"):
        readers.load_json(plain)


def test_a_one_line_json_document_over_the_line_bound_is_read(tmp_path, small_bounds) -> None:
    """A whole document is bounded as a document, not as a line: minified JSON is one line."""
    rows = [{"response": "x" * 1000} for _ in range(2000)]  # ~2 MiB on one line
    for name in ("rows.json", "rows.json.gz"):
        path = tmp_path / name
        data = json.dumps(rows).encode()
        path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
        assert [row for row, _ in readers.iter_rows(path)] == rows
        assert readers.load_json(path) == rows
        assert json.loads(readers.read_bytes(str(path))) == rows


def test_a_multi_member_gzip_document_is_read_whole(tmp_path) -> None:
    path = tmp_path / "doc.json.gz"
    path.write_bytes(gzip.compress(b'{"a": ') + gzip.compress(b"[1, 2]}") + b"\0" * 8)
    assert readers.read_bytes(str(path)) == b'{"a": [1, 2]}'
    assert readers.load_json(path) == {"a": [1, 2]}


@pytest.mark.slow  # a 100 MB line: ~1 s and ~0.5 GB
def test_a_100_mb_jsonl_row_is_read_under_the_default_bound(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(readers.MAX_RECORD_ENV, raising=False)
    path = tmp_path / "big.jsonl"
    path.write_text(json.dumps({"response": "x" * (100 * 10**6)}) + "\n", encoding="utf-8")
    ((row, where),) = list(readers.iter_rows(path))
    assert len(row["response"]) == 100 * 10**6 and where == f"{path}:1"


# -- reproducer 3: CSV fields over 131,072 characters ---------------------------------------------

def test_csv_fields_longer_than_the_csv_modules_default_are_read(tmp_path, capsys) -> None:
    long = "I cannot help with that. " + "x" * 200_000
    path = tmp_path / "long.csv"
    with open(path, "w", encoding="utf-8", newline="") as handle:
        csv.writer(handle).writerows([["response"], [long], ['multi\nline "quoted"']])
    assert [row["response"] for row, _ in readers.iter_rows(path)] == [long, 'multi\nline "quoted"']
    out = tmp_path / "out.jsonl"
    status, err = run_cli(capsys, refusal(path, out))
    assert status == 0, err
    assert [json.loads(line)["refusal"] for line in out.read_text(encoding="utf-8").splitlines()] == [1.0, 0.0]


def test_a_taxonomy_csv_with_a_long_field_is_read(tmp_path) -> None:
    from rapidscore.abstention.taxonomy import Taxonomy

    path = tmp_path / "taxonomy.csv"
    path.write_text(f"parent,child,name\n,a,{'n' * 200_000}\na,b,B\n", encoding="utf-8")
    taxonomy = Taxonomy.load(path)
    assert taxonomy.children("a") == ["b"] and len(taxonomy.name("a")) == 200_000


def test_a_csv_record_spanning_lines_over_the_bound_names_its_first_line(tmp_path, small_bounds) -> None:
    path = tmp_path / "open_quote.csv.gz"
    gzip_bomb(path, 4 * MiB, prefix=b'response\nfine\n"never closed', byte=b"aaaaaaa\n")
    with pytest.raises(ValueError, match=rf"^{path}:3: CSV record longer than 1 MiB \(lines 3-\d+; the bound"):
        list(readers.iter_rows(path))
    fields = tmp_path / "many_fields.csv"  # every field short, every line short: the record is long
    fields.write_text('a,b\n"x' + '\n","x' * 300_000 + '"\n', encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{fields}:2: CSV record longer than 1 MiB"):
        list(readers.iter_rows(fields))


def test_malformed_csv_names_the_file_and_line(tmp_path, capsys) -> None:
    path = tmp_path / "cr.csv"
    path.write_bytes(b"response\nfine\nbad\rfield\n")  # a lone CR in an unquoted field: csv.Error
    with pytest.raises(ValueError, match=rf"^{path}:3: not valid CSV: a carriage return \(\\r\) inside an unquoted"):
        list(readers.iter_rows(path))
    status, err = run_cli(capsys, refusal(path, tmp_path / "out.jsonl"))
    assert status == 2 and f"{path}:3: not valid CSV" in err


# -- reproducer 4: integers over Python's 4,300 digits ---------------------------------------------

BIG = "1" * 5000


def assert_digits_error(err: str, where: str) -> None:
    assert f"{where}: an integer of more than {sys.get_int_max_str_digits()} digits" in err, err
    assert "PYTHONINTMAXSTRDIGITS" in err, err


@pytest.mark.parametrize(("name", "text", "line"), [
    ("rows.jsonl", '{"response": "ok"}\n{"response": "ok", "n": ' + BIG + "}\n", 2),
    ("rows.json", '[{"response": "ok"},\n {"response": "ok",\n  "n": ' + BIG + "}]\n", 3),
])
def test_an_integer_over_the_digit_limit_names_the_file_and_line(tmp_path, capsys, name, text, line) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    status, err = run_cli(capsys, refusal(path, tmp_path / "out.jsonl"))
    assert status == 2
    assert_digits_error(err, f"{path}:{line}")
    if name.endswith(".json"):
        with pytest.raises(ValueError, match=rf"^{path}:{line}: an integer of more than"):
            readers.load_json(path)


def test_an_abstention_table_integer_over_the_digit_limit_names_the_file_and_line(tmp_path, capsys) -> None:
    path = tmp_path / "table.jsonl"
    row = dict(model="m", technique="t", eval_type="abstention", seed="1", concept="c", question="q",
               response="I cannot")
    path.write_text(json.dumps(row) + "\n" + json.dumps(row)[:-1] + ', "n": ' + BIG + "}\n", encoding="utf-8")
    status, err = run_cli(capsys, ["abstention", path, "-q"])
    assert status == 2
    assert_digits_error(err, f"{path}:2")


def test_a_results_file_integer_over_the_digit_limit_names_the_file(tmp_path) -> None:
    from rapidscore.abstention.results import ResultsError, load_select_file

    path = tmp_path / "m" / "abstention" / "t.json.gz"
    path.parent.mkdir(parents=True)
    path.write_bytes(gzip.compress(b'{"1": {"c": {"a": {"response": "x",\n "n": ' + BIG.encode() + b"}}}}"))
    with pytest.raises(ResultsError) as info:
        load_select_file(path)
    assert_digits_error(str(info.value), f"{path}:2")


@pytest.mark.parametrize(("name", "text", "line"), [("serve.json", '{"workers": 2,\n "port": ' + BIG + "}", 2),
                                                    ("serve.toml", "workers = 2\nport = " + BIG + "\n", 2)])
def test_a_serve_config_integer_over_the_digit_limit_names_the_file_and_line(tmp_path, capsys, name, text,
                                                                             line) -> None:
    from rapidscore.serve.config import load_config

    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError) as info:
        load_config(path)
    assert_digits_error(str(info.value), f"{path}:{line}")
    status, err = run_cli(capsys, ["serve", "--config", path])
    assert status == 2
    assert_digits_error(err, f"{path}:{line}")


def test_a_serve_config_is_bounded_as_a_document(tmp_path, small_bounds) -> None:
    from rapidscore.serve.config import load_config

    path = tmp_path / "serve.toml"
    path.write_bytes(b"workers = 2\n" + b"# comment\n" * (MiB // 2))  # 5 MiB, every line short
    with pytest.raises(ValueError, match=rf"^{path}: over 4 MiB"):
        load_config(path)


# -- reproducer 5: a bad Parquet file ---------------------------------------------------------------

def test_a_bad_parquet_file_is_named_with_what_was_expected(tmp_path, capsys) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"response\nnot parquet at all\n")
    status, err = run_cli(capsys, refusal(bad, tmp_path / "out.jsonl"))
    assert status == 2
    assert f"{bad}: not a readable Parquet file" in err and "PAR1" in err, err
    good = tmp_path / "good.parquet"
    pq.write_table(pa.table({"response": ["I cannot"] * 1000}), good)
    cut = tmp_path / "cut.parquet"
    cut.write_bytes(good.read_bytes()[:-100])
    for read in (lambda: list(readers.iter_rows(cut)), lambda: readers.count_rows(str(cut)),
                 lambda: list(readers.iter_rows(bad))):
        with pytest.raises(ValueError, match=r"\.parquet: not a readable Parquet file"):
            read()


def test_a_parquet_file_with_a_corrupt_page_is_named(tmp_path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "page.parquet"
    pq.write_table(pa.table({"response": [f"text {i}" * 20 for i in range(5000)]}), path, compression="snappy")
    data = bytearray(path.read_bytes())
    data[100:2000] = b"\xff" * 1900  # the first column chunk's pages, the footer intact
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=rf"^{path}: not a readable Parquet file"):
        list(readers.iter_rows(path))


# -- reproducer 6: a lone surrogate -------------------------------------------------------------------

def test_a_lone_surrogate_escape_is_read_as_it_is(tmp_path) -> None:
    """JSON allows the escape "\\ud800": the reader gives the string as Python reads it (the
    abstention command scores it; see test_bad_inputs.py). Writing it out again is the writers'
    concern."""
    path = tmp_path / "surrogate.jsonl"
    path.write_text('{"response": "I cannot \\ud800 help"}\n', encoding="utf-8")
    assert [row for row, _ in readers.iter_rows(path)] == [{"response": "I cannot \ud800 help"}]


# -- reproducer 7: the other errors of a reader name the file -------------------------------------------

def test_damaged_gzip_documents_name_the_file_and_line(tmp_path) -> None:
    path = tmp_path / "doc.json.gz"
    path.write_bytes(gzip.compress(b'{"a":\n 1,\n "b": 2}' * 1000)[:-30])
    for read in (lambda: readers.load_json(path), lambda: readers.read_bytes(str(path)),
                 lambda: list(readers.iter_rows(path))):
        with pytest.raises(ValueError, match=rf"^{path}:\d+: cannot read the compressed data \(truncated"):
            read()
    path.write_bytes(b"plain text, not gzip")
    with pytest.raises(ValueError, match=rf"^{path}:1: cannot read the compressed data .*Not a gzipped file"):
        readers.load_json(path)
    path.write_bytes(gzip.compress(b'["ok",\n "caf\xe9"]'))
    with pytest.raises(ValueError, match=rf"^{path}:2: not valid UTF-8 text: byte 0xe9 at column 6"):
        readers.load_json(path)
    path.write_bytes(gzip.compress(b"\xef\xbb\xbf" + b'["ok"]'))  # a BOM is not text
    assert readers.load_json(path) == ["ok"]
    empty = tmp_path / "empty.json.gz"
    empty.write_bytes(b"")
    assert readers.read_bytes(str(empty)) == b""


def test_conll_reading_is_bounded_and_names_the_file(tmp_path, small_bounds) -> None:
    from rapidscore.ner.conll import read_conll
    from rapidscore.ner.tags import TagError

    good = "EU B-ORG\nrejects O\n\nPeter B-PER\n"
    path = tmp_path / "gold.conll.gz"
    path.write_bytes(gzip.compress(good.encode()))
    assert read_conll(str(path)).tags == [["B-ORG", "O"], ["B-PER"]]
    cr = tmp_path / "mac.conll"
    cr.write_bytes(good.replace("\n", "\r").encode())  # old Mac line ends: still lines
    assert read_conll(str(cr)).lines == [1, 4]
    path.write_bytes(gzip.compress(good.encode() * 200)[:-10])
    with pytest.raises(TagError, match=rf"^{path}:\d+: cannot read the compressed data"):
        read_conll(str(path))
    gzip_bomb(path, 8 * MiB, prefix=good.encode())
    with pytest.raises(TagError, match=rf"^{path}:5: line longer than 1 MiB"):
        read_conll(str(path))
    latin = tmp_path / "latin.conll"
    latin.write_bytes(b"caf\xe9 O\n")
    with pytest.raises(TagError, match=rf"^{latin}: not UTF-8 text"):  # decoded by the block: no line
        read_conll(str(latin))


# -- the real size: 4 GiB in a 4 MB file ------------------------------------------------------------

PEAK_SCRIPT = textwrap.dedent("""
    import resource, subprocess, sys
    done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB on Linux
    print(done.returncode, peak)
    sys.stderr.write(done.stderr)
""")


def peak_run(argv: list[str]) -> tuple[int, int, str]:
    """(exit status, peak resident KiB, stderr) of ``rapidscore argv`` in a fresh process."""
    env = {k: v for k, v in os.environ.items() if k not in (readers.MAX_RECORD_ENV, readers.MAX_DOCUMENT_ENV)}
    done = subprocess.run([sys.executable, "-c", PEAK_SCRIPT, sys.executable, "-m", "rapidscore", *argv],
                          capture_output=True, text=True, env=env, timeout=300)
    status, peak = done.stdout.split()
    return int(status), int(peak), done.stderr


@pytest.mark.slow  # builds a 4 GiB bomb (~10 s) and reads 256 MiB of it in each command (~2 s each)
@pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss in KiB, and the bound checked on Linux")
def test_a_real_4_gib_bomb_stops_at_the_default_bound_in_bounded_memory(tmp_path) -> None:
    bomb = gzip_bomb(tmp_path / "bomb.jsonl.gz", 4 * GiB)
    assert bomb.stat().st_size < 8 * MiB
    for argv in (["refusal", "--input", str(bomb), "--set", "method=keyword", "-q", "-o", str(tmp_path / "o.jsonl")],
                 ["abstention", str(bomb), "-q"]):
        status, peak_kib, err = peak_run(argv)
        assert status == 2, err
        assert f"{bomb}:1: line longer than 256 MiB" in err, err
        assert peak_kib < 1.5 * GiB / 1024, f"{argv[0]}: peak {peak_kib / 1024:.0f} MiB"
