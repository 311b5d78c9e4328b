"""Streaming for every metric: results per item, in input order, in bounded memory.

:func:`score_stream` runs any registered metric (``rapidscore.metrics``) over a stream of rows,
one chunk at a time, and adds each chunk to the metric's totals; :func:`score_table` runs one
over a table (a pandas DataFrame, a pyarrow Table, a Hugging Face ``Dataset`` or
``IterableDataset``) by column names. Nothing here is written for one metric: each reads its
input lazily, one chunk at a time, as its ``Metric.stream`` does (BERTScore's memory budget and
idf pass, NRR's character budget). See docs/scale.md.

A metric's own stream helpers live in its package's ``streams`` module (NRR's
``negative_rejection_iter`` and ``RateCounter``, NER's ``ner_records_iter`` and ``NerTotals``,
refusal's ``refusal_iter``); they are importable from here too (their older home), found through
the registered metrics (this module's ``__getattr__``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from importlib import import_module
from importlib.util import find_spec
from types import ModuleType
from typing import Any

from rapidscore.common.metric import Metric, RowNames, Totals, plain_column
from rapidscore.common.metric_stream import metric_engine, stream_metric
from rapidscore.common.tables import metric_columns, metric_rows, table_kind
from rapidscore.errors import check_positive_int
from rapidscore.metrics import all_metrics, get_metric

__all__ = ["score_stream", "score_table"]


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
    return stream_metric(get_metric(metric), rows, chunk_size=chunk_size, engine=engine, totals=totals,
                         columns=columns, **options)


def score_table(table: Any, metric: str | Metric | None = None, *, columns: Mapping[str, str | None] | None = None,
                engine: Any = None, chunk_size: int = 4096, **options: Any) -> dict[str, list]:
    """Score every row of ``table`` with a registered ``metric`` (default BERTScore); returns its
    output columns (one plain value per row; e.g. ``precision``, ``recall``, ``f1`` for BERTScore).

    ``table``: a pandas DataFrame, a pyarrow Table, a ``datasets.Dataset`` or a dict of columns
    (scored in one call), or a ``datasets.IterableDataset`` / an iterable of dict rows (streamed
    ``chunk_size`` rows at a time). ``columns``: ``{metric input: table column}`` where the names
    differ. ``options`` build the metric's engine (its model and options, as for
    ``rapidscore.streaming.score_stream``), or pass a built ``engine``. The numbers are the
    metric's own API's on the same rows. ColumnError names a missing column; a bad row raises
    TypeError / ValueError naming it ("row 3").

    Thread-safe as the engine (every engine rapidscore builds is)."""
    if metric is None:
        from rapidscore.bertscore.metric import METRIC

        metric = METRIC
    metric = get_metric(metric)
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    engine = metric_engine(metric, engine, options)
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


def _stream_modules() -> Iterator[ModuleType]:
    """The ``streams`` module of each registered metric's package, where rapidscore's own
    package has one (``rapidscore.nrr.streams``): the metrics' own stream helpers."""
    root = __name__.partition(".")[0]
    seen = set()
    for metric in all_metrics():
        package = type(metric).__module__.rpartition(".")[0]
        if package.partition(".")[0] != root or package in seen:
            continue
        seen.add(package)
        if find_spec(f"{package}.streams") is not None:
            yield import_module(f"{package}.streams")


def __getattr__(name: str) -> Any:
    """A metric's stream helper by its older name here (``negative_rejection_iter``, ...)."""
    if not name.startswith("__"):
        for module in _stream_modules():
            if name in getattr(module, "__all__", ()):
                return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *(n for module in _stream_modules() for n in getattr(module, "__all__", ()))})
