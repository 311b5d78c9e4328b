"""``rapidscore report`` on small hand-made result files (no model, no browser): every kind told
from its fields, the numbers in the page's cells (4 decimals shown, in full in ``data-value``),
texts escaped, the worst and best items, the output layer (never over an input; a failed run
keeps the old page), and a light ``--help``. The page in a browser: test_report_in_chromium.py.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from rapidscore.cli import main
from rapidscore.report.html import slug

ROOT = Path(__file__).resolve().parents[2]
SIGNATURE = "model:sentence-transformers/all-MiniLM-L6-v2|layer:6|idf:no|rescaled:no|version:0.1.0"


class _Tables(HTMLParser):
    """{table id: {"head": [...], "rows": [[(text, data-value), ...]]}} of an HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, dict] = {}
        self._table: dict | None = None
        self._cell: list[str] | None = None
        self._value: str | None = None
        self._in_head = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        attributes = dict(attrs)
        if tag == "table":
            self._table = self.tables.setdefault(attributes.get("id", ""), {"head": [], "rows": []})
        elif tag == "thead":
            self._in_head = True
        elif tag == "tbody":
            self._in_head = False
        elif tag == "tr" and self._table is not None and not self._in_head:
            self._table["rows"].append([])
        elif tag in ("td", "th") and self._table is not None:
            self._cell, self._value = [], attributes.get("data-value")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._table is not None and self._cell is not None:
            text = "".join(self._cell).strip()
            if tag == "th":
                self._table["head"].append(text)
            else:
                self._table["rows"][-1].append((text, self._value))
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def tables_of(path: Path) -> dict[str, dict]:
    parser = _Tables()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser.tables


def row_of(table: dict, first: str) -> dict[str, tuple]:
    for row in table["rows"]:
        if row[0][0] == first:
            return dict(zip(table["head"], row))
    raise AssertionError(f"no row {first!r}: {[r[0][0] for r in table['rows']]}")


def write_json(path: Path, document) -> Path:
    path.write_text(json.dumps(document, indent=1), encoding="utf-8")
    return path


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def bertscore_document(f1: list[float]) -> dict:
    precision = [f + 0.01 for f in f1]
    recall = [f - 0.01 for f in f1]
    mean = {"P": sum(precision) / len(f1), "R": sum(recall) / len(f1), "F1": sum(f1) / len(f1)}
    return {"hash": "x", "signature": SIGNATURE, "mean": mean, "precision": precision, "recall": recall, "f1": f1}


def report(tmp_path: Path, *argv: str, out: str = "report.html") -> tuple[int, Path]:
    target = tmp_path / out
    return main(["report", *argv, "--out", str(target), "-q"]), target


