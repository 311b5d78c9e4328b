"""Records (one text and its entities) from Python objects and JSONL files, joined by id.

A JSONL line is ``{"id": ..., "text": ... (or "prompt"), "labels": <entities>}``; the entities
may also sit under ``"entities"``, ``"spans"`` (Prodigy) or ``"ents"`` (spaCy JSON). A combined
file holds ``{"id", "text", "gold": <entities>, "predictions": {model: <entities>}}`` per line.
Token labels (``"tags": ["B-PER", "O"]``, or under any entity key) come with the record's
``"tokens"``: the entities are then ``{"tokens", "tags"}`` (character offsets in the tokens joined
by spaces, the record's text when it has none).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rapidscore.common.io import detect_format, read_records

ENTITY_KEYS = ("labels", "entities", "spans", "ents", "tags")
TEXT_KEYS = ("text", "prompt")


@dataclass
class Record:
    """One text and one side's entities in their original format; ``where`` says where it came
    from (``file:line`` or a list position) for error messages."""

    id: Any
    text: str | None
    entities: Any
    where: str


def is_record_dict(item: Any) -> bool:
    return isinstance(item, Mapping) and any(key in item for key in (*ENTITY_KEYS, "gold", "predictions"))


def _text_of(item: Mapping, where: str) -> str | None:
    present = [key for key in TEXT_KEYS if key in item]
    if len(present) > 1 and item[present[0]] != item[present[1]]:
        raise ValueError(f"{where}: 'text' and 'prompt' differ")
    text = item[present[0]] if present else None
    if text is not None and not isinstance(text, str):
        raise ValueError(f"{where}: text must be a string, got {type(text).__name__}")
    return text


def _entities_of(item: Mapping, where: str) -> Any:
    present = [key for key in ENTITY_KEYS if key in item]
    if not present:
        raise ValueError(f"{where}: no entities: expected one of the keys {', '.join(ENTITY_KEYS)}")
    if len(present) > 1:
        raise ValueError(f"{where}: several entity keys {present}; keep one")
    if present[0] in ("spans", "ents"):
        return {present[0]: item[present[0]]}  # Prodigy task / spaCy JSON: keep the container shape
    return item[present[0]]


def is_label_list(entities: Any) -> bool:
    """Whether a record's entities are bare token labels (``["B-PER", "O"]``: token offsets)."""
    return isinstance(entities, (list, tuple)) and bool(entities) and all(isinstance(x, str) for x in entities)


def with_tokens(item: Mapping, entities: Any, text: str | None, where: str) -> tuple[Any, str | None]:
    """Token labels joined to the record's ``"tokens"`` (and its text, when it has none, the
    tokens joined by spaces). Token labels beside a text but without tokens are an error: their
    token offsets are no offsets in the text."""
    tokens = item.get("tokens")
    if not is_label_list(entities):
        return entities, text
    if tokens is None:
        if text is not None:
            from rapidscore.ner.tags import TagError

            raise TagError(f"{where}: token labels and a text but no 'tokens': add the record's tokens "
                           "(or drop the text to score token offsets)")
        return entities, text
    if isinstance(tokens, str) or not isinstance(tokens, Sequence):
        raise ValueError(f"{where}: 'tokens' must be a list of strings, got {type(tokens).__name__}")
    return {"tokens": list(tokens), "tags": list(entities)}, " ".join(tokens) if text is None else text


def _record_id(item: Mapping, position: int, where: str, require_id: bool) -> Any:
    if "id" in item:
        rid = item["id"]
        if not isinstance(rid, (str, int)) or isinstance(rid, bool):
            raise ValueError(f"{where}: id must be a string or an integer, got {rid!r}")
        return rid
    if require_id:
        raise ValueError(f"{where}: record has no 'id' (needed to join gold and prediction files)")
    return position


def to_records(
    data: Any, *, texts: Sequence[str | None] | None = None, ids: Sequence | None = None, source: str = "input"
) -> list[Record]:
    """Records from a list of record dicts or a list of per-record entity collections (with
    optional parallel ``texts`` and ``ids``). Duplicated ids raise ValueError."""
    if isinstance(data, (str, bytes)) or not isinstance(data, Sequence):
        raise TypeError(f"{source}: expected a list of records or of per-record entities, got {type(data).__name__}")
    if texts is not None and len(texts) != len(data):
        raise ValueError(f"{source}: {len(texts)} texts for {len(data)} records")
    if ids is not None and len(ids) != len(data):
        raise ValueError(f"{source}: {len(ids)} ids for {len(data)} records")
    records = []
    for position, item in enumerate(data):
        where = f"{source}[{position}]"
        if is_record_dict(item):
            rid = ids[position] if ids is not None else _record_id(item, position, where, False)
            text = _text_of(item, where)
            if texts is not None and texts[position] is not None:
                if text is not None and text != texts[position]:
                    raise ValueError(f"{where}: the record's text differs from texts[{position}]")
                text = texts[position]
            entities, text = with_tokens(item, _entities_of(item, where), text, where)
            records.append(Record(rid, text, entities, where))
        else:
            rid = ids[position] if ids is not None else position
            records.append(Record(rid, texts[position] if texts is not None else None, item, where))
    _check_unique(records, source)
    return records


