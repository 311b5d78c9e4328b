"""Compatibility home of the BERTScore matching API, now :mod:`rapidscore.kernels.matching`.

``rapidscore.bertscore.matching`` stays public (docs/matching.md); it re-exports the same
functions, so both names give identical results.
"""

from __future__ import annotations

from rapidscore.kernels.matching import IMPLEMENTATIONS, Scores, flatten_sentences, greedy_match, pairwise_match

__all__ = ["greedy_match", "pairwise_match", "flatten_sentences", "IMPLEMENTATIONS", "Scores"]
