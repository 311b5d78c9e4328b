"""bench/bench_gpu.py (issues 12 and 39: the GPU benchmark) on a machine without a GPU: its
refusal to measure without CUDA, its held texts and Kendall tau, issue 39's target rows, the
merge of two runs' results, the FLOP count and peak table of bench/gpu_peak.py, and the CPU smoke
run end to end."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from rapidscore.testing.scripts import load_script

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "bench" / "bench_gpu.py"


bench_gpu = load_script(SCRIPT, "bench_gpu_under_test", siblings=("common", "gpu_peak"))
gpu_peak = bench_gpu.gpu_peak


def _cuda_available() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()


@pytest.mark.skipif(_cuda_available(), reason="CUDA is present: the default run would measure, not refuse")
def test_without_cuda_the_default_run_stops_with_a_message(capsys, tmp_path) -> None:
    status = bench_gpu.main(["--out", str(tmp_path / "gpu.md")])
    err = capsys.readouterr().err
    assert status == 2
    assert "no CUDA device" in err and "--device cpu --smoke" in err
    assert not (tmp_path / "gpu.md").exists()


def test_cpu_needs_smoke_and_smoke_needs_an_out_file(capsys, tmp_path) -> None:
    assert bench_gpu.main(["--device", "cpu", "--out", str(tmp_path / "gpu.md")]) == 2
    assert "--device cpu is for the smoke run only" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        bench_gpu.main(["--device", "cpu", "--smoke"])
    assert info.value.code == 2
    assert "--smoke needs --out" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench_gpu.main(["--device", "cpu", "--smoke", "--out", str(bench_gpu.RESULTS_PATH)])
    assert "must not write" in capsys.readouterr().err


def test_held_pairs_are_distinct_deterministic_and_rag_length() -> None:
    cands, refs = bench_gpu.held_pairs(500)
    assert (cands, refs) == bench_gpu.held_pairs(500)
    texts = cands + refs
    assert len(set(texts)) == len(texts) == 1000
    words = np.array([len(t.split()) for t in refs])
    # one to three sentences of 8-28 words each
    assert words.min() >= 8 and words.max() <= 84
    assert 25 <= words.mean() <= 45, words.mean()


def test_kendall_tau_pair_count_equals_scipy() -> None:
    stats = pytest.importorskip("scipy.stats", reason="scipy is the reference for the fallback")
    rng = np.random.default_rng(3)
    a = rng.integers(0, 30, 400).astype(float)  # ties in both vectors: tau-b's correction matters
    b = a + rng.integers(-8, 9, 400)
    tau, how = bench_gpu.kendall_tau_pairs(a, b)
    assert tau == pytest.approx(stats.kendalltau(a, b).statistic, abs=1e-12)
    assert "400 of 400" in how
    assert bench_gpu.kendall_tau_pairs(a, a)[0] == pytest.approx(1.0)
    assert bench_gpu.kendall_tau_pairs(a, -a)[0] == pytest.approx(-1.0)
    sampled, how = bench_gpu.kendall_tau_pairs(a, b, max_sample=200)
    assert "sampled" in how and abs(sampled - tau) < 0.1


@pytest.mark.slow
@pytest.mark.slow  # reads the session's dry run of run_gpu_bench.sh (tests/bench/conftest.py): minutes
def test_smoke_run_on_the_cpu_end_to_end(gpu_dry_run) -> None:
    """bench_gpu.py's CPU smoke run at the dry run's sizes (G1 40 pairs, G2 20, G4 80 texts), its
    two parts merged: the run_gpu_bench.sh dry run runs exactly that, so this reads its outputs."""
    results = bench_gpu.RESULTS_PATH
    before = results.stat().st_mtime_ns if results.exists() else None
    proc = gpu_dry_run.proc
    out = gpu_dry_run.work / "RESULTS_GPU.md"
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    markdown = out.read_text(encoding="utf-8")
    data = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert "**Smoke run**" in markdown and "not judged (smoke run)" in markdown
    assert set(data["workloads"]) == {"G1", "G2", "G3", "G4"}
    # Precisions the engine refuses on the CPU are skipped with its reason, not a crash.
    g1 = data["workloads"]["G1"]
    for precision, reason in g1["skipped_precisions"].items():
        assert precision != "fp32" and reason, (precision, reason)
        assert f"rapidscore {precision}: skipped" in proc.stdout  # (the steps' output, as the log has it)
    # The measured mode agrees with the references on the CPU as on a GPU (bert-score's padding
    # reproduced with reference_batch_size=64; sentence-transformers' cosines).
    assert g1["precisions"]["fp32"]["max_abs_dF_vs_bert_score"] <= 1e-5
    assert data["workloads"]["G2"]["precisions"]["fp32"]["max_abs_dF_vs_bert_score"] <= 1e-5
    assert data["workloads"]["G4"]["precisions"]["fp32"]["max_abs_dcos_vs_st"] <= 1e-5
    assert g1["pairs"] == 40 and g1["bare_model"]["seconds"]["fp32"] > 0
    assert set(g1["bare_model"]["skipped"]) == {"tf32", "bf16", "fp16"}
    # The bare model's matrix-product rate is reported; without a GPU there is no peak to share.
    assert g1["bare_model"]["flops"] > 0 and g1["bare_model"]["rate"]["fp32"]["tflops_per_s"] > 0
    assert g1["bare_model"]["rate"]["fp32"]["share_of_fp16_peak"] is None
    assert "| G1 bare fp16 share of fp16 tensor peak | reported |" in markdown
    assert {"bert-score", "rapidscore fp32"} <= set(data["workloads"]["G3"]["minilm"]["ms"])
    # The GPU results file is never written by a smoke run.
    assert (results.stat().st_mtime_ns if results.exists() else None) == before


def test_half_precision_accuracy_against_fp32_and_the_reference() -> None:
    stats = pytest.importorskip("scipy.stats", reason="scipy is the reference for Kendall tau")
    rng = np.random.default_rng(5)
    reference = rng.uniform(0.3, 0.95, 1000)
    fp32 = reference + rng.normal(0, 1e-7, 1000)
    half = fp32 + rng.normal(0, 1e-3, 1000)
    exact = bench_gpu.f_accuracy(fp32, reference)
    assert set(exact) == {"max_abs_dF_vs_bert_score", "mean_abs_dF_vs_bert_score"}
    assert exact["max_abs_dF_vs_bert_score"] == pytest.approx(np.abs(fp32 - reference).max())
    fast = bench_gpu.f_accuracy(half, reference, fp32)
    assert fast["mean_abs_dF_vs_fp32"] == pytest.approx(np.abs(half - fp32).mean())
    assert fast["max_abs_dF_vs_fp32"] == pytest.approx(np.abs(half - fp32).max())
    assert fast["kendall_tau_vs_fp32"] == pytest.approx(stats.kendalltau(half, fp32).statistic)
    assert fast["kendall_method"].startswith("scipy")


def test_target_rows_are_issue_39s() -> None:
    assert bench_gpu.TARGETS["G1 fp32 speed-up"] == 9.0 and bench_gpu.TARGETS["G1 fp16 speed-up"] == 25.0
    assert bench_gpu.TARGETS["G1 fp32 end to end / bare fp32"] == bench_gpu.TARGETS[
        "G1 fp16 end to end / bare fp16"] == 1.3
    assert "G2 fp32 speed-up" not in bench_gpu.TARGETS and "G4 fp32 speed-up" not in bench_gpu.TARGETS
    assert set(bench_gpu.TARGET_ROWS) == set(bench_gpu.TARGETS) | set(bench_gpu.REPORTED)
    rate = {"fp16": gpu_peak.achieved(3.463e12, 0.01, "NVIDIA H100 80GB HBM3")}
    workloads = {
        "G1": {"precisions": {
            "fp32": {"speedup": {"vs_best": 9.5}, "max_abs_dF_vs_bert_score": 2e-7,
                     "end_to_end_over_bare_same_precision": 1.5},
            "fp16": {"speedup": {"vs_best": 7.2}, "mean_abs_dF_vs_fp32": 2.8e-5, "kendall_tau_vs_fp32": 0.9999,
                     "end_to_end_over_bare_same_precision": 1.2}},
            "bare_model": {"rate": rate},
            "memory_growth": {"contenders": {"rapidscore fp32": {"working_growth": 1.1},
                                             "bert-score b64": {"working_growth": 3.0}}}},
        "G2": {"precisions": {"fp32": {"speedup": {"vs_best": 1.7}}, "fp16": {"speedup": {"vs_best": 15.0}}}},
    }
    rows = {name: (threshold, shown, verdict)
            for name, threshold, shown, verdict in bench_gpu.target_rows({"smoke": False, "workloads": workloads})}
    assert list(rows) == list(bench_gpu.TARGET_ROWS)
    assert rows["G1 fp32 speed-up"] == (">= 9.000", "9.500", "met")
    assert rows["G1 fp16 speed-up"][2] == "short"
    assert rows["G1 fp16 mean |dF| vs fp32"][2] == "met" and rows["G1 fp16 tau vs fp32"][2] == "met"
    assert rows["G1 fp16 end to end / bare fp16"] == ("<= 1.300", "1.200", "met")
    assert rows["G1 fp32 end to end / bare fp32"] == ("<= 1.300", "1.500", "short")
    share = rows["G1 bare fp16 share of fp16 tensor peak"]
    assert share == ("reported", "35.0% (346.3 of 989.4 TFLOP/s)", "reported (not a target)")
    assert rows["G2 fp16 speed-up"][2] == "met"
    assert rows["G2 fp32 speed-up"] == ("reported", "1.700", "reported (not a target)")
    assert rows["memory growth at 4x pairs"][1:] == ("1.100", "met")  # rapidscore's modes only
    assert rows["G3 MiniLM p50 ms"][2].startswith("n/a")
    smoke = bench_gpu.target_rows({"smoke": True, "workloads": workloads})
    assert {verdict for *_, verdict in smoke} == {"not judged (smoke run)"}


def _run_data(command: str, reps: int, workloads: dict) -> dict:
    machine = {"cpu_model": "test CPU", "cpus": 2, "cpus_available": 2, "flags": [], "memory_gib": 1.0, "gpu": []}
    return {"smoke": False, "command": command, "date": "2026-11-28T00:00:00+00:00", "commit": "abc1234",
            "machine": machine, "versions": {"torch": "x"}, "environment": {"device": "cuda", "torch_cuda": "13.0"},
            "reps": reps, "precisions": ["fp32", "fp16"], "workloads": workloads, "kendall_method": "scipy"}


def test_merge_makes_one_report_of_two_runs(tmp_path: Path) -> None:
    latency = {"model": "m", "skipped_precisions": {},
               "ms": {"bert-score": {"p50": 5.0, "p99": 9.0}, "rapidscore fp32": {"p50": 1.5, "p99": 3.0}}}
    g3 = {"minilm": latency, "large": {**latency, "ms": {"bert-score": {"p50": 10.0, "p99": 12.0},
                                                         "rapidscore fp32": {"p50": 2.0, "p99": 3.0}}}}
    g4 = {"texts": 100, "max_length": 256, "skipped_precisions": {}, "peak_memory": {},
          "median_s": {"sentence-transformers b32": 2.0, "rapidscore fp16": 0.3},
          "precisions": {"fp16": {"speedup": {"vs_best": 6.0}, "max_abs_dcos_vs_st": 1e-4}}}
    first, second = tmp_path / "g1g3.json", tmp_path / "g2g4.json"
    first.write_text(json.dumps(_run_data("python bench/bench_gpu.py --parts G3", 3, {"G3": g3})), encoding="utf-8")
    second.write_text(json.dumps(_run_data("python bench/bench_gpu.py --parts G4", 2, {"G4": g4})), encoding="utf-8")
    out = tmp_path / "merged" / "RESULTS_GPU.md"
    assert bench_gpu.main(["--merge", str(first), str(second), "--out", str(out)]) == 0
    markdown = out.read_text(encoding="utf-8")
    data = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert set(data["workloads"]) == {"G3", "G4"} and data["merged_from"] == [str(first), str(second)]
    assert "--parts G3` ; `python bench/bench_gpu.py --parts G4" in markdown
    assert "medians of 3 (G3) / 2 (G4) repetitions" in markdown
    assert "| G3 MiniLM p50 ms | <= 2.000 | 1.500 | met |" in markdown
    assert "| G3 large p50 / bert-score p50 | <= 0.250 | 0.200 | met |" in markdown
    assert "| G4 fp16 speed-up | >= 5.000 | 6.000 | met |" in markdown
    assert "## G3: one short pair" in markdown and "## G4: sentence embeddings" in markdown
    # A merge that holds a smoke run never writes bench/RESULTS_GPU.md.
    smoke = tmp_path / "smoke.json"
    smoke.write_text(json.dumps({**_run_data("smoke", 1, {}), "smoke": True}), encoding="utf-8")
    assert bench_gpu.main(["--merge", str(first), str(smoke), "--out", str(bench_gpu.RESULTS_PATH)]) == 2


def test_flops_and_the_fp16_peak_table() -> None:
    # MiniLM (h 384, f 1536), one batch of 2 x 10 tokens, 6 layers, counted by hand.
    per_token = 2 * 4 * 384 * 384 + 2 * 2 * 384 * 1536 + 2 * 2 * 10 * 384
    assert gpu_peak.encoder_flops(384, 1536, 6, [(2, 10)]) == 6 * 20 * per_token
    assert gpu_peak.encoder_flops(384, 1536, 6, [(2, 10), (1, 4)]) == pytest.approx(
        6 * (20 * per_token + 4 * (per_token - 2 * 2 * 6 * 384)))
    assert gpu_peak.fp16_dense_peak("NVIDIA H100 80GB HBM3")[0] == 989.4e12
    assert gpu_peak.fp16_dense_peak("NVIDIA H100 PCIe")[0] == 756e12
    assert gpu_peak.fp16_dense_peak("NVIDIA H200")[0] == 989.4e12
    assert gpu_peak.fp16_dense_peak("NVIDIA A100-SXM4-80GB")[0] == 312e12
    peak, label = gpu_peak.fp16_dense_peak("NVIDIA L4")
    assert peak is None and label.startswith("n/a") and "NVIDIA L4" in label
    assert gpu_peak.fp16_dense_peak(None) == (None, "n/a (no GPU)")
    result = gpu_peak.achieved(494.7e12, 1.0, "NVIDIA H200")
    assert result["tflops_per_s"] == pytest.approx(494.7) and result["share_of_fp16_peak"] == pytest.approx(0.5)
    assert gpu_peak.achieved(1e12, 1.0, "NVIDIA L4")["share_of_fp16_peak"] is None


def test_model_dims_from_the_embedded_config(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 384,
                                                      "intermediate_size": 1536}), encoding="utf-8")
    assert gpu_peak.model_dims(tmp_path) == {"hidden": 384, "ffn": 1536, "model_type": "bert"}
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "distilbert", "dim": 768, "hidden_dim": 3072}),
                                          encoding="utf-8")
    assert gpu_peak.model_dims(tmp_path)["ffn"] == 3072
