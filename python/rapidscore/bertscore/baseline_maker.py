"""Computing a rescale baseline for any model, as the published baselines were made.

Kept apart from ``baselines`` (reading and applying baseline files), which the scorer imports:
making a baseline needs the scorer, so this module sits above it and no import cycle forms.
"""

from __future__ import annotations

import os

import numpy as np

from rapidscore.bertscore.baselines import write_baseline
from rapidscore.bertscore.scorer import BERTScore
from rapidscore.errors import check_positive_int

__all__ = ["compute_baseline", "random_pairs"]


def random_pairs(n_sentences: int, n_pairs: int, seed: int) -> np.ndarray:
    """``n_pairs`` (i, j) index pairs with i != j, drawn uniformly with a fixed seed."""
    if n_sentences < 2:
        raise ValueError(f"a baseline needs at least 2 distinct sentences, got {n_sentences}")
    rng = np.random.default_rng(seed)
    first = rng.integers(0, n_sentences, size=n_pairs)
    shift = rng.integers(1, n_sentences, size=n_pairs)  # never 0: the partner is a different sentence
    return np.stack([first, (first + shift) % n_sentences], axis=1)


def compute_baseline(sentences, model=None, *, n_pairs: int = 100_000, seed: int = 0,
                     out_path: str | os.PathLike | None = None, **scorer_options) -> np.ndarray:
    """Baseline P, R, F for every layer of ``model`` from a corpus of sentences.

    Scores ``n_pairs`` random pairs of different sentences (deterministic for a given ``seed``) at
    every layer and averages them, as the published baselines were made. Returns a (layers + 1, 3)
    array and writes it in the reference's format when ``out_path`` is given.
    """
    n_pairs = check_positive_int(n_pairs, "n_pairs")
    if out_path is not None and os.path.isdir(out_path):  # before the scoring, not after it
        raise IsADirectoryError(f"baseline output {os.fspath(out_path)} is a directory; give a file name")
    unique = sorted({s.strip() for s in sentences if isinstance(s, str) and s.strip()})
    pairs = random_pairs(len(unique), n_pairs, seed)
    scorer = BERTScore(model=model, all_layers=True, **scorer_options)
    result = scorer.score([unique[i] for i in pairs[:, 0]], [unique[j] for j in pairs[:, 1]])
    table = np.stack([result.precision.mean(axis=1), result.recall.mean(axis=1), result.f1.mean(axis=1)], axis=1)
    if out_path is not None:
        write_baseline(out_path, table)
    return table
