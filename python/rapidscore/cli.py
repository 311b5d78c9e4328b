"""Command line entry point: ``rapidscore <metric> ...``.

Each metric keeps its command in its own ``cli`` module, which imports only argparse-level code
(its package ``__init__`` loads nothing eagerly): building the parser, ``--help`` included, never
loads numpy, the kernels or an encoder. A command module provides ``add_arguments(parser)`` and
``run(args) -> int`` (the exit code); ``run`` imports the metric when the command runs.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import warnings
from collections.abc import Iterator
from importlib import import_module
from typing import NoReturn

from rapidscore._version import __version__
from rapidscore.common.file_run import command_run, set_model_source

# The commands that are not a metric's: command -> (module, one-line help). A metric's command
# comes from the registry (rapidscore.metrics): its own module, or the generic metric command.
TOOL_COMMANDS = {
    "abstention": ("rapidscore.abstention.cli", "abstention metrics over a concept taxonomy (SELECT)"),
    "rgb": ("rapidscore.abstention.rgb", "RGB negative rejection: the share of no-support questions declined"),
    "serve": ("rapidscore.serve.cli", "HTTP scoring service with micro-batching (the [serve] extra)"),
    "export": ("rapidscore.export_cli", "export a model's ONNX graphs into a cache (build machine; [export])"),
    "report": ("rapidscore.report.cli", "one self-contained HTML page of an evaluation run's result files"),
    "compare": ("rapidscore.compare.cli", "paired significance tests and intervals: is a system better than another?"),
}


def commands() -> dict[str, tuple[str | None, str]]:
    """Every command: the registered metrics' (module, or None for the generic command of
    ``rapidscore.metric_cli``), then the tools'; -> (module, one-line help)."""
    from rapidscore.metrics import all_metrics

    table: dict[str, tuple[str | None, str]] = {m.name: (m.front_ends.command, m.front_ends.summary)
                                                for m in all_metrics()}
    return {**table, **TOOL_COMMANDS}




def _available_commands():
    from rapidscore.metric_cli import MetricCommand
    from rapidscore.metrics import get_metric

    for name, (module_name, help_text) in commands().items():
        aliases = get_metric(name).front_ends.aliases if module_name is None or name not in TOOL_COMMANDS else ()
        if module_name is None:
            yield name, MetricCommand(name), help_text, aliases
            continue
        try:
            module = import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                continue  # command not part of this build
            raise
        yield name, module, help_text, aliases


class _Parser(argparse.ArgumentParser):
    """argparse's parser whose errors are one line, as every command error is (the usage dump is
    one --help away). Sub-commands' parsers are of this class too (add_subparsers' default)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {_one_line(message)} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rapidscore",
        description="Fast, reference-exact evaluation metrics for LLM and NER outputs.",
        epilog="Run 'rapidscore COMMAND --help' for a command's options.")
    parser.add_argument("--version", action="version", version=f"rapidscore {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, module, help_text, aliases in _available_commands():
        command = sub.add_parser(name, help=help_text, description=help_text, aliases=list(aliases))
        module.add_arguments(command)
        command.set_defaults(run_command=module.run)
    return parser


# What a command reports as a message (exit 2) rather than a traceback. RuntimeError covers the
# runtimes' "no such device" failures; RecursionError input nested too deeply; MemoryError input
# too large for this machine.
USER_ERRORS = (ValueError, TypeError, KeyError, OSError, ImportError, RuntimeError, RecursionError, MemoryError)


def _one_line(text: str) -> str:
    # messages from other libraries (the hub's) may span lines; a command's error is one line
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def _input_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, str]:
    """``{path: option}`` of the input files the command's options name (``-c``, ``--input``)."""
    from rapidscore.common.file_options import declared_files

    try:
        actions = command_parser(parser, args.command)._actions
    except (KeyError, StopIteration):  # pragma: no cover - every parsed command has its parser
        return {}
    return {declared.path: declared.option for declared in declared_files(actions, args)
            if declared.spec.role == "input" and declared.option.startswith("-")}


def _file_problem(exc: OSError, known: bool) -> str | None:
    """A file error in the same words on every route: a missing input is "no such file" whether
    rapidscore checked it or ``open`` failed (``known``: the path is one of the command's inputs,
    or the error is rapidscore's own, with no errno text)."""
    if known or not exc.strerror:
        if isinstance(exc, FileNotFoundError):
            return "no such file"
        if isinstance(exc, IsADirectoryError):
            return "is a directory; expected a file"
    return exc.strerror


def _failed_path(exc: BaseException) -> str | None:
    """The file an OSError is about: open()'s ``filename``, or the ``input_path`` of rapidscore's
    own input checks (common/input_files.py)."""
    if not isinstance(exc, OSError):
        return None
    path = exc.filename if exc.filename is not None else getattr(exc, "input_path", None)
    return None if path is None else os.fspath(path)


