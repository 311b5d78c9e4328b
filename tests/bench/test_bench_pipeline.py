"""bench/bench_pipeline.py (issue 39): the device engine's host side against a simulated device.

The benchmark is the test: end to end over the simulated device's busy time, with the device
exactly as slow as the host's own work, at the benchmark's default size (10,000 pairs, the GPU's
batch budget). The serial run of the same stages, measured beside it, is about 1.8-1.9 on the
2-core development machine and the overlapped engine 1.13-1.18 (bench/RESULTS.md, issue 39's
bound 1.15). The test's bound, 1.25, leaves room for a loaded CI machine and still fails any
change that puts the host's work back between two of the model's batches.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the device engine runs the torch backend")

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "bench" / "bench_pipeline.py"
REGRESSION_BOUND = 1.25


@pytest.mark.slow
def test_the_model_never_waits_for_the_host_against_a_simulated_device(tmp_path):
    out = tmp_path / "pipeline.json"
    command = [sys.executable, str(SCRIPT), "--pairs", "10000", "--reps", "3", "--out", str(tmp_path),
               "--json", str(out)]
    attempts = []
    for _ in range(2):  # a second run only where the first met a loaded machine
        subprocess.run(command, check=True, capture_output=True, text=True, timeout=600, cwd=REPO_ROOT)
        data = json.loads(out.read_text())
        attempts.append(data["ratio"])
        assert data["max_abs_dF_overlapped_vs_serial"] == 0.0  # same batches, same chunks: same scores
        if data["ratio"]["overlapped"] <= REGRESSION_BOUND:
            break
    assert attempts[-1]["overlapped"] <= REGRESSION_BOUND, attempts
    assert attempts[-1]["serial"] >= 1.5, attempts  # the measurement tells the two engines apart


def test_the_simulated_device_must_be_at_least_as_slow_as_the_host():
    run = subprocess.run([sys.executable, str(SCRIPT), "--factor", "0.5"], capture_output=True, text=True,
                         timeout=120, cwd=REPO_ROOT)
    assert run.returncode == 2 and "--factor must be >= 1" in run.stderr
