"""Streaming NER: each record's DMBertA and SemEval detail from a stream of records, and the
corpus totals they add up to.

The streaming runner (``rapidscore.streaming.score_stream``) with NER's usual options; also
importable from ``rapidscore.streaming`` (its older home). Reads its input lazily, one chunk at a
time. Thread safety: a generator is one stream's; :class:`NerTotals` is one stream's too.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from rapidscore.common.metric_stream import stream_metric
from rapidscore.ner.metric import METRIC, NerTotals

__all__ = ["ner_records_iter", "NerTotals"]


def ner_records_iter(items: Iterable, *, chunk_size: int = 1024, **options) -> Iterator[dict]:
    """Per-record DMBertA and SemEval detail of a stream of ``(gold, predicted)`` records, as
    ``rapidscore.ner.evaluate(...).records`` gives them (id, n_gold, n_pred, precision, recall,
    score, matches, semeval counts, semeval_entities: each scheme's correct / incorrect / partial /
    missed / spurious entities, repairs).

    A record is a record dict (``{"id", "text", "labels"}``) or the record's entities in any
    supported format (then numbered by stream position). ``options`` as ``evaluate``; the label
    similarity is built once for the stream. Pass the records to :class:`NerTotals` for the corpus
    scores."""
    for row in stream_metric(METRIC, items, chunk_size=chunk_size, **options):
        yield row["record"]
