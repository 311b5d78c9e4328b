"""Ray Data: score a ``ray.data.Dataset`` on a cluster (the ``[ray]`` extra).

Callable classes for ``Dataset.map_batches``, one model per actor (``rapidscore.get_encoder``),
taking and returning column batches (``batch_format`` "numpy", "pandas" or "pyarrow"). Every
registered metric (``rapidscore.metrics``) has one, generated from its declaration
(``rapidscore.common.metric.Metric``): :func:`batch_class` gives it, with one keyword per input
column (``Column.column_keyword``, default the column's own name) and the metric's build options;
it adds the metric's output columns. The built-in metrics' classes are importable by the names
they declare (``Metric.front_ends.batch_class_names``: ``BERTScoreBatch``, ``NRRBatch`` and its
older name ``SimilarityBatch``, ``NERBatch``, ``RefusalBatch``); :class:`MetricBatch` runs any metric by name.

A pass over the whole dataset first (``Metric.rows.dataset_pass``; BERTScore's ``idf=True``: the
document counts of every reference): :func:`score_dataset` runs it per block in parallel and
merges the partials on the driver before any row is scored; :func:`document_frequencies` is
BERTScore's, public (pass its result as ``idf=``). Scores equal single-process scores of the same
rows.

ONNX export on a cluster: the first actor of a node that needs a model exports it into the
node's cache (``$RAPIDSCORE_CACHE``, default ``~/.cache/rapidscore``) under a file lock, so the
other actors of that node wait and load the same file: one export per node. Point
``RAPIDSCORE_CACHE`` (or ``cache_dir=``) at shared storage to export once per cluster. See
docs/scale.md.

Thread safety: a batch object is as thread-safe as the engine it holds (the built-in metrics'
are; Ray calls one actor's batches one at a time anyway). :func:`batch_class` takes a lock.
"""

from __future__ import annotations

import inspect
import re
import textwrap
import threading
from typing import Any

import numpy as np

from rapidscore.bertscore.idf import DocumentFrequencies
from rapidscore.common.metric import DatasetPass, Metric, RowNames
from rapidscore.errors import BatchError
from rapidscore.metrics import all_metrics, get_metric

__all__ = ["MetricBatch", "batch_class", "document_frequencies", "score_dataset", "BatchError"]


def _require_ray():
    try:
        import ray
        import ray.data  # the Data library: part of the [ray] extra
    except ImportError as exc:
        raise ImportError("the Ray integration needs Ray Data: pip install 'rapidscore[ray]'") from exc
    return ray


# -- column batches ---------------------------------------------------------------------------

def _kind(batch: Any) -> str:
    if isinstance(batch, dict):
        return "numpy"
    library = type(batch).__module__.partition(".")[0]
    if library in ("pandas", "pyarrow"):
        return library
    raise TypeError(f"a batch must be a dict of numpy arrays, a pandas DataFrame or a pyarrow Table, got "
                    f"{type(batch).__name__}")


def _column_names(batch: Any) -> list[str]:
    kind = _kind(batch)
    if kind == "numpy":
        return list(batch)
    return list(batch.column_names if kind == "pyarrow" else batch.columns)


def _column(batch: Any, name: str) -> list:
    """A column as a list of plain Python values (numpy arrays inside cells become lists)."""
    if name not in _column_names(batch):
        raise BatchError(f"the batch has no column {name!r} (columns: {_column_names(batch)})")
    kind = _kind(batch)
    if kind == "pyarrow":
        return batch.column(name).to_pylist()
    values = batch[name].tolist()
    return [_plain(value) for value in values]


def _plain(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()] if value.dtype == object else value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _with_columns(batch: Any, columns: dict[str, Any]) -> Any:
    kind = _kind(batch)
    if kind == "numpy":
        return {**batch, **{name: np.asarray(values) for name, values in columns.items()}}
    if kind == "pandas":
        return batch.assign(**{name: np.asarray(values) for name, values in columns.items()})
    import pyarrow as pa

    for name, values in columns.items():
        array = pa.array(np.asarray(values))
        if name in batch.column_names:
            batch = batch.set_column(batch.column_names.index(name), name, array)
        else:
            batch = batch.append_column(name, array)
    return batch


def _row_label(row: int, ids: list | None, id_column: str | None) -> str:
    return f"row {row} of the batch" + (f" ({id_column}={ids[row]!r})" if ids is not None else "")


class _BatchRows(RowNames):
    """Rows named as a batch names them: "row 4 of the batch (id='r4')"."""

    def __init__(self, ids: list | None, id_column: str | None):
        super().__init__("row")
        self.ids, self.id_column = ids, id_column

    def row(self, row: int) -> str:
        return _row_label(row, self.ids, self.id_column)

    def rows(self, first: int, last: int) -> str:
        return f"rows {first}-{last} of the batch"


# -- the callable classes ---------------------------------------------------------------------

class MetricBatch:
    """Any registered metric (``rapidscore.metrics``) over a batch's columns, adding the metric's
    output columns. ``metric``: its name (or alias); ``columns``: ``{input column: batch
    column}`` where they differ from the metric's own names (an optional input, such as NER's
    ``text``, is read only when named here); ``id_column``: named in the error of a bad row;
    ``options`` build the metric's engine once per actor (its model and options).

    Each metric's own class (:func:`batch_class`) is this class with the metric's column
    keywords."""

    metric: Metric

    def __init__(self, metric: Any, *, columns: dict[str, str | None] | None = None, id_column: str | None = None,
                 **options: Any):
        self.metric = get_metric(metric)
        inputs = {column.name: column for column in self.metric.inputs}
        unknown = sorted(set(columns or {}) - set(inputs))
        if unknown:
            raise ValueError(f"{type(self).__name__}: {self.metric.name} has no input column(s) {unknown} "
                             f"(its inputs: {list(inputs)})")
        given = columns or {}
        self.columns = {name: given.get(name, None if column.optional else name) for name, column in inputs.items()}
        self.id_column = id_column
        self.engine = self.metric.build(**options)

    def __call__(self, batch: Any) -> Any:
        columns = {name: _column(batch, source) for name, source in self.columns.items() if source is not None}
        ids = _column(batch, self.id_column) if self.id_column else None
        try:
            outputs = self.metric.score(self.engine, columns, _BatchRows(ids, self.id_column))
        except (TypeError, ValueError) as exc:
            raise BatchError(f"{type(self).__name__}: {exc}") from None
        return _with_columns(batch, {name: outputs[name] for name in self.metric.outputs if name in outputs})


# metric -> its class, made once per metric object (keyed by id; the entry holds the metric, so
# the id is never reused while the entry exists)
_CLASSES: dict[int, tuple[Metric, type[MetricBatch]]] = {}
_CLASSES_LOCK = threading.Lock()


def batch_class(metric: str | Metric) -> type[MetricBatch]:
    """The Ray batch class of ``metric`` (a registered metric's name or alias, or a Metric),
    generated from its declaration once per metric object: a :class:`MetricBatch` subclass named
    ``metric.front_ends.batch_class_names[0]`` (else ``<Name>Batch``) whose ``__init__`` takes one
    keyword per input column (``Column.column_keyword``: the batch column holding it; default the
    column's name, None for an optional column, which is then not read), then ``id_column``,
    ``columns`` (MetricBatch's ``{input column: batch column}``, also taken) and the metric's
    build options. ``batch_class(m).metric is m``. The class of a metric that declares its name
    pickles by reference (workers generate it again from their registry); another one (a
    metric registered at run time) by value."""
    metric = get_metric(metric)
    with _CLASSES_LOCK:
        cached = _CLASSES.get(id(metric))
        if cached is None:
            cached = _CLASSES[id(metric)] = (metric, _make_batch_class(metric))
    return cached[1]


def _class_name(metric: Metric) -> str:
    if metric.front_ends.batch_class_names:
        return metric.front_ends.batch_class_names[0]
    words = re.split(r"[^0-9A-Za-z]+", metric.name)
    name = "".join(word[:1].upper() + word[1:] for word in words if word)
    return f"{name if name.isidentifier() else 'Metric' + name}Batch"


def _make_batch_class(metric: Metric) -> type[MetricBatch]:
    name = _class_name(metric)
    # (keyword, input column, default batch column)
    inputs = tuple((c.column_keyword, c.name, None if c.optional else c.name) for c in metric.inputs)
    keywords = [keyword for keyword, _name, _default in inputs]
    bad = [k for k in keywords if not k.isidentifier() or k in ("self", "id_column", "columns")] + \
        sorted({k for k in keywords if keywords.count(k) > 1})
    if bad:
        raise ValueError(f"{metric!r}: its input columns' keywords {bad} cannot name a batch class's arguments")

    def __init__(self: MetricBatch, *args: Any, id_column: str | None = None,
                 columns: dict[str, str | None] | None = None, **options: Any) -> None:
        if len(args) > len(inputs):
            raise TypeError(f"{name}() takes {len(inputs)} positional column argument(s) ({', '.join(keywords)}), "
                            f"{len(args)} were given")
        chosen = dict(zip(keywords, args))
        for keyword in keywords:
            if keyword in options:
                if keyword in chosen:
                    raise TypeError(f"{name}() got multiple values for argument {keyword!r}")
                chosen[keyword] = options.pop(keyword)
        mapping = dict(columns or {})  # MetricBatch's form, {input column: batch column}, also taken
        for keyword, column, _default in inputs:
            if keyword in chosen and column in mapping:
                raise TypeError(f"{name}() got the input {column!r} twice: {keyword}= and columns=")
        sources = {column: chosen.get(keyword, mapping.get(column, default)) for keyword, column, default in inputs}
        MetricBatch.__init__(self, metric, columns={**mapping, **sources}, id_column=id_column, **options)

    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    parameters += [inspect.Parameter(keyword, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default)
                   for keyword, _column, default in inputs]
    parameters += [inspect.Parameter("id_column", inspect.Parameter.KEYWORD_ONLY, default=None),
                   inspect.Parameter("columns", inspect.Parameter.KEYWORD_ONLY, default=None),
                   inspect.Parameter("options", inspect.Parameter.VAR_KEYWORD)]
    __init__.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    __init__.__qualname__ = f"{name}.__init__"
    __init__.__module__ = __name__
    namespace = {"__init__": __init__, "__doc__": _class_doc(metric), "__module__": __name__, "__qualname__": name,
                 "metric": metric}
    return type(name, (MetricBatch,), namespace)


def _class_doc(metric: Metric) -> str:
    """The generated class's docstring: the metric's summary, inputs, outputs and options."""
    summary = metric.front_ends.summary or metric.name
    paragraphs = [f"{summary[:1].upper()}{summary[1:]} over a batch's columns (metric {metric.name!r}; generated "
                  "from its declaration by rapidscore.integrations.ray.batch_class)."]
    columns = ["Columns read (the keyword naming the batch column, and its default):", ""]
    for column in metric.inputs:
        default = "None: not read unless named" if column.optional else repr(column.name)
        columns.append(f"- ``{column.column_keyword}`` ({default}): {column.help or column.kind}")
    paragraphs += ["\n".join(columns),
                   "Adds the columns " + ", ".join(f"``{name}``" for name in metric.outputs) + ". ``id_column``: "
                   "named in the error of a bad row (BatchError). ``columns``: ``{input column: batch column}``, "
                   "MetricBatch's form of the column keywords. ``options`` build the metric's engine once per "
                   f"actor (``get_metric({metric.name!r}).build``: its model loads once)."]
    if type(metric).build is not Metric.build and inspect.getdoc(type(metric).build):
        paragraphs.append(inspect.getdoc(type(metric).build) or "")
    if metric.rows.dataset_pass is not None:
        step = metric.rows.dataset_pass
        paragraphs.append(f"``{step.option}=True`` over a whole dataset needs a pass over its ``{step.column}`` "
                          "column first: score_dataset runs it (per block, in parallel) and passes the merged "
                          f"result as ``{step.option}``.")
    if len(metric.front_ends.batch_class_names) > 1:
        paragraphs.append("Older names: " + ", ".join(metric.front_ends.batch_class_names[1:]) + ".")
    return "\n\n".join(p if p.startswith(("Columns", "``options``")) or "\n" in p else textwrap.fill(p, 96)
                       for p in paragraphs)


def __getattr__(name: str) -> Any:
    """The batch class of the registered metric that declares ``name`` (``BERTScoreBatch``,
    ``SimilarityBatch``, ...: ``Metric.front_ends.batch_class_names``)."""
    if not name.startswith("__"):
        for metric in all_metrics():
            if name in metric.front_ends.batch_class_names:
                return batch_class(metric)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *(n for metric in all_metrics() for n in metric.front_ends.batch_class_names)})


# -- a pass over the whole dataset (idf) ------------------------------------------------------

def _count_block(batch: Any, *, count: Any, column: str, options: dict, id_column: str | None, owner: str) -> Any:
    """One block's partial of a dataset pass, pickled into a one-row table (any partial
    travels back to the driver so)."""
    import pyarrow as pa
    from ray import cloudpickle

    values = _column(batch, column)
    try:
        partial = count(values, options)
    except (TypeError, ValueError) as exc:
        ids = _column(batch, id_column) if id_column and id_column in _column_names(batch) else None
        match = re.match(r"item (\d+)(: | )", str(exc))
        if match is None:
            raise BatchError(f"{owner}: column {column!r}: {exc}") from None
        row = int(match.group(1))
        label = _row_label(row, ids, id_column) if 0 <= row < len(values) else f"row {row} of the batch"
        raise BatchError(f"{owner}: {label}, column {column!r}: {str(exc)[match.end():]}") from None
    return pa.table({"partial": pa.array([cloudpickle.dumps(partial)], pa.binary())})


def _dataset_pass(dataset: Any, step: DatasetPass, column: str, options: dict, *, batch_size: int | None,
                  id_column: str | None = None, owner: str) -> Any:
    """``step.count`` over ``column`` of every block (Ray tasks, in parallel), merged on the
    driver with ``step.merge`` (in groups, so the driver holds few partials at a time)."""
    import pickle

    _require_ray()
    blocks = dataset.map_batches(_count_block, fn_kwargs={"count": step.count, "column": column, "options": options,
                                                          "id_column": id_column, "owner": owner},
                                 batch_size=batch_size, batch_format="pyarrow")
    partials: list = []
    for row in blocks.iter_rows():
        partials.append(pickle.loads(row["partial"]))
        if len(partials) >= 64:
            partials = [step.merge(partials)]
    return step.merge(partials)


def document_frequencies(dataset: Any, reference_column: str = "reference", *, batch_size: int = 4096,
                         **scorer_options) -> DocumentFrequencies:
    """idf document counts of a dataset's references, counted per block in parallel and merged:
    a ``rapidscore.bertscore.idf.DocumentFrequencies`` (``.save(path)`` writes an idf file).
    ``scorer_options``: the scorer's model options (the tokenizer must be the scorer's).
    BERTScore's dataset pass (``BERTScoreMetric.rows.dataset_pass``), the one ``score_dataset``
    runs for ``idf=True``."""
    from rapidscore.bertscore.metric import METRIC

    step = METRIC.rows.dataset_pass
    if step is None:
        raise RuntimeError("BERTScore declares no dataset pass")
    options = {k: v for k, v in scorer_options.items() if k != step.option}
    return _dataset_pass(dataset, step, reference_column, options, batch_size=batch_size,
                         owner="document_frequencies")


def score_dataset(dataset: Any, metric: str | Metric | None = None, *, concurrency: int | tuple[int, int] = 1,
                  num_gpus: float | None = None, num_cpus: float | None = None, batch_size: int | None = 1024,
                  batch_format: str = "pyarrow", **options) -> Any:
    """Score a whole ``ray.data.Dataset`` with a registered ``metric`` (its name or an alias, as
    ``rapidscore.metrics`` lists them, or a Metric; default BERTScore): ``options`` go to its batch
    class (:func:`batch_class`: column keywords, ``id_column``, model and engine options). A metric that
    declares a dataset pass (``Metric.rows.dataset_pass``; BERTScore's ``idf=True``) with its option
    set to True gets that pass first (one distributed pass over the column the options map; its
    merged result becomes the option). ``concurrency`` actors (each loads the model once),
    ``num_gpus`` / ``num_cpus`` per actor. Returns the lazy dataset with the score columns added."""
    _require_ray()
    if metric is None:
        from rapidscore.bertscore.metric import METRIC

        metric = METRIC
    metric = get_metric(metric)
    step = metric.rows.dataset_pass
    if step is not None and options.get(step.option) is True:
        # the batch column holding the pass's input, as the batch class reads it (keyword, or columns=)
        column = next(c for c in metric.inputs if c.name == step.column)
        source = options.get(column.column_keyword) or (options.get("columns") or {}).get(column.name) or column.name
        keywords = {c.column_keyword for c in metric.inputs} | {"id_column", "columns", step.option}
        build_options = {k: v for k, v in options.items() if k not in keywords}
        counted = _dataset_pass(dataset, step, source, build_options, batch_size=4096,
                                id_column=options.get("id_column"), owner=f"{metric.name} {step.option} pass")
        options[step.option] = counted if step.becomes is None else step.becomes(counted)
    remote: dict[str, Any] = {}
    if num_gpus is not None:
        remote["num_gpus"] = num_gpus
    if num_cpus is not None:
        remote["num_cpus"] = num_cpus
    return dataset.map_batches(batch_class(metric), fn_constructor_kwargs=options, concurrency=concurrency,
                               batch_size=batch_size, batch_format=batch_format, **remote)
