"""Rows as the metric layers name and convert them: :class:`RowNames` (how a caller names its
rows in errors), ``relabel`` (an error of one row named the caller's way), ``check_pairs`` (a
text column and a reference column as checked pairs) and the output columns as plain values
(``plain_column``, ``output_rows``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rapidscore.common.stream import check_pair

__all__ = ["RowNames", "relabel", "check_pairs", "plain_column", "output_rows"]


class RowNames:
    """How a caller names its rows in errors. The default names rows of a stream by position
    (``offset`` + the row within the chunk): "item 7"; "items 4-7 of the stream"."""

    def __init__(self, noun: str = "item", offset: int = 0):
        self.noun, self.offset = noun, offset

    def row(self, row: int) -> str:
        return f"{self.noun} {self.offset + row}"

    def rows(self, first: int, last: int) -> str:
        return f"{self.noun}s {self.offset + first}-{self.offset + last} of the stream"


def relabel(exc: BaseException, prefix: str, label: str) -> BaseException:
    """``exc`` (a TypeError/ValueError whose message may start with ``prefix``, e.g. "item 3")
    again, of its type, its message starting with ``label`` instead."""
    message = str(exc)
    if message.startswith(prefix + ": "):
        message = message[len(prefix) + 2:]
    elif message.startswith(prefix + " "):
        message = message[len(prefix) + 1:]
        return type(exc)(f"{label} {message}")
    return type(exc)(f"{label}: {message}")


def check_pairs(texts: Sequence, references: Sequence, names: tuple[str, str],
                rows: RowNames | None = None) -> list[tuple[str, list[str]]]:
    """Rows of a text column and a reference column (a cell: one reference or a non-empty list)
    as ``(text, [references])`` pairs; TypeError / ValueError naming the row by ``rows``."""
    rows = rows or RowNames()
    pairs = []
    for row, item in enumerate(zip(texts, references)):
        try:
            pairs.append(check_pair(item, row, names))
        except (TypeError, ValueError) as exc:
            raise relabel(exc, f"item {row}", rows.row(row)) from None
    return pairs


def plain_column(values: Any) -> list:
    """An output column (array or sequence) as a list of plain Python values."""
    return values.tolist() if hasattr(values, "tolist") else list(values)


def output_rows(outputs: Mapping[str, Any], names: Sequence[str] | None = None) -> list[dict]:
    """Output columns as one dict per row: the columns ``names`` (None where a metric did not
    produce one, e.g. NRR's ``rejected`` without a threshold), or every column given."""
    names = list(outputs) if names is None else list(names)
    n_rows = len(next(iter(outputs.values()), ()))
    columns = [plain_column(outputs[name]) if name in outputs else [None] * n_rows for name in names]
    return [dict(zip(names, row)) for row in zip(*columns)]
