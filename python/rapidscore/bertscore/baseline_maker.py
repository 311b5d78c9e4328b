"""Computing a rescale baseline for any model, as the published baselines were made.

Kept apart from ``baselines`` (reading and applying baseline files), which the scorer imports:
making a baseline needs the scorer, so this module sits above it and no import cycle forms.
"""

from __future__ import annotations

import os

import numpy as np

from rapidscore.bertscore.baselines import write_baseline
from rapidscore.bertscore.scorer import BERTScore
from rapidscore.common.output_checks import check_output_target
from rapidscore.errors import check_positive_int

__all__ = ["compute_baseline", "random_pairs", "DEFAULT_BASELINE_MEMORY"]

# Token embeddings (every layer) held at once. A corpus whose embeddings fit is encoded once and
# scored in one call; a larger one is streamed in chunks of pairs under this budget.
DEFAULT_BASELINE_MEMORY = 2**30


def random_pairs(n_sentences: int, n_pairs: int, seed: int) -> np.ndarray:
    """``n_pairs`` (i, j) index pairs with i != j, drawn uniformly with a fixed seed."""
    if n_sentences < 2:
        raise ValueError(f"a baseline needs at least 2 distinct sentences, got {n_sentences}")
    rng = np.random.default_rng(seed)
    first = rng.integers(0, n_sentences, size=n_pairs)
    shift = rng.integers(1, n_sentences, size=n_pairs)  # never 0: the partner is a different sentence
    return np.stack([first, (first + shift) % n_sentences], axis=1)


def compute_baseline(sentences, model=None, *, n_pairs: int = 100_000, seed: int = 0,
                     out_path: str | os.PathLike | None = None, memory_budget: int = DEFAULT_BASELINE_MEMORY,
                     **scorer_options) -> np.ndarray:
    """Baseline P, R, F for every layer of ``model`` from a corpus of sentences.

    Scores ``n_pairs`` random pairs of different sentences (the distinct stripped non-empty
    sentences, sorted; pairs deterministic for a given ``seed``) at every layer and averages them
    (in float64), as the published baselines were made. Returns a (layers + 1, 3) array and writes
    it in the reference's format when ``out_path`` is given.

    Memory: when the token embeddings of the whole corpus at every layer fit ``memory_budget``
    bytes, each sentence is encoded once and all pairs are scored in one call; otherwise the pairs
    are scored in chunks under the budget (``BERTScore.score_iter``'s chunks), each chunk encoding
    the sentences it needs (up to two encodings per pair). Scores do not depend on the chunking.
    """
    n_pairs = check_positive_int(n_pairs, "n_pairs")
    memory_budget = check_positive_int(memory_budget, "memory_budget")
    if out_path is not None:  # before the scoring, not after it
        check_output_target(out_path, "baseline output")
    unique = sorted({s.strip() for s in sentences if isinstance(s, str) and s.strip()})
    pairs = random_pairs(len(unique), n_pairs, seed)
    progress = bool(scorer_options.pop("progress", False))
    scorer = BERTScore(model=model, all_layers=True, progress=progress, **scorer_options)
    cands = [unique[i] for i in pairs[:, 0]]
    refs = [unique[j] for j in pairs[:, 1]]
    ids, _truncated = scorer.encoder.tokenizer.encode(unique)
    corpus_bytes = sum(len(i) for i in ids) * 4 * scorer.encoder.hidden_size * (scorer.encoder.num_layers + 1)
    sums = np.zeros((scorer.encoder.num_layers + 1, 3), dtype=np.float64)
    if corpus_bytes <= memory_budget:
        result = scorer.score(cands, refs)
        sums += _layer_sums(result)
    else:
        from rapidscore.bertscore.streaming import chunk_results

        chunks = chunk_results(scorer, zip(cands, refs), memory_budget=memory_budget)
        bar = None
        if progress:
            from rapidscore.common.progress import progress_bar

            bar = progress_bar(total=n_pairs, unit="pair", desc="baseline")
        for chunk, result in chunks:
            sums += _layer_sums(result)
            if bar is not None:
                bar.update(len(chunk))
        if bar is not None:
            bar.close()
    table = sums / n_pairs
    if out_path is not None:
        write_baseline(out_path, table)
    return table


def _layer_sums(result) -> np.ndarray:
    """(layers, 3): the sums over pairs of P, R and F at each layer, in float64."""
    return np.stack([result.precision.sum(axis=1, dtype=np.float64), result.recall.sum(axis=1, dtype=np.float64),
                     result.f1.sum(axis=1, dtype=np.float64)], axis=1)
