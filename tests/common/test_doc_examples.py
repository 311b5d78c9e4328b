"""The documentation's runnable examples run as written.

A ```python block preceded by the line ``<!-- test: run -->`` in README.md or docs/**/*.md is
executed here; a file's marked blocks run in order in one namespace (later blocks may use what
earlier ones defined), in a temporary working directory. Unmarked blocks are fragments (they use
the reader's own ``cands``, a GPU, a cluster or a hub model) and are not run.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # the examples load the embedded MiniLM

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- test: run -->"
BLOCK = re.compile(r"^" + re.escape(MARKER) + r"\n```python\n(.*?)^```", re.S | re.M)


def marked_blocks() -> dict[str, list[str]]:
    blocks = {}
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        found = BLOCK.findall(path.read_text(encoding="utf-8"))
        if found:
            blocks[str(path.relative_to(ROOT))] = found
    return blocks


BLOCKS = marked_blocks()


def test_the_marker_is_only_used_before_python_blocks():
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        assert text.count(MARKER) == len(BLOCK.findall(text)), f"{path.name}: a marker not followed by ```python"
    assert sum(len(found) for found in BLOCKS.values()) >= 8  # the examples below stay marked


@pytest.mark.parametrize("doc", sorted(BLOCKS))
def test_marked_examples_run(doc, minilm_path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # an example may write files
    namespace: dict = {"__name__": f"doc_example_{Path(doc).stem}"}
    for number, code in enumerate(BLOCKS[doc]):
        try:
            exec(compile(code, f"{doc} (example {number})", "exec"), namespace)
        except Exception as exc:  # the failing example, named
            pytest.fail(f"{doc}, marked example {number} failed: {type(exc).__name__}: {exc}\n{code}")
