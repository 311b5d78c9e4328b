"""Sequence classifiers (``AutoModelForSequenceClassification``, no remote code) exported to ONNX
with their classification head, kept in the disk cache of the encoders (``encoder/export/disk_cache.py``).

An entry ``<cache>/onnx/<key>/`` holds ``model.onnx`` (``(input_ids, attention_mask) -> logits``,
batch axis symbolic), ``tokenizer.json``, ``tokenizer_spec.json`` and ``meta.json`` (the labels,
``problem_type``, and each file's size and sha256, checked on every load as for the encoders'
entries). The key hashes the model's fingerprint (``model_source.fingerprint``, no torch), the
head, the opset and this exporter's version. A graph that does not reproduce the model on the
verification batches is refused (``ExportMismatchError``, remembered beside the entry); the
classifier then runs through torch (``encoder/classifier.py``).
"""

from __future__ import annotations

import json
import logging
import time
import warnings
from pathlib import Path
from typing import Any

from rapidscore.encoder.export.disk_cache import build_entry, cache_root, entry_key, find_entry, write_entry_meta
from rapidscore.encoder.export.onnx_export import (
    EXPORT_MODULES,
    EXPORT_TOLERANCE,
    OPSET,
    PROBE_TEXTS,
    ExportMismatchError,
    export_graph,
)
from rapidscore.encoder.model_source import fingerprint, from_pretrained, read_config
from rapidscore.encoder.runtime.torch import require_torch_stack
from rapidscore.errors import NotAClassifierError, RapidscoreWarning

__all__ = ["CLASSIFIER_EXPORTER_VERSION", "NotAClassifierError", "classifier_head", "cached_classifier_export",
           "load_classification_model"]

CLASSIFIER_EXPORTER_VERSION = 1
HEAD = "sequence-classification"
logger = logging.getLogger(__name__)


def classifier_head(model_dir: Path) -> dict[str, Any]:
    """The head of a model directory, read from config.json (no torch): ``labels`` (id -> label,
    in id order), ``problem_type`` and ``model_type``. A NotAClassifierError for a model without a
    sequence-classification head, a regression head, or one that needs remote code."""
    config = read_config(model_dir)
    architectures = config.get("architectures") or []
    if not any(str(a).endswith("ForSequenceClassification") for a in architectures):
        raise NotAClassifierError(
            f"{model_dir} has no sequence-classification head (architectures: {architectures or 'none'}); a "
            "classifier detector needs a model that AutoModelForSequenceClassification loads with its trained "
            "head, e.g. a fine-tuned refusal classifier")
    if config.get("auto_map"):
        raise NotAClassifierError(f"{model_dir} needs remote code (auto_map in config.json), which rapidscore "
                                  "never runs")
    if config.get("problem_type") == "regression":
        raise NotAClassifierError(f"{model_dir} has a regression head (problem_type 'regression'), not a classifier")
    raw = config.get("id2label") or {}
    try:
        labels = {int(k): str(v) for k, v in raw.items()}
    except (TypeError, ValueError) as exc:
        raise NotAClassifierError(f"{model_dir}: config.json id2label is unreadable ({exc})") from exc
    count = len(labels) or int(config.get("num_labels") or 2)
    if sorted(labels) != list(range(count)):
        labels = {i: labels.get(i, f"LABEL_{i}") for i in range(count)}
    return {"labels": [labels[i] for i in range(count)], "problem_type": config.get("problem_type"),
            "model_type": config.get("model_type")}


def load_classification_model(model_dir: Path, attention: str = "eager") -> Any:
    """The torch model with its head (``AutoModelForSequenceClassification``, no remote code), in
    eval mode; safetensors preferred, a pickle carrying code refused (``model_source.from_pretrained``)."""
    require_torch_stack("a classifier with backend='torch' or its ONNX export")
    import transformers
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = from_pretrained(transformers.AutoModelForSequenceClassification, Path(model_dir),
                                attn_implementation=attention)
    return model.eval()


