"""The README's report command promises a figure, and its set-up line may install no matplotlib
(issue 48, "the first hour"): the README says the figure needs the ``[plot]`` extra and what the
page says without it, and the report, run as the README runs it with matplotlib missing, is
written with everything else and says so, on the page and on stderr, in the README's words."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import pytest

from rapidscore.cli import main

ROOT = Path(__file__).resolve().parents[2]
NO_FIGURE_NOTE = "no figures: the figures need matplotlib: pip install 'rapidscore[plot]'"


def readme_report_section() -> tuple[str, list[str]]:
    """The paragraph before the README's ``rapidscore report`` command, and that command's argv."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"\n\n((?:[^\n]+\n)+)\n```bash\n([^\n]*rapidscore report [^\n]*)\n```", text)
    assert match, "README.md: no paragraph and bash block with the rapidscore report command"
    command = match.group(2).split("&&")[-1].strip()
    argv = shlex.split(command)
    assert argv[0].endswith("rapidscore") and argv[1] == "report", command
    return match.group(1), argv[1:]


def test_readme_says_the_figure_needs_the_plot_extra() -> None:
    paragraph, _argv = readme_report_section()
    words = " ".join(paragraph.split())
    assert "figure" in words
    assert "`[plot]`" in words and ".[plot]" in words, "say how to get the figure (the [plot] extra)"
    assert NO_FIGURE_NOTE in words, "say what the page and the command say without matplotlib"


@pytest.mark.slow  # a bertscore run and a report with the tiny model: a few seconds
def test_the_readme_report_without_matplotlib_says_so(tmp_path, tiny_bert, monkeypatch, capsys) -> None:
    _paragraph, argv = readme_report_section()
    # short texts in place of the examples' (the tiny model's 128 tokens hold them whole)
    cands, refs = str(tmp_path / "candidates.txt"), str(tmp_path / "references.txt")
    Path(cands).write_text("Rob Halford sings in Judas Priest.\nHe plays football in Madrid.\n", encoding="utf-8")
    Path(refs).write_text("Rob Halford is the singer of Judas Priest.\n" * 2, encoding="utf-8")
    assert main(["bertscore", "-c", cands, "-r", refs, "-m", tiny_bert, "--json", "-q"]) == 0, capsys.readouterr().err
    scores = tmp_path / "bertscore.json"
    scores.write_text(capsys.readouterr().out, encoding="utf-8")
    json.loads(scores.read_text(encoding="utf-8"))
    # the README's command, its paths made absolute (the test runs from anywhere)
    places = {"bertscore.json": str(scores), "report.html": str(tmp_path / "report.html"),
              "examples/bertscore/candidates.txt": cands, "examples/bertscore/references.txt": refs}
    argv = [places.get(arg, arg) for arg in argv]
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` fails, as without [plot]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert f"rapidscore report: {NO_FIGURE_NOTE}" in err.splitlines()
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert NO_FIGURE_NOTE.replace("'", "&#x27;") in page
    assert "He plays football in Madrid." in page  # everything else is there: the answers with their scores
