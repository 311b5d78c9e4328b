"""Wrapper of the native refusal-phrase matcher (``rapidscore._core.phrases``,
csrc/core/phrase_match.hpp), used by :class:`rapidscore.abstention.detectors.KeywordMatcher`.

``FuzzyPhraseMatcher(processed_phrases, raw_lengths, threshold)`` decides
``max_k partial_ratio(text, phrase_k) / 100 > threshold`` exactly for ASCII texts;
``.match(texts, threads)`` returns (status int8: 0 below, 1 above, 2 needs the reference
path; best phrase index int32; best partial_ratio float64) per text. The two text helpers are
SELECT's contraction rules and rapidfuzz's ``default_process`` for ASCII text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rapidscore import _core
from rapidscore.threads import lease, num_threads_or_alias

__all__ = ["FuzzyPhraseMatcher", "match_phrases", "expand_contractions_ascii", "default_process_ascii"]

FuzzyPhraseMatcher = _core.phrases.FuzzyPhraseMatcher

if TYPE_CHECKING:  # the class as a type lives in the stub (_core.pyi)
    from rapidscore._core import _Phrases


def match_phrases(matcher: _Phrases.FuzzyPhraseMatcher, texts: list[str], num_threads: int | None = None, *,
                  n_threads: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``matcher.match(texts, threads)`` with at most ``num_threads`` threads leased from the
    process's budget (None: as many as the budget allows). ``n_threads``: the deprecated alias of
    ``num_threads`` (DeprecationWarning; its 0 = None)."""
    with lease(num_threads_or_alias(num_threads, n_threads, where="match_phrases")) as granted:
        return matcher.match(texts, granted)


def expand_contractions_ascii(text: str) -> str:
    """SELECT's contraction rules applied to ASCII ``text``."""
    return _core.phrases.expand_contractions_ascii(text)


def default_process_ascii(text: str) -> str:
    """``rapidfuzz.utils.default_process`` of ASCII ``text``."""
    return _core.phrases.default_process_ascii(text)
