"""bench/bench_gpu.py (issue 12's GPU benchmark) on a machine without a GPU: its refusal to
measure without CUDA, its held texts and Kendall tau, and the CPU smoke run end to end."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "bench" / "bench_gpu.py"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _load_bench_gpu():
    """bench_gpu.py as a module. Run as a script, its folder is its sys.path[0] and it imports its
    sibling bench/common.py as ``common``: loaded here first and named so only while the script's
    top runs (sys.path stays as it is)."""
    saved = sys.modules.get("common")
    sys.modules["common"] = _load("common", SCRIPT.parent / "common.py")
    try:
        return _load("bench_gpu_under_test", SCRIPT)
    finally:
        if saved is None:
            del sys.modules["common"]
        else:
            sys.modules["common"] = saved


bench_gpu = _load_bench_gpu()


def _cuda_available() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()


@pytest.mark.skipif(_cuda_available(), reason="CUDA is present: the default run would measure, not refuse")
def test_without_cuda_the_default_run_stops_with_a_message(capsys, tmp_path):
    status = bench_gpu.main(["--out", str(tmp_path / "gpu.md")])
    err = capsys.readouterr().err
    assert status == 2
    assert "no CUDA device" in err and "--device cpu --smoke" in err
    assert not (tmp_path / "gpu.md").exists()


def test_cpu_needs_smoke_and_smoke_needs_an_out_file(capsys, tmp_path):
    assert bench_gpu.main(["--device", "cpu", "--out", str(tmp_path / "gpu.md")]) == 2
    assert "--device cpu is for the smoke run only" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        bench_gpu.main(["--device", "cpu", "--smoke"])
    assert info.value.code == 2
    assert "--smoke needs --out" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench_gpu.main(["--device", "cpu", "--smoke", "--out", str(bench_gpu.RESULTS_PATH)])
    assert "must not write" in capsys.readouterr().err


def test_held_pairs_are_distinct_deterministic_and_rag_length():
    cands, refs = bench_gpu.held_pairs(500)
    assert (cands, refs) == bench_gpu.held_pairs(500)
    texts = cands + refs
    assert len(set(texts)) == len(texts) == 1000
    words = np.array([len(t.split()) for t in refs])
    # one to three sentences of 8-28 words each
    assert words.min() >= 8 and words.max() <= 84
    assert 25 <= words.mean() <= 45, words.mean()


def test_kendall_tau_pair_count_equals_scipy():
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
def test_smoke_run_on_the_cpu_end_to_end(tmp_path):
    pytest.importorskip("bert_score", reason="the smoke run compares with bert-score")
    pytest.importorskip("sentence_transformers", reason="the smoke run compares with sentence-transformers")
    results = bench_gpu.RESULTS_PATH
    before = results.stat().st_mtime_ns if results.exists() else None
    out = tmp_path / "smoke" / "gpu.md"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--smoke", "--out", str(out),
                           "--cache-dir", str(tmp_path / "cache"), "--reps", "1", "--latency-calls", "10"],
                          capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    markdown = out.read_text(encoding="utf-8")
    data = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert "**Smoke run**" in markdown and "not judged (smoke run)" in markdown
    assert set(data["workloads"]) == {"G1", "G2", "G3", "G4"}
    # Precisions the engine refuses on the CPU are skipped with its reason, not a crash.
    g1 = data["workloads"]["G1"]
    for precision, reason in g1["skipped_precisions"].items():
        assert precision != "fp32" and reason, (precision, reason)
        assert f"rapidscore {precision}: skipped" in proc.stderr
    # The measured mode agrees with the references on the CPU as on a GPU (bert-score's padding
    # reproduced with reference_batch_size=64; sentence-transformers' cosines).
    assert g1["precisions"]["fp32"]["max_abs_dF_vs_bert_score"] <= 1e-5
    assert data["workloads"]["G2"]["precisions"]["fp32"]["max_abs_dF_vs_bert_score"] <= 1e-5
    assert data["workloads"]["G4"]["precisions"]["fp32"]["max_abs_dcos_vs_st"] <= 1e-5
    assert g1["pairs"] == 200 and g1["bare_model"]["seconds"]["fp32"] > 0
    assert set(g1["bare_model"]["skipped"]) == {"tf32", "bf16", "fp16"}
    assert {"bert-score", "rapidscore fp32"} <= set(data["workloads"]["G3"]["minilm"]["ms"])
    # The GPU results file is never written by a smoke run.
    assert (results.stat().st_mtime_ns if results.exists() else None) == before


def test_half_precision_accuracy_against_fp32_and_the_reference():
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