def cached_classifier_export(model_dir: Path, *, cache_dir: Path | None = None) -> tuple[Path, bool]:
    """The cache entry of the classifier's ONNX export, exported on first use (once across
    processes); a damaged entry is exported again with a warning. Returns (entry, exported here).
    An ExportMismatchError when the graph does not reproduce the model (now or in an earlier
    attempt, recorded beside the entry)."""
    root = Path(cache_dir) if cache_dir is not None else cache_root()
    key = entry_key({"model": fingerprint(model_dir), "head": HEAD, "opset": OPSET,
                     "exporter": CLASSIFIER_EXPORTER_VERSION})
    entry, usable, damage, refused = find_entry(root, key, ExportMismatchError)
    if usable:
        return entry, False
    if damage is not None:
        warnings.warn(f"the ONNX cache entry {entry} of the classifier {model_dir} is damaged: {damage}; "
                      "exporting it again", RapidscoreWarning, stacklevel=4)
    require_torch_stack(f"exporting the classifier {model_dir} to ONNX", EXPORT_MODULES)

    def export(staging: Path) -> None:
        logger.info("exporting the classifier %s to ONNX (first use; later runs load %s)", model_dir, entry)
        _export_into(staging, Path(model_dir))

    return build_entry(root, key, export, refusal=refused, refused_by=ExportMismatchError,
                       refusal_record={"exporter_version": CLASSIFIER_EXPORTER_VERSION})


def _export_into(target: Path, model_dir: Path) -> None:
    import numpy as np
    import torch
    import transformers

    from rapidscore.encoder.runtime.onnx import import_onnxruntime
    from rapidscore.encoder.torch_model import load_tokenizer, tokenizer_spec

    head = classifier_head(model_dir)
    tokenizer, config = load_tokenizer(model_dir, None)
    if not tokenizer.is_fast:
        raise NotAClassifierError(f"{model_dir}: a classifier needs a fast tokenizer (tokenizer.json)")
    spec = tokenizer_spec(tokenizer, config)
    model = load_classification_model(model_dir)

    class Logits(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):
            return self.model(input_ids=input_ids, attention_mask=attention_mask).logits

    wrapped = Logits().eval()
    onnx_path = target / "model.onnx"
    started = time.perf_counter()
    example = tokenizer(list(PROBE_TEXTS[:2]), padding=True, return_tensors="pt")
    exporter = export_graph(wrapped, (example["input_ids"], example["attention_mask"]), onnx_path,
                            output="logits", output_axes={0: "batch"})
    seconds = time.perf_counter() - started
    ort = import_onnxruntime("verifying a classifier's ONNX export")
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    declared = {i.name for i in session.get_inputs()}
    longer = " ".join(PROBE_TEXTS)
    max_diff = 0.0
    for texts in (PROBE_TEXTS, (longer * 2,), (PROBE_TEXTS[0], longer * 40)):
        probe = tokenizer(list(texts), padding=True, truncation=True, max_length=min(spec.max_length, 512),
                          return_tensors="pt")
        with torch.inference_mode():
            expected = wrapped(probe["input_ids"], probe["attention_mask"]).numpy()
        feed = {k: probe[k].numpy() for k in ("input_ids", "attention_mask") if k in declared}
        got = session.run(None, feed)[0]
        if got.shape != expected.shape:
            raise ExportMismatchError(f"the ONNX graph of the classifier {model_dir} returns shape {got.shape} "
                                      f"where the model returns {expected.shape}")
        max_diff = max(max_diff, float(np.abs(got - expected).max()))
        if not max_diff <= EXPORT_TOLERANCE:
            raise ExportMismatchError(f"the ONNX graph of the classifier {model_dir} (model type "
                                      f"{config.model_type!r}) differs from the model by {max_diff:.3g}")
    tokenizer.backend_tokenizer.save(str(target / "tokenizer.json"))
    with open(target / "tokenizer_spec.json", "w", encoding="utf-8") as handle:
        json.dump(spec.to_json(), handle)
    write_entry_meta(target, {
        "model_dir": str(model_dir), "head": HEAD, **head, "opset": OPSET,
        "exporter_version": CLASSIFIER_EXPORTER_VERSION, "exporter": exporter, "torch": torch.__version__,
        "transformers": transformers.__version__, "verify_max_abs_diff": max_diff, "export_seconds": round(seconds, 3)})
