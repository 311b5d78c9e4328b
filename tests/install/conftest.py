"""The install tests' one build: tools/build_wheels.sh runs once per session (the sdist, the
manylinux wheel and the embedded model's companion wheel; about 2 min with a warm zig cache), and
test_wheels.py and test_lean_install.py install from the same dist/. Only the standard library
and pytest here: this folder's installed-package set also runs against an installed wheel."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def dist(tmp_path_factory) -> Path:
    """A dist/ written by tools/build_wheels.sh (``auditwheel-show.txt``: its auditwheel report), or
    RAPIDSCORE_TEST_DIST: a dist/ that it wrote before (to run the install tests again without a
    build), or that a build started beside the tests is writing (.ci/run): its report appears when
    it is done, ``build-failed`` (the build's output) when it failed."""
    given = os.environ.get("RAPIDSCORE_TEST_DIST")
    if given:
        return _finished(Path(given).resolve())
    out = tmp_path_factory.mktemp("dist")
    # The companion's graph comes from this environment's exporter (the same Python as the tests).
    env = {**os.environ, "RAPIDSCORE_DIST": str(out), "RAPIDSCORE_EXPORT_PYTHON": sys.executable}
    done = subprocess.run(["bash", str(ROOT / "tools" / "build_wheels.sh")], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=1800)
    assert done.returncode == 0, done.stderr[-6000:]
    (out / "auditwheel-show.txt").write_text(done.stdout)
    return out


def _finished(dist: Path, timeout: float = 1800) -> Path:
    deadline = time.monotonic() + timeout
    while not (dist / "auditwheel-show.txt").exists():
        failed = dist / "build-failed"
        assert not failed.exists(), f"tools/build_wheels.sh failed:\n{failed.read_text()[-6000:]}"
        assert time.monotonic() < deadline, f"no build in {dist} after {timeout:.0f} s (RAPIDSCORE_TEST_DIST)"
        time.sleep(2)
    return dist