def test_every_kind_is_told_from_its_fields(tmp_path):
    ner_result = {"n_records": 2, "dmberta": {"mean": 0.76, "accumulate": 1.5, "precision": 0.75, "recall": 0.74,
                                              "f1": 0.745}, "semeval": {s: {"f1": 0.5} for s in
                                                                        ("strict", "exact", "partial", "type")},
                  "signature": "ner|labels:exact|version:0.1.0", "records": []}
    files = [
        write_json(tmp_path / "bertscore_a.json", bertscore_document([0.8, 0.6])),
        write_jsonl(tmp_path / "bertscore_b.jsonl", [{"index": 0, "precision": 0.5, "recall": 0.5, "f1": 0.5}]),
        write_json(tmp_path / "nrr.json", {"negative_rejection_rate": 0.5, "capture_rate": 0.5, "n_evaluated": 2,
                                           "n_rejected": 1, "n_captured": 1, "threshold": 0.8,
                                           "signature": "nrr|method:embedding", "similarities": [0.9, 0.7],
                                           "rejected": [False, True], "best_reference": [0, 0]}),
        tmp_path / "nrr_rows.csv",
        write_json(tmp_path / "models.json", {"m1": ner_result}),
        write_jsonl(tmp_path / "refusal.jsonl", [{"index": 0, "id": "a", "refusal": True},
                                                 {"index": 1, "id": "b", "refusal": False}]),
        write_json(tmp_path / "totals.json", {"metric": "refusal", "signature": "refusal|method:heuristic",
                                              "n_responses": 2, "refusal_rate": 0.5}),
        tmp_path / "indented.txt",  # a command's --json saved under another name
        write_json(tmp_path / "select.json", {"meta": {"signature": "abstention|method:heuristic"}, "experiments": [
            {"name": ".", "signature": "abstention|method:heuristic", "decisions": {}, "decisions_by_cell": {}}],
            "rows": [{"experiment": ".", "model": "m--a-2b", "technique": "sft", "model_name": "A-2B",
                      "technique_name": "SFT", "metric": "abstention", "mean": 0.25, "half_width": None,
                      "n_concepts": 1}]}),
    ]
    files[3].write_text("index,similarity,rejected,best_reference\n0,0.75,True,0\n1,0.95,False,0\n")
    files[7].write_text(json.dumps(bertscore_document([0.4]), indent=2))
    status, page = report(tmp_path, *map(str, files))
    assert status == 0
    inputs = tables_of(page)["inputs"]
    kinds = {row[0][0]: row[1][0] for row in inputs["rows"]}
    assert kinds == {"bertscore_a": "bertscore", "bertscore_b": "bertscore", "nrr": "nrr", "nrr_rows": "nrr",
                     "m1": "ner", "refusal": "metric", "totals": "metric", "indented": "bertscore",
                     "select": "select"}
    assert row_of(inputs, "bertscore_a")["Signature"][0] == SIGNATURE
    assert row_of(inputs, "bertscore_b")["Signature"][0] == "not recorded in the file"

    tables = tables_of(page)
    row = row_of(tables["bertscore-summary"], "bertscore_a")
    mean = bertscore_document([0.8, 0.6])["mean"]
    assert (row["P"][0], row["F1"][0], row["Items"][0]) == (f"{mean['P']:.4f}", f"{mean['F1']:.4f}", "2")
    assert float(row["F1"][1]) == mean["F1"]
    rows = row_of(tables["nrr-summary"], "nrr_rows")  # counted from the CSV rows
    assert (rows["NRR"][0], rows["Rejected"][0], rows["Threshold"][0]) == ("0.5000", "1", "\u2013")
    assert row_of(tables["ner-summary"], "m1")["DMBertA mean"][0] == "0.7600"
    assert tables["select-select-abstention"]["rows"] == [[("A-2B", None), ("25.0 ± nan", "0.25")]]
    refusal = tables["metric-refusal-summary"]
    assert row_of(refusal, "refusal")["refusal"][0] == "0.5000"
    assert row_of(refusal, "totals")["refusal_rate"][0] == "0.5000"


def test_a_file_of_no_known_kind_is_an_error_naming_its_fields(tmp_path, capsys):
    unknown = write_json(tmp_path / "other.json", {"score": 1, "items": [1, 2]})
    status, page = report(tmp_path, str(unknown))
    assert status == 2 and not page.exists()
    err = capsys.readouterr().err
    assert "other.json: not a result file the report knows (fields: items, score)" in err


def test_texts_are_escaped_and_the_worst_and_best_items_listed(tmp_path):
    f1 = [0.9, 0.1, 0.5, 0.7, 0.3, 0.8, 0.2]
    result = write_json(tmp_path / "run.json", {**bertscore_document(f1), "signature": "model:<m>|layer:1"})
    candidates = tmp_path / "candidates.txt"
    candidates.write_text("".join(f"<script>alert({k})</script> & co\n" for k in range(len(f1))))
    references = tmp_path / "references.txt"
    references.write_text("".join(f"reference {k}\n" for k in range(len(f1))))
    status, page = report(tmp_path, str(result), "--name", f"{result}=<b>sys</b>", "--candidates", str(candidates),
                          "--references", str(references), "--items", "2")
    assert status == 0
    text = page.read_text(encoding="utf-8")
    assert text.count("<script>") == 1 and "alert(" not in text.split("<script>")[1]  # only the page's own
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; co" in text and "&lt;b&gt;sys&lt;/b&gt;" in text
    assert "model:&lt;m&gt;|<wbr>layer:1" in text
    tables = tables_of(page)
    key = slug("<b>sys</b>")
    assert key.startswith("b-sys-b-") and slug("b-sys-b") == "b-sys-b" and slug("B sys b") != slug("b sys b")
    worst, best = tables[f"bertscore-items-{key}-worst"], tables[f"bertscore-items-{key}-best"]
    assert [(r[0][0], r[3][0]) for r in worst["rows"]] == [("2", "0.1000"), ("7", "0.2000")]
    assert [(r[0][0], r[3][0]) for r in best["rows"]] == [("1", "0.9000"), ("6", "0.8000")]
    assert worst["rows"][0][4][0] == "<script>alert(1)</script> & co" and worst["rows"][0][5][0] == "reference 1"
    assert "Content-Security-Policy" in text and "default-src 'none'" in text
    assert re.findall(r"https?://[^\"' ]*", text) == re.findall(r"http://www\.w3\.org/[^\"' ]*", text)  # namespaces


