"""Export of truncated encoders to ONNX, kept in the disk cache (``encoder/export/disk_cache.py``).

A cache entry is a directory ``<cache>/onnx/<key>/`` holding ``model.onnx``, ``tokenizer.json``,
``tokenizer_spec.json`` and ``meta.json``. The key hashes the model files' fingerprint, the layer,
precision, opset, tokenizer options and the exporter version, and is computed without torch, so a
process that finds the entry never imports torch or transformers. The disk cache builds each entry
once across processes (file lock, staging directory, refusal record) and checks its files against
the sizes and hashes meta.json records whenever it is loaded: a damaged entry is exported again,
with a warning, or, where exporting is impossible (no torch), a :class:`DamagedCacheError` names
the file and says what to do.

An export announces itself on the ``rapidscore`` logger (INFO): silent in a library unless the
application enables logging; the command line shows it on stderr (``-q`` hides it).
"""

from __future__ import annotations

import json
import logging
import time
import warnings
from pathlib import Path
from typing import Any

from rapidscore.encoder.export.disk_cache import build_entry, cache_root, entry_key, find_entry, write_entry_meta
from rapidscore.encoder.export.shipped import companion_graphs_note, shipped_entry
from rapidscore.encoder.model_source import fingerprint, weightless_record
from rapidscore.encoder.runtime.torch import TORCH_MODULES, require_torch_stack
from rapidscore.errors import DamagedCacheError, ExportMismatchError, ModelNotFoundError, RapidscoreWarning

__all__ = ["cached_export", "cache_key", "export_graph", "ExportMismatchError", "DamagedCacheError",
           "EXPORT_MODULES", "EXPORTER_VERSION", "OPSET", "require_torch_stack"]

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


# What exporting needs: the torch backend's modules, and onnx and onnxscript (the [export] extra).
EXPORT_MODULES = (*TORCH_MODULES, "onnx", "onnxscript")


def _verification_batches() -> list[tuple[str, ...]]:
    """Batches of other shapes than the tracing example's: the probes together, one longer text
    alone, and one as long as the model takes (truncated there, at most 512 tokens)."""
    longer = " ".join(PROBE_TEXTS)
    return [PROBE_TEXTS, (longer * 2,), (PROBE_TEXTS[0], longer * 40)]


logger = logging.getLogger(__name__)


def cache_key(model_dir: Path, layer: int | str, precision: str, add_prefix_space: bool | None,
              unpadded: bool = False) -> str:
    description = {
        "model": fingerprint(model_dir), "layer": layer, "precision": precision, "opset": OPSET,
        "add_prefix_space": add_prefix_space, "exporter": EXPORTER_VERSION,
    }
    if unpadded:  # absent otherwise: the padded graphs' keys stay as they were
        description["unpadded"] = True
    return entry_key(description)


def cached_export(model_dir: Path, layer: int | str, precision: str, add_prefix_space: bool | None,
                  *, cache_dir: Path | None = None, unpadded: bool = False,
                  use_shipped: bool = True) -> tuple[Path, bool]:
    """Directory of the ONNX export of (model, layer, precision); exports it when missing.

    ``layer`` is an int (hidden_states[layer]) or "all" (every hidden state, stacked).
    ``unpadded``: the graph over a batch's real tokens only (``torch_model.UnpaddedLayerOutput``;
    families of ``model_source.unpadded_supported``).
    ``use_shipped``: an entry of the same key shipped in a package (``shipped.shipped_entry``: the
    embedded model's companion) is used in place, read-only; False finds or exports it in the cache.
    Returns (entry directory, whether this call performed the export).
    """
    root = Path(cache_dir) if cache_dir is not None else cache_root()
    key = cache_key(model_dir, layer, precision, add_prefix_space, unpadded)
    if use_shipped:
        shipped = shipped_entry(key)
        if shipped is not None:
            return shipped, False
    entry, usable, damage, refused = find_entry(root, key, ExportMismatchError)
    if usable:
        return entry, False
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

    return build_entry(root, key, export, refusal=refused, refused_by=ExportMismatchError,
                       refusal_record={"exporter_version": EXPORTER_VERSION})


def _check_has_weights(model_dir: Path, layer: int | str, unpadded: bool, entry: Path, damage: str | None) -> None:
    """A model kept in the cache without its weights (``rapidscore export``) cannot export what is
    missing: say which export to run where the model is."""
    record = weightless_record(model_dir)
    if record is None:
        return
    name = record.get("name", model_dir)
    graph = "the unpadded graph of " if unpadded else ""
    shipped_note = companion_graphs_note(model_dir, f"{graph}layer {layer}")
    if shipped_note is not None:
        raise ModelNotFoundError(shipped_note)
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


def _export_into(target: Path, model_dir: Path, layer: int | str, precision: str,
                 add_prefix_space: bool | None, unpadded: bool = False) -> None:
    import numpy as np
    import torch

    from rapidscore.encoder.model_source import ROBERTA_LIKE, read_config, unpadded_supported
    from rapidscore.encoder.tokens.batching import unpadded_inputs
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
        exporter = export_graph(wrapped, (example["input_ids"], example["attention_mask"]), onnx_path,
                                all_layers)
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
        from rapidscore.encoder.tokens.python_tokenizer import SAVED_DIRECTORY

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


def export_graph(module, args, path: Path, all_layers: bool = False, *, output: str = "hidden",
                 output_axes: dict[int, str] | None = None) -> str:
    """Export ``module(input_ids, attention_mask)`` with the TorchScript exporter (fast, mature for
    BERT-family graphs), falling back to the dynamo exporter. Returns which exporter produced the
    file. ``output``, ``output_axes``: the output's name and symbolic axes (default: hidden states,
    batch and sequence; a classifier's logits: ``output="logits", output_axes={0: "batch"}``)."""
    import torch

    input_names, output_names = ["input_ids", "attention_mask"], [output]
    out_axes = {1: "batch", 2: "sequence"} if all_layers else {0: "batch", 1: "sequence"}
    dynamic_axes = {"input_ids": {0: "batch", 1: "sequence"},
                    "attention_mask": {0: "batch", 1: "sequence"}, output: output_axes or out_axes}
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
