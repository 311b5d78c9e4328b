"""Streaming for every metric: results per item, in input order, in bounded memory.

:func:`score_stream` runs any registered metric (``rapidscore.metrics``) over a stream of rows,
one chunk at a time, and adds each chunk to the metric's totals; :func:`score_table` runs one
over a table (a pandas DataFrame, a pyarrow Table, a Hugging Face ``Dataset`` or
``IterableDataset``) by column names. The per-metric entry points
below are that runner with each metric's usual options (kept for the callers that use them):

- BERTScore: ``BERTScore.score_iter(pairs)`` (``rapidscore.bertscore``), idf by a first pass
  (``BERTScore.document_frequencies``) or an idf file; ``score_stream("bertscore", ...)``.
- Similarity / NRR: ``SentenceSimilarity.score_iter(items)`` (``rapidscore.nrr``);
  :func:`negative_rejection_iter` adds the decision per item and :class:`RateCounter` the rate.
- NER: :func:`ner_records_iter` yields each record's DMBertA and SemEval detail;
  :class:`NerTotals` accumulates the corpus scores :func:`rapidscore.ner.evaluate` reports.
- Refusal: :func:`refusal_iter` yields one decision per response.

Each reads its input lazily, one chunk at a time. See docs/scale.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from rapidscore.common.metric import Metric, RowNames, Totals, output_rows, plain_column
from rapidscore.common.tables import metric_columns, metric_rows, table_kind
from rapidscore.errors import check_positive_int
from rapidscore.metrics import get_metric
from rapidscore.ner.metric import NerTotals
from rapidscore.nrr.metric import RateCounter

__all__ = ["score_stream", "score_table", "negative_rejection_iter", "RateCounter", "ner_records_iter", "NerTotals",
           "refusal_iter"]


def score_stream(metric: str | Metric, rows: Iterable, *, chunk_size: int = 4096, engine: Any = None,
                 totals: Totals | None = None, columns: dict[str, str | None] | None = None,
                 **options: Any) -> Iterator[dict]:
    """The outputs of ``metric`` per row of ``rows`` (a dict of its output columns), in input
    order, reading ``chunk_size`` rows at a time.

    A row is a tuple in the order of the metric's input columns (``(candidate, reference)``,
    ``(generated, reference)``, ``(gold, predicted[, text])``) or, for a one-column metric, the
    value itself (a response). ``rows`` may also be a table read row by row (a
    ``datasets.IterableDataset`` or ``Dataset``, a pandas DataFrame, a pyarrow Table; with
    ``columns``, any iterable of dict rows): its columns by the metric's input names, or as
    ``columns={"candidate": "response", ...}`` maps them (``rapidscore.common.tables``).
    ``options`` build the metric's engine once (its model and
    options; see each metric), or pass a built ``engine``. ``totals``: an accumulator of the
    metric (``get_metric(name).totals()``) updated with every chunk. A bad row raises
    TypeError / ValueError naming its position in the stream."""
    metric = get_metric(metric)
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    if columns is not None or table_kind(rows) is not None:
        rows = metric_rows(metric, rows, columns)
    engine = _engine(metric, engine, options)
    return _rows(metric, engine, rows, chunk_size, totals)


def score_table(table: Any, metric: str | Metric = "bertscore", *, columns: Mapping[str, str | None] | None = None,
                engine: Any = None, chunk_size: int = 4096, **options: Any) -> dict[str, list]:
    """Score every row of ``table`` with a registered ``metric``; returns its output columns
    (one plain value per row; e.g. ``precision``, ``recall``, ``f1`` for BERTScore).

    ``table``: a pandas DataFrame, a pyarrow Table, a ``datasets.Dataset`` or a dict of columns
    (scored in one call), or a ``datasets.IterableDataset`` / an iterable of dict rows (streamed
    ``chunk_size`` rows at a time). ``columns``: ``{metric input: table column}`` where the names
    differ. ``options`` build the metric's engine (its model and options, as for
    ``rapidscore.streaming.score_stream``), or pass a built ``engine``. The numbers are the
    metric's own API's on the same rows. ColumnError names a missing column; a bad row raises
    TypeError / ValueError naming it ("row 3").

    Thread-safe as the engine (every engine rapidscore builds is)."""
    metric = get_metric(metric)
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    engine = _engine(metric, engine, options)
    kind = table_kind(table)
    if kind is not None and kind != "iterable_dataset":
        outputs = metric.score(engine, metric_columns(metric, table, columns), RowNames("row"))
        # a 2-D output (BERTScore's all_layers: layers x rows) as one array per row, as streams give it
        return {name: plain_column(values.T if getattr(values, "ndim", 1) == 2 else values)
                for name, values in outputs.items()}
    result: dict[str, list] = {}
    stream = score_stream(metric, metric_rows(metric, table, columns), chunk_size=chunk_size, engine=engine)
    for n_rows, row in enumerate(stream):
        for name in [*row, *(name for name in result if name not in row)]:
            result.setdefault(name, [None] * n_rows).append(row.get(name))
    return result


def _engine(metric: Metric, engine: Any, options: dict) -> Any:
    """The given engine, or the metric's built from ``options`` (not both)."""
    if engine is None:
        return metric.build(**options)
    if options:
        raise TypeError(f"pass options or a built engine, not both (got {sorted(options)})")
    return engine


def _rows(metric: Metric, engine: Any, rows: Iterable, chunk_size: int, totals: Totals | None) -> Iterator[dict]:
    for _chunk, outputs in metric.stream(engine, rows, chunk_size=chunk_size):
        if totals is not None:
            totals.update(outputs)
        yield from output_rows(outputs)


def negative_rejection_iter(items: Iterable, threshold: float = 0.8, *, similarity_model=None,
                            chunk_size: int = 4096, **options) -> Iterator[dict]:
    """``{"similarity", "rejected", "best_reference"}`` per ``(generated, reference)`` item, as
    ``rapidscore.nrr.negative_rejection`` decides them (rejected: similarity < threshold).
    ``options`` as ``SentenceSimilarity`` (model, method, engine options)."""
    from rapidscore.nrr.metric import METRIC

    engine = METRIC.build(threshold=threshold, similarity_model=similarity_model, **options)
    for row in score_stream(METRIC, items, chunk_size=chunk_size, engine=engine):
        yield {"similarity": row["similarity"], "rejected": row["rejected"], "best_reference": row["best_reference"]}


def ner_records_iter(items: Iterable, *, chunk_size: int = 1024, **options) -> Iterator[dict]:
    """Per-record DMBertA and SemEval detail of a stream of ``(gold, predicted)`` records, as
    ``rapidscore.ner.evaluate(...).records`` gives them (id, n_gold, n_pred, precision, recall,
    score, matches, semeval counts, semeval_entities: each scheme's correct / incorrect / partial /
    missed / spurious entities, repairs).

    A record is a record dict (``{"id", "text", "labels"}``) or the record's entities in any
    supported format (then numbered by stream position). ``options`` as ``evaluate``; the label
    similarity is built once for the stream. Pass the records to :class:`NerTotals` for the corpus
    scores."""
    for row in score_stream("ner", items, chunk_size=chunk_size, **options):
        yield row["record"]


def refusal_iter(responses: Iterable, method: Any = "heuristic", *, chunk_size: int = 4096,
                 **options) -> Iterator[bool]:
    """One refusal decision per response (True = refusal), as
    ``rapidscore.abstention.detect_refusal`` decides them; the detector is built once."""
    for row in score_stream("refusal", responses, chunk_size=chunk_size, method=method, **options):
        yield row["refusal"]
