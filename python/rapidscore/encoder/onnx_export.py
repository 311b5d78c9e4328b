"""Export of truncated encoders to ONNX, cached on disk.

A cache entry is a directory ``<cache>/onnx/<key>/`` holding ``model.onnx``, ``tokenizer.json``,
``tokenizer_spec.json`` and ``meta.json``. The key hashes the model files' fingerprint, the layer,
precision, opset, tokenizer options and the exporter version, and is computed without torch, so a
process that finds the entry never imports torch or transformers.

Entries are written into a temporary directory and renamed into place under an exclusive file lock:
two processes exporting the same model at once produce one entry, and a crash never leaves a
half-written entry behind.

meta.json records the size and sha256 of every other file of the entry, and loading an entry
checks all of them: a file damaged later (a truncated copy, a full disk, an edit), missing, or
present but not recorded (added later, or an older exporter's entry that recorded fewer files) is
damage, found before ONNX Runtime or tokenizers read it: the entry is exported again with a
warning, or, where exporting is impossible (no torch), a :class:`DamagedCacheError` names the file
and says what to do. Hashing every file costs about 0.5 s per GB (48 ms for all-MiniLM-L6-v2's
90 MB graph), so an entry that passed is stamped (``<key>.verified.json`` beside it: each file's
size, mtime, ctime and inode); later loads hash again only when the files' identities differ from
the stamp (any write or utime call moves ctime, which no file API sets back), and cost a few
stat calls.

An export announces itself on the ``rapidscore`` logger (INFO): silent in a library unless the
application enables logging; the command line shows it on stderr (``-q`` hides it).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rapidscore.common.outputs import file_sha256
from rapidscore.encoder.model_source import fingerprint, weightless_record
from rapidscore.errors import ModelNotFoundError, RapidscoreError, RapidscoreWarning

# 2: special_ids of tokenizer_spec.json are the framing tokens only (no [UNK]); bert-score's
# layer truncation for every family. 3: meta.json records each file's size and sha256 (entries of
# version 2 cannot be verified, so they are not used).
EXPORTER_VERSION = 3
OPSET = 18
PROBE_TEXTS = (
    "The quick brown fox jumps over the lazy dog.",
    "Short.",
    "A somewhat longer probe sentence, with punctuation; numbers 12345 and accents: café, naïve.",
)
# Export is verified against torch on the probe batches: tokens must agree within this bound.
EXPORT_TOLERANCE = 1e-4


# What exporting needs, and what the torch backend needs: the [export] extra provides both.
EXPORT_MODULES = ("torch", "transformers", "onnx", "onnxscript")
TORCH_MODULES = ("torch", "transformers")


def _verification_batches() -> list[tuple[str, ...]]:
    """Batches of other shapes than the tracing example's: the probes together, one longer text
    alone, and one as long as the model takes (truncated there, at most 512 tokens)."""
    longer = " ".join(PROBE_TEXTS)
    return [PROBE_TEXTS, (longer * 2,), (PROBE_TEXTS[0], longer * 40)]


def require_torch_stack(purpose: str, modules: tuple[str, ...] = TORCH_MODULES) -> None:
    """Raise an ImportError naming the extra to install when one of ``modules`` is missing.

    Checked before any work starts: without it a missing onnxscript surfaced deep inside
    torch.onnx.export as "No module named 'onnxscript'", with no hint of the extra.
    """
    import importlib.util

    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        raise ImportError(f"{purpose} needs {', '.join(missing)}, part of the [export] extra: "
                          "pip install 'rapidscore[export]'", name=missing[0])


class ExportMismatchError(RapidscoreError, RuntimeError):
    """The ONNX graph of a model does not reproduce the model (a family whose forward pass depends
    on the input's shape in Python: Longformer's and LED's sliding-window padding). Remembered in
    the cache (``<key>.no-onnx.json``), so later loads fall back to torch without re-exporting."""


class DamagedCacheError(RapidscoreError, ValueError):
    """A cache entry's files do not match the sizes and hashes its export recorded, and it cannot be
    exported again here (torch or another part of the [export] extra is missing)."""


logger = logging.getLogger(__name__)


def cache_root() -> Path:
    root = os.environ.get("RAPIDSCORE_CACHE")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "rapidscore"
    return base / "onnx"


def cache_key(model_dir: Path, layer: int | str, precision: str, add_prefix_space: bool | None,
              unpadded: bool = False) -> str:
    description = {
        "model": fingerprint(model_dir), "layer": layer, "precision": precision, "opset": OPSET,
        "add_prefix_space": add_prefix_space, "exporter": EXPORTER_VERSION,
    }
    if unpadded:  # absent otherwise: the padded graphs' keys stay as they were
        description["unpadded"] = True
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


def cached_export(model_dir: Path, layer: int | str, precision: str, add_prefix_space: bool | None,
                  *, cache_dir: Path | None = None, unpadded: bool = False) -> tuple[Path, bool]:
    """Directory of the ONNX export of (model, layer, precision); exports it when missing.

    ``layer`` is an int (hidden_states[layer]) or "all" (every hidden state, stacked).
    ``unpadded``: the graph over a batch's real tokens only (``torch_model.UnpaddedLayerOutput``;
    families of ``model_source.unpadded_supported``).
    Returns (entry directory, whether this call performed the export).
    """
    root = Path(cache_dir) if cache_dir is not None else cache_root()
    key = cache_key(model_dir, layer, precision, add_prefix_space, unpadded)
    entry = root / key
    damage = entry_damage(entry) if entry.exists() else None
    if entry.exists() and damage is None:
        return entry, False
    refused = root / f"{key}.no-onnx.json"
    if damage is None and refused.is_file():
        raise ExportMismatchError(refusal_reason(refused))
    what = f"{model_dir} (layer {layer}{', unpadded graph' if unpadded else ''})"
    purpose = f"exporting {what} to ONNX (first use of this model and layer)"
    _check_has_weights(model_dir, layer, unpadded, entry, damage)
    if damage is not None:
        _check_can_export_again(entry, damage, model_dir, layer, root)
        warnings.warn(f"the ONNX cache entry {entry} of {what} is damaged: {damage}; exporting it again",
                      RapidscoreWarning, stacklevel=4)
    require_torch_stack(purpose, EXPORT_MODULES)
    from rapidscore.encoder.runtime.onnx import import_onnxruntime

    import_onnxruntime(purpose)  # the export is verified in ONNX Runtime: fail before the work

    def export(staging: Path) -> None:
        logger.info("exporting %s to ONNX: first use of this model and layer, about 10 s for "
                    "all-MiniLM-L6-v2, minutes for large models; later runs load %s", what, entry)
        started = time.perf_counter()
        _export_into(staging, model_dir, layer, precision, add_prefix_space, unpadded)
        logger.info("exported %s in %.1f s", what, time.perf_counter() - started)

    return build_entry(root, key, export, refusal=refused, refused_by=ExportMismatchError)


def build_entry(root: Path, key: str, build: Callable[[Path], None], *, refusal: Path,
                refused_by: type[Exception]) -> tuple[Path, bool]:
    """Build the cache entry ``root / key`` once across processes (the export, the int8 graph):
    under the entry's file lock, ``build(staging)`` writes its files into a staging directory of
    this process (stale ones of dead processes are removed first), which replaces the entry in one
    rename (a damaged entry is moved aside first); on any error the staging is removed, and an
    error of type ``refused_by`` is recorded in ``refusal``, so later calls refuse without building.
    Returns (entry, whether this call built it)."""
    entry = root / key
    with exclusive_lock(root / f"{key}.lock"):
        if entry.exists() and entry_damage(entry) is None:  # another process finished it while we waited
            return entry, False
        if not entry.exists() and refusal.is_file():  # or refused it
            raise refused_by(refusal_reason(refusal))
        root.mkdir(parents=True, exist_ok=True)
        remove_stale_staging(root)
        staging = Path(tempfile.mkdtemp(prefix=f".{key}-{_staging_owner()}-", dir=root))
        try:
            build(staging)
            verified_stamp(entry).unlink(missing_ok=True)  # it vouched for the files being replaced
            if entry.exists():  # damaged (the callers check first): moved aside, then removed
                damaged = root / f".{key}-{_staging_owner()}-damaged"
                os.replace(entry, damaged)
                shutil.rmtree(damaged, ignore_errors=True)
            os.replace(staging, entry)
        except BaseException as exc:
            shutil.rmtree(staging, ignore_errors=True)
            if isinstance(exc, refused_by):
                _write_refusal(refusal, str(exc))
            raise
    return entry, True


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
    staging = stamp.with_name(f".{stamp.name}-{_staging_owner()}-{threading.get_ident()}")
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


def _check_has_weights(model_dir: Path, layer: int | str, unpadded: bool, entry: Path, damage: str | None) -> None:
    """A model kept in the cache without its weights (``rapidscore export``) cannot export what is
    missing: say which export to run where the model is."""
    record = weightless_record(model_dir)
    if record is None:
        return
    name = record.get("name", model_dir)
    graph = "the unpadded graph of " if unpadded else ""
    problem = f"its entry {entry} is damaged: {damage}" if damage else f"{graph}layer {layer} was not exported"
    error = ModelNotFoundError if damage is None else DamagedCacheError
    raise error(
        f"model {name!r} is kept in the rapidscore cache without its weights ({model_dir}) and {problem}. "
        f"Export it where the model and the [export] extra are: rapidscore export {name} --layer {layer} "
        "--cache DIR, and copy DIR here (RAPIDSCORE_CACHE=DIR)")


def _check_can_export_again(entry: Path, damage: str, model_dir: Path, layer: int | str, root: Path) -> None:
    """Raise a DamagedCacheError saying what to do when this process cannot export the entry again."""
    import importlib.util

    missing = [name for name in (*EXPORT_MODULES, "onnxruntime") if importlib.util.find_spec(name) is None]
    if missing:
        cache = f" --cache {root.parent}" if root.name == "onnx" else ""
        raise DamagedCacheError(
            f"the ONNX cache entry {entry} is damaged: {damage}. It cannot be exported again here "
            f"({', '.join(missing)} not installed). Delete {entry}, then either export it again on a machine with "
            f"the [export] extra (rapidscore export {model_dir} --layer {layer}{cache}) and copy the cache here, or "
            "install the extra here (pip install 'rapidscore[export]')")


def _write_refusal(path: Path, reason: str) -> None:
    staging = path.with_name(f".{path.name}-{_staging_owner()}")
    staging.write_text(json.dumps({"reason": reason, "exporter_version": EXPORTER_VERSION}), encoding="utf-8")
    os.replace(staging, path)


def refusal_reason(path: Path) -> str:
    """The reason recorded in a refusal file (``build_entry``)."""
    try:
        return str(json.loads(path.read_text(encoding="utf-8"))["reason"])
    except (OSError, ValueError, KeyError, TypeError):
        return f"an earlier attempt refused this model ({path})"


# A staging directory is ".{key}-{host}~{pid}-{random}". A process killed during an export (kill -9,
# out of memory) cannot remove its own, so every export first removes the stale ones: those of a
# process of this host that is no longer running (and older than a minute, so a directory being
# created right now is never touched), and any older than a day (another host's, an older
# naming, a reused pid).
STALE_OWNER_GONE_SECONDS = 60.0
STALE_ANY_SECONDS = 24 * 3600.0


def _staging_owner() -> str:
    host = "".join(c if c.isalnum() else "_" for c in os.uname().nodename) if hasattr(os, "uname") else "host"
    return f"{host}~{os.getpid()}"


def _process_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # exists, owned by someone else (or cannot tell: keep the directory)
    return True


def remove_stale_staging(root: Path, now: float | None = None) -> list[Path]:
    """Delete the staging directories under ``root`` left by exports that died; returns them."""
    now = time.time() if now is None else now
    host = _staging_owner().rsplit("~", 1)[0]
    removed = []
    for path in root.glob(".*-*"):
        if not path.is_dir():
            continue
        try:
            age = now - path.stat().st_mtime
        except FileNotFoundError:
            continue  # renamed into place or removed meanwhile
        parts = path.name.rsplit("-", 2)  # ".{key}-{owner}-{suffix}": keys may contain "-" (int8 entries)
        owner = parts[1] if len(parts) == 3 else ""
        owner_host, _, pid = owner.rpartition("~")
        gone = owner_host == host and pid.isdigit() and not _process_running(int(pid))
        if (gone and age > STALE_OWNER_GONE_SECONDS) or age > STALE_ANY_SECONDS:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _export_into(target: Path, model_dir: Path, layer: int | str, precision: str,
                 add_prefix_space: bool | None, unpadded: bool = False) -> None:
    import numpy as np
    import torch

    from rapidscore.encoder.batching import unpadded_inputs
    from rapidscore.encoder.model_source import ROBERTA_LIKE, read_config, unpadded_supported
    from rapidscore.encoder.torch_model import (
        LayerOutput,
        UnpaddedLayerOutput,
        load_tokenizer,
        load_truncated_model,
        padding_sensitive,
        tokenizer_spec,
    )

    if precision != "fp32":
        raise ValueError(f"ONNX export supports precision 'fp32', got {precision!r}")
    if unpadded and not unpadded_supported(read_config(model_dir), layer):
        raise ValueError(f"no unpadded graph for {model_dir} at layer {layer!r} (model_source.unpadded_supported)")
    all_layers = layer == "all"
    tokenizer, config = load_tokenizer(model_dir, add_prefix_space)
    spec = tokenizer_spec(tokenizer, config)
    model = load_truncated_model(model_dir, None if all_layers else int(layer), all_layers=all_layers)
    wrapped = LayerOutput.build(model, layer if all_layers else int(layer))

    def unpadded_feed(texts) -> dict:
        ids = [np.asarray(seq, dtype=np.int64) for seq in
               tokenizer(list(texts), truncation=True, max_length=min(spec.max_length, 512))["input_ids"]]
        return unpadded_inputs(ids, spec.pad_id, config.model_type in ROBERTA_LIKE)

    onnx_path = target / "model.onnx"
    started = time.perf_counter()
    if unpadded:
        example_feed = unpadded_feed(PROBE_TEXTS[:2])
        exporter = _export_unpadded_graph(UnpaddedLayerOutput.build(model),
                                          tuple(torch.from_numpy(v) for v in example_feed.values()), onnx_path)
    else:
        example = tokenizer(list(PROBE_TEXTS[:2]), padding=True, return_tensors="pt")
        exporter = _export_graph(wrapped, (example["input_ids"], example["attention_mask"]), onnx_path, all_layers)
    export_seconds = time.perf_counter() - started

    # Verify on batches of other shapes than the tracing example (several sentences; one longer;
    # one of the model's full length), against the padded torch model: a graph that baked a shape
    # in (Longformer's and LED's window padding) passes the tracing shape and fails these.
    from rapidscore.encoder.runtime.onnx import import_onnxruntime

    ort = import_onnxruntime("verifying an ONNX export")
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    declared = {i.name for i in session.get_inputs()}
    max_diff = 0.0
    for texts in _verification_batches():
        probe = tokenizer(list(texts), padding=True, truncation=True, max_length=min(spec.max_length, 512),
                          return_tensors="pt")
        with torch.inference_mode():
            expected = wrapped(probe["input_ids"], probe["attention_mask"]).numpy()
        if unpadded:
            feed = unpadded_feed(texts)
        else:
            feed = {"input_ids": probe["input_ids"].numpy(), "attention_mask": probe["attention_mask"].numpy()}
        got = session.run(None, {k: v for k, v in feed.items() if k in declared})[0]
        mask = probe["attention_mask"].numpy().astype(bool)
        if not unpadded and got.shape != expected.shape:
            raise ExportMismatchError(
                f"the ONNX graph of {model_dir} (model type {config.model_type!r}, layer {layer}) returns shape "
                f"{got.shape} where the model returns {expected.shape}")
        real_expected = expected[..., mask, :]  # (tokens, dim); with a leading layer axis when all_layers
        real_got = got if unpadded else got[..., mask, :]  # the unpadded graph returns real tokens only
        if real_got.shape != real_expected.shape:
            raise ExportMismatchError(f"the unpadded ONNX graph of {model_dir} returns {real_got.shape[-2]} tokens "
                                      f"for {real_expected.shape[-2]}")
        max_diff = max(max_diff, float(np.abs(real_expected - real_got).max()))
        if not max_diff <= EXPORT_TOLERANCE:
            raise ExportMismatchError(
                f"the ONNX graph of {model_dir} (model type {config.model_type!r}, layer {layer}) differs from the "
                f"model by {max_diff:.3g} > {EXPORT_TOLERANCE}")

    if tokenizer.is_fast:
        tokenizer.backend_tokenizer.save(str(target / "tokenizer.json"))
    else:  # a Python tokenizer (XLM, ProphetNet): kept as transformers saves it
        from rapidscore.encoder.python_tokenizer import SAVED_DIRECTORY

        tokenizer.save_pretrained(str(target / SAVED_DIRECTORY))
    with open(target / "tokenizer_spec.json", "w", encoding="utf-8") as handle:
        json.dump(spec.to_json(), handle)
    import transformers

    meta: dict[str, Any] = {
        "model_dir": str(model_dir), "model_type": config.model_type, "layer": layer,
        "precision": precision, "opset": OPSET, "exporter_version": EXPORTER_VERSION,
        "exporter": exporter, "torch": torch.__version__, "transformers": transformers.__version__,
        "hidden_size": int(config.hidden_size), "verify_max_abs_diff": max_diff, "unpadded": unpadded,
        "padding_sensitive": padding_sensitive(model),
        "export_seconds": round(export_seconds, 3),
    }
    write_entry_meta(target, meta)  # last: every file recorded, checked whenever the entry is loaded


def _export_unpadded_graph(module, args, path: Path) -> str:
    """Export the unpadded graph (TorchScript exporter): T tokens, B sentences, L the longest."""
    import torch

    input_names = ["input_ids", "position_ids", "gather", "scatter", "attention_mask"]
    dynamic_axes = {"input_ids": {0: "tokens"}, "position_ids": {0: "tokens"}, "gather": {0: "batch", 1: "sequence"},
                    "scatter": {0: "tokens"}, "attention_mask": {0: "batch", 1: "sequence"}, "hidden": {0: "tokens"}}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, str(path), dynamo=False, opset_version=OPSET, dynamic_axes=dynamic_axes,
                          do_constant_folding=True, input_names=input_names, output_names=["hidden"])
    return "torchscript"


def _export_graph(module, args, path: Path, all_layers: bool) -> str:
    """Export with the TorchScript exporter (fast, mature for BERT-family graphs), falling back to
    the dynamo exporter. Returns which exporter produced the file."""
    import torch

    input_names, output_names = ["input_ids", "attention_mask"], ["hidden"]
    out_axes = {1: "batch", 2: "sequence"} if all_layers else {0: "batch", 1: "sequence"}
    dynamic_axes = {"input_ids": {0: "batch", 1: "sequence"},
                    "attention_mask": {0: "batch", 1: "sequence"}, "hidden": out_axes}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(module, args, str(path), dynamo=False, opset_version=OPSET,
                              dynamic_axes=dynamic_axes, do_constant_folding=True,
                              input_names=input_names, output_names=output_names)
            return "torchscript"
        except Exception:
            from torch.export import Dim

            batch, sequence = Dim("batch"), Dim("sequence")
            shapes = {"input_ids": {0: batch, 1: sequence}, "attention_mask": {0: batch, 1: sequence}}
            torch.onnx.export(module, args, str(path), dynamo=True, opset_version=OPSET,
                              dynamic_shapes=shapes, external_data=False,
                              input_names=input_names, output_names=output_names)
            return "dynamo"
