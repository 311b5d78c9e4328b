"""bench/bench_pipeline.py (issue 39): the device engine's host side against a simulated device.

The benchmark is the test: end to end over the simulated device's busy time, with the device as
slow as the host's own work, must stay <= 1.15 for the overlapped engine, so a change that puts
host work back between two of the model's batches fails here, on a CPU, not only on a GPU. The
serial run of the same stages, measured beside it (about 1 + host / device), shows that the
measurement tells the two apart.
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


@pytest.mark.slow
def test_the_model_never_waits_for_the_host_against_a_simulated_device(tmp_path):
    out = tmp_path / "pipeline.json"
    command = [sys.executable, str(SCRIPT), "--pairs", "2000", "--batch-tokens", "4096", "--reps", "3",
               "--out", str(tmp_path), "--json", str(out)]
    attempts = []
    for _ in range(2):  # a second run only where the first met a loaded machine
        subprocess.run(command, check=True, capture_output=True, text=True, timeout=600, cwd=REPO_ROOT)
        data = json.loads(out.read_text())
        attempts.append(data["ratio"])
        assert data["max_abs_dF_overlapped_vs_serial"] == 0.0  # same batches, same chunks: same scores
        if data["ratio"]["overlapped"] <= data["bound"]:
            break
    assert attempts[-1]["overlapped"] <= 1.15, attempts
    assert attempts[-1]["serial"] >= 1.5, attempts


def test_the_simulated_device_must_be_at_least_as_slow_as_the_host():
    run = subprocess.run([sys.executable, str(SCRIPT), "--factor", "0.5"], capture_output=True, text=True,
                         timeout=120, cwd=REPO_ROOT)
    assert run.returncode == 2 and "--factor must be >= 1" in run.stderr