def _describe(exc: BaseException, input_options: dict[str, str] | None = None) -> str:
    path = _failed_path(exc)
    if isinstance(exc, OSError) and path is not None:
        option = (input_options or {}).get(path)
        problem = _file_problem(exc, option is not None)
        if problem:  # "-c nope.txt: no such file", not "[Errno 2] No such file or directory: 'nope.txt'"
            return f"{option} {path}: {problem}" if option else f"{path}: {problem}"
    if isinstance(exc, KeyError) and len(exc.args) == 1 and isinstance(exc.args[0], str):
        return exc.args[0]  # str(KeyError) wraps the message in quotes
    if isinstance(exc, MemoryError):
        return f"out of memory{': ' + str(exc) if str(exc) else ''}"
    return str(exc) or type(exc).__name__


def _models_used_since(mark):
    """The encoder layer's record of the models used (``rapidscore.encoder.loaded``), read without
    importing the encoder: a run that never imported it loaded no model."""
    loaded = sys.modules.get("rapidscore.encoder.loaded")
    if loaded is None:
        return 0 if mark is None else mark, {}  # (uses are numbered from 1)
    return loaded.models_used_since(mark)


set_model_source(_models_used_since)  # a command run asks which models it loaded (common/file_run.py)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # named by the command's parser, whose --help lists its options
        command_parser(parser, args.command).error(f"unrecognized arguments: {' '.join(unknown)}")
    notes = _NotesOnStderr.attach(args)
    from rapidscore.common.readers import set_max_record_bytes  # not at import: --help stays light

    try:
        # --max-record-bytes for this run only (None: the default): an in-process run never leaks it
        set_max_record_bytes(getattr(args, "max_record_bytes", None))
        with _warnings_on_one_line(args.command), command_run(command_parser(parser, args.command)._actions, args):
            return int(args.run_command(args) or 0)
    except KeyboardInterrupt:
        return 130
    except USER_ERRORS as exc:
        # Bad input, a missing or unreadable file, a device that is not there: a message and exit
        # status 2, never a traceback (RAPIDSCORE_DEBUG=1 shows it, for bug reports).
        if os.environ.get("RAPIDSCORE_DEBUG"):
            raise
        print(f"rapidscore {args.command}: error: {_one_line(_describe(exc, _input_options(parser, args)))}",
              file=sys.stderr)
        return 2
    except Exception as exc:  # a failure no check foresaw (a bug): one line and exit 2 too
        if os.environ.get("RAPIDSCORE_DEBUG"):
            raise
        print(f"rapidscore {args.command}: error: {type(exc).__name__}: {_one_line(str(exc))} (unexpected; "
              "RAPIDSCORE_DEBUG=1 shows the traceback for a bug report)", file=sys.stderr)
        return 2
    finally:
        set_max_record_bytes(None)
        notes.detach()


def command_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """The parser of one command (its options, and the files they declare: common/outputs.py)."""
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return commands.choices[command]


@contextlib.contextmanager
def _warnings_on_one_line(command: str) -> Iterator[None]:
    """Warnings as one line each (``rapidscore CMD: warning: ...``), not Python's file, line
    number and source line."""
    def one_line(message, category, filename, lineno, line=None) -> str:
        return f"rapidscore {command}: warning: {_one_line(str(message))}\n"

    saved = warnings.formatwarning
    warnings.formatwarning = one_line
    try:
        yield
    finally:
        warnings.formatwarning = saved


class _NotesOnStderr:
    """The library's notes (INFO on the ``rapidscore`` logger: an ONNX export starting and ending)
    on stderr while a command runs, unless it was given -q; a library caller sees them only when it
    enables logging."""

    def __init__(self, handler: logging.Handler | None = None) -> None:
        self.handler, self.level = handler, logging.NOTSET

    @classmethod
    def attach(cls, args) -> _NotesOnStderr:
        if getattr(args, "quiet", False):
            return cls()

        class Handler(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:  # sys.stderr at the time of the note (tests replace it)
                print(record.getMessage(), file=sys.stderr)

        handler = Handler(logging.INFO)
        notes = cls(handler)
        logger = logging.getLogger("rapidscore")
        notes.level = logger.level
        if logger.getEffectiveLevel() > logging.INFO:
            logger.setLevel(logging.INFO)
        logger.addHandler(handler)
        return notes

    def detach(self) -> None:
        if self.handler is not None:
            logger = logging.getLogger("rapidscore")
            logger.removeHandler(self.handler)
            logger.setLevel(self.level)


if __name__ == "__main__":
    sys.exit(main())
