"""Semantic similarity and the Negative Rejection Rate (NRR).

A generated answer is *rejected* (its meaning is not captured) when its similarity to the ground
truth is strictly below a threshold. NRR = rejected / evaluated; the capture rate is 1 - NRR
(captured / (captured + not captured), the formula RAG write-ups often print).

This is not the "negative rejection" of RAG robustness benchmarks (the rate at which a model
correctly refuses when its retrieved documents hold no answer); for refusals, see
``rapidscore.abstention``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from rapidscore._version import __version__
from rapidscore.encoder.model_source import DEFAULT_MODEL

METHODS = ("embedding", "bertscore")
CRITERIA = ("f1", "youden")

__all__ = ["NRRResult", "negative_rejection", "similarity", "nrr_curve", "calibrate_threshold",
           "ThresholdCalibration", "negative_rejection_frame", "negative_rejection_jsonl", "SentenceSimilarity"]


@dataclass(frozen=True)
class NRRResult:
    """Per-item similarities and rejections, and the rates over all items."""

    similarities: np.ndarray
    rejected: np.ndarray
    threshold: float
    signature: str
    best_reference: np.ndarray = field(repr=False, default=None)

    @property
    def n_evaluated(self) -> int:
        return int(self.rejected.size)

    @property
    def n_rejected(self) -> int:
        return int(self.rejected.sum())

    @property
    def n_captured(self) -> int:
        return self.n_evaluated - self.n_rejected

    @property
    def rate(self) -> float:
        """Negative Rejection Rate: fraction of items whose similarity is below the threshold."""
        return self.n_rejected / self.n_evaluated

    @property
    def capture_rate(self) -> float:
        """1 - NRR: fraction of items whose meaning is captured."""
        return self.n_captured / self.n_evaluated

    def curve(self, thresholds=None):
        """NRR as a function of the threshold, from these similarities (see ``nrr_curve``)."""
        return nrr_curve(self.similarities, thresholds)

    def to_dict(self) -> dict:
        return {"negative_rejection_rate": self.rate, "capture_rate": self.capture_rate,
                "n_evaluated": self.n_evaluated, "n_rejected": self.n_rejected, "n_captured": self.n_captured,
                "threshold": self.threshold, "signature": self.signature,
                "similarities": self.similarities.tolist(), "rejected": self.rejected.tolist()}


def _check_items(generated, references):
    from rapidscore.common.inputs import normalize_inputs

    if isinstance(generated, str) or not isinstance(generated, Sequence):
        raise TypeError(f"generated must be a list of strings, got {type(generated).__name__}")
    if isinstance(references, str) or not isinstance(references, Sequence):
        raise TypeError(f"references must be a list of strings (or lists of strings), got {type(references).__name__}")
    if len(generated) == 0:
        raise ValueError("nothing to evaluate: generated is empty")
    try:
        return normalize_inputs(generated, references)
    except (TypeError, ValueError) as exc:
        raise type(exc)(str(exc).replace("cands", "generated").replace("refs", "references")
                        .replace("candidates", "generated answers")) from None


def _check_threshold(threshold) -> float:
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.floating)) or np.isnan(threshold):
        raise TypeError(f"threshold must be a number in [-1, 1], got {threshold!r}")
    if not -1.0 <= float(threshold) <= 1.0:
        raise ValueError(f"threshold must be in [-1, 1] (a cosine similarity), got {threshold}")
    return float(threshold)


class SentenceSimilarity:
    """Similarity of answer pairs: sentence-embedding cosine, or BERTScore F1.

    ``method="embedding"``: mean-pooled, L2-normalised sentence embeddings as sentence-transformers
    computes them (its ``max_seq_length`` honoured), cosine similarity. ``method="bertscore"``:
    BERTScore F1 at ``layer`` (default: the model's last layer). Reusable across calls.
    An empty (after strip) answer or reference gets similarity 0.
    """

    def __init__(self, model: str | os.PathLike = DEFAULT_MODEL, method: str = "embedding",
                 layer: int | None = None, progress: bool = False, **encoder_options):
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}")
        self.method, self.model_name = method, os.fspath(model)
        if method == "embedding":
            from rapidscore.encoder import Encoder
            from rapidscore.encoder.model_source import resolve_model, sentence_transformers_max_length

            max_length = encoder_options.pop("max_length", None) or sentence_transformers_max_length(resolve_model(model))
            self.encoder = Encoder(model, layer=layer, max_length=max_length, progress=progress, **encoder_options)
        else:
            from rapidscore.bertscore import BERTScore

            self.scorer = BERTScore(model=model, layer=layer, progress=progress, **encoder_options)
            self.encoder = self.scorer.encoder

    @property
    def signature(self) -> str:
        e = self.encoder
        return (f"method:{self.method}|model:{self.model_name}|layer:{e.layer}|pooling:mean|maxlen:{e.max_length}"
                f"|backend:{e.backend}-{e.device}|precision:{e.precision}|version:{__version__}")

    def pairs(self, generated: list[str], groups: list[list[str]]) -> tuple[np.ndarray, np.ndarray]:
        """Best similarity of each generated answer over its references, and that reference's index."""
        flat = [ref for group in groups for ref in group]
        owners = np.repeat(np.arange(len(groups)), [len(g) for g in groups])
        if self.method == "embedding":
            texts = list(dict.fromkeys(generated + flat))
            index = {t: i for i, t in enumerate(texts)}
            vectors = self.encoder.sentence_embeddings(texts).astype(np.float64)
            gen = vectors[[index[generated[o]] for o in owners]]
            ref = vectors[[index[r] for r in flat]]
            sims = np.einsum("ij,ij->i", gen, ref)
        else:
            sims = self.scorer.score([generated[o] for o in owners], flat).f1.astype(np.float64)
        empty = np.array([not generated[o].strip() or not r.strip() for o, r in zip(owners, flat)])
        sims[empty] = 0.0
        sims = np.clip(sims, -1.0, 1.0)
        best = np.full(len(groups), -np.inf)
        best_index = np.zeros(len(groups), dtype=np.int64)
        position = np.zeros(len(groups), dtype=np.int64)
        for k, (owner, sim) in enumerate(zip(owners, sims)):  # few references per item: a plain loop
            if sim > best[owner]:
                best[owner], best_index[owner] = sim, position[owner]
            position[owner] += 1
        return best.astype(np.float32), best_index


def similarity(generated, references, model: str | os.PathLike = DEFAULT_MODEL, method: str = "embedding",
               **options) -> np.ndarray:
    """Per-item similarity (float32) between generated answers and their reference(s)."""
    generated, groups = _check_items(generated, references)
    return SentenceSimilarity(model, method, **options).pairs(generated, groups)[0]


def negative_rejection(generated, references, threshold: float = 0.8, model: str | os.PathLike = DEFAULT_MODEL,
                       method: str = "embedding", *, similarity_model: SentenceSimilarity | None = None,
                       **options) -> NRRResult:
    """Negative Rejection Rate of generated answers against ground-truth answers.

    ``references``: one string per item, or a list of strings (the best similarity counts).
    An item is rejected when its similarity is strictly below ``threshold`` (in [-1, 1]; thresholds
    are model-specific: 0.8 suits all-MiniLM-L6-v2 cosines, not necessarily another model).
    Pass ``similarity_model`` to reuse a loaded model across calls.
    """
    threshold = _check_threshold(threshold)
    generated, groups = _check_items(generated, references)
    sim_model = similarity_model or SentenceSimilarity(model, method, **options)
    sims, best = sim_model.pairs(generated, groups)
    rejected = sims < np.float32(threshold)
    signature = f"nrr|{sim_model.signature}|threshold:{threshold:g}|nrefs:{max(len(g) for g in groups)}"
    return NRRResult(similarities=sims, rejected=rejected, threshold=threshold, signature=signature,
                     best_reference=best)


def nrr_curve(similarities, thresholds=None) -> tuple[np.ndarray, np.ndarray]:
    """(thresholds, NRR at each threshold), NRR(t) = fraction of similarities strictly below t.

    Default thresholds: 201 points from -1 to 1. Computed once from the sorted similarities.
    """
    sims = np.sort(np.asarray(similarities, dtype=np.float64))
    if sims.size == 0:
        raise ValueError("similarities is empty")
    if np.isnan(sims).any():
        raise ValueError("similarities contain NaN")
    grid = np.linspace(-1, 1, 201) if thresholds is None else np.asarray(thresholds, dtype=np.float64)
    return grid, np.searchsorted(sims, grid, side="left") / sims.size


@dataclass(frozen=True)
class ThresholdCalibration:
    """The chosen threshold and the confusion matrix of the *rejected* (not captured) class."""

    threshold: float
    criterion: str
    value: float
    true_positive: int   # not captured, rejected
    false_positive: int  # captured, rejected
    true_negative: int   # captured, not rejected
    false_negative: int  # not captured, not rejected

    @property
    def confusion_matrix(self) -> np.ndarray:
        """[[TN, FP], [FN, TP]] with rows = truth (captured, not captured), columns = decision
        (kept, rejected)."""
        return np.array([[self.true_negative, self.false_positive], [self.false_negative, self.true_positive]])


def calibrate_threshold(similarities, captured, criterion: str = "f1") -> ThresholdCalibration:
    """Choose the threshold that best separates labelled examples.

    ``captured[i]`` is True when a person judged item i's meaning captured. The decision "rejected"
    is similarity < threshold; ``criterion`` "f1" maximises F1 of the rejected class, "youden"
    maximises Youden's J (TPR - FPR). Candidate thresholds are the midpoints between consecutive
    distinct similarities (and just beyond both ends); ties go to the lower threshold.
    """
    if criterion not in CRITERIA:
        raise ValueError(f"criterion must be one of {CRITERIA}, got {criterion!r}")
    sims = np.asarray(similarities, dtype=np.float64)
    labels = np.asarray(captured)
    if sims.ndim != 1 or labels.shape != sims.shape:
        raise ValueError(f"similarities and captured must be 1-D of equal length, got {sims.shape} and {labels.shape}")
    if sims.size == 0:
        raise ValueError("no labelled examples")
    if labels.dtype != bool:
        if not np.isin(labels, [0, 1]).all():
            raise ValueError("captured must hold booleans (or 0/1)")
        labels = labels.astype(bool)
    not_captured = ~labels
    distinct = np.unique(sims)
    candidates = np.concatenate([[distinct[0] - 1e-6], (distinct[:-1] + distinct[1:]) / 2, [distinct[-1] + 1e-6]])
    rejected = sims[None, :] < candidates[:, None]
    tp = (rejected & not_captured).sum(1)
    fp = (rejected & labels).sum(1)
    fn = (~rejected & not_captured).sum(1)
    tn = (~rejected & labels).sum(1)
    if criterion == "f1":
        denominator = 2 * tp + fp + fn
        values = np.where(denominator > 0, 2 * tp / np.maximum(denominator, 1), 0.0)
    else:
        tpr = tp / max(int(not_captured.sum()), 1)
        fpr = fp / max(int(labels.sum()), 1)
        values = tpr - fpr
    best = int(np.argmax(values))
    return ThresholdCalibration(threshold=float(candidates[best]), criterion=criterion, value=float(values[best]),
                                true_positive=int(tp[best]), false_positive=int(fp[best]),
                                true_negative=int(tn[best]), false_negative=int(fn[best]))


def negative_rejection_frame(frame, generated: str = "generated", reference: str = "reference", **options) -> NRRResult:
    """NRR over a pandas DataFrame's columns (a reference cell may hold a list of references)."""
    for column in (generated, reference):
        if column not in frame.columns:
            raise ValueError(f"DataFrame has no column {column!r} (columns: {list(frame.columns)})")
    refs = [list(r) if isinstance(r, (list, tuple, np.ndarray)) else r for r in frame[reference].tolist()]
    return negative_rejection(frame[generated].tolist(), refs, **options)


def read_jsonl_column(path: str | os.PathLike, key: str) -> list:
    values = []
    with open(path, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}, line {line_no}: not valid JSON ({exc})") from None
            if key not in record:
                raise ValueError(f"{path}, line {line_no}: no key {key!r}")
            values.append(record[key])
    return values


def negative_rejection_jsonl(path: str | os.PathLike, generated: str = "generated", reference: str = "reference",
                             **options) -> NRRResult:
    """NRR over a JSONL file with one record per item."""
    return negative_rejection(read_jsonl_column(path, generated), read_jsonl_column(path, reference), **options)


def plot_similarities(result: NRRResult, fname: str | os.PathLike | None = None):
    """Histogram of the similarities with the threshold line (needs matplotlib: rapidscore[plot])."""
    try:
        import matplotlib

        if fname:
            matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError("plotting needs matplotlib: pip install 'rapidscore[plot]'") from exc
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.hist(result.similarities, bins=40, color="#4c72b0", alpha=0.85)
    ax.axvline(result.threshold, color="#c44e52", linestyle="--",
               label=f"threshold {result.threshold:g}: NRR {result.rate:.1%}")
    ax.set_xlabel("similarity to the reference")
    ax.set_ylabel("items")
    ax.legend()
    fig.tight_layout()
    if fname:
        fig.savefig(fname, dpi=100)
    return fig
