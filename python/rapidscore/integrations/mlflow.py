"""MLflow: rapidscore's metrics as scorers of ``mlflow.genai.evaluate`` (MLflow 3; mlflow-skinny
is enough).

The factories return ``mlflow.genai.scorers.Scorer`` objects, each scoring one evaluation row
with a metric of the registry (``rapidscore.metrics``) whose engine (the model) is built once,
when the scorers are made:

- :func:`bertscore_scorers`: BERTScore of ``outputs`` against the row's expected response ->
  ``bertscore_precision``, ``bertscore_recall``, ``bertscore_f1`` (any subset);
- :func:`similarity_scorers`: the sentence-embedding cosine similarity -> ``similarity``, and
  with a ``threshold`` ``similarity_rejected`` (1.0 / 0.0), whose mean is NRR;
- :func:`refusal_scorer`: refusal detection (SELECT's heuristic by default, any detector of
  ``rapidscore.abstention``) -> ``refusal`` (True = the response refuses).

One scorer per value, named after ``name=`` (``bertscore_scorers(name="deberta", ...)`` gives
``deberta_f1``...), because MLflow applies a scorer's aggregations to the values named as the
scorer. MLflow logs each row's values as assessments of the row's trace and each value's aggregations
(``mean``, ``min``, ``max``, ``median``, ``variance``, ``p90`` by default) as metrics of the run,
``"<value name>/<aggregation>"``: ``bertscore_f1/mean``. The values equal rapidscore's own API on
the same rows.

A row MLflow cannot score (an ``outputs`` that is not text, no expected response) raises
:class:`IntegrationInputError` naming what is wrong; ``mlflow.genai.evaluate`` records that error on
the row's assessment and leaves the row out of the aggregates (calling a scorer directly raises
it). A bad option (an unknown output, a threshold out of range, an unknown refusal method) raises
when the scorer is made.

Thread safety: a scorer is thread-safe (``mlflow.genai.evaluate`` runs rows in threads); it
holds one engine, and rapidscore's engines are thread-safe.

MLflow 3's file tracking store is in maintenance mode: ``mlflow.set_tracking_uri("file:...")``
needs ``MLFLOW_ALLOW_FILE_STORE=true``, and its sqlite store needs ``alembic`` (a dependency of
the full ``mlflow`` package, not of mlflow-skinny).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from rapidscore.errors import IntegrationInputError
from rapidscore.metrics import get_metric

__all__ = ["AGGREGATIONS", "RowScores", "bertscore_scorers", "similarity_scorers", "refusal_scorer"]

#: MLflow's aggregations of a scorer's per-row values (each logged as "<name>/<aggregation>")
AGGREGATIONS: tuple[str, ...] = ("mean", "min", "max", "median", "variance", "p90")
BERTSCORE_OUTPUTS = ("precision", "recall", "f1")



def _require_mlflow() -> Any:
    """MLflow's ``scorer`` decorator."""
    try:
        from mlflow.genai.scorers import scorer
    except ImportError as exc:
        raise ImportError("the MLflow integration needs MLflow 3's GenAI API: pip install 'mlflow-skinny>=3'") \
            from exc
    return scorer


def _text(outputs: Any, output_key: str | None, scorer_name: str, *, records: bool = False) -> Any:
    """The row's response: ``outputs`` itself, or ``outputs[output_key]``."""
    where = "outputs"
    if output_key is not None:
        if not isinstance(outputs, Mapping) or output_key not in outputs:
            raise IntegrationInputError(f"{scorer_name}: outputs must be a dict with the key {output_key!r} "
                                   f"(output_key), got {type(outputs).__name__}: {outputs!r:.80}")
        outputs, where = outputs[output_key], f"outputs[{output_key!r}]"
    record = records and isinstance(outputs, Mapping) and isinstance(outputs.get("answer"), str)
    if isinstance(outputs, str) or record:
        return outputs
    shape = "a str or a {'complete', 'answer'} dict" if records else "a str"
    hint = "" if output_key is not None or not isinstance(outputs, Mapping) else \
        " (pass output_key= to read one key of a dict)"
    raise IntegrationInputError(f"{scorer_name}: {where} must be {shape}, got {type(outputs).__name__}: "
                           f"{outputs!r:.80}{hint}")


def _reference(expectations: Any, reference_key: str, scorer_name: str) -> Any:
    """The row's reference: ``expectations[reference_key]``, a str or a non-empty list of str."""
    if not isinstance(expectations, Mapping) or expectations.get(reference_key) is None:
        got = sorted(expectations) if isinstance(expectations, Mapping) else type(expectations).__name__
        raise IntegrationInputError(f"{scorer_name}: the row has no expectation {reference_key!r} (reference_key) "
                               f"to score against; its expectations: {got}")
    reference = expectations[reference_key]
    is_list = isinstance(reference, (list, tuple)) and reference and all(isinstance(r, str) for r in reference)
    if not (isinstance(reference, str) or is_list):
        raise IntegrationInputError(f"{scorer_name}: expectations[{reference_key!r}] must be a str or a non-empty "
                               f"list of str, got {type(reference).__name__}: {reference!r:.80}")
    return reference


