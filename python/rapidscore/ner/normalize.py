"""Normalisation of one record's entities before alignment.

Steps, in order, each counted in a :class:`Repairs`:

1. trim whitespace and edge punctuation from the span (``" Emily Brown."`` -> ``"Emily Brown"``),
   moving the offsets with it;
2. check the offsets against the text: when ``text[start:end]`` is not the entity's surface (or
   the offsets lie beyond the text), re-anchor the surface to its occurrence nearest to ``start``;
   a surface absent from the text raises ValueError (or is dropped and listed, on request);
3. sort by ``(start, end, label)`` and drop exact duplicates (same span and label).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from typing import Any

from rapidscore.ner.formats import Entity


@dataclass
class Repairs:
    """What normalisation changed in one side of one record (or summed over many)."""

    trimmed: int = 0
    reanchored: int = 0
    duplicates: int = 0
    dropped: int = 0
    dropped_entities: list = field(default_factory=list)  # (record id, surface, start, end)

    def add(self, other: Repairs) -> None:
        self.trimmed += other.trimmed
        self.reanchored += other.reanchored
        self.duplicates += other.duplicates
        self.dropped += other.dropped
        self.dropped_entities.extend(other.dropped_entities)

    def to_dict(self) -> dict:
        return {
            "trimmed": self.trimmed,
            "reanchored": self.reanchored,
            "duplicates": self.duplicates,
            "dropped": self.dropped,
            "dropped_entities": [list(x) for x in self.dropped_entities],
        }


def _is_edge_junk(char: str) -> bool:
    return char.isspace() or unicodedata.category(char).startswith("P")


def trim_bounds(surface: str) -> tuple[int, int]:
    """Index range of ``surface`` without leading/trailing whitespace and punctuation."""
    lo, hi = 0, len(surface)
    while lo < hi and _is_edge_junk(surface[lo]):
        lo += 1
    while hi > lo and _is_edge_junk(surface[hi - 1]):
        hi -= 1
    return lo, hi


def _nearest_occurrence(text: str, surface: str, start: int) -> int | None:
    best = None
    at = text.find(surface)
    while at != -1:
        if best is None or abs(at - start) < abs(best - start):
            best = at
        at = text.find(surface, at + 1)
    return best


def normalize_entities(
    entities: list[Entity],
    text: str | None = None,
    *,
    record: Any = None,
    trim: bool = True,
    on_missing_surface: str = "error",
) -> tuple[list[Entity], Repairs]:
    """Normalised copy of one side of one record, and what was repaired.

    Without ``text`` only trimming of a known surface (offsets moved by the trimmed amounts),
    sorting and de-duplication happen. An entity that trims to nothing (only spaces/punctuation)
    is dropped and listed. ``on_missing_surface``: ``"error"`` (default) raises ValueError naming
    the record when a surface is not in the text or offsets without a surface lie beyond it;
    ``"drop"`` drops such entities and lists them in the repairs.
    """
    if on_missing_surface not in ("error", "drop"):
        raise ValueError(f"on_missing_surface must be 'error' or 'drop', got {on_missing_surface!r}")
    repairs = Repairs()
    where = f"record {record!r}" if record is not None else "input"
    out = []
    for ent in entities:
        start, end, surface = ent.start, ent.end, ent.surface
        if start == end or surface == "":
            if on_missing_surface == "error":
                raise ValueError(f"{where}: entity ({start}, {end}, {ent.label!r}) is empty")
            repairs.dropped += 1
            repairs.dropped_entities.append((record, surface, start, end))
            continue
        if text is not None and surface is None:
            if end > len(text):
                if on_missing_surface == "error":
                    raise ValueError(
                        f"{where}: entity ({start}, {end}, {ent.label!r}) lies beyond the text "
                        f"({len(text)} characters) and has no surface to re-anchor"
                    )
                repairs.dropped += 1
                repairs.dropped_entities.append((record, None, start, end))
                continue
            surface = text[start:end]
        if surface is not None and trim:
            lo, hi = trim_bounds(surface)
            if (lo, hi) != (0, len(surface)):
                repairs.trimmed += 1
                if lo == hi:
                    repairs.dropped += 1
                    repairs.dropped_entities.append((record, surface, start, end))
                    continue
                surface = surface[lo:hi]
                start, end = start + lo, start + hi
        if text is not None and surface is not None and text[start:end] != surface:
            anchored = _nearest_occurrence(text, surface, start)
            if anchored is None:
                if on_missing_surface == "error":
                    raise ValueError(
                        f"{where}: entity surface {surface!r} ({ent.start}:{ent.end}, {ent.label!r}) "
                        "does not occur in the text"
                    )
                repairs.dropped += 1
                repairs.dropped_entities.append((record, surface, ent.start, ent.end))
                continue
            repairs.reanchored += 1
            start, end = anchored, anchored + len(surface)
        out.append(Entity(start, end, ent.label, surface=surface, score=ent.score))
    out.sort(key=lambda e: (e.start, e.end, e.label))
    unique: list[Entity] = []
    for ent in out:
        if unique and (unique[-1].start, unique[-1].end, unique[-1].label) == (ent.start, ent.end, ent.label):
            repairs.duplicates += 1
            continue
        unique.append(ent)
    return unique, repairs
