"""Decoding token labels into entity spans: IOB1, IOB2, IOE1, IOE2, IOBES and BILOU, as seqeval 1.2.2.

The spans are what ``rapidscore.ner.tags`` scores (span-level precision / recall / F1 equal to
seqeval's ``classification_report``) and what ``tags_to_entities`` / ``tags_to_records`` hand to
the DMBertA evaluation.

Two modes, as seqeval's:

``mode=None`` (default, "conlleval"-like)
    seqeval's ``get_entities`` chunking, whatever the scheme: ``I-`` after ``O`` or after another
    type starts an entity, a type change ends one, ``B-``/``S-`` start, ``E-``/``S-`` end. The
    sentences are read as seqeval reads them: joined with an ``O`` between them. A label is split
    as seqeval splits it (``"B-PER"`` -> prefix ``B``, type ``PER``; a label without a prefix,
    ``"PER"``, is prefix ``P`` and type ``ER``, as in seqeval). With ``scheme="BILOU"`` the
    ``U-``/``L-`` prefixes are read as ``S-``/``E-`` (seqeval's default mode knows neither); any
    other scheme name leaves the labels as given.
``mode="strict"``
    seqeval's ``mode="strict"`` with ``scheme``: an entity is exactly a start, insides and an end
    that the scheme allows (``seqeval.scheme``'s patterns); any other run of labels is no entity.
    A prefix the scheme does not allow is an error, as in seqeval. Without a scheme (or
    ``"auto"``) the scheme is detected from ``y_true`` as ``classification_report`` does.

Spans are token indices ``[start, end)``. Every function here is pure and thread-safe; a
span is immutable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from rapidscore.errors import TagError

if TYPE_CHECKING:
    pass

__all__ = ["SCHEMES", "TagSpan", "resolve_scheme", "resolve_mode", "detect_scheme", "decode_tags", "tags_to_entities",
           "tags_to_records", "parse_tag_format", "SCHEME_TABLES", "check_lengths", "default_chunks",
           "default_split_all", "not_ne_tags", "label_sequences", "strict_spans", "strict_split"]

SCHEMES = ("IOB1", "IOB2", "IOE1", "IOE2", "IOBES", "BILOU")
SCHEME_ALIASES = {"BIO": "IOB2", "BIOES": "IOBES", "BILUO": "BILOU", "BIOUL": "BILOU"}
MODES = ("default", "strict")


class TagSpan(NamedTuple):
    """One entity decoded from token labels: tokens ``[start, end)`` and its type (immutable, thread-safe)."""

    start: int
    end: int
    label: str


# ---------------------------------------------------------------- schemes and modes

_ANY = "IOBESUL"  # seqeval's Prefix.ANY


class _Scheme:
    """One scheme's allowed prefixes and its start / inside / end patterns, as seqeval.scheme
    writes them: (previous prefixes, current prefixes, type condition 'any' / 'same' / 'diff')."""

    def __init__(self, name: str, allowed: str, start: list, inside: list, end: list):
        self.name = name
        self.allowed = allowed
        self.start_table = self._table(start)
        self.inside_table = self._table(inside)
        self.end_table = self._table(end)

    @staticmethod
    def _table(patterns: list) -> dict:
        # (previous prefix, current prefix) -> (matches when the types are the same, when they differ)
        table: dict[tuple[str, str], tuple[bool, bool]] = {}
        for previous, current, condition in patterns:
            for p in previous:
                for c in current:
                    same, diff = table.get((p, c), (False, False))
                    table[(p, c)] = (same or condition in ("any", "same"), diff or condition in ("any", "diff"))
        return table

    @staticmethod
    def matches(table: dict, previous: str, current: str, same_type: bool) -> bool:
        found = table.get((previous, current))
        return found is not None and found[0 if same_type else 1]


SCHEME_TABLES = {
    "IOB1": _Scheme("IOB1", "IOB",
                    start=[("O", "I", "any"), ("I", "I", "diff"), ("B", "I", "any"), ("I", "B", "same"),
                           ("B", "B", "same")],
                    inside=[("B", "I", "same"), ("I", "I", "same")],
                    end=[("I", "I", "diff"), ("I", "O", "any"), ("I", "B", "any"), ("B", "O", "any"),
                         ("B", "I", "diff"), ("B", "B", "same")]),
    "IOE1": _Scheme("IOE1", "IOE",
                    start=[("O", "I", "any"), ("I", "I", "diff"), ("E", "I", "any"), ("E", "E", "same")],
                    inside=[("I", "I", "same"), ("I", "E", "same")],
                    end=[("I", "I", "diff"), ("I", "O", "any"), ("I", "E", "diff"), ("E", "I", "same"),
                         ("E", "E", "same")]),
    "IOB2": _Scheme("IOB2", "IOB",
                    start=[(_ANY, "B", "any")],
                    inside=[("B", "I", "same"), ("I", "I", "same")],
                    end=[("I", "O", "any"), ("I", "I", "diff"), ("I", "B", "any"), ("B", "O", "any"),
                         ("B", "I", "diff"), ("B", "B", "any")]),
    "IOE2": _Scheme("IOE2", "IOE",
                    start=[("O", "I", "any"), ("O", "E", "any"), ("E", "I", "any"), ("E", "E", "any"),
                           ("I", "I", "diff"), ("I", "E", "diff")],
                    inside=[("I", "E", "same"), ("I", "I", "same")],
                    end=[("E", _ANY, "any")]),
    "IOBES": _Scheme("IOBES", "IOBES",
                     start=[(_ANY, "B", "any"), (_ANY, "S", "any")],
                     inside=[("B", "I", "same"), ("B", "E", "same"), ("I", "I", "same"), ("I", "E", "same")],
                     end=[("S", _ANY, "any"), ("E", _ANY, "any")]),
    "BILOU": _Scheme("BILOU", "BILOU",
                     start=[(_ANY, "B", "any"), (_ANY, "U", "any")],
                     inside=[("B", "I", "same"), ("B", "L", "same"), ("I", "I", "same"), ("I", "L", "same")],
                     end=[("U", _ANY, "any"), ("L", _ANY, "any")]),
}


def resolve_scheme(scheme: Any) -> str | None:
    """The canonical scheme name of ``scheme``: one of :data:`SCHEMES` in any case, an alias
    (``BIO`` = IOB2, ``BIOES`` = IOBES, ``BILUO``/``BIOUL`` = BILOU), a seqeval scheme class
    (``seqeval.scheme.IOB2``), or None / ``"auto"`` (returned as None)."""
    if scheme is None:
        return None
    if isinstance(scheme, type):  # seqeval.scheme.IOB2 and friends: the class's name is the scheme
        scheme = scheme.__name__
    if not isinstance(scheme, str):
        raise TagError(f"scheme must be a name ({', '.join(SCHEMES)} or 'auto'), got {scheme!r}")
    name = scheme.strip().upper()
    if name == "AUTO":
        return None
    name = SCHEME_ALIASES.get(name, name)
    if name not in SCHEMES:
        raise TagError(f"unknown tagging scheme {scheme!r}; choose one of {', '.join(SCHEMES)} or 'auto' "
                       f"(aliases: {', '.join(SCHEME_ALIASES)})")
    return name


def resolve_mode(mode: Any) -> str:
    """``"strict"`` or ``"default"`` (None, ``"default"``, ``"lenient"`` and ``"conlleval"`` mean the default)."""
    if mode is None:
        return "default"
    if isinstance(mode, str) and mode.strip().lower() in ("default", "lenient", "conlleval"):
        return "default"
    if isinstance(mode, str) and mode.strip().lower() == "strict":
        return "strict"
    raise TagError(f"mode must be None (the default, conlleval-like) or 'strict', got {mode!r}")


# ---------------------------------------------------------------- input checks


def label_sequences(value: Any, name: str) -> list[list[str]]:
    """``value`` as a list of label lists; a bad value raises TagError naming ``name[i][j]``."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable) or isinstance(value, Mapping):
        raise TagError(f"{name} must be a list of label sequences (one per sentence), got {type(value).__name__}")
    out = []
    for i, sequence in enumerate(value):
        if isinstance(sequence, (str, bytes)):
            raise TagError(f"{name}[{i}] is a string ({sequence!r:.40}), not a sequence of labels: "
                           f"pass one list of labels per sentence, e.g. [['B-PER', 'O']]")
        if not isinstance(sequence, Iterable) or isinstance(sequence, Mapping):
            raise TagError(f"{name}[{i}] must be a sequence of labels, got {type(sequence).__name__}")
        labels = list(sequence)
        for j, label in enumerate(labels):
            if not isinstance(label, str) or not label:
                raise TagError(f"{name}[{i}][{j}]: a label must be a non-empty string, got {label!r}")
        out.append(labels)
    return out