def _check_unique(records: list[Record], source: str) -> None:
    seen: dict = {}
    for rec in records:
        if rec.id in seen:
            raise ValueError(f"{source}: duplicated id {rec.id!r} ({seen[rec.id]} and {rec.where})")
        seen[rec.id] = rec.where


def _read_lines(path: str):
    # JSONL (any extension but .csv/.tsv/.parquet, whose rows are records too), gzip allowed
    return read_records(path, default="jsonl")


def _struct_keys(entities: Any) -> Any:
    """Seed entities read from Parquet: a column of dicts is one struct of every record's keys
    (pandas and pyarrow write it so), None where a record lacks a key; those keys are absent,
    not entities without a label. (In JSON a None label stays an error.)"""
    if isinstance(entities, dict) and not {"spans", "ents"} & set(entities):
        return {key: value for key, value in entities.items() if value is not None}
    return entities


def read_jsonl(path: str, *, require_id: bool = True) -> list[Record]:
    """Records of a JSONL file (one ``{"id", "text", "labels"}`` object per line)."""
    records = []
    from_parquet = detect_format(path, default="jsonl") == "parquet"
    for position, (item, where) in enumerate(_read_lines(path)):
        rid = _record_id(item, position, where, require_id)
        entities, text = with_tokens(item, _entities_of(item, where), _text_of(item, where), where)
        records.append(Record(rid, text, _struct_keys(entities) if from_parquet else entities, where))
    _check_unique(records, path)
    return records


def read_combined_jsonl(path: str) -> tuple[list[Record], dict]:
    """Gold records and ``{model: records}`` from a combined file with ``"gold"`` and
    ``"predictions": {model: entities}`` per line. Every line must name the same models."""
    gold: list[Record] = []
    predictions: dict[str, list[Record]] = {}
    models = None
    from_parquet = detect_format(path, default="jsonl") == "parquet"
    for position, (item, where) in enumerate(_read_lines(path)):
        if "gold" not in item or not isinstance(item.get("predictions"), dict):
            raise ValueError(f"{where}: a combined file needs 'gold' and a 'predictions' object on every line")
        rid = _record_id(item, position, where, False)
        text = _text_of(item, where)
        if models is None:
            models = list(item["predictions"])
            predictions = {name: [] for name in models}
        elif set(item["predictions"]) != set(models):
            raise ValueError(f"{where}: predictions name models {sorted(item['predictions'])}, "
                             f"expected {sorted(models)}")
        gold_entities, gold_text = with_tokens(item, item["gold"], text, where)
        gold.append(Record(rid, gold_text, _struct_keys(gold_entities) if from_parquet else gold_entities, where))
        for name in models:
            entities, _ = with_tokens(item, item["predictions"][name], text, where)
            entities = _struct_keys(entities) if from_parquet else entities
            predictions[name].append(Record(rid, gold_text, entities, where))
    _check_unique(gold, path)
    if not gold:
        raise ValueError(f"{path}: no records")
    return gold, predictions


def join_by_id(gold: list[Record], predicted: list[Record], model: str) -> list[Record]:
    """``predicted`` reordered to follow ``gold``. Ids present on one side only, or a text that
    differs between the two sides, raise ValueError naming them; nothing is dropped."""
    by_id = {rec.id: rec for rec in predicted}
    gold_ids = {rec.id for rec in gold}
    missing = [rec.id for rec in gold if rec.id not in by_id]
    extra = [rec.id for rec in predicted if rec.id not in gold_ids]
    if missing:
        more = " ..." if len(missing) > 10 else ""
        raise ValueError(f"model {model!r}: no prediction for gold id(s) {missing[:10]}{more}")
    if extra:
        more = " ..." if len(extra) > 10 else ""
        raise ValueError(f"model {model!r}: prediction id(s) {extra[:10]}{more} not in the gold file")
    joined = []
    for rec in gold:
        pred = by_id[rec.id]
        if pred.text is not None and rec.text is not None and pred.text != rec.text:
            raise ValueError(f"model {model!r}: id {rec.id!r}: text differs from the gold text "
                             f"({pred.where} vs {rec.where})")
        joined.append(pred)
    return joined
