"""Adapters from the entity formats NER tools produce to one ``Entity`` type.

Every adapter returns character offsets with exclusive ends, exactly as given (normalisation,
trimming and offset repair happen later, in :mod:`rapidscore.ner.normalize`). Supported formats:

``"seed"``        ``{"surface:start:end": "label", ...}`` (the surface may contain ``:``)
``"hf"``          Hugging Face token-classification output, with aggregation (``entity_group``) or
                  without (``entity`` = ``B-X`` / ``I-X`` per token, merged into spans here)
``"gliner"``      GLiNER ``predict_entities``: ``[{"start", "end", "text", "label", "score"}]``
``"spacy"``       a spaCy ``Doc`` / list of ``Span`` (``start_char``, ``end_char``, ``label_``), or
                  ``Doc.to_json()`` (``{"text", "ents": [{"start", "end", "label"}]}``)
``"presidio"``    Presidio ``RecognizerResult`` objects or their ``to_dict()``
                  (``entity_type``, ``start``, ``end``, ``score``)
``"nervaluate"``  nervaluate / Prodigy dicts ``[{"label", "start", "end"}]``, or a Prodigy task
                  ``{"text", "spans": [...]}``
``"tuples"``      ``[(start, end, label)]`` or ``[(start, end, label, score)]``
``"tags"``        token labels (:mod:`rapidscore.ner.tag_decoding`): ``["B-PER", "I-PER", "O"]`` (token
                  offsets) or ``{"tokens": [...], "tags": [...]}`` (character offsets in the
                  tokens joined by spaces); ``"tags:SCHEME"`` / ``"tags:SCHEME:strict"`` decode
                  with a scheme / in seqeval's strict mode
``"auto"``        any of the above, recognised from its structure
"""

from __future__ import annotations

import re
from typing import Any, Callable, NamedTuple

FORMATS = ("auto", "seed", "hf", "gliner", "spacy", "presidio", "nervaluate", "prodigy", "tuples", "tags")

# The largest offset: spans are int64 in the alignment kernels, whose lengths and unions of
# two spans must fit (a 2**70 offset used to end in a bare OverflowError).
MAX_OFFSET = 2**62 - 1

_SEED_KEY = re.compile(r"^(?P<surface>.*):(?P<start>[^:]*):(?P<end>[^:]*)$", re.DOTALL)
_BIO_PREFIX = re.compile(r"^(?P<prefix>[BIESLU])-(?P<type>.+)$")


class Entity(NamedTuple):
    """One entity: character offsets ``[start, end)`` in the record's text, a label, the surface
    string when the format carries one (else None), and the detector's confidence when given."""

    start: int
    end: int
    label: str
    surface: str | None = None
    score: float | None = None


def _where(record: Any) -> str:
    return f"record {record!r}" if record is not None else "input"


def _offset(value: Any, what: str, record: Any) -> int:
    # bool is an int subclass; a True offset is a bug in the caller's data, not an offset.
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            import numpy as np  # numpy integers from pandas / model outputs are fine

            if isinstance(value, np.integer):
                return int(value)
        except ImportError:  # pragma: no cover - numpy is a dependency
            pass
        raise ValueError(f"{_where(record)}: {what} must be an integer, got {value!r}")
    return value


def _label(value: Any, record: Any) -> str:
    if (value.__class__ is not str and not isinstance(value, str)) or not value or value.isspace():
        raise ValueError(f"{_where(record)}: entity label must be a non-empty string, got {value!r}")
    return value


def _check_span(start: int, end: int, record: Any, item: Any) -> None:
    """``item`` (the entity as given) is only formatted when the check fails."""
    if start < 0 or end < 0:
        raise ValueError(f"{_where(record)}: entity {item!r} has a negative offset")
    if start > MAX_OFFSET or end > MAX_OFFSET:
        raise ValueError(f"{_where(record)}: entity {item!r:.200} has an offset beyond the largest supported "
                         f"character offset ({MAX_OFFSET} = 2**62 - 1)")
    if end < start:
        raise ValueError(f"{_where(record)}: entity {item!r} ends before it starts (end {end} < start {start})")


def parse_seed_key(key: str, record: Any = None) -> tuple[str, int, int]:
    """Split a seed-format key ``"surface:start:end"`` (surface may contain ``:``)."""
    if not isinstance(key, str):
        raise ValueError(f"{_where(record)}: entity key must be a string 'surface:start:end', got {key!r}")
    match = _SEED_KEY.match(key)
    if match is None:
        raise ValueError(f"{_where(record)}: malformed entity key {key!r}: expected 'surface:start:end'")
    start_text, end_text = match["start"].strip(), match["end"].strip()
    if not re.fullmatch(r"[+-]?\d+", start_text) or not re.fullmatch(r"[+-]?\d+", end_text):
        raise ValueError(
            f"{_where(record)}: malformed entity key {key!r}: start and end must be integers, "
            f"got {match['start']!r} and {match['end']!r}"
        )
    start, end = int(start_text), int(end_text)
    _check_span(start, end, record, key)
    return match["surface"], start, end


