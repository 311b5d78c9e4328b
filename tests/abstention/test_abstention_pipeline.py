"""SELECT's pipeline on release-shaped fixtures whose stored flags disagree with the current
detector: the default reproduces the stored-flag pipeline, --recompute the detector's (both
against rapidscore.abstention.reference.reference_evaluate, a plain gzip + json + scipy oracle);
a results root with atomic and composition experiments gives one report; output formats."""

import gzip
import json
import math
import os
import threading

import numpy as np
import pytest

from rapidscore.abstention import rates, reference
from rapidscore.abstention.detectors import SelectDetector
from rapidscore.abstention.pipeline import evaluate, find_experiments
from rapidscore.abstention.names import Names, display_model, display_technique, load_names
from rapidscore.abstention.results import ResultsError
from rapidscore.abstention.taxonomy import Taxonomy
from rapidscore.cli import main
from rapidscore.testing.select_release import make_release

MODELS = ("google--gemma-2-2b-it", "Qwen--Qwen2.5-7B-Instruct")
TECHNIQUES = ("prompt-simple", "prompt-cot")


def reference_decide(texts, method):
    return [reference.REFERENCE_METHODS[method](t) for t in texts]


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    root = tmp_path_factory.mktemp("release")
    # flags stored by "an earlier detector": 15% flipped, 8% of records without flags
    stats = make_release(root, models=MODELS, techniques=TECHNIQUES, seeds=("0", "1"), n_concepts=14,
                         per_concept=4, n_compositions=5, flip_rate=0.15, missing_rate=0.08,
                         decide=reference_decide, seed=3)
    assert stats["flipped"] > 20 and stats["missing"] > 20
    return root


def reference_table(experiment, method, recompute):
    taxonomy = Taxonomy.load(experiment.taxonomy) if "select" in experiment.name else None
    leaves = frozenset(c for c in taxonomy if taxonomy.is_leaf(c)) if taxonomy else frozenset()
    files = [(f.path, f.model, f.eval_type, f.technique) for f in experiment.files]
    return reference.reference_evaluate(files, method, recompute=recompute, skip_generalization=leaves)


def cli_rows(args, capsys):
    assert main(["abstention", *args, "--format", "json", "--no-progress"]) == 0
    captured = capsys.readouterr()
    return json.loads(captured.out), captured.err


def assert_rows_equal_reference(doc, experiments, method, recompute):
    rows = {(r["experiment"], r["model"], r["technique"], r["metric"]): r for r in doc["rows"]}
    checked = 0
    for experiment in experiments:
        for (model, technique, eval_type), (mean, half_width, n) in reference_table(experiment, method,
                                                                                   recompute).items():
            row = rows[(experiment.name, model, technique, eval_type)]
            assert row["n_concepts"] == n
            assert row["mean"] == pytest.approx(mean, abs=1e-12)
            if math.isnan(half_width):
                assert row["half_width"] is None
            else:
                assert row["half_width"] == pytest.approx(half_width, abs=1e-12)
            checked += 1
    assert checked == len([r for r in doc["rows"] if r["metric"] != "performance"])


@pytest.mark.parametrize("method", ["heuristic", "keyword"])
def test_default_reproduces_stored_flag_pipeline_and_recompute_the_detector(release, capsys, method):
    results = str(release / "results")
    experiments = find_experiments(results)
    stored_doc, stored_err = cli_rows([results, "--method", method], capsys)
    assert_rows_equal_reference(stored_doc, experiments, method, recompute=False)
    recomputed_doc, recompute_err = cli_rows([results, "--method", method, "--recompute"], capsys)
    assert_rows_equal_reference(recomputed_doc, experiments, method, recompute=True)
    # the flags disagree with the detector, so the two pipelines give different tables
    assert [r["mean"] for r in stored_doc["rows"]] != [r["mean"] for r in recomputed_doc["rows"]]
    assert "stored flag(s) used" in stored_err and "--recompute: these numbers differ" in recompute_err


def brute_force_counts(experiment, method):
    """stored / computed / disagreements by reading every record by hand."""
    stored = computed = disagree = 0
    for f in experiment.files:
        with gzip.open(f.path, "rt", encoding="utf-8") as handle:
            data = json.load(handle)
        stack = [data]
        while stack:
            node = stack.pop()
            if "response" in node:
                text = node["response"]["answer"] if isinstance(node["response"], dict) else node["response"]
                flag = node.get("refusal", {}).get(method)
                if flag is None:
                    computed += 1
                else:
                    stored += 1
                    disagree += flag != reference.REFERENCE_METHODS[method](text)
            else:
                stack.extend(node.values())
    return stored, computed, disagree


def test_decision_counts_and_check_stored(release, capsys):
    results = str(release / "results")
    experiments = find_experiments(results)
    doc, err = cli_rows([results, "--check-stored"], capsys)
    for experiment, listed in zip(experiments, doc["experiments"]):
        stored, computed, disagree = brute_force_counts(experiment, "heuristic")
        assert listed["decisions"] == {"stored": stored, "computed": computed, "compared": stored,
                                       "disagree": disagree}
        assert disagree > 0
        assert f"disagree on {disagree:,} of {stored:,}" in err
    # --check-stored only counts: the table is the stored-flag pipeline's
    assert_rows_equal_reference(doc, experiments, "heuristic", recompute=False)
    plain, _ = cli_rows([results], capsys)
    assert plain["rows"] == doc["rows"]
    assert plain["experiments"][0]["decisions"]["compared"] == 0


