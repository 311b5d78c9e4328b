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
from rapidscore.common.stream import check_pair
from rapidscore.errors import RapidscoreError

__all__ = ["BERTScoreBatch", "SimilarityBatch", "NERBatch", "RefusalBatch", "document_frequencies",
           "score_dataset", "BatchError"]


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


def _pairs(batch: Any, first: str, second: str, id_column: str | None, names: tuple[str, str],
           owner: str) -> list[tuple[str, list[str]]]:
    texts, refs = _column(batch, first), _column(batch, second)
    ids = _column(batch, id_column) if id_column else None
    pairs = []
    for row, item in enumerate(zip(texts, refs)):
        try:
            pairs.append(check_pair(item, row, names))
        except (TypeError, ValueError) as exc:
            message = str(exc).split(": ", 1)[-1] if str(exc).startswith(f"item {row}") else str(exc)
            raise BatchError(f"{owner}: {_row_label(row, ids, id_column)}: {message}") from None
    return pairs


# -- the callable classes ---------------------------------------------------------------------

class BERTScoreBatch:
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
                 id_column: str | None = None, idf: Any = None, reference_batch_size: int | None = None,
                 memory_budget: int | None = None, **scorer_options):
        from rapidscore.bertscore import BERTScore
        from rapidscore.bertscore.streaming import resolve_idf

        if idf is False:
            idf = None
        if idf is True and scorer_options.get("idf_sents") is None:
            raise ValueError("idf=True over a dataset needs its document counts: pass "
                             "idf=rapidscore.integrations.ray.document_frequencies(dataset) (score_dataset does)")
        scorer_options["idf"] = idf is not None
        if idf is True:  # weights from idf_sents
            idf = None
        self.scorer = BERTScore(**scorer_options)
        self.columns = (candidate_column, reference_column)
        self.id_column = id_column
        self.reference_batch_size = reference_batch_size
        self.memory_budget = memory_budget
        self.idf_weights = resolve_idf(self.scorer, [], idf) if idf is not None else None

    def __call__(self, batch: Any) -> Any:
        from rapidscore.bertscore.streaming import chunk_results

        pairs = _pairs(batch, *self.columns, self.id_column, ("candidate", "reference"), "BERTScoreBatch")
        parts = [result for _chunk, result in chunk_results(
            self.scorer, pairs, memory_budget=self.memory_budget, idf=self.idf_weights,
            reference_batch_size=self.reference_batch_size)]

        def column(name: str) -> np.ndarray:
            return np.concatenate([getattr(r, name) for r in parts]) if parts else np.zeros(0, np.float32)

        return _with_columns(batch, {"precision": column("precision"), "recall": column("recall"),
                                     "f1": column("f1")})


class SimilarityBatch:
    """Similarity of a batch's ``text_column`` to its ``reference_column`` (best of a list),
    adding ``similarity`` (float32) and ``best_reference``; with ``threshold`` also ``rejected``
    (similarity < threshold, the Negative Rejection Rate's decision). ``options`` are
    ``rapidscore.nrr.SentenceSimilarity``'s (model, method, layer, engine options)."""

    def __init__(self, text_column: str = "generated", reference_column: str = "reference", *,
                 id_column: str | None = None, threshold: float | None = None, **options):
        from rapidscore.nrr.scoring import SentenceSimilarity, check_threshold

        self.model = SentenceSimilarity(**options)
        self.columns = (text_column, reference_column)
        self.id_column = id_column
        self.threshold = None if threshold is None else check_threshold(threshold)

    def __call__(self, batch: Any) -> Any:
        pairs = _pairs(batch, *self.columns, self.id_column, ("generated", "reference"), "SimilarityBatch")
        if pairs:
            sims, best = self.model.pairs([text for text, _refs in pairs], [refs for _text, refs in pairs])
        else:
            sims, best = np.zeros(0, np.float32), np.zeros(0, np.int64)
        columns: dict[str, Any] = {"similarity": sims, "best_reference": best}
        if self.threshold is not None:
            columns["rejected"] = sims < np.float32(self.threshold)
        return _with_columns(batch, columns)


NER_SEMEVAL_COUNTS = ("correct", "incorrect", "partial", "missed", "spurious")


