"""One command run's files: its inputs, the models it loaded, and the outputs waiting for its end.

``rapidscore.cli.main`` runs a command inside :func:`command_run`: its declared files are checked
first (``common/output_checks.py``), then every output opened through ``common/outputs.py`` is
renamed into place when the whole run succeeds and discarded when it fails. Files read while
running (:func:`note_input`, called by the readers) and models loaded join the run's inputs, so
an output opened later cannot be one of them either. The run asks which models were loaded
(:func:`set_model_source`: the encoder layer's record, registered by ``rapidscore.cli``) when
it opens or commits an output and when it makes its fingerprint; :func:`note_model` adds one.
:meth:`FileRun.fingerprint` is what a resume state records of the run: every option that can
change a number, the content hash of every settings file (idf counts, baselines, label maps) and
the digest of every model the run loaded. Which options cannot change a number is said where
each is declared (``common/file_options.run_only``), never listed here.

Imports only the standard library.
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import hashlib
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from rapidscore.common.file_options import DeclaredFile, declared_files, file_role, is_run_only, option_name
from rapidscore.common.output_checks import (
    ModelDirectory,
    OutputError,
    check_files,
    input_refusal,
    model_directories,
    same_file,
    written_files,
)

__all__ = ["FileRun", "ModelSource", "command_run", "current_run", "note_input", "note_model", "set_model_source",
           "file_sha256", "fingerprint_options"]

#: ``source(mark) -> (mark now, {model directory: fingerprint callable})``: the models loaded after
#: ``mark`` (one it returned before; None: none, the mark only). ``rapidscore.encoder.loaded``'s
#: ``models_used_since``, registered by the command layer: common/ does not import the encoder.
ModelSource = Callable[[Any], tuple[Any, dict[str, Callable[[], str]]]]
_MODEL_SOURCE: list[ModelSource] = []


def set_model_source(source: ModelSource | None) -> None:
    """Where command runs ask which models were loaded (None: nowhere)."""
    _MODEL_SOURCE[:] = [] if source is None else [source]


def fingerprint_options(actions: Sequence[argparse.Action], args: argparse.Namespace) -> dict[str, Any]:
    """``{option: value}`` of the command's declared options (``actions``) that can change a number:
    file options left out (their content is fingerprinted instead; a model's name stays, a resume
    state reports it), and those marked ``run_only`` where they are declared, so that a resumed run
    may show progress, use other threads or another chunk size (chunks never change scores: the
    streams place a resumed chunk in the reference's batches). Values set by no option of the
    command (the command's name, the parser's own defaults) are not options."""
    given = vars(args)
    return {option_name(action): given[action.dest] for action in sorted(actions, key=lambda a: a.dest)
            if action.dest in given and not is_run_only(action) and file_role(action) in (None, "model")
            and not callable(given[action.dest])}


@dataclass
class FileRun:
    """The files of one command run: its declared inputs and outputs, the files it read while
    running, the models it loaded, and the outputs waiting for the run to succeed.
    One per run; not thread-safe beyond the run's own thread (a command's writes come from it)."""

    files: list[DeclaredFile] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)  # option -> value, run-only options left out
    read: list[str] = field(default_factory=list)
    models: dict[str, Callable[[], str]] = field(default_factory=dict)  # model directory -> its fingerprint
    model_directories: list[ModelDirectory] = field(default_factory=list)  # no output is written inside one
    model_mark: Any = None  # the model source's mark: models loaded after it are the run's
    model_options: list[str] = field(default_factory=list)  # the options that name a model (its content: models)
    # (commit, discard, (target, option) or None) of each output waiting for the run's end
    _commits: list[tuple[Callable[[], None], Callable[[], None], tuple[str, str] | None]] = field(
        default_factory=list)

    @property
    def inputs(self) -> list[tuple[str, str]]:
        declared = [(f.option, f.path) for f in self.files if f.spec.role == "input"]
        return declared + [("read", path) for path in self.read]

    def ask_models(self) -> None:
        """Add the models loaded since the last question (the registered model source's)."""
        if _MODEL_SOURCE:
            self.model_mark, models = _MODEL_SOURCE[0](self.model_mark)
            for model_dir, digest in models.items():
                self.add_model(model_dir, digest)

    def add_model(self, model_dir: str, digest: Callable[[], str]) -> None:
        """A model the run loaded: ``digest()`` (its content fingerprint, computed only when a
        resume state asks) joins the run's fingerprint, its directory the run's inputs (an
        OutputError for an output opened inside it already)."""
        self.models.setdefault(model_dir, digest)
        self.add_model_directory(model_dir)

    def check_output(self, path: str, option: str) -> None:
        self.ask_models()
        for input_option_name, input_path in self.inputs:
            if same_file(path, input_path):
                raise input_refusal(option, path, path, input_option_name, input_path)
        for model in self.model_directories:
            refusal = model.refusal(option, path, path)
            if refusal is not None:
                raise refusal

    def add_model_directory(self, path: str, option: str = "model") -> None:
        """A model directory the run reads: no output may be written inside it. The outputs the
        run declared or opened already are checked at once (an OutputError), so a run writing
        into a model it loads late fails when it loads it."""
        if any(same_file(path, known.path) for known in self.model_directories):
            return
        model = ModelDirectory(option, path)
        self.model_directories.append(model)
        outputs = [(f.option, f.path, written) for f in self.files if f.spec.role == "output"
                   for written in written_files(f)]
        outputs += [(checked[1], checked[0], checked[0]) for _commit, _discard, checked in self._commits
                    if checked is not None]  # (target, option) of the outputs opened already
        for output_option_name, output_path_name, written in outputs:
            refusal = model.refusal(output_option_name, output_path_name, written)
            if refusal is not None:
                raise refusal

    def defer(self, commit: Callable[[], None], discard: Callable[[], None], target: str | None = None,
              option: str = "output") -> None:
        """Run ``commit`` when the run succeeds, ``discard`` when it fails. ``target``: the file the
        commit replaces, checked again then against the inputs known by that time (a model loaded
        after the output was opened)."""
        if target is not None and option == "output":  # a caller that does not know its option (a stream)
            option = next((f.option for f in self.files if f.spec.role == "output" and same_file(f.path, target)),
                          option)
        self._commits.append((commit, discard, None if target is None else (target, option)))

    def finish(self, succeeded: bool) -> None:
        pending, self._commits = self._commits, []
        if succeeded:
            try:
                self.ask_models()
                for _commit, _discard, checked in pending:
                    if checked is not None:
                        self.check_output(*checked)
            except OutputError:
                self._discard(pending)
                raise
            for commit, _discard, _checked in pending:
                commit()
        else:
            self._discard(pending)

    @staticmethod
    def _discard(pending: list) -> None:
        for _commit, discard, _checked in reversed(pending):
            with contextlib.suppress(OSError):
                discard()

    def fingerprint(self) -> dict[str, Any]:
        """What a resume state records of this run: ``{name: value}`` of every option that can
        change a number, ``"<option> sha256"`` of every settings file, ``"models"``: the content
        fingerprints of the models loaded. Flat, so that a difference names the setting."""
        self.ask_models()
        result: dict[str, Any] = dict(self.options)
        for item in self.files:
            if item.spec.role == "input" and item.spec.settings and os.path.isfile(item.path):
                result[f"{item.option} sha256"] = file_sha256(item.path)
        if self.models:  # content fingerprints, not names: two spellings of one model are one model
            result["models"] = sorted({digest() for digest in self.models.values()})
            result["model options"] = self.model_options  # their values are reported on a resume, not compared
        return result


def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 of a file's content, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


_RUN: contextvars.ContextVar[FileRun | None] = contextvars.ContextVar("rapidscore_file_run", default=None)


def current_run() -> FileRun | None:
    """The command run in progress in this context, if any."""
    return _RUN.get()


@contextlib.contextmanager
def command_run(actions: Sequence[argparse.Action], args: argparse.Namespace) -> Iterator[FileRun]:
    """Run a command (``actions``: its parser's options) inside a :class:`FileRun`: its declared
    files checked first, its outputs renamed into place when the body returns, discarded when
    it raises (KeyboardInterrupt included)."""
    files = declared_files(actions, args)
    check_files(files)
    # a model's name stays among the options (a resume state reports it; its content is in "models")
    run = FileRun(files=files, options=fingerprint_options(actions, args), model_directories=model_directories(files),
                  model_options=sorted(option_name(a) for a in actions if file_role(a) == "model"))
    if _MODEL_SOURCE:  # models loaded before the run are its own only if it uses them again
        run.model_mark = _MODEL_SOURCE[0](None)[0]
    token = _RUN.set(run)
    try:
        yield run
    except BaseException:
        run.finish(False)
        raise
    else:
        run.finish(True)
    finally:
        _RUN.reset(token)


def note_input(path: str | os.PathLike) -> None:
    """A file read by the run in progress (the readers call it): no output may replace it."""
    run = _RUN.get()
    if run is not None:
        run.read.append(os.fspath(path))


def note_model(model_dir: str | os.PathLike, digest: Callable[[], str]) -> None:
    """A model loaded by the run in progress: ``digest()`` (its content fingerprint, computed
    only when a resume state asks) joins the run's fingerprint, and its directory the run's
    inputs: no output may be written inside it (one opened earlier is refused before it replaces
    its target)."""
    run = _RUN.get()
    if run is not None:
        run.add_model(os.fspath(model_dir), digest)

