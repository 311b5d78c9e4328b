"""docs/architecture.md, "One text over the CLI and over HTTP" (issue 47): each way is a numbered
list whose every step names one file (its first code span), the files exist, and no file comes
twice on one way (a way that returns to a file is a cut still to make)."""

from __future__ import annotations

import re
from pathlib import Path

import rapidscore

PACKAGE_ROOT = Path(rapidscore.__file__).resolve().parent
DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
SECTION = "## One text over the CLI and over HTTP"


def ways(text: str) -> list[list[str]]:
    """The numbered lists of the section, each as the first code span of each step."""
    body = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    found: list[list[str]] = []
    current: list[str] | None = None
    for line in body.splitlines():
        step = re.match(r"(\d+)\. (.*)", line)
        if step:
            if step.group(1) == "1" or current is None:
                current = []
                found.append(current)
            span = re.search(r"`([^`]+)`", step.group(2))
            current.append(span.group(1) if span else "")
        elif line and not line.startswith(" "):
            current = None  # prose between lists ends a way
    return found


def test_each_way_names_each_file_once() -> None:
    found = ways(DOC.read_text(encoding="utf-8"))
    assert len(found) >= 3, found  # the command; the service's building and each request
    assert "bertscore/cli.py" in found[0] and "serve/app.py" in found[-1]
    for way in found:
        assert all(step.endswith(".py") for step in way), f"a step names no file: {way}"
        missing = [step for step in way if not (PACKAGE_ROOT / step).is_file()]
        assert not missing, f"no such file in python/rapidscore: {missing}"
        twice = sorted({step for step in way if way.count(step) > 1})
        assert not twice, f"files visited twice on one way: {twice} in {way}"


def test_the_reader_sees_a_repeat() -> None:
    text = (f"{SECTION}\n\nA way:\n\n1. `cli.py`: in.\n2. `bertscore/cli.py`: flags\n   more.\n"
            "3. `cli.py`: out.\n\nAnother:\n\n1. `serve/app.py`: route.\n\n## Next\n\n1. `x.py`\n")
    assert ways(text) == [["cli.py", "bertscore/cli.py", "cli.py"], ["serve/app.py"]]
