"""Texts and a rank statistic for checking a non-exact mode (bf16, int8, "fast") against fp32.

- :func:`word_salad`: deterministic sequences of common words (unrelated texts whose F1 values
  lie close together: the hard case for a mode's ranking).
- :func:`kendall_tau`: Kendall's tau-a by brute force, independent of scipy (the fast-mode bound
  asks for tau >= 0.995 against the exact scores).
"""

from __future__ import annotations

import numpy as np

__all__ = ["WORDS", "word_salad", "kendall_tau"]

WORDS = ["the", "a", "of", "to", "and", "in", "band", "metal", "singer", "voice", "jazz", "trumpet", "outlaw",
         "forest", "river", "city", "music", "history", "science", "famous", "known", "world", "heavy", "legend",
         "career", "player", "album", "song"]


def word_salad(n: int, seed: int) -> list[str]:
    """``n`` texts of 6-29 words drawn from :data:`WORDS`, the same for the same ``seed``."""
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=rng.integers(6, 30))).capitalize() + "." for _ in range(n)]


def kendall_tau(a: np.ndarray, b: np.ndarray) -> float:
    """Kendall's tau-a of two score vectors by brute force over all pairs (no ties expected in
    continuous scores); O(n^2) memory, meant for test-sized inputs."""
    i, j = np.triu_indices(len(a), k=1)
    return float(np.mean(np.sign(a[i] - a[j]) * np.sign(b[i] - b[j])))
