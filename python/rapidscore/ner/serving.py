"""How the service runs NER requests (``rapidscore.serve.batching``): each request evaluated
whole in the worker, with its own label similarity (a per-request label cache keeps memory
bounded by the request, not by every label clients ever sent); a failure names the request's
field at fault (``gold[3]``, ``predictions``)."""

from __future__ import annotations

from typing import Any

__all__ = ["NERTask", "evaluate_naming_the_field"]


class NERTask:
    """NER requests, each evaluated whole in the worker (no merged encoder pass), with its own
    label similarity built from the engine's (``NEREngine.labels``); a request's per-request
    options are ``evaluate``'s, and ``records`` asks for each record's detail in the answer.
    Each result is the evaluation's document (``NerResult.to_dict``)."""

    def __init__(self, engine: Any):
        self.engine = engine

    def prepare(self, gold: Any, predictions: Any, *, limits: Any = None, records: bool = False,
                **options: Any) -> tuple[Any, int]:
        n_entities = sum(len(item) if hasattr(item, "__len__") else 1 for item in (*gold, *predictions))
        return (gold, predictions, options, records), max(1, 4 * n_entities)

    def run(self, payloads: list, alone: bool) -> list:
        engine = self.engine
        return [evaluate_naming_the_field(gold, predictions, **{**engine.options, **engine.labels, **options}
                                          ).to_dict(records=records)
                for gold, predictions, options, records in payloads]


def evaluate_naming_the_field(gold: Any, predictions: Any, **options: Any) -> Any:
    """``rapidscore.ner.evaluate``; bad input raises ValueError/TypeError whose message starts with
    the request's field at fault (``gold[3]``, ``predictions``) and whose ``field`` attribute
    names it, for the HTTP answer. The field is found only after a failure (each side is
    converted again, record by record), so valid requests pay nothing for it."""
    from rapidscore.ner.evaluation import evaluate

    try:
        return evaluate(gold, predictions, **options)
    except (ValueError, TypeError, OverflowError) as exc:
        field = _ner_field_at_fault(gold, predictions, options)
        if field is None:
            raise
        message = str(exc) if str(exc).startswith(field) else f"{field}: {exc}"
        error: Exception = (TypeError if isinstance(exc, TypeError) else ValueError)(message)
        setattr(error, "field", field)  # noqa: B010 - read by the HTTP layer with getattr
        raise error from exc


def _ner_field_at_fault(gold: Any, predictions: Any, options: dict) -> str | None:
    """The first side, or record of a side, that fails to convert on its own, or ``predictions``
    when they do not join the gold records (None: neither)."""
    from rapidscore.ner.evaluation import prepare
    from rapidscore.ner.records import join_by_id, to_records

    texts = options.get("texts")
    if texts is not None and (not isinstance(gold, list) or len(texts) != len(gold)):
        return "texts"
    entity_format = options.get("format", "auto")
    sides = []
    for side, data, side_format in (("gold", gold, options.get("gold_format") or entity_format),
                                    ("predictions", predictions, entity_format)):
        try:
            records = to_records(data, texts=texts, source=side)
        except (ValueError, TypeError, OverflowError):
            return side
        for record in records:
            try:
                prepare([record], texts=[record.text], format=side_format)
            except (ValueError, TypeError, OverflowError):
                return record.where
        sides.append(records)
    try:
        join_by_id(sides[0], sides[1], "model")  # ids and texts of the predictions against the gold's
    except (ValueError, TypeError):
        return "predictions"
    return None
