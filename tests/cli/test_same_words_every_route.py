"""The same mistake gets the same words on every route (issue 48, "the first hour").

* A JSONL (or JSON rows, or many-column CSV) file without a column name names ``--column`` (and
  ``column=`` for a library call), from ``-c``, ``--make-baseline``, ``report --candidates`` and
  the readers alike.
* A missing input file is ``OPTION PATH: no such file`` whether the path came with ``-c``, ``-r``,
  ``--input``, ``--generated``, ``--gold`` or ``--pred``.
* ``--show`` prints the score line before drawing; the JSON output stays JSON.
* Every figure option (``--plot-f1``, ``--show --fname``, ``nrr --plot``) says where the figure went,
  in the same words, on stderr (none with -q).
"""

from __future__ import annotations

import json
import re

import pytest

from rapidscore.cli import main
from rapidscore.common.readers import read_texts
from rapidscore.testing.command_output import error_line, write_lines

SCORE_LINE = re.compile(r" P: \d\.\d{6} R: \d\.\d{6} F1: \d\.\d{6}$", re.MULTILINE)


@pytest.fixture
def pair_files(tmp_path) -> dict[str, str]:
    return {"cands": write_lines(tmp_path / "c.txt", ["a cat sat", "a dog ran"]),
            "refs": write_lines(tmp_path / "r.txt", ["a cat sat down", "a dog walked"]),
            "jsonl": write_lines(tmp_path / "c.jsonl", [json.dumps({"text": "a cat sat", "id": 1}),
                                                        json.dumps({"text": "a dog ran", "id": 2})]),
            "rows": write_lines(tmp_path / "rows.json", [json.dumps([{"text": "a cat sat", "id": 1}])]),
            "csv": write_lines(tmp_path / "c.csv", ["text,id", "a cat sat,1", "a dog ran,2"]),
            "gold": write_lines(tmp_path / "gold.jsonl", [json.dumps({"id": 1, "text": "John works in Paris",
                                                                      "labels": {"John:0:4": "person"}})]),
            "out": str(tmp_path / "out.jsonl"), "missing": str(tmp_path / "nope.txt")}


# ---- a file without its column name ------------------------------------------------------------------
COLUMN_ROUTES = {
    "bertscore -c": lambda f, model: ["bertscore", "-c", f["jsonl"], "-r", f["refs"], "-m", model],
    "bertscore -r": lambda f, model: ["bertscore", "-c", f["cands"], "-r", f["jsonl"], "-m", model],
    "bertscore --make-baseline": lambda f, model: ["bertscore", "--make-baseline", f["jsonl"], "-m", model,
                                                   "--out", f["out"]],
    "bertscore -c (CSV)": lambda f, model: ["bertscore", "-c", f["csv"], "-r", f["refs"], "-m", model],
}


@pytest.mark.parametrize("route", list(COLUMN_ROUTES))
def test_a_file_without_its_column_names_the_column_option(route, pair_files, tiny_bert, capsys) -> None:
    assert main([*COLUMN_ROUTES[route](pair_files, tiny_bert), "-q"]) == 2
    line = error_line(capsys)
    assert line.startswith("rapidscore bertscore: error: "), line
    assert "needs a column name: give --column KEY (column= in Python)" in line, line


@pytest.mark.parametrize(("name", "what"), [("jsonl", "JSONL input"), ("rows", "JSON input of rows"),
                                            ("csv", "CSV input")])
def test_the_readers_say_it_in_the_same_words(name, what, pair_files) -> None:
    with pytest.raises(ValueError, match=rf"^{re.escape(pair_files[name])}.*: {what} needs a column name: give "
                                         r"--column KEY \(column= in Python\)"):
        read_texts(pair_files[name])


def test_the_column_given_is_read(pair_files, tiny_bert, capsys) -> None:
    assert main(["bertscore", "-c", pair_files["jsonl"], "--column", "text", "-r", pair_files["jsonl"],
                 "-m", tiny_bert, "--json", "-q"]) == 0
    assert json.loads(capsys.readouterr().out)["f1"] == pytest.approx([1.0, 1.0], abs=1e-6)


