"""``rapidscore report`` of the examples, opened in headless Chromium: the page loads from the file
with no request but the file itself, no console error or exception, renders (a screenshot that is
not blank), its tables hold the numbers the commands wrote (as the page formats them: 4 decimals,
SELECT's cells as ``rapidscore abstention --format markdown`` prints them), the token alignment's
means are the pair's P and R, and a click on a header sorts a table.

Slow: the commands run on the embedded MiniLM. Skips without Chromium (tests/report/conftest.py).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import statistics
from pathlib import Path

import pytest

from rapidscore.cli import main
from rapidscore.report.html import slug as report_slug

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SYSTEMS = ("metal singer", "jazz <trumpeter>", "folk & hero")  # names to escape, one per example answer

TABLES_JS = """JSON.stringify(Array.from(document.querySelectorAll('table')).map(t => ({
  id: t.id,
  head: Array.from(t.tHead.rows[0].cells).map(c => c.textContent.trim()),
  rows: Array.from(t.tBodies[0].rows).map(r => Array.from(r.cells).map(c => ({
    text: c.textContent.trim(), value: c.getAttribute('data-value')})))})))"""


def _command(argv: list[str]) -> str:
    """stdout of ``rapidscore ARGV`` (exit status 0 asserted)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    assert status == 0, err.getvalue()
    return out.getvalue()


