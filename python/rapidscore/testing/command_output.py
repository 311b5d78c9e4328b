"""What the command-line tests read and write: a file of lines, and a command's one error line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["write_lines", "error_line"]


def write_lines(path: Path, lines: list[str]) -> str:
    """Write ``lines`` to ``path``, one a line (UTF-8); the path as a str."""
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def error_line(capsys: Any) -> str:
    """The one non-blank line a failed command wrote on stderr (no traceback), from pytest's ``capsys``."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]
