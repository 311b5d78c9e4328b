"""Streams of items for every metric: validated pairs, chunks under a budget, and a bounded LRU
cache keyed by text.

Imports nothing heavy: the metric engines (``BERTScore.score_iter``,
``SentenceSimilarity.score_iter``, ``rapidscore.streaming``) and the streaming CLI build on it.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

__all__ = ["check_pair", "iter_pairs", "chunks", "BoundedCache", "is_one_shot"]


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
