"""Wrapper of the refusal-phrase matcher, used by
:class:`rapidscore.abstention.detectors.KeywordMatcher`: the native kernel
(``rapidscore._core.phrases``, csrc/core/phrase_match.hpp) or its pure-Python twin
(:mod:`rapidscore.kernels.phrases_py`), as ``RAPIDSCORE_IMPLEMENTATION`` chooses
(:mod:`rapidscore.kernels._native`) when a matcher is made or a helper called.

``FuzzyPhraseMatcher(processed_phrases, raw_lengths, threshold)`` decides
``max_k partial_ratio(text, phrase_k) / 100 > threshold`` exactly for ASCII texts;
``.match(texts, threads)`` returns (status int8: 0 below, 1 above, 2 needs the reference
path; best phrase index int32; best partial_ratio float64) per text, the same arrays from
either implementation. The two text helpers are SELECT's contraction rules and rapidfuzz's
``default_process`` for ASCII text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Union

import numpy as np

from rapidscore.kernels import _native
from rapidscore.threads import lease, num_threads_or_alias

__all__ = ["FuzzyPhraseMatcher", "PhraseMatcher", "match_phrases", "expand_contractions_ascii",
           "default_process_ascii"]

if TYPE_CHECKING:  # the native class as a type lives in the stub (_core.pyi)
    from rapidscore._core import _Phrases
    from rapidscore.kernels import phrases_py

# A matcher of either implementation (the same constructor, ``threshold``, ``len`` and ``match``).
PhraseMatcher = Union["_Phrases.FuzzyPhraseMatcher", "phrases_py.FuzzyPhraseMatcher"]


def FuzzyPhraseMatcher(processed_phrases: list[str], raw_lengths: list[int],
                       threshold: float) -> PhraseMatcher:
    """A phrase matcher of the implementation in use: ``processed_phrases`` rapidfuzz-processed
    (1..64 characters of [a-z0-9 ]), ``raw_lengths`` each phrase's length before processing,
    ``threshold`` in [0, 1)."""
    if _native.implementation() == "native":
        return _native.core().phrases.FuzzyPhraseMatcher(processed_phrases, raw_lengths, threshold)
    from rapidscore.kernels import phrases_py

    return phrases_py.FuzzyPhraseMatcher(processed_phrases, raw_lengths, threshold)


def match_phrases(matcher: PhraseMatcher, texts: list[str], num_threads: int | None = None, *,
                  n_threads: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``matcher.match(texts, threads)`` with at most ``num_threads`` threads leased from the
    process's budget (None: as many as the budget allows). ``n_threads``: the deprecated alias of
    ``num_threads`` (DeprecationWarning; its 0 = None)."""
    with lease(num_threads_or_alias(num_threads, n_threads, where="match_phrases")) as granted:
        return matcher.match(texts, granted)


def expand_contractions_ascii(text: str) -> str:
    """SELECT's contraction rules applied to ASCII ``text``."""
    if _native.implementation() == "native":
        return _native.core().phrases.expand_contractions_ascii(text)
    from rapidscore.kernels import phrases_py

    return phrases_py.expand_contractions_ascii(text)


def default_process_ascii(text: str) -> str:
    """``rapidfuzz.utils.default_process`` of ASCII ``text``."""
    if _native.implementation() == "native":
        return _native.core().phrases.default_process_ascii(text)
    from rapidscore.kernels import phrases_py

    return phrases_py.default_process_ascii(text)
