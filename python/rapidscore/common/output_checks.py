"""Checking a run's outputs before anything is written: never an input, a model file or another output.

Before a command runs (:func:`check_files` over its declared files) and again before an output
replaces its target, an output is refused (:class:`OutputError`) when it is one of the run's
inputs by any name (the same path, a symlink or a hard link), including the files an output
brings with it (a stream's ``OUTPUT.resume.json``, ``OUTPUT.partial``, ``OUTPUT.parts``), when two
options name one file, when it is a directory (or a directory output is a file), when its
directory does not exist, or when it lies inside the directory of a model the run reads. An input
that is a directory where a file is wanted is refused too (``-c DIR`` is not a sentence).

Imports only the standard library.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass

from rapidscore.common.file_options import DeclaredFile
from rapidscore.errors import OutputError

__all__ = ["OutputError", "check_files", "check_output_target", "check_output_directory", "is_special_file",
           "same_file", "input_refusal", "written_files", "ModelDirectory", "model_directories",
           "STATE_SUFFIX", "STATE_TMP_SUFFIX", "PARTIAL_SUFFIX", "PARTS_SUFFIX", "STREAM_FILES"]

# the files a streamed output brings with it (common/stream_io.py): the state, the temporary
# the state is written to before its rename, the rows so far, and Parquet's part directory
STATE_SUFFIX = ".resume.json"
STATE_TMP_SUFFIX = ".resume.json.tmp"
PARTIAL_SUFFIX = ".partial"
PARTS_SUFFIX = ".parts"
STREAM_FILES = (STATE_SUFFIX, STATE_TMP_SUFFIX, PARTIAL_SUFFIX, PARTS_SUFFIX)


def same_file(a: str, b: str) -> bool:
    """Whether two paths name one file (the same path, a symlink or a hard link)."""
    try:
        return os.path.samefile(a, b)  # one inode: the same path, a symlink or a hard link
    except OSError:  # one of them does not exist (yet)
        return os.path.realpath(a) == os.path.realpath(b)


def is_special_file(path: str) -> bool:
    """An existing file that is not a regular file or a directory (/dev/null, a FIFO): written in
    place, never replaced by a rename."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def check_output_directory(path: str | os.PathLike, option: str = "output") -> None:
    """An output's directory must exist: a typo in it is an error, not a tree of new directories
    (FileNotFoundError / NotADirectoryError naming ``option``)."""
    parent = os.path.dirname(os.path.abspath(os.fspath(path)))
    if not os.path.exists(parent):
        raise FileNotFoundError(f"{option} {os.fspath(path)}: no such directory {parent} (it is not created)")
    if not os.path.isdir(parent):
        raise NotADirectoryError(f"{option} {os.fspath(path)}: {parent} is not a directory")


def check_output_target(path: str | os.PathLike, option: str = "output", directory: bool = False) -> None:
    """An output's target must be a file (``directory``: a directory) whose directory exists:
    IsADirectoryError / NotADirectoryError / FileNotFoundError naming ``option``. A caller with
    long work before it writes (a baseline) checks first, so a typo fails at once."""
    path = os.fspath(path)
    if directory:
        if os.path.exists(path) and not os.path.isdir(path):
            raise NotADirectoryError(f"{option} {path} exists and is not a directory")
    elif os.path.isdir(path):
        raise IsADirectoryError(f"{option} {path} is a directory: give a file name")
    check_output_directory(path, option)


def written_files(output: DeclaredFile) -> list[str]:
    """The output and the files it brings with it (a stream's: its state, the state's temporary,
    the partial rows, the part directory and every file in it, part temporaries included)."""
    if output.spec.stream and not is_special_file(output.path):
        parts = output.path + PARTS_SUFFIX
        inside = [os.path.join(parts, name) for name in os.listdir(parts)] if os.path.isdir(parts) else []
        return [output.path, *(output.path + suffix for suffix in STREAM_FILES), *inside]
    return [output.path]


