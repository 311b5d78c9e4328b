"""Streaming for every metric: results per item, in input order, in bounded memory.

- BERTScore: ``BERTScore.score_iter(pairs)`` (``rapidscore.bertscore``), idf by a first pass
  (``BERTScore.document_frequencies``) or an idf file.
- Similarity / NRR: ``SentenceSimilarity.score_iter(items)`` (``rapidscore.nrr``);
  :func:`negative_rejection_iter` adds the decision per item and :class:`RateCounter` the rate.
- NER: :func:`ner_records_iter` yields each record's DMBertA and SemEval detail;
  :class:`NerTotals` accumulates the corpus scores :func:`rapidscore.ner.evaluate` reports.
- Refusal: :func:`refusal_iter` yields one decision per response.

Each reads its input lazily, one chunk at a time. See docs/scale.md.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from rapidscore.common.stream import chunks
from rapidscore.errors import check_positive_int

__all__ = ["negative_rejection_iter", "RateCounter", "ner_records_iter", "NerTotals", "refusal_iter"]


def negative_rejection_iter(items: Iterable, threshold: float = 0.8, *, similarity_model=None,
                            chunk_size: int = 4096, **options) -> Iterator[dict]:
    """``{"similarity", "rejected", "best_reference"}`` per ``(generated, reference)`` item, as
    ``rapidscore.nrr.negative_rejection`` decides them (rejected: similarity < threshold).
    ``options`` as ``SentenceSimilarity`` (model, method, engine options)."""
    from rapidscore.nrr.scoring import SentenceSimilarity, check_threshold

    threshold32 = np.float32(check_threshold(threshold))
    model = similarity_model or SentenceSimilarity(**options)
    for similarity, best in model.score_iter(items, chunk_size=chunk_size):
        yield {"similarity": similarity, "rejected": bool(np.float32(similarity) < threshold32),
               "best_reference": best}


class RateCounter:
    """Running NRR over streamed decisions: ``add(rejected)``; ``rate``, ``capture_rate``.
    Not thread-safe: one per stream."""

    def __init__(self) -> None:
        self.n_evaluated = self.n_rejected = 0

    def add(self, rejected: bool) -> None:
        self.n_evaluated += 1
        self.n_rejected += bool(rejected)

    @property
    def rate(self) -> float:
        return self.n_rejected / self.n_evaluated if self.n_evaluated else 0.0

    @property
    def capture_rate(self) -> float:
        return 1.0 - self.rate if self.n_evaluated else 0.0


def ner_records_iter(items: Iterable, *, chunk_size: int = 1024, **options) -> Iterator[dict]:
    """Per-record DMBertA and SemEval detail of a stream of ``(gold, predicted)`` records, as
    ``rapidscore.ner.evaluate(...).records`` gives them (id, n_gold, n_pred, precision, recall,
    score, matches, semeval counts, repairs).

    A record is a record dict (``{"id", "text", "labels"}``) or the record's entities in any
    supported format (then numbered by stream position). ``options`` as ``evaluate``; the label
    similarity is built once for the stream. Pass the records to :class:`NerTotals` for the corpus
    scores."""
    from rapidscore.ner.evaluation import evaluate
    from rapidscore.ner.labels import make_label_similarity
    from rapidscore.ner.records import is_record_dict

    chunk_size = check_positive_int(chunk_size, "chunk_size")
    similarity_keys = ("label_model", "embedder", "label_map", "encoder_options")
    similarity = make_label_similarity(options.pop("label_similarity", "embedding"),
                                       **{k: options.pop(k) for k in similarity_keys if k in options})
    position = 0
    for chunk in chunks(items, chunk_size):
        gold, predicted = [], []
        for index, item in enumerate(chunk, position):
            if isinstance(item, (str, bytes, Mapping)) or not hasattr(item, "__len__") or len(item) != 2:
                raise TypeError(f"item {index} must be a (gold, predicted) pair of records, got "
                                f"{type(item).__name__}: {item!r:.80}")
            gold.append(item[0])
            predicted.append(item[1])
        ids = None if all(is_record_dict(g) for g in gold) else list(range(position, position + len(chunk)))
        try:
            result = evaluate(gold, predicted, ids=ids, label_similarity=similarity, **options)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"records {position}-{position + len(chunk) - 1} of the stream: {exc}") from None
        yield from result.records
        position += len(chunk)


class NerTotals:
    """The corpus scores of streamed NER records: ``add(record)`` for each record of
    :func:`ner_records_iter`; ``dmberta`` and ``semeval`` as ``NerResult`` reports them.
    Not thread-safe: one per stream."""

    def __init__(self) -> None:
        self.n_records = 0
        self.credit = 0.0
        self.n_gold = self.n_pred = 0
        self.score_sum = self.precision_sum = self.recall_sum = 0.0
        self.semeval_counts: dict[str, np.ndarray] = {}

    def add(self, record: Mapping) -> None:
        self.n_records += 1
        self.credit += sum(match["credit"] for match in record["matches"])
        self.n_gold += record["n_gold"]
        self.n_pred += record["n_pred"]
        self.score_sum += record["score"]
        self.precision_sum += record["precision"]
        self.recall_sum += record["recall"]
        for scheme, counts in record["semeval"].items():
            row = np.array([counts[k] for k in ("correct", "incorrect", "partial", "missed", "spurious")], np.int64)
            self.semeval_counts[scheme] = self.semeval_counts.get(scheme, 0) + row

    @property
    def dmberta(self) -> dict:
        from rapidscore.ner.evaluation import _prf

        n = self.n_records
        precision, recall, f1 = _prf(self.credit, self.n_pred, self.n_gold)
        if self.n_gold == 0 and self.n_pred == 0:
            precision = recall = f1 = 1.0
        return {"mean": self.score_sum / n if n else 0.0, "accumulate": self.score_sum,
                "precision_mean": self.precision_sum / n if n else 0.0,
                "recall_mean": self.recall_sum / n if n else 0.0,
                "precision": precision, "recall": recall, "f1": f1,
                "credit": self.credit, "n_gold": self.n_gold, "n_pred": self.n_pred}

    @property
    def semeval(self) -> dict:
        from rapidscore.ner.evaluation import semeval_summary

        out = {}
        for scheme, counts in self.semeval_counts.items():
            correct, incorrect, partial, missed, spurious = (int(c) for c in counts)
            out[scheme] = semeval_summary(correct, incorrect, partial, missed, spurious, scheme=scheme)
        return out


def refusal_iter(responses: Iterable, method: Any = "heuristic", *, chunk_size: int = 4096,
                 **options) -> Iterator[bool]:
    """One refusal decision per response (True = refusal), as
    ``rapidscore.abstention.detect_refusal`` decides them; the detector is built once."""
    from rapidscore.abstention.detectors import get_detector, response_text

    detector = get_detector(method, **options)
    iterator = iter(responses)
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    position = 0
    while True:
        chunk = list(itertools.islice(iterator, chunk_size))
        if not chunk:
            return
        # positions in the stream, not in the chunk, in the error of a bad response
        texts = [response_text(response, index) for index, response in enumerate(chunk, position)]
        yield from detector.detect(texts).tolist()
        position += len(chunk)
