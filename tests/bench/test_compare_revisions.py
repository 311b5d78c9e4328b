"""bench/compare_revisions.py: what its command comparison forgives, and only that.

Two builds' outputs are compared byte for byte after the changes made on purpose are undone
(INTENDED); these tests hold that each undoes its own change and leaves a changed number visible.
"""

from __future__ import annotations

from pathlib import Path

from rapidscore.testing.scripts import load_script

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "bench" / "compare_revisions.py"


revisions = load_script(SCRIPT, "compare_revisions_under_test")

BASE_JSON = b"""{
  "hash": "sentence-transformers/all-MiniLM-L6-v2_L6_idf",
  "signature": "model:m|layer:6|idf:yes|rescaled:yes|version:0.1.0",
  "mean": {
    "F1": 0.6922147870063782
  },
  "similarities": [
    0.5
  ]
}
"""
DIGEST = "e3552ce868a995552f91685035435ba2e271bd7e25f63ed41d805c53ad185621"
TREE_JSON = BASE_JSON.replace(b"idf:yes|", b"idf:yes+uniform|").replace(
    b'  "mean"', b'  "references_sha256": "' + DIGEST.encode() + b'",\n  "mean"').replace(
    b"  ]\n}", b'  ],\n  "references_sha256": "' + DIGEST.encode() + b'"\n}')


def test_the_intended_json_changes_are_undone_and_a_changed_number_is_not() -> None:
    assert TREE_JSON != BASE_JSON
    assert revisions.normalise(TREE_JSON, "run/nrr.json") == revisions.normalise(BASE_JSON, "run/nrr.json")
    changed = TREE_JSON.replace(b"0.6922147870063782", b"0.6922147870063783")
    assert revisions.normalise(changed, "run/nrr.json") != revisions.normalise(BASE_JSON, "run/nrr.json")
    # a signature that changed elsewhere than the uniform-idf mark stays different
    other = TREE_JSON.replace(b"rescaled:yes", b"rescaled:no")
    assert revisions.normalise(other, "out.json") != revisions.normalise(BASE_JSON, "out.json")


BASE_PAGE = (b'<p class="caption" id="bertscore-summary-caption">Mean precision, recall and F1 per system</p>'
             b'<table><tr><th>System</th><th>F1</th></tr>'
             b'<tr><td>metal</td><td class="num" data-value="0.85">0.8503</td></tr></table>')
TREE_PAGE = (b'<p class="caption" id="bertscore-summary-caption">Mean precision, recall and F1 per system; the 95% '
             b'bootstrap interval of the mean F1</p>'
             b'<table><tr><th>System</th><th>F1</th><th>F1 CI low</th></tr>'
             b'<tr><td>metal</td><td class="num" data-value="0.85">0.8503</td><td>0.80</td></tr></table>'
             b'<figure id="figure-bertscore-intervals"></figure>')


def test_a_page_may_add_lines_but_not_change_one() -> None:
    base, tree = revisions.normalise(BASE_PAGE, "report.html"), revisions.normalise(TREE_PAGE, "report.html")
    added, problem = revisions.additions_only(base, tree)
    assert problem is None and added == 4  # the CI header and cell, the figure's two tags
    changed = revisions.normalise(TREE_PAGE.replace(b">0.8503<", b">0.8504<"), "report.html")
    added, problem = revisions.additions_only(base, changed)
    assert problem is not None and "0.8503" in problem
    # the caption's interval note is undone in pages only
    assert revisions.normalise(TREE_PAGE, "cli/report.out") == TREE_PAGE


def test_every_command_of_the_examples_is_run_and_quick_keeps_what_the_report_reads() -> None:
    full = revisions.command_list("onnx", first=True)
    commands = {args[0] for _, args, _ in full}
    assert commands == {"bertscore", "nrr", "ner", "refusal", "abstention", "rgb", "report"}
    names = [name for name, _, _ in full]
    assert len(names) == len(set(names))
    other = revisions.command_list("torch", first=False)
    assert all("--backend" in args or "backend=torch" in args for _, args, _ in other)
    quick = revisions.command_list("torch", first=False, quick=True)
    assert {name for name, _, _ in quick} == revisions.QUICK_OTHER_BACKENDS
    # the report reads the files that the commands before it wrote
    written = {stdout for _, _, stdout in quick if stdout}
    report = next(args for name, args, _ in quick if name == "report-examples")
    assert {"run/answer1.json", "run/answer2.json", "run/answer3.json", "run/nrr.json", "run/ner.json"} <= written
    assert all(path in report for path in written)
