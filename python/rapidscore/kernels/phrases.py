"""Wrapper of the native refusal-phrase matcher (``rapidscore._core.phrases``,
csrc/core/phrase_match.hpp), used by :class:`rapidscore.abstention.detectors.KeywordMatcher`.

``FuzzyPhraseMatcher(processed_phrases, raw_lengths, threshold)`` decides
``max_k partial_ratio(text, phrase_k) / 100 > threshold`` exactly for ASCII texts;
``.match(texts, n_threads=0)`` returns (status int8: 0 below, 1 above, 2 needs the reference
path; best phrase index int32; best partial_ratio float64) per text. The two text helpers are
SELECT's contraction rules and rapidfuzz's ``default_process`` for ASCII text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rapidscore import _core
from rapidscore.threads import lease, requested_threads

__all__ = ["FuzzyPhraseMatcher", "match_phrases", "expand_contractions_ascii", "default_process_ascii"]

FuzzyPhraseMatcher = _core.phrases.FuzzyPhraseMatcher

if TYPE_CHECKING:  # the class as a type lives in the stub (_core.pyi)
    from rapidscore._core import _Phrases


def match_phrases(matcher: _Phrases.FuzzyPhraseMatcher, texts: list[str],
                  n_threads: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``matcher.match(texts, threads)`` with threads leased from the process's budget
    (``n_threads <= 0``: as many as the budget allows)."""
    with lease(requested_threads(n_threads)) as granted:
        return matcher.match(texts, granted)


def expand_contractions_ascii(text: str) -> str:
    """SELECT's contraction rules applied to ASCII ``text``."""
    return _core.phrases.expand_contractions_ascii(text)


def default_process_ascii(text: str) -> str:
    """``rapidfuzz.utils.default_process`` of ASCII ``text``."""
    return _core.phrases.default_process_ascii(text)