def from_seed(labels: dict, record: Any = None) -> list[Entity]:
    out = []
    for key, label in labels.items():
        surface, start, end = parse_seed_key(key, record)
        out.append(Entity(start, end, _label(label, record), surface=surface))
    return out


def _get(item: Any, *names: str) -> Any:
    for name in names:
        if isinstance(item, dict):
            if name in item:
                return item[name]
        elif hasattr(item, name):
            return getattr(item, name)
    return None


def _score(value: Any, record: Any) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int beyond a float's range
        raise ValueError(f"{_where(record)}: entity score must be a number, got {value!r:.200}") from None


def _span_entity(item: Any, label_key: tuple, surface_key: tuple, record: Any) -> Entity:
    start, end = _get(item, "start", "start_char"), _get(item, "end", "end_char")
    if start is None or end is None:
        raise ValueError(f"{_where(record)}: entity {item!r} has no start/end offsets")
    start, end = _offset(start, "start", record), _offset(end, "end", record)
    _check_span(start, end, record, item)
    label = _get(item, *label_key)
    if label is None:
        expected = " or ".join(map(repr, label_key))
        raise ValueError(f"{_where(record)}: entity {item!r} has no label (expected {expected})")
    label = _label(label, record)
    surface = _get(item, *surface_key) if surface_key else None
    if surface is not None and not isinstance(surface, str):
        raise ValueError(f"{_where(record)}: entity surface must be a string, got {surface!r}")
    return Entity(start, end, label, surface=surface, score=_score(_get(item, "score"), record))


def from_hf(items: list, record: Any = None) -> list[Entity]:
    """HF pipeline output. ``word`` is detokenised and not always ``text[start:end]``, so it is not
    used as the surface; the text slice is. Token-level output (``entity`` with B-/I- tags) is
    merged: a token continues the current entity when it has the same type, is not tagged B-, and
    touches or directly follows the previous token (consecutive ``index`` when present)."""
    if not items:
        return []
    if all(isinstance(it, dict) and "entity_group" in it for it in items):
        return [_span_entity(it, ("entity_group",), (), record) for it in items]
    tokens = []
    for it in items:
        if not isinstance(it, dict) or "entity" not in it:
            raise ValueError(f"{_where(record)}: Hugging Face entity {it!r} has neither 'entity_group' nor 'entity'")
        tokens.append(it)
    tokens.sort(key=lambda it: (_offset(it.get("start"), "start", record), it.get("index", 0)))
    out: list[Entity] = []
    current: list[Any] | None = None  # [start, end, type, scores, last_index]
    for it in tokens:
        tag = _label(it["entity"], record)
        match = _BIO_PREFIX.match(tag)
        prefix, etype = (match["prefix"], match["type"]) if match else ("I", tag)
        start, end = _offset(it.get("start"), "start", record), _offset(it.get("end"), "end", record)
        _check_span(start, end, record, it)
        index = it.get("index")
        adjacent = current is not None and (
            (index is not None and current[4] is not None and index == current[4] + 1)
            or (index is None and start - current[1] <= 1)
        )
        if current is not None and prefix in ("I", "E", "L") and etype == current[2] and adjacent:
            current[1] = max(current[1], end)
            current[3].append(_score(it.get("score"), record))
            current[4] = index
            continue
        if current is not None:
            out.append(_close_token_entity(current))
        current = [start, end, etype, [_score(it.get("score"), record)], index]
    if current is not None:
        out.append(_close_token_entity(current))
    return out


def _close_token_entity(current: list) -> Entity:
    scores = [s for s in current[3] if s is not None]
    return Entity(current[0], current[1], current[2], score=sum(scores) / len(scores) if scores else None)


def from_gliner(items: list, record: Any = None) -> list[Entity]:
    return [_span_entity(it, ("label",), ("text",), record) for it in items]


def from_spacy(doc: Any, record: Any = None) -> list[Entity]:
    if isinstance(doc, dict):  # Doc.to_json()
        ents = doc.get("ents")
        if not isinstance(ents, list):
            raise ValueError(f"{_where(record)}: spaCy JSON has no 'ents' list")
        return [_span_entity(it, ("label",), (), record) for it in ents]
    spans = doc.ents if hasattr(doc, "ents") else doc
    return [_span_entity(span, ("label_",), ("text",), record) for span in spans]


def from_presidio(items: list, record: Any = None) -> list[Entity]:
    return [_span_entity(it, ("entity_type",), (), record) for it in items]


def from_nervaluate(items: Any, record: Any = None) -> list[Entity]:
    if isinstance(items, dict):  # Prodigy task
        items = items.get("spans") or []
    return [_span_entity(it, ("label",), ("text",), record) for it in items]


