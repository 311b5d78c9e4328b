"""SELECT techniques compared on the same concepts (rapidscore.compare.select_systems and
``rapidscore compare FOLDER``): paired by concept, SELECT's own means, and concepts one cell
lacks named."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rapidscore.compare import PairingError, compare
from rapidscore.compare.inputs import select_systems

RESULTS = Path(__file__).resolve().parents[2] / "examples" / "abstention" / "results"


def test_the_examples_techniques_paired_by_concept() -> None:
    from rapidscore.abstention import rates
    from rapidscore.abstention.detectors import get_detector
    from rapidscore.abstention.pipeline import evaluate, find_experiments

    files = [f for experiment in find_experiments(str(RESULTS)) for f in experiment.files]
    counts = evaluate(files, get_detector("heuristic"), method="heuristic", workers=1).counts
    scores = rates.concept_scores_from_counts(counts)
    summary = rates.summarize_scores(scores)
    cells = [("model-a", "prompt"), ("model-a", "sft"), ("model-b", "prompt")]
    systems = select_systems(scores, "abstention", cells)
    result = compare(systems, "model-a/prompt", metric="abstention", resamples=2000, trials=2000)
    for model, technique in cells:
        # each system's value is SELECT's mean over concepts
        expected = summary[(model, technique)]["abstention"].mean
        assert result.system(f"{model}/{technique}").mean == pytest.approx(expected)
    concepts = scores[("model-a", "prompt", "abstention")]
    assert result.systems[0].n_items == len(concepts)
    # paired: the difference is the mean of per-concept differences
    per_concept = [scores[("model-a", "sft", "abstention")][c] - concepts[c] for c in concepts]
    assert result.pair("model-a/sft").difference == pytest.approx(np.mean(per_concept))


def test_concepts_unmatched_between_cells_are_named() -> None:
    scores = {("m", "a", "abstention"): {(None, "ex:River"): 1.0, (None, "ex:Lake"): 0.5},
              ("m", "b", "abstention"): {(None, "ex:River"): 0.5, (None, "ex:Sea"): 0.0}}
    with pytest.raises(PairingError, match=r"m/b lacks 1 of m/a's concepts \(ex:Lake\) and has 1 concepts m/a "
                                           r"lacks \(ex:Sea\)"):
        select_systems(scores, "abstention", [("m", "a"), ("m", "b")])
    with pytest.raises(PairingError, match="no specificity scores for m/a"):
        select_systems(scores, "specificity", [("m", "a"), ("m", "b")])


def _cli(capsys, *argv):
    from rapidscore.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_command_compares_a_select_folder_by_concept(capsys) -> None:
    """``rapidscore compare FOLDER``: each model/technique a system, its concepts the items; each
    system's mean is the abstention command's, the numbers the API's on the same concepts."""
    from rapidscore.abstention import rates
    from rapidscore.abstention.detectors import get_detector
    from rapidscore.abstention.pipeline import evaluate, find_experiments
    from rapidscore.abstention.taxonomy import Taxonomy

    code, out, _ = _cli(capsys, "compare", str(RESULTS), "--baseline", "model-a/prompt", "--metric", "specificity",
                                "--json", "--paired-bs-n", "1500", "--paired-ar-n", "1500")
    assert code == 0
    doc = json.loads(out)
    assert doc["metric"] == "specificity" and "resampler:splitmix64" in doc["signature"]
    names = [s["name"] for s in doc["systems"]]
    assert names == ["model-a/prompt", "model-a/sft", "model-b/prompt", "model-b/sft"]
    assert {i["paired_by"] for i in doc["inputs"]} == {"concept"}
    assert all(i["signature"].startswith("abstention|method:heuristic") for i in doc["inputs"])

    code, out, err = _cli(capsys, "abstention", str(RESULTS), "--json")
    assert code == 0, err
    table = {(row["model"], row["technique"]): row for row in json.loads(out)["rows"]
             if row["metric"] == "specificity"}
    for system in doc["systems"]:
        row = table[tuple(system["name"].split("/"))]
        assert system["mean"] == pytest.approx(row["mean"], abs=1e-12) and system["n_items"] == row["n_concepts"]

    experiment = find_experiments(str(RESULTS))[0]
    counts = evaluate(experiment.files, get_detector("heuristic"), method="heuristic", workers=1).counts
    scores = rates.concept_scores_from_counts(counts, taxonomy=Taxonomy.load(experiment.taxonomy))
    cells = [tuple(name.split("/")) for name in names]
    expected = compare(select_systems(scores, "specificity", cells), "model-a/prompt", metric="specificity",
                       resamples=1500, trials=1500).to_dict()
    assert doc["systems"] == expected["systems"]


def test_select_refusals_are_one_line(tmp_path, capsys) -> None:
    code, out, _ = _cli(capsys, "abstention", str(RESULTS), "--json")
    summary = tmp_path / "select.json"
    summary.write_text(out)
    code, _, err = _cli(capsys, "compare", str(summary), str(summary))
    assert code == 2 and err.count("\n") == 1
    assert "holds each cell's mean over concepts, not each concept's rate; give the SELECT results folder" in err
    code, _, err = _cli(capsys, "compare", str(RESULTS), "--metric", "f1")
    assert code == 2 and "--metric f1: not a metric of SELECT results (metrics: abstention, specificity, " \
                          "generalization)" in err
    code, _, err = _cli(capsys, "compare", str(RESULTS), "--baseline", "model-c/prompt")
    assert code == 2 and "--baseline model-c/prompt: no such system" in err


def test_the_report_pairs_a_select_folders_cells_as_the_command_does(tmp_path, capsys) -> None:
    page = tmp_path / "report.html"
    code, out, _ = _cli(capsys, "report", str(RESULTS), "--out", str(page), "--json", "--resamples", "1000")
    assert code == 0
    shown = json.loads(out)["comparisons"]["select"]
    code, out, _ = _cli(capsys, "compare", str(RESULTS), "--json", "--paired-bs-n", "1000", "--paired-ar-n", "1000")
    assert code == 0
    assert shown["systems"] == json.loads(out)["systems"] and shown["metric"] == "abstention"
    html = page.read_text()
    assert 'id="select-pairwise"' in html and "paired by concept" in html
    for system in shown["systems"][1:]:
        assert f"{system['p_randomization_adjusted']:.4f}" in html.split('id="select-pairwise"')[1]
