"""rapidscore's semantic similarity and Negative Rejection Rate for ``evaluate.load(path)``
(see ``rapidscore.integrations.hf_evaluate``)."""

from __future__ import annotations

from rapidscore.integrations.hf_evaluate import NRRModule

__all__ = ["NRRModule"]