# ---- a missing input file ---------------------------------------------------------------------------
MISSING_ROUTES = {
    "bertscore -c": ("bertscore", "-c", lambda f, m: ["bertscore", "-c", f["missing"], "-r", f["refs"], "-m", m]),
    "bertscore -r": ("bertscore", "-r", lambda f, m: ["bertscore", "-c", f["cands"], "-r", f["refs"], f["missing"],
                                                      "-m", m]),
    "bertscore -c streamed": ("bertscore", "-c", lambda f, m: ["bertscore", "-c", f["missing"], "-r", f["refs"],
                                                               "-m", m, "--output", f["out"]]),
    "bertscore --input": ("bertscore", "--input", lambda f, m: ["bertscore", "--input", f["missing"], "-m", m,
                                                                "--output", f["out"]]),
    "nrr --generated": ("nrr", "--generated", lambda f, m: ["nrr", "--generated", f["missing"], "--references",
                                                            f["refs"], "--model", m]),
    "nrr --input": ("nrr", "--input", lambda f, m: ["nrr", "--input", f["missing"], "--model", m, "--output",
                                                    f["out"]]),
    "refusal --input": ("refusal", "--input", lambda f, m: ["refusal", "--input", f["missing"]]),
    "ner --gold": ("ner", "--gold", lambda f, m: ["ner", "--gold", f["missing"], "--pred", f"p={f['gold']}",
                                                  "--label-model", m]),
    "ner --pred": ("ner", "--pred", lambda f, m: ["ner", "--gold", f["gold"], "--pred", f"p={f['missing']}",
                                                  "--label-model", m]),
}


@pytest.mark.parametrize("route", list(MISSING_ROUTES))
def test_a_missing_file_names_its_option_and_path(route, pair_files, tiny_bert, capsys, tmp_path) -> None:
    command, option, argv = MISSING_ROUTES[route]
    assert main([*argv(pair_files, tiny_bert), "-q"]) == 2
    assert error_line(capsys) == f"rapidscore {command}: error: {option} {pair_files['missing']}: no such file"
    assert not (tmp_path / "out.jsonl").exists()  # nothing written for a run that could not start


# ---- --show and the figure options ------------------------------------------------------------------
@pytest.mark.slow  # draws two figures and scores three times with the tiny model: a few seconds
def test_show_prints_the_score_line_and_every_figure_option_its_path(pair_files, tiny_bert, tmp_path,
                                                                      capsys) -> None:
    pytest.importorskip("matplotlib", reason="the figures need the [plot] extra")
    common = ["bertscore", "-c", pair_files["cands"], "-r", pair_files["refs"], "-m", tiny_bert]
    heatmap = str(tmp_path / "pair.png")
    assert main([*common, "--show", "--fname", heatmap]) == 0
    captured = capsys.readouterr()
    assert SCORE_LINE.search(captured.out), captured.out  # the score line, as without --show
    assert f"wrote the figure {heatmap}" in captured.err.splitlines()
    # --json stays one JSON document on stdout; the figure's note goes to stderr
    assert main([*common, "--show", "--fname", heatmap, "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["f1"] and f"wrote the figure {heatmap}" in captured.err
    f1 = str(tmp_path / "f1.svg")
    assert main([*common, "--plot-f1", f1]) == 0
    captured = capsys.readouterr()
    assert SCORE_LINE.search(captured.out) and f"wrote the figure {f1}" in captured.err.splitlines()
    histogram = str(tmp_path / "histogram.png")
    assert main(["nrr", "--generated", pair_files["cands"], "--references", pair_files["refs"], "--model",
                 tiny_bert, "--plot", histogram]) == 0
    assert f"wrote the figure {histogram}" in capsys.readouterr().err.splitlines()
    assert main([*common, "--plot-f1", f1, "-q"]) == 0  # -q: results only
    assert "wrote the figure" not in capsys.readouterr().err
