"""The classifier refusal detector: a trained sequence classifier (any model that
``AutoModelForSequenceClassification`` loads without remote code, e.g.
protectai/distilroberta-base-rejection-v1) run by ``rapidscore.encoder.classifier``.

A response is a refusal when the probability of the refusal label (softmax over the logits, or
sigmoid for a single-logit or multi-label head, as the transformers pipeline scores) is above
``threshold``; by default the argmax (a single logit: > 0.5).
"""

from __future__ import annotations

import os
import re

import numpy as np

from rapidscore.abstention.detector_base import Detector, response_texts
from rapidscore.errors import ClassifierLabelError

__all__ = ["ClassifierDetector", "ClassifierLabelError", "REFUSAL_LABEL_PATTERN"]

#: label names read as "refusal" (case-insensitive, anywhere in the label)
REFUSAL_LABEL_PATTERN = re.compile(r"refus|reject|abstain", re.IGNORECASE)


def refusal_label_index(labels: tuple[str, ...], refusal_label: str | int | None, model: str) -> int:
    """The index of the refusal label among ``labels``: ``refusal_label`` (a label name, or an id),
    else the one label named like refusal / rejection / refuse / reject / abstain."""
    listed = ", ".join(f"{i}: {name!r}" for i, name in enumerate(labels))
    if refusal_label is None:
        found = [i for i, name in enumerate(labels) if REFUSAL_LABEL_PATTERN.search(name)]
        if len(found) == 1:
            return found[0]
        how = "several labels" if found else "no label"
        raise ClassifierLabelError(
            f"cannot tell which label of {model} is a refusal: {how} named like refusal/rejection/refuse/reject/"
            f"abstain among its labels ({listed}); pass refusal_label= one of them")
    if isinstance(refusal_label, (int, np.integer)) and not isinstance(refusal_label, bool):
        if 0 <= refusal_label < len(labels):
            return int(refusal_label)
    elif isinstance(refusal_label, str) and refusal_label in labels:
        return labels.index(refusal_label)
    raise ClassifierLabelError(f"refusal_label={refusal_label!r} is not a label of {model}; its labels: {listed}")


class ClassifierDetector(Detector):
    """Refusal by a trained sequence classifier.

    ``model``: a directory or hub id (offline first) of a sequence classifier; a model without a
    classification head is a ``NotAClassifierError``. ``refusal_label``: the label meaning
    refusal (a name or an id; default: the one label named like refusal / rejection / refuse /
    reject / abstain, case-insensitive); unknown or ambiguous: a :class:`ClassifierLabelError`
    listing the labels. ``threshold``: refusal when its probability is > threshold, in [0, 1];
    None (default): the argmax label (a single logit or multi-label head: > 0.5).
    ``long_texts``: ``"truncate"`` (at the model's maximum length, counted, TruncationWarning) or
    ``"window"`` (the maximum refusal probability over windows). The engine keywords
    (``backend``, ``device``, ``precision``, ``num_threads``, ``batch_tokens``, ``cache_dir``,
    ``max_length``): as ``rapidscore.encoder.classifier.SequenceClassifier``.

    :meth:`probabilities` / :meth:`scores` give the refusal probability per response. Thread-safe.
    """

    name = "classifier"

    def __init__(self, model: str | os.PathLike | None = None, *, refusal_label: str | int | None = None,
                 threshold: float | None = None, long_texts: str = "truncate", backend: str | None = None,
                 device: str = "cpu", precision: str = "fp32", num_threads: int | None = None,
                 batch_tokens: int | None = None, cache_dir: str | os.PathLike | None = None,
                 max_length: int | None = None):
        from rapidscore.encoder.classifier import SequenceClassifier

        if model is None:
            raise ValueError("method='classifier' needs model= (a directory or hub id of a sequence classifier, "
                             "e.g. a download of protectai/distilroberta-base-rejection-v1)")
        if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.number))
                                      or not 0.0 <= threshold <= 1.0):  # NaN fails the comparison too
            raise ValueError(f"threshold must be a probability in [0, 1] or None (the argmax), got {threshold!r}")
        self.classifier = SequenceClassifier(model, backend=backend, device=device, precision=precision,
                                             num_threads=num_threads, batch_tokens=batch_tokens,
                                             cache_dir=cache_dir, long_texts=long_texts, max_length=max_length)
        self.model_name = os.fspath(model)
        self.labels = self.classifier.labels
        self.refusal_index = refusal_label_index(self.labels, refusal_label, repr(self.model_name))
        self.refusal_label = self.labels[self.refusal_index]
        self.threshold = None if threshold is None else float(threshold)

    def probabilities(self, responses) -> np.ndarray:
        """The refusal probability per response (float64; with ``long_texts="window"`` the
        maximum over a long response's windows)."""
        from rapidscore.encoder.classifier import softmax_or_sigmoid

        texts = response_texts(responses)
        logits, owners = self.classifier.window_logits(texts, stacklevel=2)
        probs = softmax_or_sigmoid(logits, self.classifier.problem_type)
        return self._per_text(probs[:, self.refusal_index], owners, len(texts))

    scores = probabilities

    @staticmethod
    def _per_text(values: np.ndarray, owners: np.ndarray, n: int) -> np.ndarray:
        out = np.full(n, -np.inf)
        np.maximum.at(out, owners, values)
        return out

    def detect(self, texts: list[str]) -> np.ndarray:
        from rapidscore.encoder.classifier import softmax_or_sigmoid

        logits, owners = self.classifier.window_logits(texts, stacklevel=3)
        probs = softmax_or_sigmoid(logits, self.classifier.problem_type)
        if self.threshold is not None:
            return self._per_text(probs[:, self.refusal_index], owners, len(texts)) > self.threshold
        if self.classifier.multi_label:
            return self._per_text(probs[:, self.refusal_index], owners, len(texts)) > 0.5
        # argmax per input (the pipeline's top label); a windowed text refuses when any window does
        wins = (probs.argmax(axis=1) == self.refusal_index).astype(np.float64)
        return self._per_text(wins, owners, len(texts)) > 0.5
