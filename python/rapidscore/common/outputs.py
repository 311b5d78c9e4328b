"""The one output layer: every file a command writes is opened here.

A command declares its file options once, where it builds its parser (:func:`input_option`,
:func:`output_option` mark the argparse actions). ``rapidscore.cli.main`` reads those marks and
runs the command inside a :class:`FileRun`, which, before the command runs:

- refuses an output that is one of the run's inputs by any name (the same path, a symlink or a
  hard link), including the files an output brings with it (a stream's ``OUTPUT.resume.json``,
  ``OUTPUT.partial``, ``OUTPUT.parts``), an output named by two options, an output that is a
  directory (or a directory output that is a file), an output whose directory does not exist;
- refuses an input that is a directory where a file is wanted (``-c DIR`` is not a sentence);
- refuses an output inside the directory of a model an option names (:func:`model_option`): a
  loaded model's files are inputs too. A model loaded otherwise (:func:`note_model`) joins the
  inputs when it loads, and an output is checked again before it replaces its target.

While the command runs, every file is opened through :func:`open_output` or
:func:`output_path`: it is written to a temporary file beside the target and renamed into place
when the whole run succeeds, so a failed or interrupted fresh run leaves an earlier result as it
was. Files read while running (:func:`note_input`, called by the readers) join the run's inputs,
so an output opened later cannot be one of them either. Outside a command (the Python API) the
same functions check what they can (directory, parent) and rename when the file is complete.
A temporary file names its host and process, so the next writer of the same target removes those
a killed process left; a failed write names the output, not the temporary file.

Streams (``common/stream_io.py``) keep their append-and-resume protocol: rows go to
``OUTPUT.partial`` and its state file, both checked here, and the partial file becomes OUTPUT
when the run ends well. :meth:`FileRun.fingerprint` is what a resume state records of the run:
every option that can change a number, the content hash of every settings file (idf counts,
baselines, label maps) and the digest of every model the run loaded.

Imports only the standard library: the parsers of every command use it.
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import errno
import hashlib
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from rapidscore.errors import RapidscoreError

__all__ = ["OutputError", "input_option", "output_option", "model_option", "FileRun", "command_run", "current_run",
           "open_output", "output_path", "process_owner", "process_running", "save_figure", "note_input", "note_model",
           "name_os_error", "commit_when_done",
           "check_output_target", "check_output_directory", "file_sha256", "is_special_file",
           "remove_stale_temporaries", "STATE_SUFFIX",
           "STATE_TMP_SUFFIX", "PARTIAL_SUFFIX", "PARTS_SUFFIX", "RUN_ONLY_OPTIONS"]

# the files a streamed output brings with it (common/stream_io.py): the state, the temporary
# the state is written to before its rename, the rows so far, and Parquet's part directory
STATE_SUFFIX = ".resume.json"
STATE_TMP_SUFFIX = ".resume.json.tmp"
PARTIAL_SUFFIX = ".partial"
PARTS_SUFFIX = ".parts"
STREAM_FILES = (STATE_SUFFIX, STATE_TMP_SUFFIX, PARTIAL_SUFFIX, PARTS_SUFFIX)

# Options that cannot change a number: left out of a resume fingerprint so that a resumed run may
# show progress, use other threads or another chunk size (chunks never change scores: the
# streams place a resumed chunk in the reference's batches).
RUN_ONLY_OPTIONS = frozenset({
    "resume", "progress", "quiet", "verbose", "json", "threads", "chunk_size", "memory_budget", "cache_tokens",
    "max_record_bytes", "seg_level", "table", "run_command", "command", "progress_default",
})

_MARK = "rapidscore_file"


class OutputError(RapidscoreError, ValueError):
    """An output that would destroy an input or another output, or that cannot be written."""


# -- declarations ---------------------------------------------------------------------------------

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
    option: str
    path: str
    spec: _FileOption


def _option_name(action: argparse.Action) -> str:
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
            files.append(DeclaredFile(_option_name(action), path, spec))
    return files


def file_options(actions: Iterable[argparse.Action], role: str) -> list[tuple[str, argparse.Action]]:
    """``(option, action)`` of every action marked as ``role`` ("input" or "output")."""
    return [(_option_name(a), a) for a in actions
            if getattr(a, _MARK, None) is not None and getattr(a, _MARK).role == role]


# -- checks ---------------------------------------------------------------------------------------

def _same_file(a: str, b: str) -> bool:
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


def _companions(output: DeclaredFile) -> list[str]:
    """The output and the files it brings with it (a stream's: its state, the state's temporary,
    the partial rows, the part directory and every file in it, part temporaries included)."""
    if output.spec.stream and not is_special_file(output.path):
        parts = output.path + PARTS_SUFFIX
        inside = [os.path.join(parts, name) for name in os.listdir(parts)] if os.path.isdir(parts) else []
        return [output.path, *(output.path + suffix for suffix in STREAM_FILES), *inside]
    return [output.path]


def _refuse_input(option: str, path: str, written: str, input_option: str, input_path: str) -> OutputError:
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
class _ModelDirectory:
    option: str  # the option that named it, or "model" for one loaded without an option
    path: str
    _files: list[str] | None = None

    def refusal(self, option: str, path: str, written: str) -> OutputError | None:
        """The refusal of output ``option`` ``path`` (writing ``written``) when it would replace a
        file of this model or write inside its directory; None when it would not."""
        if self._files is None:
            self._files = _directory_files(self.path)
        model_file = next((f for f in self._files if _same_file(written, f)), None)
        if model_file is None and not _inside(written, self.path):
            return None
        what = f"the model file {model_file}" if model_file is not None else "inside the model directory"
        beside = "" if written == path else f" (it keeps {written} beside it)"
        model = (f"{self.option} {self.path}" if self.option != "model"
                 else f"the model this run loaded, {self.path}")
        return OutputError(f"{option} {path}{beside} is {what} of {model}: a run never writes into a model it "
                           f"reads; give another {option}")


def _model_directories(files: Iterable[DeclaredFile]) -> list[_ModelDirectory]:
    # hub ids and the embedded model's name are resolved when the model loads (note_model)
    return [_ModelDirectory(f.option, f.path) for f in files if f.spec.role == "model" and os.path.isdir(f.path)]


def check_files(files: Iterable[DeclaredFile]) -> None:
    """The checks of a run's declared files (see the module's docstring); raises before anything
    is opened for writing."""
    files = list(files)
    inputs = [f for f in files if f.spec.role == "input"]
    outputs = [f for f in files if f.spec.role == "output"]
    models = _model_directories(files)
    for item in inputs:
        if not item.spec.directory and os.path.isdir(item.path):
            also = " (or a sentence in quotes)" if item.spec.text else ""
            raise IsADirectoryError(f"{item.option} {item.path} is a directory: give a file{also}")
    seen: list[tuple[DeclaredFile, str]] = []
    for output in outputs:
        check_output_target(output.path, output.option, output.spec.directory)
        for written in _companions(output):
            for item in inputs:
                if _same_file(written, item.path):
                    raise _refuse_input(output.option, output.path, written, item.option, item.path)
            for model in models:
                refusal = model.refusal(output.option, output.path, written)
                if refusal is not None:
                    raise refusal
            for other, other_written in seen:
                if _same_file(written, other_written):
                    beside = written != output.path or other_written != other.path
                    raise OutputError(f"{output.option} {output.path} and {other.option} {other.path} are one file"
                                      f"{' (with the files a stream keeps beside it)' if beside else ''}: give each "
                                      "output its own file")
        seen.extend((output, written) for written in _companions(output))


# -- the run ----------------------------------------------------------------------------------------

@dataclass
class FileRun:
    """The files of one command run: its declared inputs and outputs, the files it read while
    running, the models it loaded, and the outputs waiting for the run to succeed.
    One per run; not thread-safe beyond the run's own thread (a command's writes come from it)."""

    files: list[DeclaredFile] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)  # option -> value, run-only options left out
    read: list[str] = field(default_factory=list)
    models: dict[str, Callable[[], str]] = field(default_factory=dict)  # model directory -> its fingerprint
    model_directories: list[_ModelDirectory] = field(default_factory=list)  # no output is written inside one
    # (commit, discard, (target, option) or None) of each output waiting for the run's end
    _commits: list[tuple[Callable[[], None], Callable[[], None], tuple[str, str] | None]] = field(
        default_factory=list)

    @property
    def inputs(self) -> list[tuple[str, str]]:
        declared = [(f.option, f.path) for f in self.files if f.spec.role == "input"]
        return declared + [("read", path) for path in self.read]

    def check_output(self, path: str, option: str) -> None:
        for input_option_name, input_path in self.inputs:
            if _same_file(path, input_path):
                raise _refuse_input(option, path, path, input_option_name, input_path)
        for model in self.model_directories:
            refusal = model.refusal(option, path, path)
            if refusal is not None:
                raise refusal

    def add_model_directory(self, path: str, option: str = "model") -> None:
        """A model directory the run reads: no output may be written inside it. The outputs the
        run declared or opened already are checked at once (an OutputError), so a run writing
        into a model it loads late fails when it loads it."""
        if any(_same_file(path, known.path) for known in self.model_directories):
            return
        model = _ModelDirectory(option, path)
        self.model_directories.append(model)
        outputs = [(f.option, f.path, written) for f in self.files if f.spec.role == "output"
                   for written in _companions(f)]
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
            option = next((f.option for f in self.files if f.spec.role == "output" and _same_file(f.path, target)),
                          option)
        self._commits.append((commit, discard, None if target is None else (target, option)))

    def finish(self, succeeded: bool) -> None:
        pending, self._commits = self._commits, []
        if succeeded:
            try:
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
        result: dict[str, Any] = dict(self.options)
        for item in self.files:
            if item.spec.role == "input" and item.spec.settings and os.path.isfile(item.path):
                result[f"{item.option} sha256"] = file_sha256(item.path)
        if self.models:  # content fingerprints, not names: two spellings of one model are one model
            result["models"] = sorted({digest() for digest in self.models.values()})
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
    file_dests = {a.dest for a in actions if getattr(a, _MARK, None) is not None and getattr(a, _MARK).role != "model"}
    names = {a.dest: _option_name(a) for a in actions}
    options = {names.get(dest, dest): value for dest, value in sorted(vars(args).items())
               if dest not in RUN_ONLY_OPTIONS and dest not in file_dests and not callable(value)}
    run = FileRun(files=files, options=options, model_directories=_model_directories(files))
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
        run.models.setdefault(os.fspath(model_dir), digest)
        run.add_model_directory(os.fspath(model_dir))


# -- writing ------------------------------------------------------------------------------------

def _file_mode(target: str) -> int:
    try:
        return stat.S_IMODE(os.stat(target).st_mode)  # replacing a file keeps its permissions
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _target(path: str, option: str) -> str:
    """Where ``path`` is written: a symlink's target (the link stays a link); checked first."""
    check_output_target(path, option)
    run = _RUN.get()
    if run is not None:
        run.check_output(path, option)
    return os.path.realpath(path) if os.path.islink(path) else path


