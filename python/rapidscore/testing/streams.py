"""Driving a streamed command from outside, as a user killing it would: wait until its resume
state records some rows (then the test sends SIGKILL)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

__all__ = ["wait_for_rows"]


def wait_for_rows(state_path: str | Path, rows: int, proc: subprocess.Popen, timeout: float = 180.0) -> int:
    """Poll ``state_path`` (a stream's ``OUTPUT.resume.json``) until it records at least ``rows``
    rows; returns the rows recorded. AssertionError if ``proc`` ends first or ``timeout`` passes."""
    state_path = Path(state_path)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the run ended before it was killed: {proc.stderr.read() if proc.stderr else ''}")
        try:
            done = json.loads(state_path.read_text())["rows"]
        except (OSError, ValueError, KeyError):
            done = 0
        if done >= rows:
            return done
        time.sleep(0.05)
    raise AssertionError(f"no {rows} rows written within {timeout} s")
