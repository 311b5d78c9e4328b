"""Streams of items for every metric: validated pairs, chunks under a budget, and a bounded LRU
cache keyed by text.

Imports nothing heavy: the metric engines (``BERTScore.score_iter``,
``SentenceSimilarity.score_iter``, ``rapidscore.streaming``) and the streaming CLI build on it.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

__all__ = ["check_pair", "iter_pairs", "chunks", "BoundedCache", "is_one_shot", "HeldItem", "item_sha256",
           "held_items", "item_chars", "MAX_CHUNK_CHARS"]

# Characters of text a chunk of a stream holds at most (an item over it alone is a chunk of its
# own): text costs memory of its own (1-4 bytes a character, more while it is tokenised), whatever
# a metric's token budget, e.g. rows each a few MB of text that truncation cuts to 512 tokens.
MAX_CHUNK_CHARS = 32 * 2**20


def check_pair(item: Any, index: int, names: tuple[str, str] = ("candidate", "reference")) -> tuple[str, list[str]]:
    """One stream item as ``(text, [reference, ...])``.

    An item is a ``(text, reference)`` pair (tuple, list or 2-element array) whose reference is a
    string or a non-empty list of strings. TypeError / ValueError name the item's index.
    """
    first, second = names
    if isinstance(item, Mapping):  # item[0] of a dict was a bare KeyError: 0
        raise TypeError(f"item {index} must be a ({first}, {second}) pair, got a dict with keys {list(item)!r:.80}; "
                        f"pass tuples, e.g. ((row[{first!r}], row[{second!r}]) for row in rows)")
    if isinstance(item, (str, bytes)) or (not isinstance(item, Sequence) and not hasattr(item, "__len__")):
        raise TypeError(f"item {index} must be a ({first}, {second}) pair, got {type(item).__name__}: {item!r:.80}")
    try:
        size = len(item)
    except TypeError:
        raise TypeError(f"item {index} must be a ({first}, {second}) pair, got {type(item).__name__}") from None
    if size != 2:
        raise ValueError(f"item {index} must be a ({first}, {second}) pair, got {size} values")
    text, refs = item[0], item[1]
    if not isinstance(text, str):
        raise TypeError(f"item {index}: the {first} must be a str, got {type(text).__name__}: {text!r:.80}")
    if isinstance(refs, str):
        return str(text), [str(refs)]
    if not hasattr(refs, "__iter__") or isinstance(refs, (bytes, dict)):
        raise TypeError(f"item {index}: the {second} must be a str or a list of str, got {type(refs).__name__}: "
                        f"{refs!r:.80}")
    group = list(refs.tolist() if hasattr(refs, "tolist") else refs)
    if not group:
        raise ValueError(f"item {index}: empty list of {second}s")
    for position, ref in enumerate(group):
        if not isinstance(ref, str):
            raise TypeError(f"item {index}: {second} {position} must be a str, got {type(ref).__name__}: {ref!r:.80}")
    return str(text), [str(ref) for ref in group]


def iter_pairs(pairs: Iterable, names: tuple[str, str] = ("candidate", "reference"),
               start: int = 0) -> Iterator[tuple[str, list[str]]]:
    """:func:`check_pair` over an iterable (items numbered from ``start``)."""
    for index, item in enumerate(pairs, start):
        yield check_pair(item, index, names)


def item_sha256(item: Sequence) -> bytes:
    """The SHA-256 of an item as read: its text and references (not an id column), as one JSON
    list; a :class:`HeldItem` carries the digest of the item it was cut from. A resume compares
    the running digest of these over the rows written."""
    held = getattr(item, "input_sha256", None)
    if held is not None:
        return held
    # surrogatepass: a lone surrogate a JSON escape put in the input is hashed, not an encoding error
    return hashlib.sha256(json.dumps([item[0], list(item[1])], ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8", "surrogatepass")).digest()


class HeldItem(tuple):
    """A ``(text, [references])`` item as a stream holds it: texts that are only partly read
    (a truncated text's first pieces) cut to that part, and ``input_sha256`` the digest of the
    item as read (:func:`item_sha256`), so a resume still checks the input's own rows."""

    input_sha256: bytes

    def __new__(cls, text: str, refs: list[str], input_sha256: bytes) -> HeldItem:
        item = super().__new__(cls, (text, refs))
        item.input_sha256 = input_sha256
        return item


def held_items(items: Iterable[tuple[str, list[str]]], held_text: Callable[[str], str],
               longer_than: int) -> Iterator[tuple[str, list[str]]]:
    """``items`` with every text of more than ``longer_than`` characters replaced by
    ``held_text(text)`` (the part a metric reads: for a truncated text, the prefix that tokenises
    the same): what a stream holds of an item is then bounded by the metric, not the input.
    Such items become :class:`HeldItem`; the others pass unchanged."""
    for item in items:
        text, refs = item[0], item[1]
        if len(text) <= longer_than and all(len(ref) <= longer_than for ref in refs):
            yield item
            continue
        digest = item_sha256(item)
        cut = [held_text(t) if len(t) > longer_than else t for t in (text, *refs)]
        del item, text, refs  # the whole texts go now, not when the next item is read
        yield HeldItem(cut[0], cut[1:], digest)


def item_chars(item: tuple[str, list[str]]) -> int:
    """Characters an item holds (its text and references)."""
    return len(item[0]) + sum(len(ref) for ref in item[1])


def is_one_shot(iterable: Iterable) -> bool:
    """Whether ``iterable`` can be read only once (an iterator or generator, not a list)."""
    return iter(iterable) is iterable


def chunks(items: Iterable, max_items: int, cost: Callable[[Any], int] | None = None,
           max_cost: int | None = None) -> Iterator[list]:
    """Consecutive lists of at most ``max_items`` items whose summed ``cost`` stays within
    ``max_cost`` (an item costing more than the budget alone is a chunk of its own). Reads the
    input lazily: one chunk is held at a time."""
    if max_items < 1:
        raise ValueError(f"max_items must be >= 1, got {max_items}")
    iterator = iter(items)
    if cost is None or max_cost is None:
        while True:
            chunk = list(itertools.islice(iterator, max_items))
            if not chunk:
                return
            yield chunk
    chunk, spent = [], 0
    for item in iterator:
        item_cost = cost(item)
        if chunk and (len(chunk) >= max_items or spent + item_cost > max_cost):
            yield chunk
            chunk, spent = [], 0
        chunk.append(item)
        spent += item_cost
    if chunk:
        yield chunk


class BoundedCache:
    """A least-recently-used ``key -> value`` map holding at most ``capacity`` units of ``size``
    (tokens, bytes). ``capacity=0`` keeps nothing. Not thread-safe: one per stream."""

    def __init__(self, capacity: int, size: Callable[[Any], int]):
        if capacity < 0:
            raise ValueError(f"cache capacity must be >= 0, got {capacity}")
        self.capacity, self._size = int(capacity), size
        self._values: OrderedDict = OrderedDict()
        self.used = 0
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, key) -> bool:
        return key in self._values

    def get(self, key) -> Any:
        """The value (marked recently used), or None."""
        value = self._values.get(key)
        if value is None:
            self.misses += 1
            return None
        self.hits += 1
        self._values.move_to_end(key)
        return value

    def put(self, key, value) -> None:
        size = self._size(value)
        if size > self.capacity or key in self._values:
            return
        self._values[key] = value
        self.used += size
        while self.used > self.capacity:
            _key, old = self._values.popitem(last=False)
            self.used -= self._size(old)
