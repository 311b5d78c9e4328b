"""Where the companion distribution ``rapidscore-embedded-minilm`` is installed, found without
importing it (its shipped graph and the checks of its files: ``encoder/export/shipped.py``).
A leaf module: the model lookup (``encoder/model_source.py``) and the disk cache both ask it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

__all__ = ["COMPANION_DISTRIBUTION", "COMPANION_PACKAGE", "MANIFEST", "companion_dir", "companion_model_dir"]

COMPANION_DISTRIBUTION = "rapidscore-embedded-minilm"
COMPANION_PACKAGE = "rapidscore_embedded_minilm"
MANIFEST = "manifest.json"


def companion_dir() -> Path | None:
    """The installed companion package's directory, or None (found without importing it)."""
    try:
        spec = importlib.util.find_spec(COMPANION_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    root = Path(spec.origin).resolve().parent
    return root if (root / MANIFEST).is_file() else None


def companion_model_dir() -> Path | None:
    """The model directory (without weights) of the companion package, or None."""
    root = companion_dir()
    return root / "model" if root is not None and (root / "model" / "config.json").is_file() else None