def input_refusal(option: str, path: str, written: str, input_option: str, input_path: str) -> OutputError:
    """The error of output ``option`` ``path`` whose file ``written`` is input ``input_option`` ``input_path``."""
    if written == path:
        how = f" (a link to {os.path.realpath(path)})" if os.path.islink(path) else ""
        return OutputError(f"{option} {path}{how} is the input file {input_option} {input_path}: writing it would "
                           f"destroy the input; give another {option}")
    return OutputError(f"{option} {path} keeps {written} beside it, which is the input file {input_option} "
                       f"{input_path}: writing it would destroy the input; give another {option}")


def _inside(path: str, directory: str) -> bool:
    real, folder = os.path.realpath(path), os.path.realpath(directory)
    return real == folder or real.startswith(folder.rstrip(os.sep) + os.sep)


def _directory_files(directory: str) -> list[str]:
    """The files of a model directory (a hub cache's snapshot holds links to blobs elsewhere)."""
    found: list[str] = []
    for folder, _dirs, names in os.walk(directory):
        found.extend(os.path.join(folder, name) for name in names)
    return found


@dataclass
class ModelDirectory:
    """A model directory a run reads: no output may replace one of its files or be written inside it."""

    option: str  # the option that named it, or "model" for one loaded without an option
    path: str
    _files: list[str] | None = None

    def refusal(self, option: str, path: str, written: str) -> OutputError | None:
        """The refusal of output ``option`` ``path`` (writing ``written``) when it would replace a
        file of this model or write inside its directory; None when it would not."""
        if self._files is None:
            self._files = _directory_files(self.path)
        model_file = next((f for f in self._files if same_file(written, f)), None)
        if model_file is None and not _inside(written, self.path):
            return None
        what = f"the model file {model_file}" if model_file is not None else "inside the model directory"
        beside = "" if written == path else f" (it keeps {written} beside it)"
        model = (f"{self.option} {self.path}" if self.option != "model"
                 else f"the model this run loaded, {self.path}")
        return OutputError(f"{option} {path}{beside} is {what} of {model}: a run never writes into a model it "
                           f"reads; give another {option}")


def model_directories(files: Iterable[DeclaredFile]) -> list[ModelDirectory]:
    """The model directories the declared ``files`` name."""
    # hub ids and the embedded model's name are resolved when the model loads (note_model)
    return [ModelDirectory(f.option, f.path) for f in files if f.spec.role == "model" and os.path.isdir(f.path)]


def check_files(files: Iterable[DeclaredFile]) -> None:
    """The checks of a run's declared files (see the module's docstring); raises before anything
    is opened for writing."""
    files = list(files)
    inputs = [f for f in files if f.spec.role == "input"]
    outputs = [f for f in files if f.spec.role == "output"]
    models = model_directories(files)
    for item in inputs:
        if not item.spec.directory and os.path.isdir(item.path):
            also = " (or a sentence in quotes)" if item.spec.text else ""
            raise IsADirectoryError(f"{item.option} {item.path} is a directory: give a file{also}")
    seen: list[tuple[DeclaredFile, str]] = []
    for output in outputs:
        check_output_target(output.path, output.option, output.spec.directory)
        for written in written_files(output):
            for item in inputs:
                if same_file(written, item.path):
                    raise input_refusal(output.option, output.path, written, item.option, item.path)
            for model in models:
                refusal = model.refusal(output.option, output.path, written)
                if refusal is not None:
                    raise refusal
            for other, other_written in seen:
                if same_file(written, other_written):
                    beside = written != output.path or other_written != other.path
                    raise OutputError(f"{output.option} {output.path} and {other.option} {other.path} are one file"
                                      f"{' (with the files a stream keeps beside it)' if beside else ''}: give each "
                                      "output its own file")
        seen.extend((output, written) for written in written_files(output))

