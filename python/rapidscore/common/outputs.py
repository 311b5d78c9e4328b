"""Writing an output file: beside its target, renamed into place when the run succeeds.

Every file a command writes is opened through :func:`open_output` or :func:`output_path`: it is
written to a temporary file beside the target and renamed into place when the whole run
succeeds (``common/file_run.py``), so a failed or interrupted fresh run leaves an earlier result
as it was; the target is checked first (``common/output_checks.py``). Outside a command (the
Python API) the same functions check what they can (directory, parent) and rename when the file
is complete. A temporary file names its host and process, so the next writer of the same target
removes those a killed process left; a failed write names the output, not the temporary file.

Streams (``common/stream_io.py``) keep their append-and-resume protocol: rows go to
``OUTPUT.partial`` and its state file, and the partial file becomes OUTPUT when the run ends well.

Imports only the standard library.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterator
from typing import IO, Any

from rapidscore.common.file_run import current_run
from rapidscore.common.output_checks import check_output_target, is_special_file
from rapidscore.common.processes import process_owner, process_running  # (public here too: tests, older importers)

__all__ = ["open_output", "output_path", "save_figure", "commit_when_done", "name_os_error",
           "remove_stale_temporaries", "process_owner", "process_running"]


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
    run = current_run()
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

    run = current_run()
    if run is None:
        commit()
    else:
        run.defer(commit, discard, target, option)


# A temporary output is ".{name}.{host}~{pid}.{random}.tmp{ending}" beside its target. A process
# killed while writing (kill -9, out of memory) cannot remove its own, so every writer of the
# same target first removes those of processes of this host that are no longer running (another
# host's, on a shared disk, may still be writing).
_TEMPORARY_OWNER = re.compile(r"(?P<host>\w+)~(?P<pid>\d+)\.\w+")


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
