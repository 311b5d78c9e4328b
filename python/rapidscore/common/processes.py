"""This process and others of its host, as the files they write are named: ``host~pid``.

Temporary outputs (``common/outputs.py``) and the encoder's staging directories
(``encoder/export/staging.py``) are named by their writer, so a later writer can tell a dead writer's
leftovers from a live one's. Imports only the standard library.
"""

from __future__ import annotations

import os

__all__ = ["process_owner", "process_running"]


def process_owner() -> str:
    """``host~pid`` of this process: what a temporary file or staging directory is named by."""
    host = "".join(c if c.isalnum() else "_" for c in os.uname().nodename) if hasattr(os, "uname") else "host"
    return f"{host}~{os.getpid()}"


def process_running(pid: int) -> bool:
    """Whether process ``pid`` of this host may still be running (True when it cannot be told)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else (or cannot tell: keep its file)
    return True
