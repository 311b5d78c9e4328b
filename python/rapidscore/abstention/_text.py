"""Text normalisation shared by the refusal detectors (reference and fast path).

SELECT transliterates responses with ``unidecode.unidecode(text, errors="preserve")``. Unidecode
is GPL-licensed, so rapidscore does not depend on it: ``transliterate`` is SELECT's exact function
when unidecode is installed, and the built-in transliteration otherwise (or when the environment
sets ``RAPIDSCORE_TRANSLITERATION=builtin``).

The built-in transliteration is written so that refusal *decisions* equal unidecode's, which
depend on three things: the ASCII letters that can form an English refusal phrase, the
punctuation that joins or splits words (contractions, quotes before ``Abstained``), and lengths
(the heuristic's 300- and 100-character windows). So it maps, per character:

- typographic punctuation, spaces, zero-width characters: explicit table (unidecode's outputs);
- combining marks U+0300-U+036F: dropped ("can'\u0301t" -> "can't"), as unidecode does;
- Latin letters with diacritics, ligatures, fullwidth forms, circled digits: compatibility
  decomposition (NFKD) without marks, plus a table for letters NFKD leaves alone (ß, æ, ø, ł...);
- Greek and Cyrillic: a transliteration table in unidecode's scheme (eta -> e, ha -> kh,
  shcha -> shch), so look-alike letters inside English words ("I cannot" written with a Cyrillic
  "a") match as they do for SELECT;
- other letters and digits (CJK ideographs, kana, Hangul, Arabic, Indic scripts...): anyascii
  (ISC license), with unidecode's layout for ideographs (a capitalised syllable and a space), so
  lengths stay close to unidecode's;
- everything else (emoji, symbols, variation selectors): kept, as ``errors="preserve"`` keeps
  characters unidecode has no table for.

The strings can differ from unidecode's for other letters (a different romanisation), never in
a way that creates or removes an ASCII refusal phrase; ``tests/abstention/test_transliteration``
checks identical decisions on a corpus of hard cases with and without unidecode.
"""

from __future__ import annotations

import os
import re
import unicodedata

_PUNCT = {
    "\u2018": "'", "\u2019": "'", "\u201a": ",", "\u201b": "'", "\u2032": "'", "\u00b4": "'",
    "\u201c": '"', "\u201d": '"', "\u201e": ",,", "\u201f": '"', "\u2033": "''", "\u2034": "'''",
    "\u2035": "`", "\u00ab": "<<", "\u00bb": ">>", "\u2039": "<", "\u203a": ">",
    "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "--", "\u2015": "--",
    "\u2212": "-", "\u2026": "...", "\u2025": "..", "\u2024": ".", "\u2027": ".", "\u2016": "||",
    "\u2017": "_", "\u2020": "+", "\u2021": "++", "\u2022": "*", "\u2023": "*>", "\u00b7": "*",
    "\u203c": "!!", "\u203d": "!?", "\u2047": "??", "\u2048": "?!", "\u2049": "!?", "\u2044": "/",
    "\u2030": "%0", "\u2028": "\n", "\u2029": "\n\n",
    "\u00a0": " ", "\u2000": " ", "\u2001": " ", "\u2002": " ", "\u2003": " ", "\u2004": " ",
    "\u2005": " ", "\u2006": " ", "\u2007": " ", "\u2008": " ", "\u2009": " ", "\u200a": " ",
    "\u202f": " ", "\u205f": " ", "\u3000": " ", "\u200b": " ",
    "\u200c": "", "\u200d": "", "\u200e": "", "\u200f": "", "\u2060": "", "\ufeff": "", "\u00ad": "",
    "\u180e": "",
    "\u00d7": "x", "\u00df": "ss", "\u00e6": "ae", "\u00c6": "AE", "\u0153": "oe", "\u0152": "OE",
    "\u00f8": "o", "\u00d8": "O", "\u0111": "d", "\u0110": "D", "\u0142": "l", "\u0141": "L",
    "\u00f0": "d", "\u00d0": "D", "\u00fe": "th", "\u00de": "Th", "\u0131": "i",
    "\u00a9": "(c)", "\u00ae": "(r)", "\u2122": "(tm)", "\u00bf": "?", "\u00a1": "!", "\u20ac": "EUR",
    # CJK punctuation (full stops and commas are followed by a space in unidecode's table)
    "\u3001": ", ", "\u3002": ". ", "\u3003": '"', "\u3008": "<", "\u3009": "> ", "\u300a": "<<",
    "\u300b": ">> ", "\u300c": "[", "\u300d": "] ", "\u300e": "{", "\u300f": "} ", "\u3010": "[(",
    "\u3011": ")] ", "\u3014": "[", "\u3015": "] ", "\u301c": "~ ", "\u301d": "``", "\u301e": "''",
}
_PUNCT.update({"\u2031": "%00", "\u2036": "``", "\u2037": "```", "\u2038": "^", "\u203b": "*",
               "\u203e": "-", "\u203f": "_", "\u037e": "?",
               # Latin-1 signs and letters NFKD maps elsewhere
               "\u00a8": '"', "\u00af": "-", "\u00b8": ",", "\u00b0": "deg", "\u00b1": "+-", "\u00ac": "!",
               "\u00f7": "/", "\u00a6": "|", "\u00bc": " 1/4", "\u00bd": " 1/2", "\u00be": " 3/4",
               "\u00b5": "u", "\u0138": "k", "\u014a": "NG"})
# C1 controls, bidirectional embeddings and deprecated format characters: dropped
for _cp in (*range(0x80, 0xA0), *range(0x202A, 0x202F), *range(0x206A, 0x2070)):
    _PUNCT[chr(_cp)] = ""