def test_results_root_pairs_experiments_with_taxonomies(release, capsys):
    experiments = find_experiments(release)  # the release root: results/ is found below it
    assert [e.name for e in experiments] == ["results/expr.abstain.compositions", "results/expr.abstain.select"]
    composition, atomic = experiments
    assert atomic.taxonomy == str(release / "data" / "taxonomy.json")
    assert composition.taxonomy == str(release / "results" / "expr.abstain.compositions" / "taxonomy.json")
    assert len(atomic.files) == len(composition.files) == len(MODELS) * len(TECHNIQUES) * 3
    doc, err = cli_rows([str(release)], capsys)
    assert {r["experiment"] for r in doc["rows"]} == {e.name for e in experiments}
    assert [e["taxonomy"] for e in doc["experiments"]] == [composition.taxonomy, atomic.taxonomy]
    assert "taxonomy" in err
    # an explicit mapping wins; an unknown experiment name is an error
    other = str(release / "data" / "taxonomy.json")
    paired = find_experiments(release, taxonomies={"results/expr.abstain.compositions": None, "*": other})
    assert [e.taxonomy for e in paired] == [None, other]
    with pytest.raises(ValueError, match="unknown experiment"):
        find_experiments(release, taxonomies={"nope": other})
    assert main(["abstention", str(release), "--taxonomy", "nope=x.json", "--no-progress"]) == 2


def test_text_report_has_every_experiment(release, capsys):
    assert main(["abstention", str(release / "results"), "--no-progress", "--levels"]) == 0
    out = capsys.readouterr().out
    assert "abstention (%), expr.abstain.select" in out and "abstention (%), expr.abstain.compositions" in out
    assert "Gemma-2-2B-IT" in out and "Prompt CoT" in out and "by relation" in out and "by depth" in out


def test_parallel_workers_and_threads_give_identical_counts(release):
    (atomic,) = [e for e in find_experiments(release) if e.name.endswith("select")]
    detector = SelectDetector("heuristic")
    serial = evaluate(atomic.files, detector, workers=1)
    parallel = evaluate(atomic.files, detector, workers=2)
    assert parallel.counts == serial.counts and parallel.stats == serial.stats
    recomputed = evaluate(atomic.files, detector, recompute=True, workers=2)
    assert recomputed.stats.computed == serial.stats.stored + serial.stats.computed

    results, errors = [], []

    def worker():
        try:
            results.append(evaluate(atomic.files, detector, recompute=True, workers=1).counts)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and all(r == recomputed.counts for r in results)


def test_typed_and_generic_decoding_agree(release, monkeypatch):
    """msgspec's schema decoding (the fast path) and orjson/json + full checks give the same counts."""
    from rapidscore.abstention import pipeline

    if not pipeline._TYPED_DECODERS:
        pytest.skip("msgspec (the [fast] extra) is not installed: only the generic path exists")
    detector = SelectDetector("heuristic")
    for experiment in find_experiments(release):
        for recompute in (False, True):
            typed = evaluate(experiment.files, detector, recompute=recompute, workers=1)
            with monkeypatch.context() as patch:
                patch.setattr(pipeline, "_TYPED_DECODERS", ())
                generic = evaluate(experiment.files, detector, recompute=recompute, workers=1)
            assert typed.counts == generic.counts and typed.stats == generic.stats
    # a file the typed path declines (a malformed record) is read by the generic path
    assert pipeline._typed_columns(b'{"1": {"c": {"a": {"response": 3}}}}', "abstention", "heuristic", False) is None
    assert pipeline._typed_columns(b'{"abstention": {"1": {"c": {"a": {"response": "x"}}}}}', "abstention",
                                   "heuristic", False) is None
    assert pipeline._typed_columns(b'{"1": {"c": {"a": {"response": "x", "refusal": {"heuristic": true}}}}}',
                                   "abstention", "heuristic", False) == ([("1", None, "c")], [1], [1], [])


def test_non_select_detector_runs_in_the_calling_process(release):
    (atomic,) = [e for e in find_experiments(release) if e.name.endswith("select")]
    seen = []

    def judge(texts):
        seen.append(len(texts))
        return [t.startswith("Abstained") for t in texts]

    from rapidscore.abstention.detectors import CallableDetector

    result = evaluate(atomic.files, CallableDetector(judge, batched=True), method="judge", workers=2)
    assert result.stats.stored == 0 and result.stats.computed == result.records == sum(seen)
    assert len(seen) == len(atomic.files)  # one batch per file: memory bounded by a file