def name_os_error(exc: OSError, path: str) -> OSError:
    """An OSError that names ``path`` (a full disk reports none)."""
    if exc.filename is not None:
        return exc
    return type(exc)(exc.errno or errno.EIO, exc.strerror or str(exc), path)


def commit_when_done(tmp: str, target: str, *, keep_on_failure: bool = False,
                     after: Callable[[], None] | None = None, option: str = "output") -> None:
    """Rename ``tmp`` onto ``target`` now (no run in progress) or when the run succeeds (once
    ``target`` is checked again against the run's inputs: ``option`` names it then); a failed run
    removes ``tmp`` (``keep_on_failure``: a stream's partial file, kept for --resume).
    ``after``: runs once the rename is done (a stream removes its state)."""
    def commit() -> None:
        os.replace(tmp, target)
        if after is not None:
            after()

    def discard() -> None:
        if not keep_on_failure:
            os.remove(tmp)

    run = _RUN.get()
    if run is None:
        commit()
    else:
        run.defer(commit, discard, target, option)


# A temporary output is ".{name}.{host}~{pid}.{random}.tmp{ending}" beside its target. A process
# killed while writing (kill -9, out of memory) cannot remove its own, so every writer of the
# same target first removes those of processes of this host that are no longer running (another
# host's, on a shared disk, may still be writing).
_TEMPORARY_OWNER = re.compile(r"(?P<host>\w+)~(?P<pid>\d+)\.\w+")


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


