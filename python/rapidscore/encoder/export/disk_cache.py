"""The disk cache of exported graphs: ``<cache>/onnx/<key>/``, one directory per entry (the ONNX
export of a model and layer, ``encoder/export/onnx_export.py``; its int8 copy, ``encoder/export/int8.py``).

An entry is built once across processes (:func:`build_entry`): under an exclusive file lock its
files are written into a staging directory of the building process, which is renamed into place:
two processes building the same entry at once produce one entry, and a crash never leaves a
half-written entry behind (its staging directory is removed by the next build,
:func:`remove_stale_staging`). A build that refuses the model records why (a refusal file beside
the entry), so later calls refuse at once.

meta.json records the size and sha256 of every other file of the entry (:func:`write_entry_meta`,
the last file a build writes), and loading an entry checks all of them (:func:`entry_damage`): a
file damaged later (a truncated copy, a full disk, an edit), missing, or present but not recorded
(added later, or an older exporter's entry that recorded fewer files) is damage, found before ONNX
Runtime or tokenizers read it; the owner of the entry builds it again or says what to do. Hashing
every file costs about 0.5 s per GB (48 ms for all-MiniLM-L6-v2's 90 MB graph), so an entry that
passed is stamped (``<key>.verified.json`` beside it: each file's size, mtime, ctime and inode);
later loads hash again only when the files' identities differ from the stamp (any write or utime
call moves ctime, which no file API sets back), and cost a few stat calls.

(The loaded models of a process are the other cache, in memory: ``encoder/cache.py``.)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from rapidscore.common.file_run import file_sha256
from rapidscore.common.processes import process_owner
from rapidscore.encoder.export.staging import remove_stale_staging
from rapidscore.encoder.model_source import cache_base

__all__ = ["cache_root", "entry_key", "exclusive_lock", "build_entry", "find_entry", "file_record", "record_files",
           "write_entry_meta", "verified_stamp", "entry_damage", "refusal_reason", "remove_stale_staging"]


def cache_root() -> Path:
    """Where entries live by default: ``onnx/`` of the rapidscore cache (``$RAPIDSCORE_CACHE``, else
    ``~/.cache/rapidscore``)."""
    return cache_base() / "onnx"


def entry_key(description: Mapping[str, Any]) -> str:
    """The key of the entry that ``description`` (JSON values) identifies: 32 hex digits of the
    sha256 of its sorted JSON, so every field counts and their order does not."""
    return hashlib.sha256(json.dumps(description, sort_keys=True).encode()).hexdigest()[:32]


@contextlib.contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the file ``path`` (created if needed) for the ``with`` block: one
    writer of a cache entry across processes (the export, the int8 graph)."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_entry(root: Path, key: str, build: Callable[[Path], None], *, refusal: Path,
                refused_by: type[Exception], refusal_record: Mapping[str, Any] | None = None) -> tuple[Path, bool]:
    """Build the cache entry ``root / key`` once across processes (the export, the int8 graph):
    under the entry's file lock, ``build(staging)`` writes its files into a staging directory of
    this process (stale ones of dead processes are removed first), which replaces the entry in one
    rename (a damaged entry is moved aside first); on any error the staging is removed, and an
    error of type ``refused_by`` is recorded in ``refusal`` (its message, and ``refusal_record``),
    so later calls refuse without building. Returns (entry, whether this call built it)."""
    entry = root / key
    with exclusive_lock(root / f"{key}.lock"):
        if entry.exists() and entry_damage(entry) is None:  # another process finished it while we waited
            return entry, False
        if not entry.exists() and refusal.is_file():  # or refused it
            raise refused_by(refusal_reason(refusal))
        root.mkdir(parents=True, exist_ok=True)
        remove_stale_staging(root)
        staging = Path(tempfile.mkdtemp(prefix=f".{key}-{process_owner()}-", dir=root))
        try:
            build(staging)
            verified_stamp(entry).unlink(missing_ok=True)  # it vouched for the files being replaced
            if entry.exists():  # damaged (the callers check first): moved aside, then removed
                damaged = root / f".{key}-{process_owner()}-damaged"
                os.replace(entry, damaged)
                shutil.rmtree(damaged, ignore_errors=True)
            os.replace(staging, entry)
        except BaseException as exc:
            shutil.rmtree(staging, ignore_errors=True)
            if isinstance(exc, refused_by):
                _write_refusal(refusal, {"reason": str(exc), **(refusal_record or {})})
            raise
    return entry, True


def find_entry(root: Path, key: str, refused_by: type[Exception]) -> tuple[Path, bool, str | None, Path]:
    """(entry, usable, damage, refusal file) of the entry ``root / key``: usable when it exists
    and every file matches meta.json; else ``damage`` says what is wrong with an existing one. An
    error of type ``refused_by`` when there is none and an earlier build refused the model."""
    entry, refusal = root / key, root / f"{key}.no-onnx.json"
    damage = entry_damage(entry) if entry.exists() else None
    if entry.exists() and damage is None:
        return entry, True, None, refusal
    if damage is None and refusal.is_file():
        raise refused_by(refusal_reason(refusal))
    return entry, False, damage, refusal


def file_record(path: Path) -> dict:
    """Size and sha256 of a file, as meta.json records them (~48 ms for MiniLM's 90 MB graph on a
    CPU with SHA extensions)."""
    return {"size": path.stat().st_size, "sha256": file_sha256(path)}


def _entry_files(entry: Path) -> list[str]:
    """Relative paths of every file of an entry, meta.json included, sorted."""
    return sorted(path.relative_to(entry).as_posix() for path in entry.rglob("*") if path.is_file())


def record_files(entry: Path) -> dict[str, dict]:
    """Size and sha256 of every file of an entry except meta.json, by relative path."""
    return {name: file_record(entry / name) for name in _entry_files(entry) if name != "meta.json"}


def write_entry_meta(entry: Path, meta: dict[str, Any]) -> None:
    """Write an entry's meta.json with the record of every other file (``entry_damage`` checks
    them all): the last file a build writes, so its presence marks a complete entry."""
    meta = dict(meta, files=record_files(entry))
    with open(entry / "meta.json", "w", encoding="utf-8") as handle:
        json.dump(meta, handle, indent=1)


# A stamp is written only when every file is older than this: a write within the same tick of the
# file system's clock as the stamp could leave a file's times as the stamp recorded them.
STAMP_MIN_AGE_SECONDS = 2.0


def verified_stamp(entry: Path) -> Path:
    """Where the stamp of a verified entry lives: beside it, so the entry holds only recorded files."""
    return entry.with_name(f"{entry.name}.verified.json")


def _identities(entry: Path) -> dict[str, list[int]] | None:
    """Size, mtime, ctime, inode and device of every file of an entry (None when one vanished)."""
    identities = {}
    try:
        for name in _entry_files(entry):
            st = (entry / name).stat()
            identities[name] = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]
    except OSError:
        return None
    return identities


def _read_stamp(entry: Path) -> Any:
    try:
        return json.loads(verified_stamp(entry).read_text(encoding="utf-8")).get("files")
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return None  # none, or unreadable: verify in full


def _write_stamp(entry: Path, identities: dict[str, list[int]]) -> None:
    newest = max(max(mtime, ctime) for _, mtime, ctime, _, _ in identities.values())
    if newest > time.time_ns() - STAMP_MIN_AGE_SECONDS * 1e9:
        return  # too fresh to trust its times: verified in full until it is older
    stamp = verified_stamp(entry)
    staging = stamp.with_name(f".{stamp.name}-{process_owner()}-{threading.get_ident()}")
    try:
        staging.write_text(json.dumps({"files": identities}), encoding="utf-8")
        os.replace(staging, stamp)
    except OSError:  # a read-only cache: every load verifies in full, as without stamps
        with contextlib.suppress(OSError):
            staging.unlink()


def entry_damage(entry: Path) -> str | None:
    """What is wrong with a cache entry (a file missing, of another size or hash than its export
    recorded in meta.json, or not recorded there), or None when every file matches.

    Hashes every file unless the entry's stamp (written after the last check that passed, once
    its files were a few seconds old) still matches each file's size, mtime, ctime and inode."""
    before = _identities(entry)
    if before is not None and _read_stamp(entry) == before:
        return None
    damage = _damage_by_hash(entry)
    if damage is None and before is not None and _identities(entry) == before:  # unchanged while hashed
        _write_stamp(entry, before)
    return damage