def check_lengths(y_true: list[list[str]], y_pred: list[list[str]]) -> None:
    if not y_true and not y_pred:  # seqeval refuses it too
        raise TagError("y_true and y_pred hold no sequences: nothing to evaluate")
    if len(y_true) != len(y_pred):
        raise TagError(f"y_true has {len(y_true)} sequences, y_pred has {len(y_pred)}")
    for i, (gold, pred) in enumerate(zip(y_true, y_pred)):
        if len(gold) != len(pred):
            raise TagError(f"sequence {i}: y_true has {len(gold)} labels, y_pred has {len(pred)}")


# ---------------------------------------------------------------- default (conlleval-like) mode


def _default_split(label: str, suffix: bool, bilou: bool) -> tuple[str, str]:
    """seqeval.get_entities' split of a label into its chunk tag and type."""
    if suffix:
        tag, type_ = label[-1], label[:-1].rsplit("-", maxsplit=1)[0] or "_"
    else:
        tag, type_ = label[0], label[1:].split("-", maxsplit=1)[-1] or "_"
    if bilou:  # U-/L- read as IOBES's S-/E-
        tag = "S" if tag == "U" else "E" if tag == "L" else tag
    return tag, type_


_END_AFTER = frozenset("ES")
_END_PAIRS = frozenset({("B", "B"), ("B", "S"), ("B", "O"), ("I", "B"), ("I", "S"), ("I", "O")})
_START_TAGS = frozenset("BS")
_START_PAIRS = frozenset({("E", "E"), ("E", "I"), ("S", "E"), ("S", "I"), ("O", "E"), ("O", "I")})
_NOT_CHUNK = frozenset("O.")


