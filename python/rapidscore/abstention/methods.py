"""The names of the refusal detectors (``get_detector``), importable without the detectors
themselves (the registry's declarations and ``--help`` read them; numpy is not loaded)."""

from __future__ import annotations

__all__ = ["SELECT_METHODS", "PRESET_METHODS", "METHODS"]

SELECT_METHODS = ("phrase", "keyword", "phr+kw", "heuristic")
PRESET_METHODS = ("arditi", "xstest")
METHODS = SELECT_METHODS + PRESET_METHODS + ("embedding", "classifier")
