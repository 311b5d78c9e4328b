"""--progress on a terminal that reports a size of 0 (``script``, some CI runners): the bar shows,
at a default width, instead of nothing (tqdm reads 0 rows as no room for a bar).

A fresh pseudo-terminal from ``os.openpty`` reports 0 columns and 0 rows, as ``script`` makes
when its own input is not a terminal: the tests write to one and read what arrived.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterator

import pytest

from rapidscore.cli import main
from rapidscore.common import progress
from rapidscore.common.progress import progress_bar

DEFAULT_COLUMNS = 80  # progress.FALLBACK_SIZE's columns: a bar this wide at most

pytestmark = pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal (os.openpty)")

BAR = re.compile(r"\d+%\|")  # tqdm's bar: "50%|█████     | 1/2"


@pytest.fixture
def unsized_terminal(monkeypatch) -> Iterator[Callable[[], Callable[[], str]]]:
    """A pseudo-terminal of 0 x 0; yields a function that puts it in sys.stderr (in the test:
    pytest's capture sets sys.stderr again after the fixtures) and returns a function returning
    what was written to it."""
    leader, follower = os.openpty()
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)
    os.set_blocking(leader, False)
    with open(follower, "w", encoding="utf-8", errors="replace") as stream:
        assert os.get_terminal_size(stream.fileno()) == (0, 0)  # what script's terminal reports

        def written() -> str:
            stream.flush()
            chunks = []
            while True:
                try:
                    chunk = os.read(leader, 65536)
                except BlockingIOError:
                    break
                if not chunk:
                    break
                chunks.append(chunk)
            return b"".join(chunks).decode("utf-8", "replace")

        def attach() -> Callable[[], str]:
            monkeypatch.setattr(sys, "stderr", stream)
            return written

        yield attach
        monkeypatch.undo()  # sys.stderr back before the terminal closes
    os.close(leader)
    progress.decide(None)


def test_terminal_size_of_zero_is_the_default(unsized_terminal, monkeypatch) -> None:
    from rapidscore.common.progress import FALLBACK_SIZE, terminal_size

    unsized_terminal()
    assert FALLBACK_SIZE == (DEFAULT_COLUMNS, 24)
    assert terminal_size(sys.stderr) == FALLBACK_SIZE
    monkeypatch.setenv("COLUMNS", "120")  # a size the user set wins over the default
    monkeypatch.setenv("LINES", "0")
    assert terminal_size(sys.stderr) == (120, FALLBACK_SIZE[1])
    monkeypatch.setenv("COLUMNS", "0")  # COLUMNS=0 says nothing either
    assert terminal_size(sys.stderr) == FALLBACK_SIZE


def test_terminal_size_off_a_terminal_is_none(tmp_path) -> None:
    from rapidscore.common.progress import terminal_size

    with open(tmp_path / "log.txt", "w") as log:
        assert terminal_size(log) is None
    assert terminal_size(object()) is None  # no file descriptor (a notebook's stream, a StringIO)


@pytest.mark.parametrize("dynamic", [False, True])
def test_forced_bar_shows_on_a_terminal_of_zero_columns(unsized_terminal, dynamic) -> None:
    written = unsized_terminal()
    progress.decide(True)  # --progress: at once
    bar = progress_bar(range(3), desc="encoding", unit="batch", leave=False,
                       **({"dynamic_ncols": True} if dynamic else {}))
    for _ in bar:
        pass
    text = written()
    assert BAR.search(text) and "encoding" in text and "/3" in text, repr(text)
    lines = [part for part in re.split(r"[\r\n]", text) if part.strip()]
    assert max(len(line) for line in lines) <= DEFAULT_COLUMNS - 1  # the default width, never wrapping


@pytest.mark.slow  # a command run with the tiny model: a few seconds
def test_command_progress_on_a_terminal_of_zero_columns(unsized_terminal, tmp_path, tiny_bert, capsys) -> None:
    cands = tmp_path / "c.txt"
    refs = tmp_path / "r.txt"
    cands.write_text("a cat sat\na dog ran\n", encoding="utf-8")
    refs.write_text("a cat sat down\na dog walked\n", encoding="utf-8")
    written = unsized_terminal()
    assert main(["bertscore", "-c", str(cands), "-r", str(refs), "-m", tiny_bert, "--progress"]) == 0
    text = written()
    assert BAR.search(text) and "encoding" in text, repr(text)
    assert " F1: " in capsys.readouterr().out