def default_chunks(tags: list[str], types: list[str]) -> list[tuple[str, int, int]]:
    """seqeval.get_entities over one (already joined) sequence: (type, start, end exclusive).
    Written out as seqeval's end_of_chunk / start_of_chunk, the stale start of a chunk that
    ends without having started included (seqeval reports it so)."""
    chunks = []
    prev_tag, prev_type, begin = "O", "", 0
    for i, (tag, type_) in enumerate(zip([*tags, "O"], [*types, "_"])):
        type_changed = prev_type != type_
        if (prev_tag in _END_AFTER or (prev_tag, tag) in _END_PAIRS
                or (prev_tag not in _NOT_CHUNK and type_changed)):
            chunks.append((prev_type, begin, i))
        if tag in _START_TAGS or (prev_tag, tag) in _START_PAIRS or (tag not in _NOT_CHUNK and type_changed):
            begin = i
        prev_tag, prev_type = tag, type_
    return chunks


def default_split_all(labels: list[str], suffix: bool, bilou: bool) -> tuple[list[str], list[str]]:
    pairs = [_default_split(label, suffix, bilou) for label in labels]
    return [tag for tag, _ in pairs], [type_ for _, type_ in pairs]


def not_ne_tags(sequences: list[list[str]], suffix: bool) -> list[str]:
    """Labels seqeval warns about ('... seems not to be NE tag'), a few, for one warning."""
    seen: list[str] = []
    for labels in sequences:
        for label in labels:
            if label in ("O", "B", "I", "E", "S") or label in seen:
                continue
            ok = label.endswith(("-B", "-I", "-E", "-S")) if suffix else label.startswith(("B-", "I-", "E-", "S-"))
            if not ok:
                seen.append(label)
                if len(seen) == 3:
                    return seen
    return seen


# ---------------------------------------------------------------- strict mode


def strict_split(label: str, suffix: bool, scheme: _Scheme, where: str) -> tuple[str, str]:
    """seqeval.scheme.Token's prefix and type; a prefix the scheme does not allow raises."""
    prefix, type_ = (label[-1], label[:-1]) if suffix else (label[0], label[1:])
    if prefix not in scheme.allowed:
        allowed = ", ".join(f"{p}-" if p != "O" else "O" for p in scheme.allowed)
        raise TagError(f"{where}: label {label!r} is not allowed in {scheme.name} (allowed prefixes: {allowed}"
                       f"{', as suffixes' if suffix else ''}); seqeval refuses it too")
    return prefix, type_.strip("-") or "_"


