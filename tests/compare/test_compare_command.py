"""``rapidscore compare`` over result files: the --json fields and their numbers (the API's),
the markdown and LaTeX tables, NAME=FILE, pairing by id, and each refusal as one line, exit 2."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rapidscore.cli import main
from rapidscore.compare import compare

SIGNATURE = "bertscore|model:tiny|layer:2|idf:no|rescale:no|version:0.1.0"


def _bertscore_json(path, f1, signature=SIGNATURE):
    f1 = [float(v) for v in f1]
    path.write_text(json.dumps({"hash": "x", "signature": signature, "mean": {"F1": float(np.mean(f1))},
                                "precision": f1, "recall": f1, "f1": f1}))
    return str(path)


@pytest.fixture
def three_systems(tmp_path) -> tuple[dict, list[str]]:
    rng = np.random.default_rng(0)
    base = rng.uniform(0.6, 0.9, 60)
    scores = {"base": base, "better": base + rng.normal(0.05, 0.02, 60), "same": base + rng.normal(0, 0.02, 60)}
    return scores, [_bertscore_json(tmp_path / f"{name}.json", values) for name, values in scores.items()]


def _run(capsys, *argv):
    code = main(["compare", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_gives_each_system_and_the_api_numbers(three_systems, capsys) -> None:
    scores, files = three_systems
    code, out, _ = _run(capsys, *files, "--baseline", "base", "--json", "--paired-bs-n", "800", "--paired-ar-n", "900")
    assert code == 0
    doc = json.loads(out)
    expected = compare(scores, "base", metric="f1", resamples=800, trials=900).to_dict()
    assert [s["name"] for s in doc["systems"]] == ["base", "better", "same"]
    assert doc["systems"] == expected["systems"] and doc["signature"] == expected["signature"]
    better = doc["systems"][1]
    for field in ("name", "mean", "low", "high", "difference", "difference_low", "difference_high", "p_bootstrap",
                  "p_randomization", "p_bootstrap_adjusted", "p_randomization_adjusted"):
        assert field in better
    assert better["p_bootstrap"] < 0.01 and better["significant"] == {"bootstrap": True, "randomization": True}
    assert [i["file"] for i in doc["inputs"]] == files and doc["inputs"][0]["signature"] == SIGNATURE


def test_markdown_and_latex_tables(three_systems, capsys) -> None:
    _, files = three_systems
    code, out, _ = _run(capsys, *files, "--format", "markdown", "--paired-bs-n", "500", "--paired-ar-n", "500")
    assert code == 0
    assert "| base (baseline) |" in out and "| better |" in out and "Holm-adjusted" in out
    assert "note:" not in out  # 60 items
    assert "*" in out.split("| better |")[1].splitlines()[0]  # marked significant
    code, out, _ = _run(capsys, *files, "--format", "latex", "--paired-bs", "--paired-bs-n", "500")
    assert code == 0
    assert r"\begin{tabular}" in out and r"\toprule" in out and "p (randomization)" not in out
    assert "$^{*}$" in out and "% compare|metric:f1" in out


def test_name_equals_file_and_pairing_by_id(tmp_path, capsys) -> None:
    rows_a = [{"index": k, "id": f"q{k}", "precision": v, "recall": v, "f1": v} for k, v in enumerate([.5, .6, .7, .8])]
    rows_b = [dict(row, f1=row["f1"] + 0.1) for row in reversed(rows_a)]  # another order: matched by id
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(json.dumps(r) + "\n" for r in rows_a))
    b.write_text("".join(json.dumps(r) + "\n" for r in rows_b))
    code, out, _ = _run(capsys, f"old={a}", f"new={b}", "--baseline", "old", "--json", "--paired-ar")
    assert code == 0
    doc = json.loads(out)
    assert [s["name"] for s in doc["systems"]] == ["old", "new"]
    assert doc["systems"][1]["difference"] == pytest.approx(0.1)  # every item +0.1 once paired by id
    assert doc["systems"][1]["p_bootstrap"] is None and doc["inputs"][0]["paired_by"] == "id"


@pytest.mark.parametrize("case, message", [
    ("counts", "items unmatched between systems: b .* lacks 1 of a's lines \\(4\\)"),
    ("ids", "items unmatched between systems: b .*lacks 1 of a's ids \\(q3\\) and has 1 ids a lacks \\(zz\\)"),
    ("signature", "b .* was scored with other settings than a .*: model other vs tiny"),
    ("digest", "scored against different inputs \\(references_sha256"),
    ("totals", "refusal totals without per-item scores"),
    ("kinds", "different metrics \\(a: bertscore, b: nrr\\)"),
    ("baseline", "--baseline nope: no such system \\(systems: a, b\\)"),
    ("metric", "--metric bleu: not a metric of these bertscore results"),
])
def test_refusals_are_one_line_and_exit_2(tmp_path, capsys, case, message) -> None:
    a = tmp_path / "a.json"
    values = [0.5, 0.6, 0.7, 0.8]
    _bertscore_json(a, values)
    b = tmp_path / "b.json"
    extra: list[str] = []
    if case == "counts":
        _bertscore_json(b, values[:3])
    elif case == "ids":
        for path, ids in ((a, ["q0", "q1", "q2", "q3"]), (b, ["q0", "q1", "q2", "zz"])):
            path = path.with_suffix(".jsonl")
            path.write_text("".join(json.dumps({"index": k, "id": i, "precision": v, "recall": v, "f1": v}) + "\n"
                                    for k, (i, v) in enumerate(zip(ids, values))))
        a, b = a.with_suffix(".jsonl"), b.with_suffix(".jsonl")
    elif case == "signature":
        _bertscore_json(b, values, SIGNATURE.replace("model:tiny", "model:other"))
    elif case == "digest":
        for path, digest in ((a, "1" * 64), (b, "2" * 64)):
            doc = {"signature": SIGNATURE, "precision": values, "recall": values, "f1": values,
                   "references_sha256": digest}
            path.write_text(json.dumps(doc))
    elif case == "totals":
        a.write_text(json.dumps({"metric": "refusal", "signature": "refusal|version:0.1.0", "refusal_rate": 0.5}))
        b.write_text(json.dumps({"metric": "refusal", "signature": "refusal|version:0.1.0", "refusal_rate": 0.4}))
    elif case == "kinds":
        b.write_text(json.dumps({"similarities": values, "rejected": [True, False, True, True]}))
    elif case == "baseline":
        _bertscore_json(b, values)
        extra = ["--baseline", "nope"]
    elif case == "metric":
        _bertscore_json(b, values)
        extra = ["--metric", "bleu"]
    code, out, err = _run(capsys, str(a), str(b), *extra)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("rapidscore compare: error: ")
    assert __import__("re").search(message, err), err


def test_ner_corpus_scores_from_summed_record_counts(tmp_path, capsys) -> None:
    from pathlib import Path

    ner = Path(__file__).resolve().parents[2] / "examples" / "ner"
    assert main(["ner", "--gold", str(ner / "gold.jsonl"), *(f for m in ("gliner", "spacy", "deberta")
                                                             for f in ("--pred", f"{m}={ner / (m + '.jsonl')}")),
                 "--label-similarity", "exact", "--json", "-q"]) == 0
    document = capsys.readouterr().out
    path = tmp_path / "ner.json"
    path.write_text(document)
    written = json.loads(document)
    for metric, expected in (("strict_f1", lambda r: r["semeval"]["strict"]["f1"]),
                             ("partial_precision", lambda r: r["semeval"]["partial"]["precision"]),
                             ("dmberta_f1", lambda r: r["dmberta"]["f1"]),
                             ("dmberta_mean", lambda r: r["dmberta"]["mean"])):
        code, out, err = _run(capsys, str(path), "--baseline", "spacy", "--metric", metric, "--json",
                              "--paired-bs-n", "300")
        assert code == 0, err
        doc = json.loads(out)
        assert [s["name"] for s in doc["systems"]] == ["spacy", "gliner", "deberta"]
        for system in doc["systems"]:
            assert system["mean"] == pytest.approx(expected(written[system["name"]]), abs=1e-12), metric
        assert doc["exact_randomization"] is True  # two records: every swap pattern
    code, out, _ = _run(capsys, str(path), "--baseline", "spacy", "--format", "markdown", "--paired-bs-n", "300")
    assert code == 0 and out.rstrip().endswith(
        "note: 2 items: bootstrap p-values are unreliable below about 30 items; read the randomization test's "
        "(exact here)")


@pytest.mark.slow  # exports and runs a tiny model three times (~10 s on 2 cores)
def test_bertscore_json_records_its_references_digest_and_compare_refuses_other_references(tmp_path, capsys,
                                                                                           tiny_model_path) -> None:
    """bertscore --json records references_sha256; systems scored against different references
    are refused even though their signatures agree."""
    cands = tmp_path / "cands.txt"
    cands.write_text("a cat sat\na dog ran\nthe sun\n")
    outputs = {}
    for name, refs in (("one", "a cat sat down\na dog runs\nthe sun is up\n"),
                       ("two", "a cat sat down\na dog runs\nthe sun is up\n"),
                       ("other", "a cat sat down\na dog runs\nthe moon is up\n")):
        ref_file = tmp_path / f"refs_{name}.txt"
        ref_file.write_text(refs)
        assert main(["bertscore", "-c", str(cands), "-r", str(ref_file), "-m", str(tiny_model_path("bert")), "--json",
                     "-q"]) == 0
        outputs[name] = tmp_path / f"{name}.json"
        outputs[name].write_text(capsys.readouterr().out)
    digests = {name: json.loads(path.read_text())["references_sha256"] for name, path in outputs.items()}
    assert digests["one"] == digests["two"] != digests["other"]
    code, _, err = _run(capsys, str(outputs["one"]), str(outputs["two"]), "--paired-bs-n", "100",
                        "--paired-ar-n", "100")
    assert code == 0, err
    code, out, err = _run(capsys, str(outputs["one"]), str(outputs["other"]))
    assert code == 2 and out == "" and "scored against different inputs (references_sha256" in err


def test_ner_systems_scored_against_different_gold_are_refused(tmp_path, capsys) -> None:
    def record(rid: str, n_gold: int) -> dict:
        counts = {"correct": 1, "incorrect": 0, "partial": 0, "missed": n_gold - 1, "spurious": 0}
        return {"id": rid, "n_gold": n_gold, "n_pred": 1, "precision": 1.0, "recall": 1 / n_gold,
                "score": 0.5, "matches": [],
                "semeval": {scheme: dict(counts) for scheme in ("strict", "exact", "partial", "type")}}

    signature = "ner|labels:exact|version:0.1.0"
    for name, golds in (("a", (1, 2, 3)), ("b", (1, 2, 4))):
        (tmp_path / f"{name}.json").write_text(json.dumps({"model": {
            "n_records": 3, "dmberta": {}, "semeval": {}, "signature": signature,
            "records": [record(f"r{k}", n) for k, n in enumerate(golds)]}}))
    code, out, err = _run(capsys, f"a={tmp_path / 'a.json'}", f"b={tmp_path / 'b.json'}")
    assert code == 2 and out == ""
    assert "b (" in err and "scored against different gold: record r2 has 4 gold entities in one, 3 in the other" in err
