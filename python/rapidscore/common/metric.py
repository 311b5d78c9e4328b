"""The metric contract: what a metric is, once, for every layer that runs metrics.

A :class:`Metric` says its name (and older names), its input and output columns, how its engine is
built (its models loaded once, there), how a chunk of rows is scored, and its corpus totals. The
streaming runner (``rapidscore.streaming.score_stream``), the Ray batch classes, the service's
batching and the CLI's generic command are written against this class and find metrics in the
registry (``rapidscore.metrics``); a metric's decision rules live in its own package only.

Rows are columns (``{"candidate": [...], "reference": [...]}``, plain values); a bad row raises
TypeError or ValueError naming it as the caller names rows (:class:`RowNames`: "item 7", "row 7").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Protocol, runtime_checkable

from rapidscore.common.rows import RowNames, check_pairs, output_rows, plain_column, relabel
from rapidscore.common.stream import chunks
from rapidscore.errors import ColumnError

__all__ = ["Column", "Declared", "Option", "RequestOption", "ServerSetting", "Settings", "DatasetPass", "Metric",
           "Rows", "FrontEnds", "stream_columns", "Totals", "ColumnError", "RowNames", "ServingTask", "PiecewiseTask",
           "WarmingTask", "check_columns", "request_option_table", "request_options", "server_settings",
           "engine_metric", "field_error", "frozen_value", "check_pairs", "relabel", "output_rows", "plain_column"]


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
class Option(Declared):
    """An option of a metric, declared once, saying where it may be set: as a keyword of
    :meth:`Metric.settings` always; ``request``: by a caller per request (an HTTP request field,
    a flag of the generic command); ``per_request``: handed to the batching task with each
    request (no engine of its own per value: numbers such as a threshold); ``start``: fixed
    when a server starts (``rapidscore serve --NAME``, a key of its settings file), ``repeated``
    when it may be given several times (a tuple of values), ``files`` when each value is a file
    that requests name by its file name without the extension.

    ``server``: the server setting (a metric's, or the server's own: ``model``, ``layer``,
    ``long_texts``, ``backend``, ...) whose value a request that gives none gets; ``among``: the
    value must be one of that server setting's values (a served model by any spelling, a file
    by its name), checked by the service, which answers 400 naming the option otherwise.

    ``run_only``: the option cannot change a number (threads, a memory budget): the generic
    command's flag of it stays out of a resume state's fingerprint."""

    request: bool = False
    per_request: bool = False
    start: bool = False
    repeated: bool = False
    files: bool = False
    server: str | None = None
    among: str | None = None
    run_only: bool = False

    def check(self, value: Any) -> Any:
        """``value`` checked against the declaration (ValueError naming the option)."""
        if self.repeated:
            if isinstance(value, str) or not isinstance(value, (list, tuple)):
                value = (value,)
            values = tuple(self.check_value(item) for item in value)
            if self.files:
                from pathlib import Path

                stems = [Path(item).stem for item in values]
                if len(set(stems)) != len(stems):
                    raise ValueError(f"{self.name}: two files of one name {stems}: requests name them by file name")
            return values
        return self.check_value(value)


@dataclass(frozen=True)
class RequestOption(Option):
    """An :class:`Option` a caller may set per request (the service's request fields, the
    generic command's flags). A request that sets one to other than its default is scored by an
    engine built with it (unless ``per_request``), so the result equals the Python API's with
    that keyword."""

    request: bool = True


@dataclass(frozen=True)
class ServerSetting(Option):
    """An :class:`Option` a server fixes when it starts (``rapidscore serve --FLAG``, a key of
    its settings file, a ``ServeConfig`` keyword; the flag is its name with dashes)."""

    start: bool = True


def request_options(metric: Metric) -> tuple[Option, ...]:
    """The options of ``metric`` a caller may set per request, in declared order."""
    return tuple(option for option in metric.options if option.request)


def server_settings(metric: Metric) -> tuple[Option, ...]:
    """The options of ``metric`` a server fixes at start, in declared order."""
    return tuple(option for option in metric.options if option.start)


class Settings(Mapping):
    """A metric's settings, resolved once (:meth:`Metric.settings`): a frozen, hashable mapping
    of the keywords its engine is built with (``metric.build(**settings)``). Equal settings are
    one engine: the service keys its table of engines on them."""

    __slots__ = ("_hash", "_values")
    _values: dict[str, Any]
    _hash: int

    def __init__(self, values: Mapping[str, Any] | None = None, **more: Any):
        merged = {**(values or {}), **more}
        object.__setattr__(self, "_values", dict(sorted(merged.items())))
        object.__setattr__(self, "_hash", hash(tuple((k, frozen_value(v)) for k, v in self._values.items())))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Settings are frozen")

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Settings) and hash(self) == hash(other) and dict(self.items()) == dict(other.items())

    def __repr__(self) -> str:
        return f"Settings({self._values!r})"


def frozen_value(value: Any) -> Any:
    """``value``, or a stand-in of equal values for a list / dict (a Settings must hash)."""
    if isinstance(value, (list, tuple)):
        return tuple(frozen_value(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, frozen_value(v)) for k, v in value.items()))
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value


def field_error(field: str, message: str) -> ValueError:
    """A ValueError ``"FIELD: message"`` whose ``field`` names the option or request field at
    fault (the HTTP layer answers 400 naming it)."""
    error = ValueError(f"{field}: {message}")
    setattr(error, "field", field)  # noqa: B010 - read by the HTTP layer with getattr
    return error


@dataclass(frozen=True)
class DatasetPass:
    """A first pass over a whole dataset that fills a build option before any row is scored
    (BERTScore's ``idf=True``: the document counts of every reference). Front ends that score a
    dataset in parts (Ray) run ``count`` per block, in parallel, and ``merge`` the partials.
    ``option``: the build option it fills when that option is ``True``; ``column``: the input
    column it reads; ``count(values, options) -> partial`` (values: the column's cells of one
    block; options: the other build options); ``merge(partials) -> value``: module-level
    functions (they travel to workers); ``becomes(value)``: the option's value (None: ``value``)."""

    option: str
    column: str
    count: Callable[[list, dict], Any]
    merge: Callable[[list], Any]
    becomes: Callable[[Any], Any] | None = None


@dataclass(frozen=True)
class Rows:
    """What a metric's rows are, beyond its input columns (every field has a default; a metric
    declares only what differs).

    ``noun``: what a row is called in errors ("item 3", "record 3"); ``aligned``: every row has a
    value in each required column (their lengths must agree; NER's records are joined by id
    instead); ``minimum``: the fewest rows a call or request may hold (NRR's rate of nothing is
    undefined: 1); ``dataset_pass``: a pass over the whole dataset that fills a build option
    before any row is scored (:class:`DatasetPass`; None: none)."""

    noun: str = "item"
    aligned: bool = True
    minimum: int = 0
    dataset_pass: DatasetPass | None = None


@dataclass(frozen=True)
class FrontEnds:
    """How the front ends (the CLI, the HTTP service, Ray, ``BatchingScorer``) name, describe and
    present a metric (every field has a default; a metric declares only what differs).

    ``aliases``: older names that still resolve to it (CLI command, HTTP path, Ray ``metric=``);
    ``summary``: one line (command help, OpenAPI, Ray docstrings); ``command``: the module of its
    own CLI command (``add_arguments``, ``run``; None: the generic ``rapidscore.metric_cli``);
    ``batch_class_names``: its Ray batch class (``rapidscore.integrations.ray.<name>``), then
    older names (none: ``MetricBatch`` with ``metric=``); ``response_fields``: the HTTP answer's
    fields and types (the OpenAPI schema), each read from the result (an output column, an
    attribute or key) or else the settings (None: each output column as a list, and
    ``signature``); ``example``: one row of inputs a server scores before it turns ready;
    ``engine_types``: the classes (``"module:QualifiedName"``) of engines a user builds (a
    ``BatchingScorer`` given one picks the metric); ``takes_solo``: whether
    :meth:`Metric.task` takes a ``solo`` engine (the same settings with more threads)."""

    aliases: tuple[str, ...] = ()
    summary: str = ""
    command: str | None = None
    batch_class_names: tuple[str, ...] = ()
    response_fields: dict[str, Any] | None = None
    example: tuple | None = None
    engine_types: tuple[str, ...] = ()
    takes_solo: bool = False


# Older declarations (class attributes of their own), still read: name -> (group, field)
_GROUPED = {
    "row_noun": ("rows", "noun"), "aligned_rows": ("rows", "aligned"), "min_rows": ("rows", "minimum"),
    "dataset_pass": ("rows", "dataset_pass"),
    **{name: ("front_ends", name) for name in ("aliases", "summary", "command", "batch_class_names",
                                                "response_fields", "example", "engine_types", "takes_solo")},
}


class Totals:
    """Corpus totals of a metric: ``update(outputs)`` with each chunk's output columns, then
    ``summary()``, or ``line()``: it in one line. Not thread-safe: one per stream."""

    def update(self, outputs: Mapping[str, Sequence]) -> None:
        raise NotImplementedError

    def summary(self) -> dict:
        raise NotImplementedError

    def line(self) -> str:
        return ", ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in self.summary().items())


class ServingTask(Protocol):
    """How requests share one engine pass (``rapidscore.serve.batching``; :meth:`Metric.task`
    makes one per engine).

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


@runtime_checkable
class WarmingTask(ServingTask, Protocol):
    """A :class:`ServingTask` whose engine has warm-up of its own (CUDA graphs of small
    batches): ``warm_up()`` runs before the first requests when a server warms up."""

    def warm_up(self) -> None: ...


class Metric:
    """One metric, defined once: its :attr:`name`, what it reads and writes (:attr:`inputs`,
    :attr:`outputs`), what may be set (:attr:`options`), what its rows are (:attr:`rows`), how the
    front ends present it (:attr:`front_ends`), its settings resolved once (:meth:`settings`), its
    engine (:meth:`build`), how rows are scored (:meth:`score`, :meth:`stream`), its corpus
    totals (:meth:`totals`), what a result says about how it was computed (:meth:`signature`) and
    how requests share one engine pass (:meth:`task`). Every front end (the Python API, the
    streaming runner, the generic command, the HTTP service, Ray) is written against these names
    and finds metrics in the registry (``rapidscore.metrics``).

    Thread safety: a Metric holds no state (its engine does); ``score`` is as thread-safe as the
    engine it is given (every engine rapidscore builds is)."""

    name: ClassVar[str]
    inputs: ClassVar[tuple[Column, ...]]
    #: the tabular output columns (one scalar per row); ``score`` may add richer ones after them
    outputs: ClassVar[tuple[str, ...]]
    #: every declared option (:class:`Option`: where each may be set, its type and bounds)
    options: ClassVar[tuple[Option, ...]] = ()
    rows: ClassVar[Rows] = Rows()
    front_ends: ClassVar[FrontEnds] = FrontEnds()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # older declarations, still read: ``request_options`` and ``server_settings`` tuples,
        # ``options`` as names of build keywords, and the row and front-end facts as class
        # attributes of their own (``row_noun = "record"``, ``aliases = (...)``)
        super().__init_subclass__(**kwargs)
        own = cls.__dict__
        if "request_options" in own or "server_settings" in own:
            cls.options = (*own.get("request_options", ()), *own.get("server_settings", ()), *(
                option for option in own.get("options", ()) if isinstance(option, Option)))
        if any(isinstance(option, str) for option in cls.options):
            cls.options = tuple(Option(option, object, None, "") if isinstance(option, str) else option
                                for option in cls.options)
        for group in ("rows", "front_ends"):
            older = {field: own[name] for name, (where, field) in _GROUPED.items() if where == group and name in own}
            if older:
                setattr(cls, group, replace(getattr(cls, group), **older))

    def settings(self, **options: Any) -> Settings:
        """The settings of an engine (:class:`Settings`, frozen and hashable), resolved once from
        the options a caller gave; each declared option's value is checked (ValueError naming
        it). Default: the options as given."""
        declared = {option.name: option for option in self.options if not option.per_request}
        for name, value in options.items():
            if name in declared and value is not None:
                declared[name].check_value(value)
        return Settings(options)

    def build(self, **settings: Any) -> Any:
        """The engine (model loaded once) of ``settings`` (``build(**metric.settings(...))``):
        reused for every chunk."""
        raise NotImplementedError

    def score(self, engine: Any, columns: Mapping[str, Sequence], names: RowNames | None = None) -> dict[str, Any]:
        """Output columns (each one value per row) of the rows ``columns``; a bad row raises
        TypeError / ValueError naming it by ``names`` (default: a stream's "item N")."""
        raise NotImplementedError

    def stream(self, engine: Any, rows: Iterable, *, chunk_size: int = 4096) -> Iterator[tuple[list, dict]]:
        """``(rows, output columns)`` per chunk of a stream of rows, in input order. A row is a
        tuple in the order of :attr:`inputs` (optional ones may be left off), or the value
        itself for a one-column metric (:func:`stream_columns`)."""
        position = 0
        for chunk in chunks(rows, chunk_size):
            columns = stream_columns(self, chunk, position)
            yield chunk, self.score(engine, columns, RowNames(self.rows.noun, position))
            position += len(chunk)

    def totals(self) -> Totals | None:
        """A fresh accumulator of the corpus totals (None: the metric has none)."""
        return None

    def signature(self, engine: Any) -> str:
        return str(getattr(engine, "signature", f"{self.name}|rapidscore"))

    def task(self, engine: Any, solo: Any = None) -> ServingTask:
        """How requests share one engine pass (:class:`ServingTask`; the service's batching and
        ``BatchingScorer``): by default each request's rows are scored alone, in the worker."""
        return RowsTask(self, engine)

    def __repr__(self) -> str:
        return f"<metric {self.name!r}>"


def stream_columns(metric: Metric, rows: Sequence, first: int = 0) -> dict[str, list]:
    """Stream rows (see :meth:`Metric.stream`) as ``metric``'s input columns; TypeError naming a
    row of the wrong shape (``first``: the number of the first row)."""
    if len(metric.inputs) == 1:
        return {metric.inputs[0].name: list(rows)}
    names = [c.name for c in metric.inputs]
    required = sum(not c.optional for c in metric.inputs)
    shape = "(" + ", ".join(names[:required]) + ")" + (" pair" if required == 2 else " tuple")
    columns: dict[str, list] = {name: [] for name in names}
    for index, row in enumerate(rows, first):
        if isinstance(row, (str, bytes, Mapping)) or not hasattr(row, "__len__") \
                or not required <= len(row) <= len(names):
            raise TypeError(f"item {index} must be a {shape}, got {type(row).__name__}: {row!r:.80}")
        for k, name in enumerate(names):
            columns[name].append(row[k] if k < len(row) else None)
    return columns


def engine_metric(engine: Any, metrics: Iterable[Metric]) -> Metric | None:
    """The metric among ``metrics`` whose ``front_ends.engine_types`` ``engine`` is an instance
    of (its class or a base class named), or None."""
    names = {f"{cls.__module__}:{cls.__qualname__}" for cls in type(engine).__mro__}
    return next((metric for metric in metrics if names.intersection(metric.front_ends.engine_types)), None)


def request_option_table(metric: Metric) -> str:
    """The markdown table of ``metric``'s request options (docs/serving.md holds it as generated;
    a test checks that the page matches)."""
    lines = ["| field | type | default | what it does |", "|---|---|---|---|"]
    for option in request_options(metric):
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


class RowsTask:
    """The default task of a metric: a request is its input columns (a dict, or one value per
    input in the order of ``metric.inputs``, an optional one by name), scored whole in the
    worker (no merged engine pass). Results equal ``metric.score``'s."""

    def __init__(self, metric: Metric, engine: Any):
        self.metric, self.engine = metric, engine

    def prepare(self, *values: Any, limits: Any = None, **named: Any) -> tuple[Any, int]:
        if len(values) == 1 and isinstance(values[0], Mapping):
            columns = dict(values[0])
        else:
            required = [c.name for c in self.metric.inputs if not c.optional]
            columns = dict(zip(required, values))
            columns.update((c.name, named[c.field]) for c in self.metric.inputs if c.optional and c.field in named)
        n_rows = check_columns(self.metric, columns)
        if limits is not None:
            limits.check_texts(n_rows, self.metric.inputs[0].name, "rows")
        return columns, max(1, n_rows)

    def run(self, payloads: list, alone: bool) -> list:
        return [self.metric.score(self.engine, columns) for columns in payloads]