def test_stored_only_and_malformed_records(tmp_path, capsys):
    folder = tmp_path / "exp" / "m" / "abstention"
    folder.mkdir(parents=True)
    data = {"1": {"c": {"a": {"response": "Abstained", "refusal": {"heuristic": True}},
                        "b": {"response": "Sure, rivers are long.", "refusal": {}},
                        "d": {"oops": 1}}}}
    with gzip.open(folder / "t.json.gz", "wt") as handle:
        json.dump(data, handle)
    assert main(["abstention", str(tmp_path), "--method", "stored:heuristic", "--no-progress"]) == 2
    assert "at key 1/c/d: malformed record" in capsys.readouterr().err
    assert main(["abstention", str(tmp_path), "--method", "stored:heuristic", "--skip-malformed",
                 "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "1 record(s) in" in err and "lack a stored flag for the method" in err
    doc, err = cli_rows([str(tmp_path), "--skip-malformed"], capsys)
    assert "skipped 1 record(s)/group(s): 1 malformed record" in err
    assert doc["experiments"][0]["decisions"] == {"stored": 1, "computed": 1, "compared": 0, "disagree": 0}
    assert doc["rows"][0]["mean"] == 0.5
    # an unreadable file (truncated .gz): an error naming it, or skipped and counted
    other = tmp_path / "other"
    good = other / "m" / "abstention"
    good.mkdir(parents=True)
    with gzip.open(good / "t.json.gz", "wt") as handle:
        json.dump({"1": {"c": {"a": {"response": "Abstained", "refusal": {"heuristic": True}}}}}, handle)
    (good / "u.json.gz").write_bytes(gzip.compress(json.dumps(data).encode() * 50)[:60])
    assert main(["abstention", str(other), "--no-progress"]) == 2
    assert "u.json.gz" in capsys.readouterr().err
    doc, err = cli_rows([str(other), "--skip-malformed"], capsys)
    assert "1 unreadable file" in err and doc["experiments"][0]["decisions"]["stored"] == 1
    empty = tmp_path / "nothing"
    empty.mkdir()
    with pytest.raises(ResultsError, match="no results files found"):
        find_experiments(empty)


def test_constant_column_half_width_is_nan_as_scipy():
    stats = pytest.importorskip("scipy.stats", reason="scipy is the reference for the interval")
    for values in ([1.0, 1.0, 1.0], [0.0] * 5, [0.25, 0.25], [0.1, 0.1, 0.1], [0.2, 0.5, 0.9, 0.4]):
        a = np.asarray(values)
        with np.errstate(invalid="ignore"):
            low, high = stats.t.interval(0.95, len(a) - 1, loc=a.mean(), scale=stats.sem(a))
        agg = rates.aggregate(values)
        expected = (high - low) / 2
        if math.isnan(expected):
            assert math.isnan(agg.half_width)
        else:
            assert agg.half_width == pytest.approx(expected, rel=1e-10, abs=1e-15)


def test_names_and_formats(release, tmp_path, capsys):
    assert display_model("google--gemma-2-2b-it") == "Gemma-2-2B-IT"
    assert display_model("meta-llama--Llama-3.1-8B-Instruct") == "Llama-3.1-8B-Instruct"
    assert display_model("mistralai--Mistral-7B-Instruct-v0.3") == "Mistral-7B-Instruct-v0.3"
    assert display_model("Qwen--Qwen2.5-0.5b-instruct") == "Qwen2.5-0.5B-Instruct"
    assert display_technique("prompt-simple") == "Prompt (ZS)"  # SELECT's short name (issue 40)
    assert display_technique("icl_few-shot") == "ICL few shot"
    mapping = tmp_path / "names.json"
    mapping.write_text(json.dumps({"models": {"google--gemma-2-2b-it": "Gemma 2 (2B)"},
                                   "techniques": {"prompt-cot": "Chain of thought"}}))
    assert load_names(mapping)["prompt-cot"] == "Chain of thought"
    csv_names = tmp_path / "names.csv"
    csv_names.write_text("name,display\nprompt-simple,Simple prompt\n")
    assert Names(load_names(csv_names)).technique("prompt-simple") == "Simple prompt"
    results = str(release / "results" / "expr.abstain.select")
    assert main(["abstention", results, "--format", "markdown", "--names", str(mapping), "--no-progress"]) == 0
    markdown = capsys.readouterr().out
    assert "| Model | Chain of thought | Prompt (ZS) |" in markdown and "Gemma 2 (2B)" in markdown
    assert " ± " in markdown and "**abstention (%)**" in markdown
    assert main(["abstention", results, "--format", "latex", "--no-progress"]) == 0
    latex = capsys.readouterr().out
    assert r"\pm" in latex and r"\begin{tabular}{lcc}" in latex and "Gemma-2-2B-IT" in latex
    assert main(["abstention", results, "--format", "csv", "--raw-names", "--no-progress"]) == 0
    csv_text = capsys.readouterr().out
    assert csv_text.splitlines()[0] == ("experiment,model,technique,model_name,technique_name,metric,mean,"
                                        "half_width,n_concepts")
    assert ",google--gemma-2-2b-it,prompt-cot,google--gemma-2-2b-it,prompt-cot," in csv_text
