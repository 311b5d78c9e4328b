"""The metric contract: what a metric is, once, for every layer that runs metrics.

A :class:`Metric` says its name (and the older names users call it by), its input columns, its
output columns, how its engine is built (the model loaded once), how a chunk of rows is scored
into output columns, and how the outputs of many chunks add up to the corpus totals. The
streaming runner (``rapidscore.streaming.score_stream``), the Ray batch classes, the service's
batching and the CLI's generic command are written against this class and find metrics in the
registry (``rapidscore.metrics``); a metric's decision rules live in its own package only.

Rows are columns: ``{"candidate": [...], "reference": [...]}``, one list per input column, all of
one length, plain Python values. A bad row raises TypeError or ValueError naming the row the way
the caller names rows (a :class:`RowNames`: "item 7" in a stream, "row 7 of the batch (id='x')"
in Ray).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

from rapidscore.common.stream import check_pair, chunks
from rapidscore.errors import ColumnError

__all__ = ["Column", "Declared", "RequestOption", "ServerSetting", "DatasetPass", "Metric", "ServerContext", "Totals",
           "ColumnError", "RowNames", "ServingTask", "PiecewiseTask", "check_columns", "request_option_table",
           "check_pairs", "relabel", "output_rows", "plain_column"]


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


@dataclass(frozen=True)
class Column:
    """An input column of a metric.

    ``kind``: ``"text"`` (a string), ``"texts"`` (a string or a non-empty list of strings: one
    reference or several), ``"entities"`` (one record's entities, in any format rapidscore.ner
    reads), ``"response"`` (a string, or a ``{"complete", "answer"}`` record) or ``"any"``.
    ``optional`` columns may be absent (then ``None`` for every row)."""

    name: str
    kind: str
    help: str = ""
    optional: bool = False
    #: the field of an HTTP request that holds the column (one value per row); default ``name``
    request_field: str | None = None
    #: the keyword of the metric's Ray batch class naming the batch column; default ``NAME_column``
    keyword: str | None = None

    @property
    def field(self) -> str:
        return self.request_field or self.name

    @property
    def column_keyword(self) -> str:
        return self.keyword or f"{self.name}_column"


@dataclass(frozen=True)
class Declared:
    """A declared option: its name, type (``bool``, ``int``, ``float``, ``str``), default,
    documentation and bounds (``choices`` for text, ``minimum`` / ``maximum`` for numbers)."""

    name: str
    type: type
    default: Any
    help: str
    choices: tuple[str, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None

    def check_value(self, value: Any) -> Any:
        """``value`` checked against the declaration (ValueError naming the option)."""
        import math

        expected = self.type
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if value is None and self.default is None:
            return None
        if not isinstance(value, expected) or (expected is not bool and isinstance(value, bool)):
            raise ValueError(f"{self.name} must be {expected.__name__}, got {value!r}")
        if self.choices is not None and value not in self.choices:
            raise ValueError(f"{self.name} must be one of {self.choices}, got {value!r}")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{self.name} must be finite, got {value!r}")
        number: Any = value
        if (self.minimum is not None and number < self.minimum) or (self.maximum is not None and number > self.maximum):
            raise ValueError(f"{self.name} must be in [{self.minimum}, {self.maximum}], got {value!r}")
        return value


@dataclass(frozen=True)
class RequestOption(Declared):
    """An option a caller may set per request (the HTTP service's request fields), declared
    once by the metric: its name (the Python API's keyword), type (``bool``, ``int``, ``float``,
    ``str``), default, documentation, and bounds (``choices`` for text, ``minimum`` /
    ``maximum`` for numbers). A request that sets an option to other than its default is scored
    by an engine built with it (``engine_options`` of the service), so the result equals the
    Python API's with that keyword."""

    #: the serving task takes the option with each request (no engine of its own per value:
    #: numbers such as a threshold); otherwise each value is scored by an engine built with it
    per_request: bool = False
    #: the value must be one the server loaded at start: ``"models"`` (a served model),
    #: ``"layers"`` (a served layer of the chosen model), ``"idf_files"`` (an idf file loaded
    #: at start, by name); another value is a 400 listing those served
    among: str | None = None


@dataclass(frozen=True)
class ServerSetting(Declared):
    """A setting a metric fixes when a server starts (``rapidscore serve --FLAG``, a key of its
    settings file, a ``ServeConfig`` keyword): a :class:`Declared` option (the flag is its name
    with dashes). A request option of the same meaning falls back to it (NRR's ``threshold`` to
    ``similarity_threshold``)."""

    #: may be given several times (``--idf-file A --idf-file B``): a tuple of values
    repeated: bool = False

    def check(self, value: Any) -> Any:
        """``value`` checked against the declaration (ValueError naming the setting)."""
        if self.repeated:
            if isinstance(value, str) or not isinstance(value, (list, tuple)):
                value = (value,)
            return tuple(self.check_value(item) for item in value)
        return self.check_value(value)


@dataclass(frozen=True)
class DatasetPass:
    """A first pass over a whole dataset that fills a build option before any row is scored
    (BERTScore's ``idf=True``: the document counts of every reference). Front ends that score a
    dataset in parts (Ray) run ``count`` per block, in parallel, and ``merge`` the partials.

    ``option``: the build option it fills when that option is ``True``; ``column``: the input
    column it reads; ``count(values, options) -> partial`` (values: the column's cells of one
    block; options: the other build options); ``merge(partials) -> value``. Both module-level
    functions (they travel to workers)."""

    option: str
    column: str
    count: Callable[[list, dict], Any]
    merge: Callable[[list], Any]


class Totals:
    """Corpus totals of a metric: ``update(outputs)`` with each chunk's output columns, then
    ``summary()``. Not thread-safe: one per stream."""

    def update(self, outputs: Mapping[str, Sequence]) -> None:
        raise NotImplementedError

    def summary(self) -> dict:
        raise NotImplementedError


class ServingTask(Protocol):
    """How the service batches a metric's requests (``rapidscore.serve.batching``;
    :meth:`Metric.serving_task` makes one per engine).

    ``prepare(*request, limits=None) -> (payload, tokens)`` runs in the caller's thread: it
    validates and tokenises one request (``limits.check_texts`` / ``check_tokens`` raise a 413's
    error before the work is queued) and returns what the worker needs and the request's token
    count, which the batch budget counts. ``run(payloads, alone) -> results`` runs in the worker:
    one result per payload, exactly what the engine's own call returns; requests of one task are
    merged into one run where the task can share work (one encoder pass); ``alone``: the batch
    runs by itself (a task may use more threads)."""

    @property
    def prepare(self) -> Callable[..., tuple[Any, int]]: ...  # each task takes its own request arguments

    def run(self, payloads: list, alone: bool) -> list: ...


@runtime_checkable
class PiecewiseTask(ServingTask, Protocol):
    """A :class:`ServingTask` that can encode a request larger than a batch in pieces, between
    other requests' batches: ``units(payload)`` the tokens of each of its texts, ``run_piece``
    the partial result of texts ``start:stop``, ``finish_pieces`` the result from every
    partial (equal to ``run([payload])``'s)."""

    def units(self, payload: Any) -> Sequence[int]: ...

    def run_piece(self, payload: Any, start: int, stop: int, alone: bool) -> Any: ...

    def finish_pieces(self, payload: Any, partials: list, alone: bool) -> Any: ...


class ServerContext(Protocol):
    """What a server fixed at start, as a metric's serving hooks see it
    (``rapidscore.serve.service.ScoringService`` is one)."""

    def setting(self, name: str) -> Any:
        """The value of a :class:`ServerSetting` (any metric's) this server runs with."""
        ...

    @property
    def default_model(self) -> str:
        """The model of a request that names none (the first served)."""
        ...

    def layer_of(self, model: str, num_layers: int | None) -> int | None:
        """The served layer of ``model`` a request chose (None: the model's first served)."""
        ...

    def idf_file(self, name: str) -> str:
        """The path of the idf file loaded at start under ``name``."""
        ...

    def encoder_options(self, solo: bool = False) -> dict | None:
        """The engine keywords of the workers' engines (``solo``: of lone batches; None: none)."""
        ...


class Metric:
    """One metric, defined once. Subclasses set the class attributes and implement
    :meth:`build` and :meth:`score`; :meth:`totals` and :meth:`serving_task` have defaults.

    Thread safety: a Metric holds no state (its engine does); ``score`` is as thread-safe as the
    engine it is given (every engine rapidscore builds is)."""

    name: ClassVar[str]
    #: older names that still resolve to this metric (CLI command, HTTP path, Ray ``metric=``)
    aliases: ClassVar[tuple[str, ...]] = ()
    summary: ClassVar[str] = ""
    inputs: ClassVar[tuple[Column, ...]]
    #: the tabular output columns (one scalar per row); ``score`` may add richer ones after them
    outputs: ClassVar[tuple[str, ...]]
    #: the keyword options of ``build`` that are not the engine's own (for generic front ends)
    options: ClassVar[tuple[str, ...]] = ()
    #: what a row is called in errors ("item 3", "record 3")
    row_noun: ClassVar[str] = "item"
    #: the module of the metric's own CLI command (``add_arguments``, ``run``); None: the generic
    #: command of ``rapidscore.metric_cli`` (rows of a file in, one output row per row out)
    command: ClassVar[str | None] = None
    #: whether ``serving_task`` takes a ``solo`` engine (the same engine with more threads)
    takes_solo: ClassVar[bool] = False
    #: the options a caller may set per request (the service's request fields; the generic
    #: command's flags): each is a keyword of :meth:`build` too
    request_options: ClassVar[tuple[RequestOption, ...]] = ()
    #: what a server fixes at start for this metric (``rapidscore serve`` flags)
    server_settings: ClassVar[tuple[ServerSetting, ...]] = ()
    #: a pass over a whole dataset that fills a build option (None: none)
    dataset_pass: ClassVar[DatasetPass | None] = None
    #: the names of the metric's Ray batch class (``rapidscore.integrations.ray.<name>``); the
    #: first is its own, later ones older names. Default: ``MetricBatch`` with ``metric=``
    batch_class_names: ClassVar[tuple[str, ...]] = ()

    def build(self, **options: Any) -> Any:
        """The engine (model loaded once, options checked): reused for every chunk."""
        raise NotImplementedError

    def score(self, engine: Any, columns: Mapping[str, Sequence], names: RowNames | None = None) -> dict[str, Any]:
        """Output columns (each one value per row) of the rows ``columns``; a bad row raises
        TypeError / ValueError naming it by ``names`` (default: a stream's "item N")."""
        raise NotImplementedError

    def stream(self, engine: Any, rows: Iterable, *, chunk_size: int = 4096) -> Iterator[tuple[list, dict]]:
        """``(rows, output columns)`` per chunk of a stream of rows, in input order. A row is a
        tuple in the order of :attr:`inputs` (optional ones may be left off), or the value
        itself for a one-column metric."""
        position = 0
        for chunk in chunks(rows, chunk_size):
            columns = self.columns_of(chunk, position)
            yield chunk, self.score(engine, columns, RowNames(self.row_noun, position))
            position += len(chunk)

    def columns_of(self, rows: Sequence, first: int = 0) -> dict[str, list]:
        """Stream rows (see :meth:`stream`) as columns; TypeError naming a row of the wrong shape."""
        if len(self.inputs) == 1:
            return {self.inputs[0].name: list(rows)}
        names = [c.name for c in self.inputs]
        required = sum(not c.optional for c in self.inputs)
        shape = "(" + ", ".join(names[:required]) + ")" + (" pair" if required == 2 else " tuple")
        columns: dict[str, list] = {name: [] for name in names}
        for index, row in enumerate(rows, first):
            if isinstance(row, (str, bytes, Mapping)) or not hasattr(row, "__len__") \
                    or not required <= len(row) <= len(names):
                raise TypeError(f"item {index} must be a {shape}, got {type(row).__name__}: {row!r:.80}")
            for k, name in enumerate(names):
                columns[name].append(row[k] if k < len(row) else None)
        return columns

    def totals(self) -> Totals | None:
        """A fresh accumulator of the corpus totals (None: the metric has none)."""
        return None

    def signature(self, engine: Any) -> str:
        return str(getattr(engine, "signature", f"{self.name}|rapidscore"))

    def serves(self, engine: Any) -> bool:
        """Whether ``engine`` (a scorer object a user built) is this metric's: the service's
        ``BatchingScorer`` picks the metric of the scorer it is given."""
        return False

    def serving_task(self, engine: Any, solo: Any = None) -> ServingTask:
        """How the service batches this metric's requests (:class:`ServingTask`): by default
        each request's rows are scored alone, in the worker."""
        return RowsTask(self, engine)

    # -- serving: what the HTTP service builds from the declarations above -------------------
    #: the response's fields and their types (the OpenAPI schema); None: each output column as
    #: a list, and ``signature``
    response_fields: ClassVar[dict[str, Any] | None] = None
    #: every row has a value in each required column (their lengths must agree; NER's records
    #: are joined by id instead)
    aligned_rows: ClassVar[bool] = True
    #: the fewest rows a request may hold (NRR's rate of nothing is undefined: 1)
    min_rows: ClassVar[int] = 0

    def serve_engine(self, server: ServerContext, options: Mapping[str, Any], encoder: Mapping[str, Any]) -> Any:
        """The engine a server scores requests with, built with a request's engine options
        (the :attr:`request_options` that are not ``per_request``, at their non-default values)
        and the server's ``encoder`` keywords; what :meth:`serving_task` takes. Default:
        ``build(**options)``."""
        return self.build(**options)

    def serve_request(self, server: ServerContext, columns: dict[str, Any],
                      options: Mapping[str, Any]) -> tuple[tuple, dict]:
        """The arguments of the serving task's ``prepare`` for one request: its columns (by
        input name) and its ``per_request`` options. Default: the columns (:class:`RowsTask`)."""
        return (columns,), {}

    def serve_response(self, server: ServerContext, result: Any, engine: Any, options: Mapping[str, Any]) -> dict:
        """The JSON document of a request's result. Default: each output column and the
        signature."""
        document = {name: plain_column(result[name]) for name in self.outputs if name in result}
        return {**document, "signature": self.signature(engine)}

    def serve_warm_up(self, server: ServerContext, scorer: Any) -> None:
        """Run a small request through ``scorer`` (a ``BatchingScorer``) before the server turns
        ready; default: nothing."""

    def __repr__(self) -> str:
        return f"<metric {self.name!r}>"


def request_option_table(metric: Metric) -> str:
    """The markdown table of ``metric``'s request options (docs/serving.md holds it as generated;
    a test checks that the page matches)."""
    lines = ["| field | type | default | what it does |", "|---|---|---|---|"]
    for option in metric.request_options:
        kind = " or ".join(f"`{c}`" for c in option.choices) if option.choices else option.type.__name__
        if option.minimum is not None or option.maximum is not None:
            kind += f" in [{option.minimum}, {option.maximum}]"
        default = "true" if option.default is True else "false" if option.default is False else repr(option.default)
        lines.append(f"| `{option.name}` | {kind} | `{default}` | {option.help} |")
    return "\n".join(lines)


def check_columns(metric: Metric, columns: Mapping[str, Sequence], owner: str = "") -> int:
    """The number of rows of ``columns``: every required input present, all of one length;
    optional ones filled with None. ValueError naming the column otherwise."""
    prefix = f"{owner}: " if owner else ""
    present = [c for c in metric.inputs if columns.get(c.name) is not None]
    missing = [c.name for c in metric.inputs if not c.optional and columns.get(c.name) is None]
    if missing:
        raise ColumnError(f"{prefix}{metric.name} needs the column(s) {missing} (got {sorted(columns)})")
    lengths = {c.name: len(columns[c.name]) for c in present}
    if len(set(lengths.values())) > 1:
        raise ColumnError(f"{prefix}the columns have different lengths: {lengths}")
    return next(iter(lengths.values()), 0)


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


class RowsTask:
    """The service's default task for a metric: a request is a dict of columns, scored whole
    in the worker (no merged encoder pass). Results equal ``metric.score``'s."""

    def __init__(self, metric: Metric, engine: Any):
        self.metric, self.engine = metric, engine

    def prepare(self, columns: Mapping[str, Sequence], *, limits: Any = None) -> tuple[Any, int]:
        n_rows = check_columns(self.metric, columns)
        if limits is not None:
            limits.check_texts(n_rows, self.metric.inputs[0].name, "rows")
        return dict(columns), max(1, n_rows)

    def run(self, payloads: list, alone: bool) -> list:
        return [self.metric.score(self.engine, columns) for columns in payloads]