def _temporary_affixes(target: str, suffix: str | None) -> tuple[str, str, str]:
    """(directory, prefix, suffix) of the temporary files written for ``target``."""
    directory, name = os.path.split(os.path.abspath(target))
    ending = os.path.splitext(name)[1] if suffix is None else suffix
    return directory, f".{name}.", f".tmp{ending}"


def remove_stale_temporaries(target: str | os.PathLike, suffix: str | None = None) -> list[str]:
    """Remove the temporary files of ``target`` left by writers of this host that died (see
    :func:`output_path`; ``suffix`` as there); returns their paths."""
    directory, prefix, ending = _temporary_affixes(os.fspath(target), suffix)
    host = process_owner().rpartition("~")[0]
    removed: list[str] = []
    try:
        names = [n for n in os.listdir(directory) if n.startswith(prefix) and n.endswith(ending)]
    except OSError:
        return removed
    for name in names:
        owner = _TEMPORARY_OWNER.fullmatch(name[len(prefix):len(name) - len(ending)])
        if owner is None or owner["host"] != host or process_running(int(owner["pid"])):
            continue
        path = os.path.join(directory, name)
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
            removed.append(path)
    return removed


# what a failed write reports without a file name (other errors come from the writer's own work)
_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS, errno.EPIPE})


