"""bench/profile_gpu.py (issue 39's profile of the GPU engine) on a machine without a GPU: its
analysis of a CUDA trace (a synthetic one with known answers, through ``--analyse``) and its CPU
smoke run end to end, whose tables must account for every millisecond of the profiled wall time.

The script runs as a subprocess (as on the GPU machine); nothing here imports it."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "bench" / "profile_gpu.py"
KIND_ROWS = ("GEMM / matmul", "attention (sdpa / flash / softmax)", "layer norm", "elementwise / activation",
             "gather / index / scatter", "reductions", "matching (kernels launched from match_rows)",
             "memcpy H2D", "memcpy D2H", "memcpy D2D", "memset", "other")


def _run(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env,
                          cwd=REPO_ROOT, timeout=timeout)


def _x(name: str, cat: str, ts: float, dur: float, tid: int = 1, correlation: int | None = None) -> dict:
    event = {"ph": "X", "cat": cat, "name": name, "pid": 1 if tid == 1 else 0, "tid": tid, "ts": ts, "dur": dur,
             "args": {}}
    if correlation is not None:
        event["args"]["correlation"] = correlation
    return event


def _synthetic_cuda_trace() -> list[dict]:
    """A window [1000, 2000] µs with known kernels, copies, launches and synchronisations: two
    streams overlapping over [1250, 1300], one kernel without its launch in the trace, one
    crossing the window's end and one after it."""
    host = [
        # The GPU timeline's copy of the window (kernels only) comes first: not the window.
        _x("profile_gpu:G1 fp16 pairs=10", "gpu_user_annotation", 1100, 700, 7),
        _x("profile_gpu:G1 fp16 pairs=10", "user_annotation", 1000, 1000),
        _x("rapidscore:model forward", "user_annotation", 1010, 100),
        # Matching runs in another thread (the engine's finish stage), as on the GPU.
        _x("rapidscore:match_rows", "user_annotation", 1400, 60, tid=2),
        _x("aten::linear", "cpu_op", 1015, 40),
        _x("cudaDeviceSynchronize", "cuda_runtime", 500, 100, correlation=50),  # before the window
        _x("cudaLaunchKernel", "cuda_runtime", 1020, 5, correlation=1),
        _x("cudaLaunchKernel", "cuda_runtime", 1030, 5, correlation=2),
        _x("cudaLaunchKernel", "cuda_runtime", 1040, 5, correlation=3),
        _x("cudaMemcpyAsync", "cuda_runtime", 1200, 10, correlation=4),
        _x("cudaLaunchKernel", "cuda_runtime", 1410, 5, tid=2, correlation=5),
        _x("cudaLaunchKernel", "cuda_runtime", 1430, 5, correlation=12),  # the calling thread meanwhile
        _x("cudaMemsetAsync", "cuda_runtime", 1450, 3, tid=2, correlation=6),
        _x("cudaLaunchKernel", "cuda_runtime", 1600, 5, correlation=7),
        _x("cudaStreamSynchronize", "cuda_runtime", 1700, 250, correlation=8),
        _x("cudaMemcpy", "cuda_runtime", 1960, 20, correlation=10),
        _x("cuLaunchKernel", "cuda_driver", 1980, 5, correlation=11),
        _x("cudaLaunchKernel", "cuda_runtime", 2500, 5, correlation=9),  # after the window
    ]
    device = [
        _x("sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64", "kernel", 1100, 200, 7, 1),
        _x("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64>>", "kernel", 1250, 150, 8, 2),
        _x("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>", "kernel",
           1400, 20, 7, 3),
        _x("Memcpy HtoD (Pinned -> Device)", "gpu_memcpy", 1420, 30, 7, 4),
        _x("ampere_sgemm_128x64_nn", "kernel", 1460, 40, 7, 5),  # launched inside match_rows
        _x("Memset (Device)", "gpu_memset", 1500, 10, 7, 6),  # also inside match_rows: still a memset
        _x("void at::native::index_elementwise_kernel<128, 4>", "kernel", 1520, 10, 8, 12),
        _x("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float>", "kernel",
           1610, 40, 7, 7),
        _x("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MaxOps<float>>>",
           "kernel", 1800, 20, 7, 99),  # its launch is not in the trace
        _x("Memcpy DtoH (Device -> Pageable)", "gpu_memcpy", 1965, 10, 7, 10),
        _x("some_kernel_of_its_own", "kernel", 1990, 30, 7, 11),  # crosses the window's end: 10 µs count
        _x("sm90_xmma_gemm_late", "kernel", 2600, 50, 7, 9),  # after the window: not counted
    ]
    flows = [{"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 1, "pid": 1, "tid": 1, "ts": 1020}]
    return host + device + flows


def test_analysis_of_a_cuda_trace_accounts_for_every_microsecond(tmp_path: Path) -> None:
    trace = tmp_path / "trace_g1_fp16.json.gz"
    with gzip.open(trace, "wt", encoding="utf-8") as handle:
        json.dump({"schemaVersion": 1, "traceEvents": _synthetic_cuda_trace()}, handle)
    proc = _run("--analyse", str(trace), timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    a = json.loads(re.search(r"```json\n(.*?)\n```", proc.stdout, re.S).group(1))
    assert (a["workload"], a["precision"], a["unit"], a["n"]) == ("G1", "fp16", "pairs", 10)
    assert a["wall_us"] == pytest.approx(1000)
    expected = {"GEMM / matmul": 175, "attention (sdpa / flash / softmax)": 125, "elementwise / activation": 20,
                "memcpy H2D": 30, "matching (kernels launched from match_rows)": 40, "memset": 10,
                "layer norm": 40, "reductions": 20, "memcpy D2H": 10, "other": 10,
                "gather / index / scatter": 10, "memcpy D2D": 0}
    assert a["by_kind_us"] == pytest.approx(expected)
    assert a["idle_us"] == pytest.approx(510)
    assert a["busy_us"] + a["idle_us"] == pytest.approx(a["wall_us"])
    # Overlapping intervals counted whole in the raw sums.
    assert a["raw_by_kind_us"]["GEMM / matmul"] == pytest.approx(200)
    assert a["raw_by_kind_us"]["attention (sdpa / flash / softmax)"] == pytest.approx(150)
    assert a["kernels"] == 8 and a["device_intervals"] == 11
    assert (a["launch_attributed"], a["launch_unattributed"]) == (10, 1)
    assert {p: v["intervals"] for p, v in a["phases"].items()} == {"model forward": 3, "matching": 2, "other": 6}
    assert a["launches"]["count"] == 7 and a["launches"]["us"] == pytest.approx(35)
    calling, finishing = a["host_threads"]
    assert calling["thread"] == "calling" and calling["api_calls"] == 9 and finishing["thread"] == "2"
    assert (finishing["api_calls"], finishing["api_us"]) == (2, pytest.approx(8))
    assert a["syncs"] == {"cudaMemcpy": {"count": 1, "us": 20.0}, "cudaStreamSynchronize": {"count": 1, "us": 250.0}}
    assert a["host_top_level_ops"] == 1 and a["host_in_ops_us"] == pytest.approx(40)
    assert a["ranges"]["match_rows"] == {"count": 1, "us": 60.0}
    # The markdown of the same analysis.
    assert "| device: GEMM / matmul | 0.175 | 17.5% | 1 | 0.200 |" in proc.stdout
    assert "| device idle (host gaps) | 0.510 | 51.0% | | |" in proc.stdout
    assert "| synchronisation: cudaStreamSynchronize | 1 | 0.250 | 0.10 |" in proc.stdout


def test_analyse_refuses_a_trace_without_its_window(tmp_path: Path) -> None:
    trace = tmp_path / "other.json"
    trace.write_text(json.dumps({"traceEvents": [_x("aten::mm", "cpu_op", 0, 10)]}), encoding="utf-8")
    proc = _run("--analyse", str(trace), timeout=120)
    assert proc.returncode == 1
    assert "no 'profile_gpu:...' range" in proc.stderr


def _breakdowns(markdown: str) -> list[tuple[float, float, dict]]:
    """(sum of the rows, wall time, rows) of each 'where the wall time goes' table."""
    tables = []
    for block in markdown.split("| where the wall time goes |")[1:]:
        rows, wall = {}, None
        for line in block.splitlines()[2:]:
            if not line.startswith("|"):
                break
            cells = [c.strip() for c in line.strip("|").split("|")]
            if cells[0] == "**profiled wall time**":
                wall = float(cells[1])
            else:
                rows[cells[0]] = float(cells[1])
        tables.append((sum(rows.values()), wall, rows))
    return tables


@pytest.mark.slow  # reads the session's dry run of run_gpu_bench.sh (tests/bench/conftest.py): minutes
def test_smoke_run_on_the_cpu_accounts_for_the_wall_time(gpu_dry_run) -> None:
    """profile_gpu.py's CPU smoke run at its defaults: the run_gpu_bench.sh dry run's profile step
    runs exactly that (``--device cpu --smoke --out WORK/profile``), so this reads its outputs."""
    out = gpu_dry_run.work / "profile"
    proc = gpu_dry_run.proc
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    markdown = (out / "profile_gpu.md").read_text(encoding="utf-8")
    data = json.loads((out / "profile_gpu.json").read_text(encoding="utf-8"))
    assert "**Smoke run**" in markdown and "measure nothing" in markdown
    for heading in ("## Summary", "## Bare model: matrix-product rate", "## G1 fp32:", "## G3 fp32:",
                    "## How the times are classified", "| host side |", "| device time by phase",
                    "Tokenisation alone", "kernel launches", "synchronisations"):
        assert heading in markdown, heading
    # fp16 is refused on the CPU: skipped with the engine's reason, not a crash.
    assert "## G1 fp16" in markdown and "needs device='cuda'" in markdown
    tables = _breakdowns(markdown)
    assert len(tables) == 2  # G1 fp32 and G3 fp32
    for total, wall, rows in tables:
        assert set(rows) == {f"device: {kind}" for kind in KIND_ROWS} | {"device idle (host gaps)"}
        assert wall > 0 and total == pytest.approx(wall, rel=0.01), (total, wall, rows)
    g1 = data["workloads"]["G1 fp32"]["analysis"]
    assert g1["busy_us"] + g1["idle_us"] == pytest.approx(g1["wall_us"], rel=1e-6)
    # The profiled call ran through the device engine: the model and match_rows ranges were seen.
    assert g1["ranges"]["model forward"]["count"] >= 1 and g1["ranges"]["match_rows"]["count"] >= 1
    assert g1["by_kind_us"]["matching (kernels launched from match_rows)"] > 0
    assert data["workloads"]["G3 fp32"]["analysis"]["n"] == 3
    bare = data["bare_model"]
    assert bare["flops"] > 0 and bare["modes"]["fp32"]["tflops_per_s"] > 0
    assert bare["modes"]["fp32"]["share_of_fp16_peak"] is None  # no GPU: no peak
    traces = sorted(p.name for p in out.iterdir() if p.name.startswith("trace_"))
    assert traces == ["trace_g1_fp32.json", "trace_g3_fp32.json"]
    # A trace brought back is read again the same way.
    again = _run("--analyse", str(out / "trace_g1_fp32.json"), timeout=120)
    assert again.returncode == 0, again.stderr[-2000:]
    redo = json.loads(re.search(r"```json\n(.*?)\n```", again.stdout, re.S).group(1))
    assert redo["by_kind_us"] == pytest.approx(g1["by_kind_us"])
