"""Running one metric over a stream of rows, chunk by chunk: the loop under every stream.

:func:`stream_metric` takes the metric itself (a :class:`~rapidscore.common.metric.Metric`), not
its registered name, so a metric package's own stream helpers (``rapidscore.nrr.streams``, ...)
use it without the registry and the front end above them: ``rapidscore.streaming.score_stream``
(which finds a metric by name) and those helpers share this loop, and neither imports the other.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from rapidscore.common.metric import Metric, Totals, output_rows
from rapidscore.common.tables import metric_rows, table_kind
from rapidscore.errors import check_positive_int

__all__ = ["stream_metric", "metric_engine"]


def stream_metric(metric: Metric, rows: Iterable, *, chunk_size: int = 4096, engine: Any = None,
                  totals: Totals | None = None, columns: dict[str, str | None] | None = None,
                  **options: Any) -> Iterator[dict]:
    """The outputs of ``metric`` per row of ``rows``, in input order, ``chunk_size`` rows at a
    time; the arguments as ``rapidscore.streaming.score_stream``'s."""
    chunk_size = check_positive_int(chunk_size, "chunk_size")
    if columns is not None or table_kind(rows) is not None:
        rows = metric_rows(metric, rows, columns)
    engine = metric_engine(metric, engine, options)
    return _rows(metric, engine, rows, chunk_size, totals)


def metric_engine(metric: Metric, engine: Any, options: dict) -> Any:
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
