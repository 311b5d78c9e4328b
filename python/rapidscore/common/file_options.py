"""Declaring a command's file options: which parser options name inputs, outputs and models, and
which options cannot change a number (:func:`run_only`).

A command marks its file options once, where it builds its parser (:func:`input_option`,
:func:`output_option`, :func:`model_option` mark the argparse actions ``add_argument`` returns);
:func:`declared_files` reads the marks back from the parsed arguments, for the checks of
``common/output_checks.py`` and the run of ``common/file_run.py``.

Imports only the standard library: the parsers of every command use it.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["input_option", "output_option", "model_option", "DeclaredFile", "declared_files", "file_options",
           "file_role", "option_name", "run_only", "is_run_only"]

_MARK = "rapidscore_file"
_RUN_ONLY = "rapidscore_run_only"


def run_only(action: argparse.Action) -> argparse.Action:
    """Mark a parser option (the action ``add_argument`` returned) as one that cannot change a
    number: what is shown (progress, tables, timings), threads, chunk sizes, memory budgets. A
    resume state's fingerprint leaves it out (``common/file_run.py``), so a resumed run may set it
    otherwise."""
    setattr(action, _RUN_ONLY, True)
    return action


def is_run_only(action: argparse.Action) -> bool:
    """Whether ``action`` was marked by :func:`run_only`."""
    return bool(getattr(action, _RUN_ONLY, False))


@dataclass(frozen=True)
class _FileOption:
    role: str  # "input", "output" or "model" (a model directory or name)
    settings: bool = False  # an input whose content changes the numbers (idf counts, a baseline)
    directory: bool = False  # a directory, not a file (an input: allowed to be one)
    text: bool = False  # an input that may be a sentence instead of a file (bertscore -c/-r)
    stream: bool = False  # an output written as a stream (its state and partial files beside it)
    paths: Callable[[Any], Iterable[Any]] | None = None  # the paths of a parsed value (NAME=FILE)


def input_option(action: argparse.Action, *, settings: bool = False, directory: bool = False, text: bool = False,
                 paths: Callable[[Any], Iterable[Any]] | None = None) -> argparse.Action:
    """Mark a parser option (the action ``add_argument`` returned) as naming input files.

    ``settings``: the file's content changes the numbers (an idf file, a baseline, a label
    map): its hash joins a resume state's fingerprint. ``directory``: a directory is a valid
    value. ``text``: the value may be a sentence instead of a file (then it need not exist).
    ``paths``: the file paths of a parsed value, when the value is not a path (``NAME=FILE``)."""
    setattr(action, _MARK, _FileOption("input", settings=settings, directory=directory, text=text, paths=paths))
    return action


def output_option(action: argparse.Action, *, stream: bool = False, directory: bool = False) -> argparse.Action:
    """Mark a parser option as naming an output file (``directory``: an output directory,
    whose files are opened through this module too). ``stream``: written by the streaming
    writer, which keeps ``OUTPUT.resume.json`` and ``OUTPUT.partial``/``OUTPUT.parts`` beside it."""
    setattr(action, _MARK, _FileOption("output", stream=stream, directory=directory))
    return action


def model_option(action: argparse.Action) -> argparse.Action:
    """Mark a parser option as naming a model (a directory, a hub id or the embedded model's
    name): no output may be written inside a model directory it names (checked before the run;
    models named otherwise are checked when they load, :func:`note_model`). Its value stays among
    the run's options (a resume state reports it)."""
    setattr(action, _MARK, _FileOption("model", directory=True, text=True))
    return action


@dataclass(frozen=True)
class DeclaredFile:
    """A file a marked option names in one run's arguments."""

    option: str
    path: str
    spec: _FileOption


def option_name(action: argparse.Action) -> str:
    """How a run names an option in its messages and fingerprint."""
    if action.option_strings:
        return action.option_strings[0]  # as the command declared it first: "-c", "--output"
    return action.metavar if isinstance(action.metavar, str) else action.dest


def _values(value: Any, spec: _FileOption) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list) or (isinstance(value, tuple) and spec.paths is None):
        values = list(value)  # nargs / append: one path per item
    else:
        values = [value]
    if spec.paths is not None:  # an item holds its path (NAME=FILE)
        values = [path for item in values for path in spec.paths(item)]
    return [os.fspath(v) for v in values if v is not None and os.fspath(v) not in ("", "-")]


def declared_files(actions: Iterable[argparse.Action], args: argparse.Namespace) -> list[DeclaredFile]:
    """The files the marked options among a parser's ``actions`` name in ``args``."""
    files = []
    for action in actions:
        spec = getattr(action, _MARK, None)
        if spec is None:
            continue
        for path in _values(getattr(args, action.dest, None), spec):
            files.append(DeclaredFile(option_name(action), path, spec))
    return files


def file_options(actions: Iterable[argparse.Action], role: str) -> list[tuple[str, argparse.Action]]:
    """``(option, action)`` of every action marked as ``role`` ("input" or "output")."""
    return [(option_name(a), a) for a in actions
            if getattr(a, _MARK, None) is not None and getattr(a, _MARK).role == role]



def file_role(action: argparse.Action) -> str | None:
    """"input", "output" or "model" for an action marked here; None for any other option."""
    spec = getattr(action, _MARK, None)
    return None if spec is None else spec.role
