"""CI runs README.md's test command (the guide's rule): `.ci/run` holds its set-up half and its
pytest half verbatim, in that order, and nothing between them but the checks started beside the
tests."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def readme_test_command() -> str:
    readme = ROOT.joinpath("README.md").read_text(encoding="utf-8")
    section = readme[readme.index("Set up and run the tests"):]
    block = re.search(r"```bash\n(.*?)\n```", section, re.S)
    assert block, "README.md's test section has no bash block"
    return block.group(1).strip()


def test_ci_runs_both_halves_of_the_readme_test_command() -> None:
    command = readme_test_command()
    setup, _, pytest_half = command.rpartition(" && ")
    assert pytest_half == ".venv/bin/python -m pytest", command
    ci = ROOT.joinpath(".ci/run").read_text(encoding="utf-8")
    assert setup + " \\\n" in ci or setup + " ||" in ci, f".ci/run lacks the set-up half: {setup}"
    assert f"\n{pytest_half} ||" in ci, f".ci/run lacks the pytest half: {pytest_half}"
    assert ci.index(setup) < ci.index(f"\n{pytest_half} ||")
