"""Tables as a metric's input: one place that reads a table's columns for every metric.

A table is a pandas DataFrame, a pyarrow Table or RecordBatch, a Hugging Face
``datasets.Dataset`` or a dict of equal-length columns; an iterable table (a
``datasets.IterableDataset``, or any iterable of dict rows) is read as a stream of rows. Columns
are found by name: a metric's input columns (``rapidscore.metrics``: BERTScore's ``candidate``
and ``reference``, NRR's ``generated`` and ``reference``, NER's ``gold``, ``predicted`` and
``text``, refusal's ``response``) under their own names, or under the table's names given as
``columns={"candidate": "response", ...}``. ``rapidscore.score_table`` (in
``rapidscore.streaming``: it runs any registered metric) scores a whole table.

No library is imported here: a table of pandas, pyarrow or datasets can only exist once its
library is loaded, so the type check (the type's module) imports nothing new.

Thread-safe: the functions keep no state.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from rapidscore.common.metric import ColumnError, Metric, plain_column
from rapidscore.errors import TableError

__all__ = ["TableError", "table_kind", "column_names", "table_column", "table_rows", "metric_columns", "metric_rows",
           "plain_value"]


def _library_of(value: Any) -> str:
    return type(value).__module__.partition(".")[0]


def table_kind(table: Any) -> str | None:
    """``"pandas"``, ``"arrow"``, ``"dataset"``, ``"iterable_dataset"`` or ``"dict"`` for the
    tables this module reads; None for anything else."""
    library = _library_of(table)
    if library == "pandas" and isinstance(table, sys.modules["pandas"].DataFrame):
        return "pandas"
    if library == "pyarrow":
        pyarrow = sys.modules["pyarrow"]
        if isinstance(table, (pyarrow.Table, pyarrow.RecordBatch)):
            return "arrow"
    if library == "datasets":
        datasets = sys.modules["datasets"]
        if isinstance(table, datasets.Dataset):
            return "dataset"
        if isinstance(table, datasets.IterableDataset):
            return "iterable_dataset"
    if isinstance(table, Mapping):
        return "dict"
    return None


def column_names(table: Any) -> list[str] | None:
    """The table's column names (None: an iterable table that does not know them before its rows)."""
    kind = table_kind(table)
    if kind == "pandas":
        return [str(name) for name in table.columns]
    if kind in ("arrow", "dataset"):
        return list(table.column_names)
    if kind == "iterable_dataset":
        return None if table.column_names is None else list(table.column_names)
    if kind == "dict":
        return list(table)
    raise TableError(f"a table must be a pandas DataFrame, a pyarrow Table, a datasets.Dataset or a dict of columns, "
                    f"got {type(table).__name__}")


def plain_value(value: Any) -> Any:
    """A cell as plain Python values: numpy arrays (a list of references read from Parquet by
    pandas) become lists, numpy scalars Python scalars; dicts and lists are converted inside."""
    if _library_of(value) == "numpy":
        if hasattr(value, "tolist") and getattr(value, "dtype", None) is not None and value.dtype == object:
            return [plain_value(item) for item in value.tolist()]
        return value.tolist() if hasattr(value, "tolist") else value
    if isinstance(value, dict):
        return {key: plain_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_value(item) for item in value]
    return value


def _missing(name: str, present: list[str] | None, owner: str) -> ColumnError:
    prefix = f"{owner}: " if owner else ""
    return ColumnError(f"{prefix}the table has no column {name!r} (its columns: {present})")


def table_column(table: Any, name: str, owner: str = "") -> list:
    """Column ``name`` of an in-memory table as a list of plain Python values. ColumnError
    naming the column and the table's columns when it has none of that name; ``owner`` starts
    the message (the function or metric that needed the column)."""
    kind = table_kind(table)
    if kind == "iterable_dataset":
        raise TableError(f"{owner + ': ' if owner else ''}a datasets.IterableDataset is a stream of rows, it has no "
                        "column to read whole: read its rows (rapidscore.common.tables.table_rows)")
    present = column_names(table)
    if present is None or name not in present:
        raise _missing(name, present, owner)
    if kind == "pandas":
        return [plain_value(value) for value in table[name].tolist()]
    if kind == "arrow":
        return table.column(name).to_pylist()
    if kind == "dataset":
        # the formatted view (numpy, torch) would give arrays; the plain one gives lists and str
        return list(table.with_format(None)[name])
    return [plain_value(value) for value in plain_column(table[name])]