def _damage_by_hash(entry: Path) -> str | None:
    """The full check: meta.json's records against every file of the entry, each one hashed."""
    meta_file = entry / "meta.json"
    try:
        files = json.loads(meta_file.read_text(encoding="utf-8"))["files"]
        records = {str(name): (int(rec["size"]), str(rec["sha256"])) for name, rec in files.items()}
    except FileNotFoundError:
        return f"{meta_file} is missing"
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return f"{meta_file} is unreadable ({type(exc).__name__}: {exc})"
    if "model.onnx" not in records:
        return f"{meta_file} records no model.onnx"
    try:
        present = _entry_files(entry)
    except OSError as exc:
        return f"{entry} is unreadable ({exc.strerror or exc})"
    for name in present:
        if name != "meta.json" and name not in records:
            return (f"{entry / name} is not recorded in {meta_file} (its export records every file it writes: "
                    "a file added later, or an entry of an older rapidscore)")
    for name, (size, sha256) in records.items():
        path = entry / name
        try:
            actual = path.stat().st_size
        except OSError:
            return f"{path} is missing"
        if actual != size:
            return f"{path} has {actual} bytes, its export wrote {size} (size mismatch)"
        try:
            if file_record(path)["sha256"] != sha256:
                return f"{path} does not match the sha256 its export recorded"
        except OSError as exc:
            return f"{path} is unreadable ({exc.strerror or exc})"
    return None



def _write_refusal(path: Path, record: Mapping[str, Any]) -> None:
    staging = path.with_name(f".{path.name}-{process_owner()}")
    staging.write_text(json.dumps(record), encoding="utf-8")
    os.replace(staging, path)


def refusal_reason(path: Path) -> str:
    """The reason recorded in a refusal file (``build_entry``)."""
    try:
        return str(json.loads(path.read_text(encoding="utf-8"))["reason"])
    except (OSError, ValueError, KeyError, TypeError):
        return f"an earlier attempt refused this model ({path})"
