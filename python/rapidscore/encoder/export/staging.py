"""Staging directories of the disk cache (ONNX entries, weightless model copies): named by host and
process, and those of builds that died removed by the next build."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from rapidscore.common.processes import process_owner, process_running

__all__ = ["STALE_OWNER_GONE_SECONDS", "STALE_ANY_SECONDS", "remove_stale_staging"]

# A staging directory is ".{key}-{host}~{pid}-{random}". A process killed during a build (kill -9,
# out of memory) cannot remove its own, so every build first removes the stale ones: those of a
# process of this host that is no longer running (and older than a minute, so a directory being
# created right now is never touched), and any older than a day (another host's, an older
# naming, a reused pid).
STALE_OWNER_GONE_SECONDS = 60.0
STALE_ANY_SECONDS = 24 * 3600.0


def remove_stale_staging(root: Path, now: float | None = None) -> list[Path]:
    """Delete the staging directories under ``root`` left by builds that died; returns them."""
    now = time.time() if now is None else now
    host = process_owner().rsplit("~", 1)[0]
    removed = []
    for path in root.glob(".*-*"):
        if not path.is_dir():
            continue
        try:
            age = now - path.stat().st_mtime
        except FileNotFoundError:
            continue  # renamed into place or removed meanwhile
        parts = path.name.rsplit("-", 2)  # ".{key}-{owner}-{suffix}": keys may contain "-" (int8 entries)
        owner = parts[1] if len(parts) == 3 else ""
        owner_host, _, pid = owner.rpartition("~")
        gone = owner_host == host and pid.isdigit() and not process_running(int(pid))
        if (gone and age > STALE_OWNER_GONE_SECONDS) or age > STALE_ANY_SECONDS:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed
