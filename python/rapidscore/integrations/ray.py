"""Ray Data: score a ``ray.data.Dataset`` on a cluster (the ``[ray]`` extra).

Callable classes for ``Dataset.map_batches``, one model per actor (``rapidscore.get_encoder``),
taking and returning column batches (``batch_format`` "numpy", "pandas" or "pyarrow"):

- :class:`BERTScoreBatch`: ``candidate`` and ``reference`` columns -> ``precision``, ``recall``,
  ``f1`` (a reference cell may hold a list of references);
- :class:`SimilarityBatch`: ``generated`` and ``reference`` -> ``similarity``,
  ``best_reference`` (and ``rejected`` with a ``threshold``);
- :class:`NERBatch`: ``gold`` and ``predicted`` entity lists (optional ``text``) -> per-record
  DMBertA ``precision``, ``recall``, ``score``, ``n_gold``, ``n_pred`` and the SemEval counts;
- :class:`RefusalBatch`: ``response`` -> ``refusal``.

idf over a dataset: :func:`document_frequencies` counts documents per block in parallel and
merges the counts on the driver; pass the result as ``idf=`` to :class:`BERTScoreBatch` (what
:func:`score_dataset` does for ``idf=True``). Scores equal single-process scores of the same rows.

ONNX export on a cluster: the first actor of a node that needs a model exports it into the
node's cache (``$RAPIDSCORE_CACHE``, default ``~/.cache/rapidscore``) under a file lock, so the
other actors of that node wait and load the same file: one export per node. Point
``RAPIDSCORE_CACHE`` (or ``cache_dir=``) at shared storage to export once per cluster. See
docs/scale.md.

Thread safety: a batch object is as thread-safe as the scorer it holds (the BERTScore,
similarity and NER ones are; Ray calls one actor's batches one at a time anyway).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from rapidscore.bertscore.idf import DocumentFrequencies
from rapidscore.common.metric import RowNames
from rapidscore.common.stream import check_pair
from rapidscore.errors import RapidscoreError
from rapidscore.metrics import get_metric

__all__ = ["MetricBatch", "BERTScoreBatch", "NRRBatch", "SimilarityBatch", "NERBatch", "RefusalBatch",
           "document_frequencies", "score_dataset", "BatchError"]


class BatchError(RapidscoreError, ValueError):
    """A row of a batch cannot be scored; the message names the row (and its id column)."""


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

    The metric's own classes below are this class with each metric's usual column keywords."""

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


class BERTScoreBatch(MetricBatch):
    """BERTScore of a batch's ``candidate_column`` against its ``reference_column`` (a cell: one
    reference or a list), adding ``precision``, ``recall`` and ``f1`` (float32).

    ``scorer_options`` are ``rapidscore.bertscore.BERTScore``'s (model, layer, device, backend,
    precision, rescale_with_baseline, lang, ...). ``idf``: the dataset's document counts
    (:func:`document_frequencies`), an idf file path or a dict (idf over a whole dataset needs
    one pass over all its references first: per batch it would differ). ``id_column``: named in
    the error of a bad row. Batches are scored in chunks of ``memory_budget`` bytes of token
    embeddings, whatever the batch size. The model loads once per actor.
    """

    def __init__(self, candidate_column: str = "candidate", reference_column: str = "reference", *,
                 id_column: str | None = None, **scorer_options: Any):
        super().__init__("bertscore", columns={"candidate": candidate_column, "reference": reference_column},
                         id_column=id_column, **scorer_options)


class NRRBatch(MetricBatch):
    """Similarity of a batch's ``text_column`` to its ``reference_column`` (best of a list),
    adding ``similarity`` (float32) and ``best_reference``; with ``threshold`` also ``rejected``
    (similarity < threshold, the Negative Rejection Rate's decision). ``options`` are
    ``rapidscore.nrr.SentenceSimilarity``'s (model, method, layer, engine options).
    ``SimilarityBatch`` is its older name."""

    def __init__(self, text_column: str = "generated", reference_column: str = "reference", *,
                 id_column: str | None = None, threshold: float | None = None, **options: Any):
        super().__init__("nrr", columns={"generated": text_column, "reference": reference_column},
                         id_column=id_column, threshold=threshold, **options)


SimilarityBatch = NRRBatch  # the older name (metric "similarity")


class NERBatch(MetricBatch):
    """Per-record DMBertA and SemEval counts of a batch's ``gold_column`` and
    ``predicted_column`` (each cell: one record's entities in any format rapidscore.ner reads;
    ``text_column`` when the format needs the text). Adds ``n_gold``, ``n_pred``, ``precision``,
    ``recall``, ``score`` and ``{scheme}_{count}`` (strict_correct, ...). ``options`` are
    ``rapidscore.ner.evaluate``'s; the label similarity (and its model) is built once per actor.
    Sum the columns (or use ``rapidscore.streaming.NerTotals``) for corpus scores."""

    def __init__(self, gold_column: str = "gold", predicted_column: str = "predicted", *,
                 text_column: str | None = None, id_column: str | None = None, **options: Any):
        super().__init__("ner", columns={"gold": gold_column, "predicted": predicted_column, "text": text_column},
                         id_column=id_column, **options)