@pytest.fixture(scope="module")
def example_run(tmp_path_factory, minilm_path):
    """The commands of docs/report.md on examples/: BERTScore of three systems (one answer each),
    NRR of the three answers, NER of three models, and the report of those plus the abstention
    example's results folder."""
    work = tmp_path_factory.mktemp("report")
    answers = (EXAMPLES / "bertscore" / "candidates.txt").read_text(encoding="utf-8").splitlines()
    references = str(EXAMPLES / "bertscore" / "references.txt")
    expected = work / "expected.txt"  # the one expected answer (references.txt repeats it per answer)
    expected.write_text(Path(references).read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    outputs: dict[str, Path] = {}
    names = []
    for k, (name, answer) in enumerate(zip(SYSTEMS, answers), start=1):
        candidates = work / f"answer{k}.txt"
        candidates.write_text(answer + "\n", encoding="utf-8")
        outputs[name] = work / f"bertscore{k}.json"
        outputs[name].write_text(_command(["bertscore", "-c", str(candidates), "-r", str(expected), "--json", "-q"]))
        names += ["--name", f"{outputs[name]}={name}", "--candidates", f"{name}={candidates}"]
    outputs["nrr"] = work / "nrr.json"
    outputs["nrr"].write_text(_command(["nrr", "--generated", str(EXAMPLES / "bertscore" / "candidates.txt"),
                                        "--references", references, "--json", "-q"]))
    outputs["ner"] = work / "ner.json"
    ner = EXAMPLES / "ner"
    outputs["ner"].write_text(_command(["ner", "--gold", str(ner / "gold.jsonl"),
                                        *(f for m in ("gliner", "deberta", "spacy")
                                          for f in ("--pred", f"{m}={ner / (m + '.jsonl')}")), "--json", "-q"]))
    select = EXAMPLES / "abstention" / "results"
    markdown = _command(["abstention", str(select), "--format", "markdown", "-q"])
    report = work / "report.html"
    summary = json.loads(_command([
        "report", *(str(outputs[name]) for name in SYSTEMS), str(outputs["nrr"]), str(outputs["ner"]), str(select),
        *names, "--candidates", f"nrr={EXAMPLES / 'bertscore' / 'candidates.txt'}", "--references", references,
        "--gold", str(ner / "gold.jsonl"), "--model", str(minilm_path), "--out", str(report), "--json", "-q"]))
    documents = {key: json.loads(path.read_text()) for key, path in outputs.items()}
    return {"report": report, "documents": documents, "markdown": markdown, "summary": summary, "work": work}


def _by_id(tables: list[dict]) -> dict[str, dict]:
    return {table["id"]: table for table in tables}


def _row(table: dict, first_cell: str) -> dict[str, dict]:
    """The row whose first cell reads ``first_cell``, as {column header: cell}."""
    for row in table["rows"]:
        if row[0]["text"] == first_cell:
            return dict(zip(table["head"], row))
    raise AssertionError(f"no row {first_cell!r} in {table['id']}: {[r[0]['text'] for r in table['rows']]}")


def _same_number(cell: dict, value: float) -> None:
    """The cell shows ``value`` with 4 decimals and holds it in full."""
    assert cell["text"] == f"{value:.4f}", (cell, value)
    assert float(cell["value"]) == value, (cell, value)


def _markdown_tables(text: str) -> dict[str, dict[str, list[str]]]:
    """``rapidscore abstention --format markdown``: {metric: {model: [cells in technique order]}} and
    the header under the key ``"header"``."""
    tables: dict[str, dict[str, list[str]]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("**") and "(%)" in line:
            current = tables.setdefault(line.strip("*").split(" (%)")[0], {})
        elif current is not None and line.startswith("| ") and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            current["header" if cells[0] == "Model" else cells[0]] = cells[1:]
    return tables


def test_report_of_the_examples_opens_offline_and_shows_the_outputs_numbers(example_run, open_in_chromium):
    page = open_in_chromium(example_run["report"])

    # nothing fetched but the file itself (the figures are inline SVG), nothing went wrong
    assert page.requests == [page.url]
    assert page.errors == []
    assert page.evaluate("document.title") == "rapidscore report"

    # it renders: a PNG of the viewport's size that is not one colour
    from PIL import Image

    shot = page.screenshot()
    assert shot[:8] == b"\x89PNG\r\n\x1a\n"
    image = Image.open(io.BytesIO(shot)).convert("L")
    assert image.size == (1280, 900)
    pixels = image.tobytes()
    assert statistics.pstdev(pixels) > 10 and len(set(pixels)) > 20
    full = Image.open(io.BytesIO(page.screenshot(full_page=True)))  # the page's width: less a scroll bar
    assert 1200 <= full.width <= 1280 and 3000 < full.height < 60000, full.size
    figures = page.evaluate("document.querySelectorAll('figure svg').length")
    assert figures == 7  # BERTScore, NRR, NER, SELECT, the intervals of BERTScore's, NER's and SELECT's systems

    tables = _by_id(json.loads(page.evaluate(TABLES_JS)))
    docs = example_run["documents"]

    # the signature of every file, as written
    inputs = tables["inputs"]
    for name in SYSTEMS:
        assert _row(inputs, name)["Signature"]["text"] == docs[name]["signature"]
    assert _row(inputs, "nrr")["Signature"]["text"] == docs["nrr"]["signature"]
    for model in ("gliner", "deberta", "spacy"):
        assert _row(inputs, model)["Signature"]["text"] == docs["ner"][model]["signature"]
    assert example_run["summary"]["notes"] == []  # the alignment's model is the scores' model
    select_signature = example_run["summary"]["results"][-1]["signature"]
    assert _row(inputs, "results")["Signature"]["text"] == select_signature and select_signature.startswith(
        "abstention|")

    # BERTScore: each system's means, its item with its text, and the token alignment's means
    answers = (EXAMPLES / "bertscore" / "candidates.txt").read_text(encoding="utf-8").splitlines()
    for k, name in enumerate(SYSTEMS):
        doc = docs[name]
        row = _row(tables["bertscore-summary"], name)
        for column, key in (("P", "P"), ("R", "R"), ("F1", "F1")):
            _same_number(row[column], doc["mean"][key])
        assert row["Items"]["text"] == "1" and row["Signature"]["text"] == doc["signature"]
        slug = report_slug(name)
        item = tables[f"bertscore-items-{slug}-all"]
        cells = dict(zip(item["head"], item["rows"][0]))
        _same_number(cells["F1"], doc["f1"][0])
        assert cells["Candidate"]["text"] == answers[k]
        for side, key in (("precision", "precision"), ("recall", "recall")):
            similarities = [float(r[3]["value"]) for r in tables[f"alignment-{slug}-{side}"]["rows"]]
            assert math.isclose(statistics.fmean(similarities), doc[key][0], abs_tol=2e-6), (name, side)

    # NRR: the totals and the lowest similarity first
    nrr, row = docs["nrr"], _row(tables["nrr-summary"], "nrr")
    _same_number(row["NRR"], nrr["negative_rejection_rate"])
    _same_number(row["Capture rate"], nrr["capture_rate"])
    assert (row["Evaluated"]["text"], row["Rejected"]["text"]) == (str(nrr["n_evaluated"]), str(nrr["n_rejected"]))
    items = tables["nrr-items-nrr-all"]
    _same_number(items["rows"][0][1], min(nrr["similarities"]))

    # NER: DMBertA and SemEval per model
    for model, result in docs["ner"].items():
        row = _row(tables["ner-summary"], model)
        for column, value in (("DMBertA mean", result["dmberta"]["mean"]),
                              ("DMBertA P", result["dmberta"]["precision"]),
                              ("Strict F1", result["semeval"]["strict"]["f1"]),
                              ("Partial F1", result["semeval"]["partial"]["f1"])):
            _same_number(row[column], value)

    # SELECT: every cell as the abstention command prints it
    markdown = _markdown_tables(example_run["markdown"])
    assert set(markdown) == {"abstention", "generalization", "specificity", "performance"}
    for metric, expected in markdown.items():
        table = tables[f"select-results-{metric}"]
        assert table["head"][1:] == expected["header"]
        shown = {row[0]["text"]: [cell["text"] for cell in row[1:]] for row in table["rows"]}
        assert shown == {model: cells for model, cells in expected.items() if model != "header"}

    # a click on a header sorts by the numbers, again reverses
    order = ("Array.from(document.getElementById('bertscore-summary').tBodies[0].rows)"
             ".map(r => Number(r.cells[4].getAttribute('data-value')))")
    page.evaluate("document.querySelectorAll('#bertscore-summary th')[4].click()")
    ascending = page.evaluate(order)
    assert ascending == sorted(ascending) and len(ascending) == 3
    page.evaluate("document.querySelectorAll('#bertscore-summary th')[4].click()")
    assert page.evaluate(order) == sorted(ascending, reverse=True)
    page.collect()
    assert page.errors == []
