"""One dry run of bench/device/run_gpu_bench.sh per session, shared by the tests of its three
scripts: the dry run runs profile_gpu.py's and bench_gpu.py's CPU smoke runs (G1-G4) and merges
them, so the tests of each script read its outputs instead of running the same smoke run again
(minutes on 2 cores each)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
RUN_GPU_BENCH = REPO_ROOT / "bench" / "device" / "run_gpu_bench.sh"


@dataclass(frozen=True)
class DryRun:
    proc: subprocess.CompletedProcess
    out: Path  # what would come back from the GPU machine
    work: Path  # the steps' own outputs: g1g3.json, g2g4.json, profile/


def dry_run(root: Path, timeout: int, **env: str) -> DryRun:
    """``run_gpu_bench.sh --dry-run`` with its folders under ``root`` and ``env`` added."""
    pytest.importorskip("bert_score", reason="the smoke runs compare with bert-score")
    pytest.importorskip("sentence_transformers", reason="the smoke runs compare with sentence-transformers")
    out, work = root / "out", root / "work"
    environment = {**os.environ, "OUT": str(out), "WORK": str(work), "PYTHON": sys.executable,
                   "DEVICE_DIR": str(root / "no-device-dir"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                   **env}
    proc = subprocess.run(["bash", str(RUN_GPU_BENCH), "--dry-run"], capture_output=True, text=True,
                          env=environment, cwd=REPO_ROOT, timeout=timeout)
    return DryRun(proc, out, work)


@pytest.fixture
def start_dry_run() -> Callable[..., DryRun]:
    """:func:`dry_run`, for a test's own run (other settings)."""
    return dry_run


@pytest.fixture(scope="session")
def gpu_dry_run(tmp_path_factory) -> DryRun:
    """The dry run at its defaults, once per session."""
    return dry_run(tmp_path_factory.mktemp("gpu-dry-run"), timeout=2400)
