"""Streaming NRR: the Negative Rejection Rate's decision per streamed item, and its running rate.

The streaming runner (``rapidscore.streaming.score_stream``) with NRR's usual options; also
importable from ``rapidscore.streaming`` (its older home). Reads its input lazily, one chunk at a
time. Thread safety: a generator is one stream's; the model behind it is shared and thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from rapidscore.common.metric_stream import stream_metric
from rapidscore.nrr.metric import METRIC, RateCounter

__all__ = ["negative_rejection_iter", "RateCounter"]


def negative_rejection_iter(items: Iterable, threshold: float = 0.8, *, similarity_model=None,
                            chunk_size: int = 4096, **options) -> Iterator[dict]:
    """``{"similarity", "rejected", "best_reference"}`` per ``(generated, reference)`` item, as
    ``rapidscore.nrr.negative_rejection`` decides them (rejected: similarity < threshold).
    ``options`` as ``SentenceSimilarity`` (model, method, engine options). :class:`RateCounter`
    (``add(row["rejected"])``) keeps the running rate."""
    engine = METRIC.build(threshold=threshold, similarity_model=similarity_model, **options)
    for row in stream_metric(METRIC, items, chunk_size=chunk_size, engine=engine):
        yield {"similarity": row["similarity"], "rejected": row["rejected"], "best_reference": row["best_reference"]}
