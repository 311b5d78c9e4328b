"""A kill -9 during an ONNX export leaves its staging directory; the next export removes it."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from rapidscore.common.outputs import process_owner
from rapidscore.encoder.export.staging import remove_stale_staging


def test_stale_staging_directories_are_removed_by_owner_and_age(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)  # that process has exited
    host = process_owner().rsplit("~", 1)[0]
    old = time.time() - 120
    killed = tmp_path / f".abc123-{host}~{dead_pid}-x1"
    running = tmp_path / f".abc123-{process_owner()}-x2"  # this process: still exporting
    fresh_killed = tmp_path / f".abc123-{host}~{dead_pid}-x3"  # too young to judge
    ancient = tmp_path / ".abc123-otherhost~1-x4"  # another host's, a day old
    entry = tmp_path / "abc123"  # a finished entry: never touched
    # int8 entries' keys hold a "-" themselves (<fp32 key>.int8-<hash>): owners are read from the right
    killed_int8 = tmp_path / f".abc123.int8-0f1e2d-{host}~{dead_pid}-x5"
    running_int8 = tmp_path / f".abc123.int8-0f1e2d-{process_owner()}-x6"
    for path in (killed, running, fresh_killed, ancient, entry, killed_int8, running_int8):
        path.mkdir()
    for path in (killed, running, entry, killed_int8, running_int8):
        os.utime(path, (old, old))
    day = time.time() - 25 * 3600
    os.utime(ancient, (day, day))
    removed = remove_stale_staging(tmp_path)
    assert sorted(p.name for p in removed) == sorted([killed.name, ancient.name, killed_int8.name])
    assert running.exists() and fresh_killed.exists() and entry.exists() and running_int8.exists()
    assert not killed.exists() and not ancient.exists()