def strict_spans(prefixes: list[str], types: list[str], scheme: _Scheme) -> list[TagSpan]:
    """seqeval.scheme.Tokens.entities for one sentence (an O appended, as seqeval does)."""
    prefixes, types = [*prefixes, "O"], [*types, "_"]
    last = len(prefixes) - 1
    spans = []
    i, prev_prefix, prev_type = 0, "O", "_"
    while i <= last:
        prefix, type_ = prefixes[i], types[i]
        if scheme.matches(scheme.start_table, prev_prefix, prefix, prev_type == type_):
            j, inner_prefix, inner_type = i + 1, prefix, type_
            # the appended O is never inside an entity, so j stops at `last` at the latest
            while scheme.matches(scheme.inside_table, inner_prefix, prefixes[j], inner_type == types[j]):
                inner_prefix, inner_type = prefixes[j], types[j]
                j += 1
            if scheme.matches(scheme.end_table, prefixes[j - 1], prefixes[j], types[j - 1] == types[j]):
                spans.append(TagSpan(i, j, type_))
            i = j
        else:
            i += 1
        prev_prefix, prev_type = prefixes[i - 1], types[i - 1]
    return spans


# seqeval.scheme.auto_detect's prefix sets, checked in its order
_AUTO_DETECT = (
    ("IOB2", ("IOB", "IB", "BO", "B")),
    ("IOE2", ("IOE", "IE", "EO", "E")),
    ("IOBES", ("IOBES", "IBES", "IOBE", "OBES", "IBE", "BES", "OBE", "BE", "S")),
    ("BILOU", ("IOBLU", "IBLU", "IOBL", "OBLU", "IBL", "BLU", "OBL", "BL", "U")),
)


def detect_scheme(y_true: Sequence[Sequence[str]], suffix: bool = False) -> str:
    """The scheme seqeval's ``auto_detect`` finds from the prefixes of ``y_true`` (IOB2, IOE2,
    IOBES or BILOU); TagError when the prefixes fit none."""
    prefixes: set[str] = set()
    for i, labels in enumerate(label_sequences(y_true, "y_true")):
        for j, label in enumerate(labels):
            prefix = label[-1] if suffix else label[0]
            if prefix not in _ANY:
                raise TagError(f"y_true[{i}][{j}]: label {label!r} has no scheme prefix; cannot detect the scheme")
            prefixes.add(prefix)
    for name, allowed_sets in _AUTO_DETECT:
        if any(prefixes == set(allowed) for allowed in allowed_sets):
            return name
    raise TagError(f"cannot detect the tagging scheme from the prefixes {sorted(prefixes)} of y_true "
                   f"(seqeval detects IOB2, IOE2, IOBES and BILOU); pass scheme=...")


# ---------------------------------------------------------------- decoding


def decode_tags(labels: Sequence[str], *, scheme: Any = None, mode: Any = None, suffix: bool = False) -> list[TagSpan]:
    """The entities of one label sequence, as token spans ``[start, end)``: seqeval's
    ``get_entities`` (default mode) or its strict ``Tokens.entities`` (``mode="strict"``; a
    scheme is required here, there being no ``y_true`` to detect it from)."""
    sequence = label_sequences([labels], "labels")[0]
    return _decode_one(sequence, resolve_scheme(scheme), resolve_mode(mode), suffix, "labels")


def _decode_one(labels: list[str], scheme: str | None, mode: str, suffix: bool, where: str) -> list[TagSpan]:
    if mode == "strict":
        if scheme is None:
            raise TagError("mode='strict' needs a scheme to decode one sequence "
                           f"({', '.join(SCHEMES)}); tag_report detects it from y_true")
        table = SCHEME_TABLES[scheme]
        pairs = [strict_split(label, suffix, table, f"{where}[{j}]") for j, label in enumerate(labels)]
        return strict_spans([p for p, _ in pairs], [t for _, t in pairs], table)
    tags, types = default_split_all(labels, suffix, scheme == "BILOU")
    return [TagSpan(start, end, type_) for type_, start, end in default_chunks(tags, types)]


