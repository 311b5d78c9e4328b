"""The report's comparisons without a browser: items unmatched between systems are named (a note
and the section's text), never dropped; one system alone has no pairwise table."""

from __future__ import annotations

import contextlib
import io
import json

from rapidscore.cli import main


def _bertscore_rows(path, ids, values):
    path.write_text("".join(json.dumps({"index": k, "id": i, "precision": v, "recall": v, "f1": v}) + "\n"
                            for k, (i, v) in enumerate(zip(ids, values))))
    return str(path)


def test_unmatched_items_are_named_not_dropped(tmp_path) -> None:
    a = _bertscore_rows(tmp_path / "a.jsonl", ["q1", "q2", "q3"], [0.5, 0.6, 0.7])
    b = _bertscore_rows(tmp_path / "b.jsonl", ["q1", "q2", "q9"], [0.6, 0.7, 0.8])
    report = tmp_path / "report.html"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert main(["report", a, b, "--out", str(report), "--resamples", "200", "--json"]) == 0
    summary = json.loads(out.getvalue())
    assert summary["comparisons"] == {}
    (note,) = summary["notes"]
    assert note.startswith("bertscore: no pairwise comparison: items unmatched between systems")
    assert "lacks 1 of a's ids (q3)" in note and "has 1 ids a lacks (q9)" in note
    assert "q3" in err.getvalue() and "q9" in err.getvalue()
    html = report.read_text()
    assert 'id="bertscore-pairwise-refused"' in html and "(q3)" in html and 'id="bertscore-pairwise"' not in html


def test_one_system_has_no_pairwise_table(tmp_path) -> None:
    a = _bertscore_rows(tmp_path / "a.jsonl", ["q1", "q2"], [0.5, 0.6])
    report = tmp_path / "report.html"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["report", a, "--out", str(report), "-q"]) == 0
    html = report.read_text()
    assert "pairwise" not in html
