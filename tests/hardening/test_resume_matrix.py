"""The resume matrix of every streaming command (bertscore, nrr, ner, refusal, a registered metric's
generic command): a first run stops at a seeded row, then ``--resume`` with the same settings
gives the bytes of one uninterrupted run; another setting, another input, damaged rows or a
damaged state are refused naming what differs (the files left as they were), or continued only
past a verified prefix. The commands are described in resume_cases.py."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from rapidscore.cli import main
from rapidscore.testing.streams import wait_for_rows

from .resume_cases import CHUNK, FAMILIES, ROWS, Family, sha256, write_input

# (family, format, first-run options) -> the files of a first run stopped part way / of one whole run
_STOPPED: dict[tuple, dict[str, bytes]] = {}
_WHOLE: dict[tuple, bytes] = {}


class Matrix:
    """One command's runs in one directory: ``stop()`` lays out the files a first run stopped at
    its seeded row leaves, ``resume()`` continues them, ``whole()`` is one uninterrupted run."""

    def __init__(self, family: Family, model: str, directory: Path, fmt: str = "jsonl"):
        self.family, self.model, self.directory, self.fmt = family, model, directory, fmt
        self.data = directory / "in.jsonl"
        self.out = directory / f"out.{fmt}"
        self.state = Path(f"{self.out}.resume.json")
        self.partial = Path(f"{self.out}.partial")
        self.parts = Path(f"{self.out}.parts")
        write_input(self.data, family)

    def argv(self, *options: str, output: Path | None = None) -> list[str]:
        return [*self.family.argv(self.data, output or self.out, self.model), *options]

    def stop(self, tmp_factory, *options: str, inject: bool = False) -> None:
        """The files of a first run with ``options`` stopped at the seeded row (made once): by a
        bad row there, or (``inject``: a run that reads its whole input first, as --idf does) by an
        error raised once the chunks before it are written."""
        key = (self.family.name, self.fmt, options)
        if key not in _STOPPED:
            where = Matrix(self.family, self.model, tmp_factory.mktemp("stopped"), self.fmt)
            if inject:
                with _failing_after(self.family.stop_row() // CHUNK):
                    assert main(where.argv(*options)) == 2
            else:
                write_input(where.data, self.family, bad_row=self.family.stop_row())
                assert main(where.argv(*options)) == 2
            written = {p.relative_to(where.directory).as_posix(): p.read_bytes()
                       for p in sorted(where.directory.rglob("*")) if p.is_file() and p.name != "in.jsonl"}
            assert f"out.{self.fmt}.resume.json" in written
            _STOPPED[key] = written
        for name, content in _STOPPED[key].items():
            (self.directory / name).parent.mkdir(exist_ok=True)
            (self.directory / name).write_bytes(content)

    def whole(self, tmp_factory, *options: str) -> bytes:
        key = (self.family.name, self.fmt, options)
        if key not in _WHOLE:
            where = Matrix(self.family, self.model, tmp_factory.mktemp("whole"), self.fmt)
            assert main(where.argv(*options)) == 0
            _WHOLE[key] = where.out.read_bytes()
        return _WHOLE[key]

    def resume(self, *options: str) -> int:
        return main(self.argv(*options, "--resume"))

    def files(self) -> dict[str, bytes]:
        return {p.relative_to(self.directory).as_posix(): p.read_bytes() for p in sorted(self.directory.rglob("*"))
                if p.is_file()}

    def read_state(self) -> dict:
        return json.loads(self.state.read_text())

    def write_state(self, state: dict) -> None:
        self.state.write_text(json.dumps(state))

    def rows_written(self) -> int:
        return self.read_state()["rows"]

    def refused(self, capsys, *options: str, names: str) -> str:
        """``--resume`` exits 2 with one error line naming ``names`` (returned); nothing is written
        or removed."""
        before = self.files()
        capsys.readouterr()
        assert self.resume(*options) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err and names in err[-1], err
        assert "(unexpected)" not in err[-1] and "Traceback" not in "\n".join(err)
        assert self.files() == before
        assert not self.out.exists()
        return err[-1]

    def continued(self, tmp_factory, *options: str) -> None:
        """``--resume`` succeeds with the bytes of one uninterrupted run, and leaves no state."""
        assert self.resume(*options) == 0
        assert self.out.read_bytes() == self.whole(tmp_factory, *options)
        assert not self.state.exists() and not self.partial.exists() and not self.parts.exists()
        assert not Path(f"{self.state}.tmp").exists()


@contextlib.contextmanager
def _failing_after(chunks: int) -> Iterator[None]:
    """Stream writers that fail (a full disk) on the chunk after their first ``chunks``."""
    from rapidscore.common.stream_io import StreamWriter

    write = StreamWriter.write
    calls = [0]

    def failing(self, items, rows):
        calls[0] += 1
        if calls[0] > chunks:
            raise OSError(errno.ENOSPC, "No space left on device (injected)")
        write(self, items, rows)

    StreamWriter.write = failing  # type: ignore[method-assign]
    try:
        yield
    finally:
        StreamWriter.write = write  # type: ignore[method-assign]


@pytest.fixture(params=list(FAMILIES))
def family(request) -> Family:
    if request.param == "toy":
        request.getfixturevalue("toy_metric")
    return FAMILIES[request.param]


@pytest.fixture()
def model(family, tiny_bert) -> str:
    return tiny_bert if family.model_option else ""


def matrix_of(family: Family, model: str, tmp_path: Path, fmt: str = "jsonl") -> Matrix:
    return Matrix(family, model, tmp_path, fmt)


# -- the same settings ------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_a_resume_with_the_same_settings_equals_one_run(family, model, fmt, tmp_path, tmp_path_factory):
    runs = matrix_of(family, model, tmp_path, fmt)
    runs.stop(tmp_path_factory)
    assert 0 < runs.rows_written() < ROWS and runs.rows_written() % CHUNK == 0
    runs.continued(tmp_path_factory)


def test_options_that_change_no_number_may_differ(family, model, tmp_path, tmp_path_factory):
    runs = matrix_of(family, model, tmp_path)
    runs.stop(tmp_path_factory)
    assert runs.resume("--chunk-size", "7") == 0
    assert runs.out.read_bytes() == runs.whole(tmp_path_factory)


# -- settings and input changes ---------------------------------------------------------------------

CHANGES = [(name, change) for name, family in FAMILIES.items() for change in family.changes]


@pytest.mark.parametrize(("name", "change"), CHANGES, ids=[f"{n}-{c[0]}" for n, c in CHANGES])
def test_a_settings_change_is_refused_naming_it(name, change, request, tiny_bert, tmp_path, tmp_path_factory,
                                                capsys):
    family = FAMILIES[name]
    if name == "toy":
        request.getfixturevalue("toy_metric")
    runs = matrix_of(family, tiny_bert if family.model_option else "", tmp_path)
    _label, first, then, names = change
    runs.stop(tmp_path_factory, *first)
    assert "with other settings" in runs.refused(capsys, *then, names=names)


MODELLED = [name for name, family in FAMILIES.items() if family.model_option]


@pytest.mark.slow  # a second model, and a copy of the first exported again: ~4 s for bertscore
@pytest.mark.parametrize("name", MODELLED)
def test_another_model_is_refused_and_a_copy_of_the_same_resumes(name, tiny_bert, tiny_model_path, tmp_path,
                                                                 tmp_path_factory, capsys):
    family = FAMILIES[name]
    runs = matrix_of(family, tiny_bert, tmp_path)
    runs.stop(tmp_path_factory)
    other = matrix_of(family, str(tiny_model_path("roberta")), tmp_path)
    other.refused(capsys, names="models")
    copy = tmp_path / "the-same-weights"
    shutil.copytree(tiny_bert, copy)
    same = matrix_of(family, str(copy), tmp_path)
    assert same.resume() == 0
    assert same.out.read_bytes() == runs.whole(tmp_path_factory)


# the refusal command's embedding detector loads its encoder at the first response: it is loaded
# before the first row, so that the state records its content as for the other commands (a model
# named by `--set model=PATH` is an opaque --set value: its spelling is compared too)
EMBEDDING_REFUSAL = replace(
    FAMILIES["refusal"], name="refusal-embedding", model_option="--set model",
    argv=lambda data, out, model: ["refusal", "--input", str(data), "--output", str(out), "--set", "method=embedding",
                                   "--set", f"model={model}", "--chunk-size", str(CHUNK), "-q"])


@pytest.mark.slow  # a second model, and a copy of the first exported again
@pytest.mark.parametrize(("family", "copy_resumes"), [(FAMILIES["ner"], True), (EMBEDDING_REFUSAL, False)],
                         ids=["ner", "refusal-embedding"])
def test_a_model_loaded_at_first_use_is_recorded_by_its_content(family, copy_resumes, tiny_bert, tiny_model_path,
                                                                tmp_path, tmp_path_factory, capsys):
    runs = matrix_of(family, tiny_bert, tmp_path)
    runs.stop(tmp_path_factory)
    assert runs.read_state()["settings"]["models"]
    matrix_of(family, str(tiny_model_path("roberta")), tmp_path).refused(capsys, names="models")
    copy = tmp_path / "the-same-weights"
    shutil.copytree(tiny_bert, copy)
    if not copy_resumes:
        matrix_of(family, str(copy), tmp_path).refused(capsys, names="--set")
    assert matrix_of(family, str(copy) if copy_resumes else tiny_bert, tmp_path).resume() == 0
    assert runs.out.read_bytes() == runs.whole(tmp_path_factory)


def test_the_model_spelling_is_reported_on_resume(tiny_bert, tmp_path, tmp_path_factory, capsys):
    family = FAMILIES["nrr"]
    runs = matrix_of(family, tiny_bert, tmp_path)
    runs.stop(tmp_path_factory)
    copy = tmp_path / "copy"
    shutil.copytree(tiny_bert, copy)
    argv = [a for a in matrix_of(family, str(copy), tmp_path).argv() if a != "-q"]
    capsys.readouterr()
    assert main([*argv, "--resume", "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "the model is named otherwise (--model:" in err and "its content is the same" in err


def test_an_earlier_row_changed_is_refused(family, model, tmp_path, tmp_path_factory, capsys):
    runs = matrix_of(family, model, tmp_path)
    runs.stop(tmp_path_factory)
    write_input(runs.data, family, edit_row=runs.rows_written() - 1)
    runs.refused(capsys, names=f"the first {runs.rows_written()} input rows differ")


def test_a_shorter_input_is_refused(family, model, tmp_path, tmp_path_factory, capsys):
    runs = matrix_of(family, model, tmp_path)
    runs.stop(tmp_path_factory)
    lines = runs.data.read_text().splitlines(keepends=True)
    runs.data.write_text("".join(lines[:runs.rows_written() - 3]))
    runs.refused(capsys, names=f"fewer rows than the {runs.rows_written()}")


def test_a_whole_input_change_under_idf_is_refused_naming_it(tiny_bert, tmp_path, tmp_path_factory, capsys):
    """--idf counts documents over the whole reference column: a reference edited past the resume
    point changes the weights of the rows already written."""
    family = FAMILIES["bertscore"]
    runs = matrix_of(family, tiny_bert, tmp_path)
    runs.stop(tmp_path_factory, "--idf", inject=True)
    write_input(runs.data, family, edit_row=ROWS - 2)
    runs.refused(capsys, "--idf", names="idf source sha256: ")


# -- damaged rows -----------------------------------------------------------------------------------

def _change_a_digit(data: bytes) -> bytes:
    position = next(i for i in range(len(data) // 2, len(data)) if data[i:i + 1].isdigit())
    digit = b"7" if data[position:position + 1] != b"7" else b"3"
    return data[:position] + digit + data[position + 1:]


# name -> (change of the partial file, what a refusal names; None: continued past the verified prefix)
PARTIAL_DAMAGE: dict[str, tuple[Callable[[Path], None], str | None]] = {
    "torn last line": (lambda p: p.write_bytes(p.read_bytes() + b'{"index": 999, "precis'), None),
    "garbage appended": (lambda p: p.write_bytes(p.read_bytes() + b"\x00\xff garbage\n" * 5), None),
    "a digit changed": (lambda p: p.write_bytes(_change_a_digit(p.read_bytes())), "SHA-256"),
    "bytes truncated": (lambda p: p.write_bytes(p.read_bytes()[:-37]), "is shorter"),
    "emptied": (lambda p: p.write_bytes(b""), "is shorter"),
    "removed": (lambda p: p.unlink(), "is gone"),
}


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
@pytest.mark.parametrize("damage", list(PARTIAL_DAMAGE))
def test_damaged_rows_are_refused_or_continued_past_a_verified_prefix(family, model, fmt, damage, tmp_path,
                                                                      tmp_path_factory, capsys):
    runs = matrix_of(family, model, tmp_path, fmt)
    runs.stop(tmp_path_factory)
    change, names = PARTIAL_DAMAGE[damage]
    change(runs.partial)
    if names is None:
        runs.continued(tmp_path_factory)
    else:
        runs.refused(capsys, names=names)


def _first_part(runs: Matrix) -> Path:
    return runs.parts / "part-000000.parquet"


PARTS_DAMAGE: dict[str, tuple[Callable[[Matrix], None], str | None]] = {
    "a part removed": (lambda r: _first_part(r).unlink(), "lacks part-000000.parquet"),
    "a byte of a part changed": (lambda r: _first_part(r).write_bytes(_change_a_digit(_first_part(r).read_bytes())),
                                 "SHA-256"),
    "a part not recorded": (lambda r: shutil.copy(_first_part(r), r.parts / "part-000099.parquet"), None),
    "a part's temporary left": (lambda r: (r.parts / ".part-000009.parquet.tmp").write_bytes(b"PAR1"), None),
}


@pytest.mark.parametrize("damage", list(PARTS_DAMAGE))
def test_damaged_parquet_parts_are_refused_or_left_out(family, model, damage, tmp_path, tmp_path_factory, capsys):
    runs = matrix_of(family, model, tmp_path, "parquet")
    runs.stop(tmp_path_factory)
    change, names = PARTS_DAMAGE[damage]
    change(runs)
    if names is None:
        runs.continued(tmp_path_factory)
    else:
        runs.refused(capsys, names=names)


# -- damaged states ---------------------------------------------------------------------------------

FIELDS = ["version", "format", "columns", "settings", "rows", "input_sha256", "bytes", "output_sha256", "parts",
          "parts_sha256"]


def _without(name: str) -> Callable[[dict, Matrix], dict]:
    return lambda state, runs: {k: v for k, v in state.items() if k != name}


def _set(name: str, value) -> Callable[[dict, Matrix], dict]:
    return lambda state, runs: {**state, name: value(state) if callable(value) else value}


def _row_boundary(runs: Matrix, rows: int) -> int:
    """The byte offset of the end of row ``rows`` in the partial file (after a CSV header)."""
    lines = runs.partial.read_bytes().splitlines(keepends=True)
    return sum(len(line) for line in lines[:rows + (1 if runs.fmt == "csv" else 0)])


def _earlier_boundary(state: dict, runs: Matrix) -> dict:
    return {**state, "bytes": _row_boundary(runs, state["rows"] - CHUNK)}


def _consistent_earlier_state(state: dict, runs: Matrix) -> dict:
    """The state as it was one chunk earlier: every field agreeing (a valid state to resume)."""
    from rapidscore.common.stream import item_sha256

    rows = state["rows"] - CHUNK
    size = _row_boundary(runs, rows)
    digest = hashlib.sha256()
    for line in runs.data.read_text().splitlines()[:rows]:
        values = list(json.loads(line).values())
        digest.update(item_sha256((values[0], values[1:])))  # the digest of the rows as read
    return {**state, "rows": rows, "bytes": size, "input_sha256": digest.hexdigest(),
            "output_sha256": sha256(runs.partial.read_bytes()[:size])}


# name -> (the state's change, what a refusal names; None: continued to the uninterrupted bytes)
STATE_DAMAGE: dict[str, tuple[Callable[[dict, Matrix], dict] | str, str | None]] = {
    "invalid JSON": ('{"version": 3, "rows": ', "is damaged"),
    "empty": ("", "is damaged"),
    "an array": ("[1, 2]", "a JSON list, not an object"),
    **{f"{name} removed": (_without(name), "state version null" if name == "version" else f'no "{name}"')
       for name in FIELDS},
    "version a string": (_set("version", "3"), 'state version "3"'),
    "format a number": (_set("format", 3), '"format" is 3'),
    "format another": (_set("format", "parquet"), "another format"),
    "columns a string": (_set("columns", "index"), '"columns" is "index"'),
    "columns other": (_set("columns", ["index", "other"]), "other columns"),
    "settings a list": (_set("settings", ["a", "b"]), '"settings" is ["a", "b"]'),
    "settings null": (_set("settings", None), '"settings" is null'),
    "settings other": (_set("settings", lambda s: {**s["settings"], "command": "other"}), "command: "),
    "rows a string": (_set("rows", lambda s: str(s["rows"])), '"rows" is "'),
    "rows a float": (_set("rows", 1.5), '"rows" is 1.5'),
    "rows true": (_set("rows", True), '"rows" is true'),
    "rows negative": (_set("rows", -5), '"rows" is -5'),
    "rows one chunk more": (_set("rows", lambda s: s["rows"] + CHUNK), '"rows" is '),
    "rows one chunk less": (_set("rows", lambda s: s["rows"] - CHUNK), '"rows" is '),
    "bytes null": (_set("bytes", None), '"bytes" is null'),
    "bytes negative": (_set("bytes", -1), '"bytes" is -1'),
    "bytes lowered by 37": (_set("bytes", lambda s: s["bytes"] - 37), "SHA-256"),
    "bytes at an earlier row boundary": (_earlier_boundary, "SHA-256"),
    "bytes past the end": (_set("bytes", lambda s: s["bytes"] + 10**6), "is shorter"),
    "input_sha256 a number": (_set("input_sha256", 5), '"input_sha256" is 5'),
    "input_sha256 another": (_set("input_sha256", "0" * 64), "input rows differ"),
    "output_sha256 not hex": (_set("output_sha256", "xyz"), '"output_sha256" is "xyz"'),
    "output_sha256 another": (_set("output_sha256", "0" * 64), "SHA-256"),
    "parts a string": (_set("parts", "a"), '"parts" is "a"'),
    "parts outside the directory": (_set("parts", ["elsewhere/part-000000.parquet"]), '"parts" is'),
    "parts_sha256 an object": (_set("parts_sha256", {}), '"parts_sha256" is {}'),
    "an earlier state, consistent": (_consistent_earlier_state, None),
}


@pytest.mark.parametrize("damage", list(STATE_DAMAGE))
def test_a_damaged_state_is_refused_naming_the_field(family, model, damage, tmp_path, tmp_path_factory, capsys):
    runs = matrix_of(family, model, tmp_path)
    runs.stop(tmp_path_factory)
    change, names = STATE_DAMAGE[damage]
    if isinstance(change, str):
        runs.state.write_text(change)
    else:
        runs.write_state(change(runs.read_state(), runs))
    if names is None:
        runs.continued(tmp_path_factory)
    else:
        runs.refused(capsys, names=names)


# -- a real kill ------------------------------------------------------------------------------------

@pytest.mark.slow  # a CLI process killed with SIGKILL, then resumed: several seconds each
@pytest.mark.parametrize("name", ["bertscore", "nrr", "ner", "refusal"])
def test_a_sigkilled_run_resumes_to_the_uninterrupted_output(name, tiny_bert, tmp_path, tmp_path_factory):
    family = FAMILIES[name]
    runs = matrix_of(family, tiny_bert if family.model_option else "", tmp_path)
    lines = runs.data.read_text().splitlines(keepends=True)
    argv = [a if a != str(runs.data) else "-" for a in runs.argv()]  # stdin, fed by hand
    proc = subprocess.Popen([sys.executable, "-m", "rapidscore", *argv, "--input-format", "jsonl"],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None
    stop = family.stop_row()
    proc.stdin.write("".join(lines[:stop]))  # the rest is never sent: the kill lands part way for certain
    proc.stdin.flush()
    done = wait_for_rows(runs.state, stop // CHUNK * CHUNK, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL and 0 < done < ROWS
    # a kill while the state was being written leaves its temporary: the resume removes it
    Path(f"{runs.state}.tmp").write_text('{"version": 3, "ro')
    assert runs.resume("--input-format", "jsonl") == 0
    assert runs.out.read_bytes() == runs.whole(tmp_path_factory)
    assert not Path(f"{runs.state}.tmp").exists()


# -- issue 46's reproducers (each fails before the state recorded the rows' digest) ----------------

def test_item2_a_state_whose_bytes_were_lowered_by_37_is_refused(tmp_path, tmp_path_factory, capsys):
    runs = matrix_of(FAMILIES["refusal"], "", tmp_path)
    runs.stop(tmp_path_factory)
    runs.write_state({**runs.read_state(), "bytes": runs.read_state()["bytes"] - 37})
    runs.refused(capsys, names="SHA-256")  # it was continued: exit 0 and an invalid JSON line


def test_item2_a_state_moved_back_to_an_earlier_row_boundary_is_refused(tmp_path, tmp_path_factory, capsys):
    runs = matrix_of(FAMILIES["refusal"], "", tmp_path)
    runs.stop(tmp_path_factory)
    runs.write_state(_earlier_boundary(runs.read_state(), runs))
    runs.refused(capsys, names="SHA-256")  # it was continued: exit 0 and CHUNK rows missing


def test_item2_a_digit_changed_in_the_partial_rows_is_refused(tmp_path, tmp_path_factory, capsys):
    runs = matrix_of(FAMILIES["refusal"], "", tmp_path)
    runs.stop(tmp_path_factory)
    runs.partial.write_bytes(_change_a_digit(runs.partial.read_bytes()))
    runs.refused(capsys, names="SHA-256")  # it was kept


@pytest.mark.parametrize("name", list(FAMILIES))
def test_item3_an_input_named_as_the_state_temporary_is_never_written(name, request, tiny_bert, tmp_path, capsys):
    family = FAMILIES[name]
    if name == "toy":
        request.getfixturevalue("toy_metric")
    source = write_input(tmp_path / "out.jsonl.resume.json.tmp", family)
    before = source.read_bytes()
    argv = family.argv(source, tmp_path / "out.jsonl", tiny_bert)
    assert main([*argv, "--input-format", "jsonl"]) == 2
    message = capsys.readouterr().err.strip().splitlines()[-1]
    assert "out.jsonl.resume.json.tmp" in message and "would destroy the input" in message
    assert source.read_bytes() == before


def test_item3_an_input_inside_the_parquet_parts_is_never_removed(tmp_path, capsys):
    parts = tmp_path / "out.parquet.parts"
    parts.mkdir()
    source = write_input(parts / ".part-000000.parquet.tmp", FAMILIES["refusal"])
    before = source.read_bytes()
    argv = FAMILIES["refusal"].argv(source, tmp_path / "out.parquet", "")
    assert main([*argv, "--input-format", "jsonl"]) == 2
    assert "would destroy the input" in capsys.readouterr().err
    assert source.read_bytes() == before


def test_item9_a_full_disk_before_the_first_row_leaves_no_file(tmp_path, monkeypatch, capsys):
    runs = matrix_of(FAMILIES["refusal"], "", tmp_path)

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    assert main(runs.argv()) == 2
    assert "No space left on device" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


def test_item9_a_killed_run_s_state_temporary_is_removed_by_the_next_run(tmp_path, tmp_path_factory, capsys):
    runs = matrix_of(FAMILIES["refusal"], "", tmp_path)
    runs.stop(tmp_path_factory)
    stale = Path(f"{runs.state}.tmp")
    stale.write_text('{"version": 3, "ro')  # a kill -9 while the state was written
    kept = {name: content for name, content in runs.files().items() if not name.endswith(".tmp")}
    # even a resume that is refused removes it, and keeps the rows and the state
    assert runs.resume("--set", "method=phrase") == 2
    assert not stale.exists() and runs.files() == kept
    stale.write_text('{"version": 3, "ro')
    runs.continued(tmp_path_factory)  # checks the temporary is gone
    stale.write_text('{"version": 3, "ro')
    assert main(runs.argv()) == 0  # a fresh run too
    assert not stale.exists()


@pytest.mark.parametrize(("field", "value"), [("settings", ["a"]), ("settings", None), ("bytes", -1), ("rows", -5)])
def test_item11_a_damaged_state_field_is_named(field, value, tmp_path, tmp_path_factory, capsys):
    runs = matrix_of(FAMILIES["refusal"], "", tmp_path)
    runs.stop(tmp_path_factory)
    runs.write_state({**runs.read_state(), field: value})
    message = runs.refused(capsys, names=f'"{field}" is {json.dumps(value)}')
    assert "without --resume" in message


def test_item11_a_refusal_shows_the_part_of_the_signature_that_differs(tiny_bert, tmp_path, tmp_path_factory,
                                                                        capsys):
    runs = matrix_of(FAMILIES["bertscore"], tiny_bert, tmp_path)
    runs.stop(tmp_path_factory)
    message = runs.refused(capsys, "-l", "1", names="signature:")
    shown = message.split("signature: ", 1)[1].split(";")[0].split(")")[0]
    assert re.fullmatch(r'"layer:\d+" then, "layer:1" now', shown), message
