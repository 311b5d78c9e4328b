"""Pure-Python twin of the native refusal-phrase matcher (``rapidscore._core.phrases``,
csrc/core/phrase_match.hpp and csrc/bindings/register_phrases.cpp).

Same contract: ``FuzzyPhraseMatcher(processed_phrases, raw_lengths, threshold)`` with the same
checks and messages, and ``.match(texts, n_threads)`` returning the same three arrays (status
int8, best phrase index int32, best partial_ratio float64). Where the native kernel decides a
text, this twin decides it with rapidfuzz itself: ``partial_ratio`` of the processed text
against every processed phrase, the first best phrase winning, status 1 when that score / 100
exceeds the threshold (the native kernel's pigeonhole filter and bit-parallel LCS compute the
same score and phrase, see the header). Where the native kernel answers 2 ("use the reference
path": non-ASCII text, a text shorter than a raw phrase, a processed text not longer than every
processed phrase) this twin answers 2 too, so callers take the same paths with either.
:mod:`rapidscore.kernels.phrases` runs it when ``RAPIDSCORE_IMPLEMENTATION`` selects the Python
twins or the extension cannot be imported.
"""

from __future__ import annotations

import re

import numpy as np

from rapidscore.kernels.alignment_py import real_arg, str_arg, thread_count

__all__ = ["FuzzyPhraseMatcher", "expand_contractions_ascii", "default_process_ascii"]

BELOW, ABOVE, FALLBACK = 0, 1, 2
MAX_PHRASE_LENGTH = 64

# SELECT's six contraction rules as the native one-pass scan applies them to UTF-8 bytes: a whole
# ASCII word (word characters [A-Za-z0-9_]; every byte of a non-ASCII character is a non-word
# byte), case-insensitive, the apostrophe optional.
_CONTRACTION = re.compile(rb"(?<![A-Za-z0-9_])(?:(can|won|wouldn|don|couldn)'?t|(i)'?m)(?![A-Za-z0-9_])",
                          re.IGNORECASE)
_EXPANSIONS = {b"can": b"cannot", b"won": b"will not", b"wouldn": b"would not", b"don": b"do not",
               b"couldn": b"could not"}
# rapidfuzz's default_process on bytes: ASCII letters and digits lower-cased, every other byte a space.
_PROCESS_TABLE = bytes(c if chr(c).isascii() and chr(c).isalnum() else ord(" ") for c in range(256)).lower()
_PHRASE_CHARACTERS = re.compile(r"[a-z0-9 ]*")


def _expand(match: re.Match) -> bytes:
    stem = match.group(1)
    return b"I am" if stem is None else _EXPANSIONS[stem.lower()]


def _expand_bytes(data: bytes) -> bytes:
    return _CONTRACTION.sub(_expand, data)


def _process_bytes(data: bytes) -> bytes:
    return data.translate(_PROCESS_TABLE).strip(b" ")


def expand_contractions_ascii(text: str) -> str:
    """SELECT's contraction rules applied to ASCII ``text`` (non-ASCII characters pass through)."""
    return _expand_bytes(str_arg(text, "text").encode("utf-8")).decode("utf-8")


def default_process_ascii(text: str) -> str:
    """``rapidfuzz.utils.default_process`` of ASCII ``text`` (as the native helper, each byte of
    a non-ASCII character counts as one non-alphanumeric character)."""
    return _process_bytes(str_arg(text, "text").encode("utf-8")).decode("ascii")


def _str_list(value, name: str) -> list[str]:
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{name} must be a list of str, got {type(value).__name__}")
    return [str_arg(item, f"{name}[{i}]") for i, item in enumerate(value)]


def _raw_lengths(value) -> list[int]:
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"raw_lengths must be a list of int, got {type(value).__name__}")
    lengths: list[int] = []
    for item in value:
        where = f"raw_lengths[{len(lengths)}]"
        if not isinstance(item, int) or isinstance(item, bool):
            raise TypeError(f"{where} must be an int, got {type(item).__name__}")
        if item < 0 or item > np.iinfo(np.int64).max:
            raise ValueError(f"{where} must be an int >= 0, got {item!r}")
        lengths.append(int(item))
    return lengths


class FuzzyPhraseMatcher:
    """Decides ``max_k partial_ratio(text, phrase_k) / 100 > threshold`` for ASCII texts, as the
    native ``FuzzyPhraseMatcher`` does (its constructor's checks, its statuses and scores)."""

    def __init__(self, processed_phrases, raw_lengths, threshold) -> None:
        phrases = _str_list(processed_phrases, "processed_phrases")
        lengths = _raw_lengths(raw_lengths)
        threshold = real_arg(threshold, "threshold")
        if not phrases:
            raise ValueError("at least one phrase is required")
        if len(lengths) != len(phrases):
            raise ValueError("raw_lengths must have one entry per phrase")
        if not 0.0 <= threshold < 1.0:
            raise ValueError("threshold must be in [0, 1)")
        for k, phrase in enumerate(phrases):
            if not 1 <= len(phrase.encode("utf-8")) <= MAX_PHRASE_LENGTH:
                raise ValueError(f"processed phrase {k} must have 1..64 characters")
            if not _PHRASE_CHARACTERS.fullmatch(phrase):
                raise ValueError(f"processed phrase {k} has characters outside [a-z0-9 ]")
            if phrase[0] == " " or phrase[-1] == " ":
                raise ValueError(f"processed phrase {k} has leading/trailing space")
        self._phrases = phrases
        self._threshold = threshold
        self._max_length = max(len(p) for p in phrases)
        self._max_raw_length = max(lengths)

    @property
    def threshold(self) -> float:
        return self._threshold

    def __len__(self) -> int:
        return len(self._phrases)

    def match(self, texts, n_threads=0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per text: status (0 below the threshold, 1 above, 2 undecided: use the reference
        path), best phrase index (-1 unless 1), best partial_ratio (0 unless 1)."""
        from rapidfuzz import fuzz

        thread_count(n_threads, "n_threads", True)
        if not isinstance(texts, list):
            raise TypeError(f"texts must be a list of str, got {type(texts).__name__}")
        for i, item in enumerate(texts):
            if not isinstance(item, str):
                raise TypeError(f"texts[{i}] must be a str, got {type(item)}")
        n = len(texts)
        status = np.zeros(n, dtype=np.int8)
        best_index = np.full(n, -1, dtype=np.int32)
        best_score = np.zeros(n, dtype=np.float64)
        for i, text in enumerate(texts):
            if not text.isascii():  # lone surrogates included: the native kernel cannot encode them
                status[i] = FALLBACK
                continue
            expanded = _expand_bytes(text.encode("ascii"))
            if len(expanded) < self._max_raw_length:  # the reference pads: left to it
                status[i] = FALLBACK
                continue
            processed = _process_bytes(expanded).decode("ascii")
            if len(processed) <= self._max_length:  # rapidfuzz would take the text as the needle
                status[i] = FALLBACK
                continue
            best, best_k = -1.0, -1
            for k, phrase in enumerate(self._phrases):
                score = fuzz.partial_ratio(processed, phrase)
                if score > best:
                    best, best_k = score, k
            if best_k >= 0 and best / 100.0 > self._threshold:
                status[i], best_index[i], best_score[i] = ABOVE, best_k, best
        return status, best_index, best_score
