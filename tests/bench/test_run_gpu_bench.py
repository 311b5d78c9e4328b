"""bench/device/run_gpu_bench.sh, the one command of a GPU session, in its dry run on this CPU:
every step with ``--device cpu --smoke``, the install skipped (its wheels are for the GPU
machine), what comes back within the device tool's limits; and a run whose budget runs out
keeps going past a failed step and says which steps passed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "bench" / "device" / "run_gpu_bench.sh"
STEPS = ("gpu-info", "install", "cuda-tests", "profile", "bench-g1g3", "merge", "bench-g2g4")

pytestmark = pytest.mark.slow  # the smoke runs of bench_gpu.py and profile_gpu.py: minutes on 2 cores


def _summary(stdout: str) -> dict[str, list[str]]:
    """Step name -> its status lines in the closing summary."""
    block = stdout.split("=== summary", 1)[1].split("=== in ", 1)[0]
    rows: dict[str, list[str]] = {}
    for line in block.splitlines()[1:]:
        name, _, status = line.strip().partition(" ")
        if name:
            rows.setdefault(name, []).append(status.strip())
    return rows


def test_the_dry_run_runs_every_step_and_brings_back_what_fits(gpu_dry_run) -> None:
    proc, out = gpu_dry_run.proc, gpu_dry_run.out
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    summary = _summary(proc.stdout)
    assert set(summary) == set(STEPS), summary
    assert summary["install"][0].startswith("skipped (see the log)"), summary
    assert "dry run: install skipped" in proc.stdout and "is absent" in proc.stdout
    for name in ("gpu-info", "cuda-tests", "profile", "bench-g1g3", "bench-g2g4"):
        assert summary[name][0].startswith("passed"), (name, summary[name])
    assert len(summary["merge"]) == 2 and all(s.startswith("passed") for s in summary["merge"])
    assert re.search(r"\d+/\d+ tests collected", proc.stdout)  # the dry run collects the CUDA tests
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert files == ["RESULTS_GPU.json", "RESULTS_GPU.md", "profile/profile_gpu.json", "profile/profile_gpu.md",
                     "profile/trace_g1_fp32.json", "profile/trace_g3_fp32.json", "run_gpu_bench.log"]
    assert len(files) <= 8 and all((out / f).stat().st_size <= 16 * 2**20 for f in files)
    results = (out / "RESULTS_GPU.md").read_text(encoding="utf-8")
    assert "**Smoke run**" in results and "not judged (smoke run)" in results
    for section in ("## G1:", "## G2:", "## G3:", "## G4:"):
        assert section in results, section
    data = json.loads((out / "RESULTS_GPU.json").read_text(encoding="utf-8"))
    assert set(data["workloads"]) == {"G1", "G2", "G3", "G4"} and len(data["merged_from"]) == 2
    assert "## Summary" in (out / "profile" / "profile_gpu.md").read_text(encoding="utf-8")
    log = (out / "run_gpu_bench.log").read_text(encoding="utf-8")
    assert "=== summary (dry," in log  # the log that comes back holds the whole output


def test_a_failed_step_and_a_spent_budget_do_not_stop_the_summary(tmp_path: Path, start_dry_run) -> None:
    proc = start_dry_run(tmp_path, timeout=600, RUN_BUDGET_S="30", PYTEST_ARGS="--no-such-pytest-option").proc
    assert proc.returncode == 1, proc.stdout[-4000:]
    summary = _summary(proc.stdout)
    assert set(summary) == set(STEPS), summary
    assert summary["cuda-tests"][0].startswith("FAILED (exit 4)")  # pytest's usage error
    assert summary["gpu-info"][0].startswith("passed")
    # The 30 s are spent before the last steps: they are reported skipped, not silently dropped.
    assert summary["bench-g2g4"][0].startswith("skipped: the run's 30 s are spent")
    # The steps between ran whole, were cut at the budget or skipped, as fast as the machine was.
    assert all(s.startswith(("passed", "TIMED OUT", "skipped: the run's")) for s in summary["profile"] + summary["bench-g1g3"])