def test_the_page_is_never_written_over_an_input_and_a_failed_run_keeps_the_old_one(tmp_path, capsys):
    result = write_json(tmp_path / "run.json", bertscore_document([0.5]))
    before = result.read_text()
    assert main(["report", str(result), "--out", str(result), "-q"]) == 2
    assert "is the input file" in capsys.readouterr().err and result.read_text() == before
    candidates = tmp_path / "c.txt"
    candidates.write_text("a candidate\n")
    assert main(["report", str(result), "--candidates", str(candidates), "--out", str(candidates), "-q"]) == 2
    assert candidates.read_text() == "a candidate\n"

    page = tmp_path / "report.html"
    page.write_text("the old page")
    broken = write_json(tmp_path / "broken.json", {"nothing": "known"})
    assert main(["report", str(result), str(broken), "--out", str(page), "-q"]) == 2
    assert page.read_text() == "the old page"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.json", "c.txt", "report.html", "run.json"]


def test_text_files_must_cover_the_items_and_alignment_options_need_a_model(tmp_path, capsys):
    result = write_json(tmp_path / "run.json", bertscore_document([0.5, 0.6, 0.7]))
    short = tmp_path / "short.txt"
    short.write_text("one line\n")
    assert report(tmp_path, str(result), "--candidates", str(short))[0] == 2
    assert "short.txt has 1 texts; " in capsys.readouterr().err
    assert report(tmp_path, str(result), "--align", "best")[0] == 2
    assert "give --model too" in capsys.readouterr().err
    assert report(tmp_path, str(result), "--candidates", f"nosuch={short}")[0] == 2
    assert "no bertscore or nrr or metric result of that file or system name (systems: run)" in capsys.readouterr().err
    twice = write_json(tmp_path / "sub.json", bertscore_document([0.5]))
    (tmp_path / "other").mkdir()
    again = write_json(tmp_path / "other" / "sub.json", bertscore_document([0.5]))
    assert report(tmp_path, str(twice), str(again))[0] == 2
    assert "are both the bertscore system 'sub': name one with --name FILE=NAME" in capsys.readouterr().err


def test_a_select_results_folder_gives_the_abstention_commands_tables(tmp_path, capsys):
    folder = ROOT / "examples" / "abstention" / "results"
    assert main(["abstention", str(folder), "--json", "-q"]) == 0
    document = json.loads(capsys.readouterr().out)
    status, page = report(tmp_path, str(folder))
    assert status == 0
    table = tables_of(page)["select-results-abstention"]
    rows = {(r["model_name"], r["technique_name"]): r for r in document["rows"] if r["metric"] == "abstention"}
    for row in table["rows"]:
        for technique, (text, value) in zip(table["head"][1:], row[1:]):
            expected = rows[(row[0][0], technique)]
            assert text == f"{100 * expected['mean']:.1f} ± {100 * expected['half_width']:.1f}"
            assert float(value) == expected["mean"]
    inputs = tables_of(page)["inputs"]
    assert row_of(inputs, "results")["Signature"][0] == document["meta"]["signature"]


def test_help_loads_no_metric_code():
    code = ("import json, sys\nfrom rapidscore.cli import main\n"
            "try:\n    main(['report', '--help'])\nexcept SystemExit:\n    pass\n"
            "print(json.dumps([m for m in ('numpy', 'matplotlib', 'rapidscore.report.inputs') if m in sys.modules]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "--candidates" in out and "--out" in out
    assert json.loads(out.strip().splitlines()[-1]) == []


def test_ids_of_inlined_figures_are_scoped():
    from rapidscore.report.figures import scoped_svg

    svg = '<svg><defs><path id="a1"/><clipPath id="p.2"/></defs><use xlink:href="#a1"/><g clip-path="url(#p.2)"/>' \
          '<a href="#elsewhere"/></svg>'
    assert scoped_svg(svg, "fig3") == ('<svg><defs><path id="fig3-a1"/><clipPath id="fig3-p.2"/></defs>'
                                       '<use xlink:href="#fig3-a1"/><g clip-path="url(#fig3-p.2)"/>'
                                       '<a href="#elsewhere"/></svg>')


@pytest.mark.parametrize("bad", ["nothing", "=x"])
def test_name_needs_file_and_name(bad, capsys):
    with pytest.raises(SystemExit):
        main(["report", "a.json", "--out", "x.html", "--name", bad])
    assert "expected FILE=NAME" in capsys.readouterr().err