# Greek and Cyrillic in unidecode's transliteration scheme (accented Greek vowels reach this
# table through NFD: their base letter).
_GREEK = dict(zip(
    "ΑΒΓΔΕΖΗΘΙΚΛΜΝΞΟΠΡΣΤΥΦΧΨΩαβγδεζηθικλμνξοπρςστυφχψω",
    ["A", "B", "G", "D", "E", "Z", "E", "Th", "I", "K", "L", "M", "N", "Ks", "O", "P", "R", "S", "T",
     "U", "Ph", "Kh", "Ps", "O",
     "a", "b", "g", "d", "e", "z", "e", "th", "i", "k", "l", "m", "n", "x", "o", "p", "r", "s", "s",
     "t", "u", "ph", "kh", "ps", "o"]))
_CYRILLIC_UPPER = ["A", "B", "V", "G", "D", "E", "Zh", "Z", "I", "I", "K", "L", "M", "N", "O", "P",
                   "R", "S", "T", "U", "F", "Kh", "Ts", "Ch", "Sh", "Shch", "'", "Y", "'", "E", "Iu", "Ia"]
_CYRILLIC_EXTRA = ["Ie", "Io", "Dj", "Gj", "Ie", "Dz", "I", "Yi", "J", "Lj", "Nj", "Tsh", "Kj", "I", "U", "Dzh"]
_CYRILLIC = {}
for _i, _out in enumerate(_CYRILLIC_UPPER):
    _CYRILLIC[chr(0x410 + _i)] = _out
    _CYRILLIC[chr(0x430 + _i)] = _out.lower()
for _i, _out in enumerate(_CYRILLIC_EXTRA):
    _CYRILLIC[chr(0x400 + _i)] = _out
    _CYRILLIC[chr(0x450 + _i)] = _out.lower()

# Combining diacritics dropped by unidecode; U+0363-U+036F are small Latin letters written above.
_COMBINING_LETTERS = dict(zip((chr(c) for c in range(0x363, 0x370)), "aeiouc" "dhmrtvx"))


def _is_ideograph(cp: int) -> bool:
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0xF900 <= cp <= 0xFAFF
            or 0x20000 <= cp <= 0x3134F)


def _other_letter(ch: str) -> str:
    try:
        from anyascii import anyascii
    except ImportError:  # pragma: no cover - anyascii is a dependency of rapidscore
        return ch
    out = anyascii(ch)
    if not out:
        return ch
    cp = ord(ch)
    if _is_ideograph(cp):
        return out.capitalize() + " "
    if 0xAC00 <= cp <= 0xD7A3:  # Hangul syllables: unidecode writes them in lower case
        return out.lower()
    return out


def builtin_char(ch: str) -> str:
    """The built-in transliteration of one non-ASCII character (see the module docstring)."""
    if ch in _PUNCT:
        return _PUNCT[ch]
    if ch in _GREEK:
        return _GREEK[ch]
    if ch in _CYRILLIC:
        return _CYRILLIC[ch]
    cp = ord(ch)
    if 0x300 <= cp <= 0x36F:
        if 0x34F <= cp <= 0x35F:
            return ch  # unidecode has no entry for these: kept
        return _COMBINING_LETTERS.get(ch, "")
    decomposed = unicodedata.normalize("NFKD", ch)
    base = "".join(c for c in decomposed if not unicodedata.combining(c))
    if base and base != ch:
        if base.isascii():
            return base
        if len(base) == 1 and (base in _GREEK or base in _CYRILLIC):  # accented Greek / Cyrillic
            return _GREEK.get(base) or _CYRILLIC[base]
    if unicodedata.category(ch)[0] in "LN" or unicodedata.category(ch) in ("Mn", "Mc"):
        return _other_letter(ch)
    return ch  # errors="preserve": emoji, symbols, variation selectors


_CACHE: dict[str, str] = {}


def builtin_transliterate(text: str) -> str:
    """ASCII transliteration without unidecode (see the module docstring)."""
    if text.isascii():
        return text
    cache = _CACHE
    out = []
    for ch in text:
        if ch < "\x80":
            out.append(ch)
            continue
        mapped = cache.get(ch)
        if mapped is None:
            mapped = cache[ch] = builtin_char(ch)
        out.append(mapped)
    return "".join(out)


_NON_ASCII = re.compile(r"[^\x00-\x7f]+")


def _unidecode_transliterate():
    try:
        from unidecode import unidecode
    except ImportError:
        return None
    cache: dict[str, str] = {}

    def one(ch: str) -> str:
        out = cache.get(ch)
        if out is None:
            out = cache[ch] = unidecode(ch, errors="preserve")
        return out

    def run(match: re.Match) -> str:
        return "".join(map(one, match.group()))

    def transliterate_unidecode(text: str) -> str:
        """``unidecode(text, errors="preserve")``: it maps each character on its own, so only the
        non-ASCII runs are looked up (cached), not every character in Python."""
        return text if text.isascii() else _NON_ASCII.sub(run, text)

    return transliterate_unidecode


# SELECT's own function when unidecode is installed (exact on every script), the built-in one
# otherwise; RAPIDSCORE_TRANSLITERATION=builtin forces the built-in one.
_unidecode = (None if os.environ.get("RAPIDSCORE_TRANSLITERATION", "") == "builtin"
              else _unidecode_transliterate())
transliterate = _unidecode if _unidecode is not None else builtin_transliterate
TRANSLITERATION = "unidecode" if _unidecode is not None else "builtin"


# Unicode White_Space, as the `regex` module's \s (SELECT uses `regex`; Python's `re` \s also
# matches \x1c-\x1f, which `regex` does not).
WHITESPACE_CLASS = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
