"""Checks of the files a command writes (an output that is an input, an output directory that
does not exist), and the names of the one input reader, :mod:`rapidscore.common.readers`, kept
here where callers import them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from rapidscore.common.readers import (
    FORMATS,
    check_input_file,
    decoded_lines,
    detect_format,
    import_parquet,
    iter_column,
    iter_lines,
    jsonl_objects,
    load_json,
    read_column,
    read_records,
    read_texts,
)

__all__ = ["FORMATS", "check_input_file", "check_outputs", "check_output_directory", "iter_lines", "load_json",
           "jsonl_objects", "decoded_lines", "import_parquet", "detect_format", "iter_column", "read_column",
           "read_texts", "read_records"]


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)  # the same inode: one path, a symlink or a hard link
    except OSError:  # one of them does not exist (yet): not the same file
        return False


def check_outputs(outputs: Mapping[str, str | os.PathLike | None],
                  inputs: Mapping[str, str | os.PathLike | Iterable[str | os.PathLike] | None]) -> None:
    """Refuse, before anything is opened for writing, an output file that is an input file by
    any name (the same path, a symlink or a hard link to it), or one file named by two outputs:
    opening it for writing would truncate the input before it is read, or one output would
    overwrite the other. ``outputs`` and ``inputs`` map the option that names each file
    (``"--output"``, ``"-r"``) to its path (or, for inputs, several paths); None and ``-``
    (stdin/stdout) are skipped. ValueError naming both options and the file."""
    def paths(value) -> list[str]:
        if value is None:
            return []
        if isinstance(value, (str, os.PathLike)):
            value = [value]
        return [os.fspath(v) for v in value if v is not None and os.fspath(v) != "-"]

    named_inputs = [(option, path) for option, value in inputs.items() for path in paths(value)]
    seen_outputs: list[tuple[str, str]] = []
    for option, value in outputs.items():
        for path in paths(value):
            for input_option, input_path in named_inputs:
                if _same_file(path, input_path):
                    how = f" (a link to {os.path.realpath(path)})" if os.path.islink(path) else ""
                    raise ValueError(f"{option} {path}{how} is the input file {input_option} {input_path}: writing "
                                     f"it would destroy the input; give another {option}")
            for other_option, other_path in seen_outputs:
                if os.path.realpath(path) == os.path.realpath(other_path) or _same_file(path, other_path):
                    raise ValueError(f"{option} {path} and {other_option} {other_path} are one file: give "
                                     "each output its own file")
            seen_outputs.append((option, path))


def check_output_directory(path: str | os.PathLike, option: str = "output") -> None:
    """An output file's directory must exist: a typo in it is an error, not a tree of new
    directories (FileNotFoundError / NotADirectoryError naming ``option``)."""
    parent = os.path.dirname(os.path.abspath(os.fspath(path)))
    if not os.path.exists(parent):
        raise FileNotFoundError(f"{option} {os.fspath(path)}: no such directory {parent} (it is not created)")
    if not os.path.isdir(parent):
        raise NotADirectoryError(f"{option} {os.fspath(path)}: {parent} is not a directory")