def _named_write_error(exc: OSError, path: str, tmp: str) -> OSError:
    """A write error naming the output ``path``: the writer saw only the temporary file ``tmp``,
    or no name at all (a full disk names none: matplotlib, pyarrow and Python's own files alike)."""
    if exc.filename == tmp and tmp != path:
        return type(exc)(exc.errno or errno.EIO, exc.strerror or str(exc), path)
    if exc.filename is None and exc.errno in _WRITE_ERRNOS:
        return name_os_error(exc, path)
    return exc


@contextlib.contextmanager
def output_path(path: str | os.PathLike, option: str = "output", suffix: str | None = None) -> Iterator[str]:
    """A temporary path beside ``path`` for a writer that takes a path (matplotlib, pyarrow);
    renamed onto ``path`` as :func:`open_output` does. ``suffix`` (default: ``path``'s
    extension) ends the temporary name, for writers that pick a format by it. Temporaries of
    ``path`` left by a killed writer are removed first. An OSError of the writer that names no
    file (a full disk) or the temporary one names ``path``."""
    path = os.fspath(path)
    target = _target(path, option)
    if is_special_file(target):  # /dev/null, /dev/full, a FIFO: written in place
        try:
            yield target
        except OSError as exc:
            named = _named_write_error(exc, path, target)
            if named is exc:
                raise
            raise named from None
        return
    remove_stale_temporaries(target, suffix)
    directory, prefix, ending = _temporary_affixes(target, suffix)
    fd, tmp = tempfile.mkstemp(prefix=f"{prefix}{process_owner()}.", suffix=ending, dir=directory)
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, _file_mode(target))
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        named = _named_write_error(exc, path, tmp)
        if named is exc:
            raise
        raise named from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    commit_when_done(tmp, target, option=option)


@contextlib.contextmanager
def open_output(path: str | os.PathLike, option: str = "output", mode: str = "w", *,
                encoding: str | None = "utf-8", newline: str | None = None) -> Iterator[IO]:
    """Open an output file for writing through the output layer (checked, written beside the
    target, renamed into place when done; see the module's docstring). ``mode``: "w" or "wb".
    OSErrors (a full disk) name the file."""
    if mode not in ("w", "wb"):
        raise ValueError(f"open_output writes whole files: mode 'w' or 'wb', not {mode!r}")
    text = {} if "b" in mode else {"encoding": encoding, "newline": newline}
    with output_path(path, option) as tmp, open(tmp, mode, **text) as handle:  # type: ignore[call-overload]
        yield handle
        handle.flush()
        if not is_special_file(tmp):
            os.fsync(handle.fileno())


def save_figure(figure: Any, path: str | os.PathLike, option: str = "plot", **savefig: Any) -> str:
    """``figure.savefig`` through the output layer, at exactly ``path`` (matplotlib would add
    ``.png`` to a name without an extension and write beside it); the format is the extension's,
    PNG without one. Returns ``path``."""
    path = os.fspath(path)
    extension = os.path.splitext(path)[1].lower().lstrip(".")
    with output_path(path, option) as tmp:
        figure.savefig(tmp, format=extension or "png", **savefig)
    return path