class RefusalBatch(MetricBatch):
    """Refusal decisions for a batch's ``response_column`` (a string, or a chain-of-thought
    ``{"complete", "answer"}`` record), adding ``refusal`` (bool). ``method`` and ``options`` as
    ``rapidscore.abstention.detect_refusal`` (``"heuristic"``, ``"embedding"``, ...); the
    detector (and its model) is built once per actor."""

    def __init__(self, response_column: str = "response", *, method: Any = "heuristic",
                 id_column: str | None = None, **options: Any):
        super().__init__("refusal", columns={"response": response_column}, id_column=id_column, method=method,
                         **options)


# -- idf and whole datasets -------------------------------------------------------------------

def _count_documents(batch: Any, reference_column: str, scorer_options: dict) -> dict:
    from rapidscore.bertscore import BERTScore
    from rapidscore.bertscore.streaming import document_frequencies as count

    scorer = BERTScore(**scorer_options)  # get_encoder: one tokenizer and model per worker process
    refs = _column(batch, reference_column)
    pairs = [("", ref) for ref in refs]
    counts = count(scorer, _checked_rows(pairs, reference_column))
    return {"n_documents": np.array([counts.n_documents], np.int64), "tokenizer": np.array([scorer.model_name], object),
            "document_counts": np.array([json.dumps({str(k): v for k, v in counts.counts.items()})], object)}


def _checked_rows(pairs: list, reference_column: str) -> list:
    for row, pair in enumerate(pairs):
        try:
            check_pair(pair, row, ("candidate", "reference"))
        except (TypeError, ValueError) as exc:
            raise BatchError(f"document_frequencies: row {row} of the batch, column {reference_column!r}: "
                             f"{str(exc).split(': ', 1)[-1]}") from None
    return pairs


def document_frequencies(dataset: Any, reference_column: str = "reference", *, batch_size: int = 4096,
                         **scorer_options) -> DocumentFrequencies:
    """idf document counts of a dataset's references, counted per block in parallel and merged:
    a ``rapidscore.bertscore.idf.DocumentFrequencies`` (``.save(path)`` writes an idf file).
    ``scorer_options``: the scorer's model options (the tokenizer must be the scorer's)."""
    _require_ray()
    options = {k: v for k, v in scorer_options.items() if k not in ("idf", "idf_sents")}
    blocks = dataset.map_batches(_count_documents, fn_kwargs={"reference_column": reference_column,
                                                              "scorer_options": options},
                                 batch_size=batch_size, batch_format="pyarrow")
    total = DocumentFrequencies()
    for row in blocks.iter_rows():
        total.merge(DocumentFrequencies({int(k): v for k, v in json.loads(row["document_counts"]).items()},
                                        int(row["n_documents"]), tokenizer=row["tokenizer"]))
    return total


# the metric's own class (its column keywords), by metric name; any other metric runs in MetricBatch
_BATCH_CLASSES: dict[str, type[MetricBatch]] = {"bertscore": BERTScoreBatch, "nrr": NRRBatch, "ner": NERBatch,
                                                "refusal": RefusalBatch}


def score_dataset(dataset: Any, metric: str = "bertscore", *, concurrency: int | tuple[int, int] = 1,
                  num_gpus: float | None = None, num_cpus: float | None = None, batch_size: int | None = 1024,
                  batch_format: str = "pyarrow", **options) -> Any:
    """Score a whole ``ray.data.Dataset``: ``metric`` is a registered metric's name ("bertscore",
    "nrr" (alias "similarity"), "ner", "refusal", or one added with ``rapidscore.metrics.register``);
    ``options`` go to that metric's batch class (columns, model, engine options). For
    BERTScore with ``idf=True`` the document counts are computed first (one distributed pass).
    ``concurrency`` actors (each loads the model once), ``num_gpus`` per actor. Returns the lazy
    dataset with the score columns added."""
    _require_ray()
    name = get_metric(metric).name
    if name == "bertscore" and options.get("idf") is True:
        options.pop("idf")
        reference_column = options.get("reference_column", "reference")
        model_options = {k: v for k, v in options.items()
                         if k not in ("candidate_column", "reference_column", "id_column", "reference_batch_size",
                                      "memory_budget", "rescale_with_baseline", "baseline_path")}
        options["idf"] = document_frequencies(dataset, reference_column, **model_options)
    remote: dict[str, Any] = {}
    if num_gpus is not None:
        remote["num_gpus"] = num_gpus
    if num_cpus is not None:
        remote["num_cpus"] = num_cpus
    batch_class = _BATCH_CLASSES.get(name)
    if batch_class is None:
        batch_class, options = MetricBatch, {"metric": name, **options}
    return dataset.map_batches(batch_class, fn_constructor_kwargs=options, concurrency=concurrency,
                               batch_size=batch_size, batch_format=batch_format, **remote)
