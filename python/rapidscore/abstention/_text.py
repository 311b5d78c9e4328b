"""Text normalisation shared by the refusal detectors (reference and fast path).

SELECT transliterates responses with ``unidecode.unidecode(text, errors="preserve")``. Unidecode
is GPL-licensed, so rapidscore does not depend on it: when it is importable it is used (exact
SELECT behaviour on every script); otherwise a built-in table covers typographic punctuation
(quotes, apostrophes, dashes, ellipsis, spaces) and Latin letters with diacritics, with the same
outputs as unidecode, and keeps other characters unchanged (``errors="preserve"``).
"""

from __future__ import annotations

import unicodedata

# unidecode outputs for common typographic characters.
_PUNCT = {
    "\u2018": "'", "\u2019": "'", "\u201a": ",", "\u201b": "'", "\u2032": "'", "\u00b4": "'",
    "\u201c": '"', "\u201d": '"', "\u201e": ',,', "\u201f": '"', "\u2033": "''", "\u00ab": "<<",
    "\u00bb": ">>", "\u2039": "<", "\u203a": ">", "\u2010": "-", "\u2011": "-", "\u2012": "-",
    "\u2013": "-", "\u2014": "--", "\u2015": "--", "\u2212": "-", "\u2026": "...",
    "\u00a0": " ", "\u2002": " ", "\u2003": " ", "\u2009": " ", "\u200a": " ", "\u202f": " ",
    "\u200b": "", "\u2022": "*", "\u00b7": "*", "\u00d7": "x", "\u00df": "ss", "\u00e6": "ae",
    "\u00c6": "AE", "\u0153": "oe", "\u0152": "OE", "\u00f8": "o", "\u00d8": "O", "\u0111": "d",
    "\u0110": "D", "\u0142": "l", "\u0141": "L", "\u00f0": "d", "\u00d0": "D", "\u00fe": "th",
    "\u00de": "Th", "\u0131": "i", "\u00a9": "(c)", "\u00ae": "(r)", "\u2122": "(tm)",
    "\u00bf": "?", "\u00a1": "!",
}


def _builtin_char(ch: str) -> str:
    if ch in _PUNCT:
        return _PUNCT[ch]
    decomposed = unicodedata.normalize("NFKD", ch)
    base = "".join(c for c in decomposed if not unicodedata.combining(c))
    if base and base.isascii():
        return base
    return ch  # errors="preserve"


_CACHE: dict[str, str] = {}


def _builtin_transliterate(text: str) -> str:
    out = []
    for ch in text:
        if ch.isascii():
            out.append(ch)
        else:
            mapped = _CACHE.get(ch)
            if mapped is None:
                mapped = _CACHE[ch] = _builtin_char(ch)
            out.append(mapped)
    return "".join(out)


try:  # pragma: no cover - depends on the environment
    from unidecode import unidecode as _unidecode

    def transliterate(text: str) -> str:
        """ASCII transliteration as SELECT does it (unidecode, errors="preserve")."""
        return text if text.isascii() else _unidecode(text, errors="preserve")

    TRANSLITERATION = "unidecode"
except ImportError:

    def transliterate(text: str) -> str:
        """ASCII transliteration of typographic punctuation and Latin diacritics; other
        characters are kept (as unidecode's errors="preserve" would keep unknown ones)."""
        return text if text.isascii() else _builtin_transliterate(text)

    TRANSLITERATION = "builtin"


# Unicode White_Space, as the `regex` module's \s (SELECT uses `regex`; Python's `re` \s also
# matches \x1c-\x1f, which `regex` does not).
WHITESPACE_CLASS = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