class RowScores:
    """One metric's engine and the outputs of the rows it scored last (up to ``capacity``; 0: no
    memo): the scorers of one metric's outputs (BERTScore's precision, recall and F1) score each
    row once. Thread-safe: a lock guards the memo (a row scored by two threads at once is at worst
    scored twice)."""

    def __init__(self, metric_name: str, engine: Any, capacity: int = 4096):
        self.metric, self.engine, self.capacity = get_metric(metric_name), engine, capacity
        self._memo: dict[tuple, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def row(self, columns: dict[str, Any], scorer_name: str) -> dict[str, Any]:
        """The metric's outputs (one value each) of one row, given as ``{input: value}``."""
        key = tuple(tuple(v) if isinstance(v, list) else v for v in columns.values())
        with self._lock:
            found = self._memo.get(key) if self.capacity else None
        if found is not None:
            return found
        try:
            outputs = self.metric.score(self.engine, {name: [value] for name, value in columns.items()})
        except (TypeError, ValueError) as exc:  # a row the metric refuses (an empty reference list...)
            raise IntegrationInputError(f"{scorer_name}: {exc}") from exc
        values = {name: column[0] for name, column in outputs.items()}
        if not self.capacity:
            return values
        with self._lock:
            if len(self._memo) >= self.capacity:
                self._memo.clear()
            self._memo[key] = values
        return values


def _check_aggregations(aggregations: Sequence[str] | None) -> list | None:
    if isinstance(aggregations, str):
        raise TypeError(f"aggregations must be a list of names, got one str {aggregations!r}; "
                        f"write [{aggregations!r}]")
    return None if aggregations is None else list(aggregations)


def bertscore_scorers(outputs: Sequence[str] = BERTSCORE_OUTPUTS, *, reference_key: str = "expected_response",
                      output_key: str | None = None, name: str = "bertscore",
                      aggregations: Sequence[str] | None = AGGREGATIONS, **options: Any) -> list:
    """Scorers of BERTScore, one per output (``precision``, ``recall``, ``f1``), named
    ``<name>_<output>``: the row's ``outputs`` (or ``outputs[output_key]``) against
    ``expectations[reference_key]`` (a str, or a list of references: the best scores count). They
    share one engine, and a row is scored once for all of them.

    ``options``: the ``bertscore`` metric's build options, i.e. :class:`rapidscore.BERTScore`'s
    (``model``, ``lang``, ``num_layers``, ``idf_sents``, ``rescale_with_baseline``, the engine
    keywords...). The model is loaded once, here."""
    scorer = _require_mlflow()
    chosen = (outputs,) if isinstance(outputs, str) else tuple(outputs)
    if not chosen or any(o not in BERTSCORE_OUTPUTS for o in chosen):
        raise ValueError(f"outputs must name some of {BERTSCORE_OUTPUTS}, got {list(chosen)!r}")
    aggregations = _check_aggregations(aggregations)
    rows = RowScores("bertscore", get_metric("bertscore").build(**options))

    def output_scorer(output: str) -> Any:
        scorer_name = f"{name}_{output}"

        def score(outputs: Any, expectations: Any) -> float:
            values = rows.row({"candidate": _text(outputs, output_key, scorer_name),
                               "reference": _reference(expectations, reference_key, scorer_name)}, scorer_name)
            return float(values[output])

        return scorer(score, name=scorer_name, aggregations=aggregations)

    return [output_scorer(output) for output in chosen]


def similarity_scorers(*, threshold: float | None = None, reference_key: str = "expected_response",
                       output_key: str | None = None, name: str = "similarity",
                       aggregations: Sequence[str] | None = AGGREGATIONS, **options: Any) -> list:
    """The scorer ``<name>`` (default ``similarity``): the ``nrr`` metric's similarity (cosine
    of sentence embeddings, or BERTScore F1 with ``method="bertscore"``; with several references
    the best) of the row's ``outputs`` and ``expectations[reference_key]``; with a ``threshold``
    also ``<name>_rejected`` (1.0 when the similarity is below it, else 0.0: its mean is the
    Negative Rejection Rate of ``rapidscore.negative_rejection``). A row is scored once for both.

    ``options``: :class:`rapidscore.nrr.SentenceSimilarity`'s (``model``, ``method``,
    ``prompt_name``, the engine keywords) or ``similarity_model=`` a loaded one."""
    from rapidscore.nrr.scoring import check_threshold

    scorer = _require_mlflow()
    if threshold is not None:
        threshold = check_threshold(threshold)  # before the model loads
    aggregations = _check_aggregations(aggregations)
    rows = RowScores("nrr", get_metric("nrr").build(threshold=threshold, **options))

    def output_scorer(scorer_name: str, output: str) -> Any:
        def score(outputs: Any, expectations: Any) -> float:
            values = rows.row({"generated": _text(outputs, output_key, scorer_name),
                               "reference": _reference(expectations, reference_key, scorer_name)}, scorer_name)
            return float(values[output])

        return scorer(score, name=scorer_name, aggregations=aggregations)

    outputs = [(name, "similarity")] + ([(f"{name}_rejected", "rejected")] if threshold is not None else [])
    return [output_scorer(scorer_name, output) for scorer_name, output in outputs]


def refusal_scorer(method: Any = "heuristic", *, output_key: str | None = None, name: str = "refusal",
                   aggregations: Sequence[str] | None = ("mean",), **options: Any) -> Any:
    """The scorer ``<name>`` (default ``refusal``): True when the row's ``outputs`` refuses (its
    mean is the refusal rate), by ``rapidscore.abstention.detect_refusal``'s ``method``
    (``"heuristic"``, ``"phrase"``, ``"keyword"``, ``"phr+kw"``, ``"arditi"``, ``"xstest"``,
    ``"embedding"``, a Detector or a callable) and its ``options``. ``outputs`` may be a
    chain-of-thought ``{"complete", "answer"}`` record, whose answer is judged."""
    scorer = _require_mlflow()
    aggregations = _check_aggregations(aggregations)
    rows = RowScores("refusal", get_metric("refusal").build(method=method, **options), capacity=0)

    def score(outputs: Any) -> bool:
        return bool(rows.row({"response": _text(outputs, output_key, name, records=True)}, name)["refusal"])

    return scorer(score, name=name, aggregations=aggregations)
