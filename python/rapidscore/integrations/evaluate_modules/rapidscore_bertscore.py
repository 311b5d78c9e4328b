"""rapidscore's BERTScore for ``evaluate.load(path)``: the hub ``bertscore`` metric's inputs,
keywords and output keys (see ``rapidscore.integrations.hf_evaluate``)."""

from __future__ import annotations

from rapidscore.integrations.hf_evaluate import BERTScoreModule

__all__ = ["BERTScoreModule"]