class NERBatch:
    """Per-record DMBertA and SemEval counts of a batch's ``gold_column`` and
    ``predicted_column`` (each cell: one record's entities in any format rapidscore.ner reads;
    ``text_column`` when the format needs the text). Adds ``n_gold``, ``n_pred``, ``precision``,
    ``recall``, ``score`` and ``{scheme}_{count}`` (strict_correct, ...). ``options`` are
    ``rapidscore.ner.evaluate``'s; the label similarity (and its model) is built once per actor.
    Sum the columns (or use ``rapidscore.streaming.NerTotals``) for corpus scores."""

    def __init__(self, gold_column: str = "gold", predicted_column: str = "predicted", *,
                 text_column: str | None = None, id_column: str | None = None, **options):
        from rapidscore.ner.labels import make_label_similarity

        keys = ("label_model", "embedder", "label_map", "encoder_options")
        self.similarity = make_label_similarity(options.pop("label_similarity", "embedding"),
                                                **{k: options.pop(k) for k in keys if k in options})
        self.columns = (gold_column, predicted_column)
        self.text_column, self.id_column, self.options = text_column, id_column, options

    def __call__(self, batch: Any) -> Any:
        from rapidscore.ner.evaluation import SEMEVAL_SCHEMES, evaluate

        gold, predicted = (_column(batch, c) for c in self.columns)
        texts = _column(batch, self.text_column) if self.text_column else None
        ids = _column(batch, self.id_column) if self.id_column else None
        try:
            records = evaluate(gold, predicted, texts=texts, ids=list(range(len(gold))),
                               label_similarity=self.similarity, **self.options).records if gold else []
        except (TypeError, ValueError) as exc:
            raise BatchError(f"NERBatch: {_name_rows(str(exc), ids, self.id_column)}") from None
        columns: dict[str, Any] = {key: [r[key] for r in records]
                                   for key in ("n_gold", "n_pred", "precision", "recall", "score")}
        for scheme in SEMEVAL_SCHEMES:
            for count in NER_SEMEVAL_COUNTS:
                columns[f"{scheme}_{count}"] = np.array([r["semeval"][scheme][count] for r in records], np.int64)
        return _with_columns(batch, columns)


def _name_rows(message: str, ids: list | None, id_column: str | None) -> str:
    """rapidscore.ner names a record by its position (the batch row); add the row's id."""
    import re

    match = re.search(r"record (\d+)", message) or re.search(r"\[(\d+)\]", message)
    if match is None:
        return message
    row = int(match.group(1))
    if ids is not None and 0 <= row < len(ids):
        return f"{_row_label(row, ids, id_column)}: {message}"
    return f"row {row} of the batch: {message}"


class RefusalBatch:
    """Refusal decisions for a batch's ``response_column`` (a string, or a chain-of-thought
    ``{"complete", "answer"}`` record), adding ``refusal`` (bool). ``method`` and ``options`` as
    ``rapidscore.abstention.detect_refusal`` (``"heuristic"``, ``"embedding"``, ...); the
    detector (and its model) is built once per actor."""

    def __init__(self, response_column: str = "response", *, method: Any = "heuristic",
                 id_column: str | None = None, **options):
        from rapidscore.abstention.detectors import get_detector

        self.detector = get_detector(method, **options)
        self.column, self.id_column = response_column, id_column

    def __call__(self, batch: Any) -> Any:
        from rapidscore.abstention.detectors import response_text

        responses = _column(batch, self.column)
        ids = _column(batch, self.id_column) if self.id_column else None
        texts = []
        for row, response in enumerate(responses):
            try:
                texts.append(response_text(response, row))
            except TypeError as exc:
                raise BatchError(f"RefusalBatch: {_row_label(row, ids, self.id_column)}: {exc}") from None
        decisions = self.detector.detect(texts) if texts else np.zeros(0, bool)
        return _with_columns(batch, {"refusal": np.asarray(decisions, dtype=bool)})


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


_BATCH_CLASSES = {"bertscore": BERTScoreBatch, "similarity": SimilarityBatch, "ner": NERBatch,
                  "refusal": RefusalBatch}


def score_dataset(dataset: Any, metric: str = "bertscore", *, concurrency: int | tuple[int, int] = 1,
                  num_gpus: float | None = None, num_cpus: float | None = None, batch_size: int | None = 1024,
                  batch_format: str = "pyarrow", **options) -> Any:
    """Score a whole ``ray.data.Dataset``: ``metric`` is "bertscore", "similarity", "ner" or
    "refusal"; ``options`` go to that metric's batch class (columns, model, engine options). For
    BERTScore with ``idf=True`` the document counts are computed first (one distributed pass).
    ``concurrency`` actors (each loads the model once), ``num_gpus`` per actor. Returns the lazy
    dataset with the score columns added."""
    _require_ray()
    if metric not in _BATCH_CLASSES:
        raise ValueError(f"metric must be one of {list(_BATCH_CLASSES)}, got {metric!r}")
    if metric == "bertscore" and options.get("idf") is True:
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
    return dataset.map_batches(_BATCH_CLASSES[metric], fn_constructor_kwargs=options, concurrency=concurrency,
                               batch_size=batch_size, batch_format=batch_format, **remote)
