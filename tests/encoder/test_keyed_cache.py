"""The process-wide caches (``rapidscore.encoder.cache.KeyedCache``): a value dropped from the LRU
while something still holds it is found again, not built a second time (a cached encoder holds
its loaded model: loading it again kept two copies of the weights)."""

from __future__ import annotations

import gc


class Value:
    def __init__(self, key):
        self.key = key


def test_a_dropped_value_still_held_is_found_again_and_a_released_one_is_rebuilt():
    from rapidscore.encoder.cache import KeyedCache

    cache = KeyedCache(2)
    built = []

    def build(key):
        built.append(key)
        return Value(key)

    held = cache.get("a", lambda: build("a"))
    cache.get("b", lambda: build("b"))
    cache.get("c", lambda: build("c"))  # "a" leaves the LRU, but `held` keeps it alive
    assert len(cache) == 2
    assert cache.get("a", lambda: build("a")) is held and built == ["a", "b", "c"]
    assert len(cache) == 2  # back in the LRU ("b" left it)
    del held
    cache.get("d", lambda: build("d"))
    cache.get("e", lambda: build("e"))  # "a" leaves again, and nothing holds it now
    gc.collect()
    cache.get("a", lambda: build("a"))
    assert built == ["a", "b", "c", "d", "e", "a"]
    cache.clear()
    assert len(cache) == 0