def from_tuples(items: list, record: Any = None) -> list[Entity]:
    out = []
    for it in items:
        if not isinstance(it, (tuple, list)) or len(it) not in (3, 4):
            raise ValueError(f"{_where(record)}: tuple entity must be (start, end, label[, score]), got {it!r}")
        start, end = _offset(it[0], "start", record), _offset(it[1], "end", record)
        _check_span(start, end, record, it)
        out.append(Entity(start, end, _label(it[2], record), score=_score(it[3], record) if len(it) == 4 else None))
    return out


def from_tags(items: Any, record: Any = None, spec: str = "tags") -> list[Entity]:
    """Token labels of one record, decoded as ``spec`` says (``tags[:SCHEME[:strict]]``)."""
    from rapidscore.errors import TagError
    from rapidscore.ner.tag_decoding import parse_tag_format, tags_to_entities

    scheme, mode = parse_tag_format(spec)
    words = None
    if isinstance(items, dict):
        if "tags" not in items:
            raise TagError(f"{_where(record)}: token-label entities need a 'tags' list, got keys {list(items)[:5]}")
        items, words = items["tags"], items.get("tokens")
    try:
        spans = tags_to_entities([items], tokens=None if words is None else [words], scheme=scheme, mode=mode)[0]
    except TagError as exc:
        raise TagError(f"{_where(record)}: {exc}") from exc
    if words is None:
        return [Entity(start, end, label) for start, end, label in spans]
    text = " ".join(words)
    return [Entity(start, end, label, surface=text[start:end]) for start, end, label in spans]


_ADAPTERS: dict[str, Callable[[Any, Any], list[Entity]]] = {
    "seed": from_seed,
    "hf": from_hf,
    "gliner": from_gliner,
    "spacy": from_spacy,
    "presidio": from_presidio,
    "nervaluate": from_nervaluate,
    "prodigy": from_nervaluate,
    "tuples": from_tuples,
    "tags": from_tags,
}


def detect_format(entities: Any, record: Any = None) -> str:
    """Name of the format of one record's entities (see the module docstring)."""
    if isinstance(entities, dict):
        if "tags" in entities and isinstance(entities["tags"], (list, tuple)):
            return "tags"
        if "ents" in entities:
            return "spacy"
        if "spans" in entities:
            return "prodigy"
        if all(isinstance(k, str) and _SEED_KEY.match(k) for k in entities):
            # Seed keys with a value that is not a label: name the entity, not "unknown format".
            for key, value in entities.items():
                if not isinstance(value, str):
                    raise ValueError(f"{_where(record)}: seed entity {key!r}: label must be a non-empty string, "
                                     f"got {type(value).__name__}: {value!r:.80}")
            return "seed"
        # A dict whose keys are not 'surface:start:end' is most likely a malformed seed record;
        # name the first bad key so the user sees what is wrong.
        for key, value in entities.items():
            if isinstance(value, str):
                parse_seed_key(key, record)
        raise ValueError(f"{_where(record)}: unknown entity format: dict with keys {list(entities)[:5]!r}")
    if hasattr(entities, "ents"):
        return "spacy"
    if isinstance(entities, (list, tuple)):
        if not entities:
            return "tuples"
        first = entities[0]
        if isinstance(first, dict):
            keys = set(first)
            if "entity_group" in keys or "entity" in keys:
                return "hf"
            if "entity_type" in keys:
                return "presidio"
            if "label" in keys and "start" in keys:
                return "gliner" if "text" in keys else "nervaluate"
        elif isinstance(first, (tuple, list)):
            return "tuples"
        elif isinstance(first, str):  # one label per token
            return "tags"
        elif hasattr(first, "start_char"):
            return "spacy"
        elif hasattr(first, "entity_type"):
            return "presidio"
        raise ValueError(f"{_where(record)}: unknown entity format: first entity is {first!r}")
    raise ValueError(f"{_where(record)}: unknown entity format: {type(entities).__name__} {entities!r:.80}")


def to_entities(entities: Any, format: str = "auto", record: Any = None) -> list[Entity]:
    """Convert one record's entities from ``format`` (see the module docstring) to ``Entity``
    objects, offsets as given. ``None`` means no entities. Bad input raises ValueError naming
    ``record``."""
    if format not in FORMATS and not (isinstance(format, str) and format.startswith("tags:")):
        raise ValueError(f"unknown entity format {format!r}; choose one of {', '.join(FORMATS)} "
                         "(or tags:SCHEME[:strict])")
    if entities is None:
        return []
    if isinstance(entities, (list, tuple)) and entities and all(isinstance(e, Entity) for e in entities):
        for entity in entities:
            _check_span(_offset(entity.start, "start", record), _offset(entity.end, "end", record), record, entity)
        return list(entities)
    if format == "auto":
        format = detect_format(entities, record)
    if format.startswith("tags"):  # "tags" or "tags:SCHEME[:strict]"
        return from_tags(entities, record, format)
    adapter = _ADAPTERS[format]
    try:
        return adapter(entities, record)
    except (AttributeError, TypeError, KeyError) as exc:
        raise ValueError(f"{_where(record)}: entities do not match format {format!r}: {exc}") from exc