def tags_to_entities(sequences: Sequence[Sequence[str]], *, tokens: Sequence[Sequence[str]] | None = None,
                     scheme: Any = None, mode: Any = None, suffix: bool = False) -> list[list[tuple]]:
    """Each sentence's entities as ``(start, end, label)`` tuples (rapidscore's ``"tuples"``
    entity format): token indices, or, when ``tokens`` are given, character offsets in the
    sentence's tokens joined with single spaces (``" ".join(tokens[i])``). Sentences are decoded
    one by one (seqeval's default mode joins them with an ``O``; the two differ only for labels
    seqeval warns are not NE tags)."""
    scheme_name, mode_name = resolve_scheme(scheme), resolve_mode(mode)
    sentences = label_sequences(sequences, "sequences")
    if mode_name == "strict" and scheme_name is None:
        scheme_name = detect_scheme(sentences, suffix)
    token_lists = _token_lists(tokens, sentences) if tokens is not None else None
    out = []
    for i, labels in enumerate(sentences):
        spans = _decode_one(labels, scheme_name, mode_name, suffix, f"sequences[{i}]")
        if token_lists is None:
            out.append([(span.start, span.end, span.label) for span in spans])
        else:
            starts, ends = _char_offsets(token_lists[i])
            out.append([(starts[span.start], ends[span.end - 1], span.label) for span in spans])
    return out


def _token_lists(tokens: Any, sentences: list[list[str]]) -> list[list[str]]:
    token_lists = label_sequences(tokens, "tokens")
    if len(token_lists) != len(sentences):
        raise TagError(f"{len(token_lists)} token sequences for {len(sentences)} label sequences")
    for i, (words, labels) in enumerate(zip(token_lists, sentences)):
        if len(words) != len(labels):
            raise TagError(f"sequence {i}: {len(words)} tokens for {len(labels)} labels")
    return token_lists


def _char_offsets(words: list[str]) -> tuple[list[int], list[int]]:
    starts, ends, position = [], [], 0
    for word in words:
        starts.append(position)
        position += len(word)
        ends.append(position)
        position += 1  # the joining space
    return starts, ends


def tags_to_records(sequences: Sequence[Sequence[str]], *, tokens: Sequence[Sequence[str]] | None = None,
                    ids: Sequence | None = None, scheme: Any = None, mode: Any = None,
                    suffix: bool = False) -> list[dict]:
    """Records for :func:`rapidscore.ner.evaluate` (DMBertA and SemEval) from token labels:
    ``{"id", "labels": [(start, end, label)]}`` with token offsets, or, when ``tokens`` are given,
    ``{"id", "text": " ".join(tokens), "labels": ...}`` with character offsets. Convert the gold
    and the predictions the same way (both with tokens, or both without)."""
    token_lists = label_sequences(tokens, "tokens") if tokens is not None else None
    entities = tags_to_entities(sequences, tokens=token_lists, scheme=scheme, mode=mode, suffix=suffix)
    if ids is not None and len(ids) != len(entities):
        raise TagError(f"{len(ids)} ids for {len(entities)} sequences")
    records = []
    for i, ents in enumerate(entities):
        record: dict = {"id": ids[i] if ids is not None else i}
        if token_lists is not None:
            record["text"] = " ".join(token_lists[i])
        record["labels"] = ents
        records.append(record)
    return records


def parse_tag_format(spec: str) -> tuple[str | None, str]:
    """``(scheme, mode)`` of a token-label entity format name: ``"tags"`` (default mode, labels as
    given), ``"tags:SCHEME"`` (default mode; BILOU's U-/L- read as S-/E-) or
    ``"tags:SCHEME:strict"`` (seqeval's strict mode)."""
    parts = spec.split(":")
    if parts[0] != "tags" or len(parts) > 3:
        raise TagError(f"token-label format must be 'tags', 'tags:SCHEME' or 'tags:SCHEME:strict', got {spec!r}")
    scheme = resolve_scheme(parts[1]) if len(parts) > 1 else None
    mode = resolve_mode(parts[2]) if len(parts) > 2 else "default"
    if mode == "strict" and scheme is None:
        raise TagError(f"format {spec!r}: strict decoding needs a scheme, e.g. 'tags:IOB2:strict'")
    return scheme, mode
