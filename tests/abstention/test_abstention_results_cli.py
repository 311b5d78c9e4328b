"""Results loading (SELECT .json.gz, flat tables), bad input, and the CLI."""

import gzip
import json
import os

import pytest

from rapidscore.abstention.results import ResultsError, load_flat_table, load_results_tree, load_select_file
from rapidscore.cli import main

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "abstention")


def write_gz(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as handle:
        json.dump(data, handle)
    return path


def rec(text, **extra):
    return {"id": "i", "response": text, "refusal": {"heuristic": True}, **extra}


def test_load_atomic_composition_and_cot(tmp_path):
    path = write_gz(tmp_path / "m1" / "abstention" / "zs.json.gz",
                    {"1": {"c1": {"a": rec("Abstained"), "b": rec({"complete": "..", "answer": "Sure"})}}})
    report = load_select_file(path)
    assert [(r.model, r.eval_type, r.technique, r.seed, r.concept) for r in report.records] == \
        [("m1", "abstention", "zs", "1", "c1")] * 2
    assert report.records[1].response == {"complete": "..", "answer": "Sure"}
    comp = write_gz(tmp_path / "m1" / "specificity" / "zs.json.gz",
                    {"1": {"about": {"x#y": {"a": rec("ok")}}}})
    (r,) = load_select_file(comp).records
    assert (r.relation, r.concept) == ("about", "x#y")
    tree = load_results_tree(tmp_path)
    assert len(tree.records) == 3 and tree.files == 2


def test_truncated_gz_names_file(tmp_path):
    path = write_gz(tmp_path / "m" / "abstention" / "t.json.gz", {"1": {"c": {"a": rec("x" * 5000)}}})
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ResultsError, match="t.json.gz.*truncated"):
        load_select_file(path)


def test_bad_structure_errors_name_file_and_key(tmp_path):
    bad = write_gz(tmp_path / "m" / "abstention" / "t.json.gz",
                   {"1": {"c": {"a": rec("x")}}, "2": {}})
    with pytest.raises(ResultsError, match=r"t.json.gz: at key 2: seed has no concepts"):
        load_select_file(bad)
    report = load_select_file(bad, on_error="skip")
    assert report.skipped == {"empty seed": 1} and len(report.records) == 1
    bad2 = write_gz(tmp_path / "m" / "abstention" / "u.json.gz",
                    {"1": {"c": {"a": rec("x"), "b": {"id": "b", "refusal": {}}, "d": rec(3)}}})
    with pytest.raises(ResultsError, match=r"u.json.gz: at key 1/c/b: malformed record"):
        load_select_file(bad2)
    assert load_select_file(bad2, on_error="skip").skipped == {"malformed record": 2}
    bad3 = write_gz(tmp_path / "m" / "abstention" / "v.json.gz", {"1": {"": {"a": rec("x")}}})
    with pytest.raises(ResultsError, match="missing concept id"):
        load_select_file(bad3)


def test_flat_tables(tmp_path):
    import pandas as pd

    rows = [dict(model="m", technique="t", eval_type="abstention", seed=1, concept="c", question="q",
                 response="I cannot answer that.")]
    df_report = load_flat_table(pd.DataFrame(rows))
    jsonl = tmp_path / "r.jsonl"
    jsonl.write_text(json.dumps(rows[0]) + "\n" + json.dumps({**rows[0], "concept": ""}) + "\n")
    with pytest.raises(ResultsError, match=r"r.jsonl: row 2: missing key\(s\) \['concept'\]"):
        load_flat_table(jsonl)
    skipped = load_flat_table(jsonl, on_error="skip")
    assert skipped.skipped == {"missing concept": 1} and len(skipped.records) == 1
    csv_path = tmp_path / "r.csv"
    pd.DataFrame(rows).to_csv(csv_path, index=False)
    assert load_flat_table(csv_path).records == df_report.records


def test_cli_text_json_csv(tmp_path, capsys):
    results, taxonomy = os.path.join(EXAMPLE, "results"), os.path.join(EXAMPLE, "taxonomy.json")
    assert main(["abstention", results, "--taxonomy", taxonomy, "--levels", "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "abstention (%)" in text and "Model-a" in text and "depth 1" in text
    out = tmp_path / "table.json"
    assert main(["abstention", results, "--format", "json", "-o", str(out), "--no-progress"]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert {r["metric"] for r in rows} == {"abstention", "generalization", "specificity", "performance"}
    assert all(0 <= r["mean"] <= 1 for r in rows)
    assert main(["abstention", results, "--format", "csv", "--method", "keyword", "--no-progress"]) == 0
    assert capsys.readouterr().out.startswith(
        "experiment,model,technique,model_name,technique_name,metric,mean,half_width,n_concepts")
    # stored flags are required when asked for
    assert main(["abstention", results, "--method", "stored:heuristic", "--no-progress"]) == 2
    assert "lack a stored flag for the method" in capsys.readouterr().err


def test_cli_reports_skips_and_plots(tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="plotting needs the [plot] extra")
    write_gz(tmp_path / "res" / "m" / "abstention" / "t.json.gz",
             {"1": {"c": {"a": rec("Abstained"), "b": {"oops": 1}}}})
    assert main(["abstention", str(tmp_path / "res"), "--no-progress"]) == 2
    assert "at key 1/c/b" in capsys.readouterr().err
    plot_dir = tmp_path / "plots"
    assert main(["abstention", str(tmp_path / "res"), "--skip-malformed", "--no-progress",
                 "--method", "stored:heuristic", "--plot-dir", str(plot_dir)]) == 0
    assert "skipped 1 record(s)/group(s): 1 malformed record" in capsys.readouterr().err
    assert (plot_dir / "m_abstention_correlation.png").exists()