def table_rows(table: Any) -> Iterator[dict]:
    """The rows of a table (in memory or iterable) as dicts of plain values, read lazily.
    TableError at once for an object that is neither a table nor an iterable."""
    kind = table_kind(table)
    if kind in ("dataset", "iterable_dataset"):
        return (dict(row) for row in table.with_format(None))
    if kind == "arrow":
        batches = table.to_batches() if hasattr(table, "to_batches") else [table]
        return (row for batch in batches for row in batch.to_pylist())
    if kind in ("pandas", "dict"):
        names = column_names(table)
        assert names is not None
        return (dict(zip(names, row)) for row in zip(*(table_column(table, name) for name in names)))
    if isinstance(table, (str, bytes)) or not isinstance(table, Iterable):
        raise TableError(f"rows must be a table or an iterable of dict rows, got {type(table).__name__}")
    return _dict_rows(table)


def _dict_rows(rows: Iterable) -> Iterator[dict]:
    for index, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise TableError(f"row {index} must be a dict of columns (a table's row), got "
                             f"{type(row).__name__}: {row!r:.80}")
        yield {key: plain_value(value) for key, value in row.items()}


def _sources(metric: Metric, columns: Mapping[str, str | None] | None, present: list[str] | None) -> dict[str, str]:
    """``{metric input: table column}``: named in ``columns``, else the input's own name; an
    optional input is read when named or when the table has a column of its name."""
    inputs = {column.name: column for column in metric.inputs}
    given = dict(columns or {})
    unknown = sorted(set(given) - set(inputs))
    if unknown:
        raise ColumnError(f"{metric.name} has no input column(s) {unknown} (its inputs: {list(inputs)}); "
                          "columns maps the metric's inputs to the table's columns")
    sources = {}
    for name, column in inputs.items():
        source = given.get(name, name)
        if source is None:
            continue
        if not isinstance(source, str):
            raise TableError(f"columns[{name!r}] must be a column name (str) or None, got {type(source).__name__}")
        if column.optional and name not in given and present is not None and source not in present:
            continue
        sources[name] = source
    return sources


def metric_columns(metric: Metric, table: Any,
                   columns: Mapping[str, str | None] | None = None) -> dict[str, list]:
    """The input columns of ``metric`` read from an in-memory ``table`` (see the module's
    docstring), as ``metric.score`` takes them. ColumnError naming a missing column."""
    if table_kind(table) == "iterable_dataset":
        raise TableError(f"{metric.name}: a datasets.IterableDataset is a stream of rows: score it with "
                        "rapidscore.score_table(dataset, metric) or rapidscore.streaming.score_stream(metric, dataset, "
                        "columns=...)")
    sources = _sources(metric, columns, column_names(table))  # TypeError naming anything but a table
    return {name: table_column(table, source, metric.name) for name, source in sources.items()}


def metric_rows(metric: Metric, rows: Any, columns: Mapping[str, str | None] | None = None) -> Iterator:
    """The stream rows of ``metric`` (``Metric.stream``: a tuple in the order of its inputs, or
    the value itself for a one-column metric) read lazily from a table or an iterable table.
    ColumnError naming the column (and the row, for a row that lacks it)."""
    present = column_names(rows) if table_kind(rows) is not None else None
    sources = _sources(metric, columns, present)
    if present is not None:
        for source in sources.values():
            if source not in present:
                raise _missing(source, present, metric.name)
    # checked above, before the first row is read: the generator below starts only when iterated
    return _metric_rows(metric.name, [sources.get(column.name) for column in metric.inputs], table_rows(rows))


def _metric_rows(metric_name: str, sources: list[str | None], rows: Iterator[dict]) -> Iterator:
    for index, row in enumerate(rows):
        values = []
        for source in sources:
            if source is not None and source not in row:
                raise ColumnError(f"{metric_name}: row {index} has no column {source!r} (its columns: {list(row)})")
            values.append(None if source is None else row[source])
        yield values[0] if len(sources) == 1 else tuple(values)
