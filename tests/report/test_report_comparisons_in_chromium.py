"""The report of three systems in headless Chromium: each system's bootstrap interval in the
summary table, the pairwise table against the baseline and the intervals' figure hold the
numbers rapidscore.compare gives on the same items (issue 49).

Slow: starts Chromium (skips without it: tests/report/conftest.py)."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest

from rapidscore.cli import main
from rapidscore.compare import compare

pytestmark = pytest.mark.slow

TABLES_JS = """JSON.stringify(Array.from(document.querySelectorAll('table')).map(t => ({
  id: t.id,
  head: Array.from(t.tHead.rows[0].cells).map(c => c.textContent.trim()),
  rows: Array.from(t.tBodies[0].rows).map(r => Array.from(r.cells).map(c => ({
    text: c.textContent.trim(), value: c.getAttribute('data-value')})))})))"""
SIGNATURE = "bertscore|model:tiny|layer:2|idf:no|version:0.1.0"


def _rows(table: dict) -> dict[str, dict[str, dict]]:
    return {row[0]["text"]: dict(zip(table["head"], row)) for row in table["rows"]}


def test_three_systems_show_the_apis_intervals_and_pairwise_table(tmp_path, open_in_chromium) -> None:
    rng = np.random.default_rng(3)
    base = rng.uniform(0.6, 0.9, 80)
    scores = {"base": base, "better": base + rng.normal(0.04, 0.03, 80), "same": base + rng.normal(0, 0.03, 80)}
    files = []
    for name, values in scores.items():
        path = tmp_path / f"{name}.json"
        values = [float(v) for v in values]
        path.write_text(json.dumps({"signature": SIGNATURE, "precision": values, "recall": values, "f1": values}))
        files.append(str(path))
    report = tmp_path / "report.html"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["report", *files, "--out", str(report), "--resamples", "3000", "--seed", "7", "--json", "-q"]) == 0
    summary = json.loads(out.getvalue())
    expected = compare(scores, "base", metric="f1", resamples=3000, trials=3000, seed=7)
    assert summary["comparisons"]["bertscore"]["systems"] == expected.to_dict()["systems"]

    page = open_in_chromium(report)
    assert page.errors == [] and page.requests == [page.url]
    tables = {t["id"]: t for t in json.loads(page.evaluate(TABLES_JS))}
    shown = _rows(tables["bertscore-summary"])
    for system in expected.systems:
        row = shown[system.name]
        assert float(row["F1 CI low"]["value"]) == system.low and float(row["F1 CI high"]["value"]) == system.high
        assert row["F1 CI low"]["text"] == f"{system.low:.4f}"
    pairwise = _rows(tables["bertscore-pairwise"])
    assert set(pairwise) == {"better", "same"}
    for pair in expected.pairs:
        row = pairwise[pair.system]
        assert float(row["Difference"]["value"]) == pair.difference
        assert (float(row["95% low"]["value"]), float(row["95% high"]["value"])) == (pair.low, pair.high)
        assert float(row["p bootstrap"]["value"]) == pair.p_bootstrap
        assert float(row["p randomization"]["value"]) == pair.p_randomization
        assert float(row["p bootstrap adjusted"]["value"]) == pair.p_bootstrap_adjusted
        marked = row["p bootstrap adjusted"]["text"].endswith("*")
        assert marked == pair.significant["bootstrap"]
    assert pairwise["better"]["p bootstrap adjusted"]["text"].endswith("*")  # a clear gain, marked
    caption = page.evaluate("document.getElementById('bertscore-pairwise-caption').textContent")
    assert expected.signature in caption.replace("\u200b", "")
    # the intervals as error bars: one figure more than the distribution's
    assert page.evaluate("document.querySelectorAll('#figure-bertscore-intervals svg').length") == 1
