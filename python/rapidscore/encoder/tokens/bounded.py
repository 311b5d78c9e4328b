"""Long texts tokenised in bounded pieces: the work (and memory) of a truncated text is in
proportion to the model's maximum length, not to the text.

The ``tokenizers`` library normalises and pre-tokenises a whole text before it truncates (about
150 bytes of memory per character: a 100 MB text needed 13 GB, and aborted the process under a
memory limit). ``PieceTokenizer`` cuts a long text into pieces at *safe cuts*, tokenises piece
after piece without special tokens, and stops once it holds more content tokens than the
truncation keeps; the result is framed with the tokenizer's own special tokens
(``BatchTokenizer.framing``). Pieces start at ``16 x max_length`` characters and double up to
``256 x max_length``, so realistic text takes one piece.

Why the ids are the whole text's, token for token (tests/hardening/test_bounded_tokenization.py
checks it on every tiny family, MiniLM and a SentencePiece precompiled map): a cut at position i
is *safe* when tokenising ``text[:i]`` and ``text[i:]`` separately gives the whole text's tokens,
concatenated. Every stage of the pipelines accepted here (``rules_from_json``) is local at such
a cut:

- the cut is before ASCII whitespace (`` ``, and ``\t \n \r`` where the pre-tokenizer splits on
  them before anything prepends a space or mark to a piece), after a letter, number,
  punctuation mark or symbol that the tokenizer's normaliser leaves non-blank (or, where the
  pre-tokenizer drops whitespace, after whitespace; never between CR and LF, one grapheme);
- normalizers act per character or per grapheme: lowercase (per character in ``tokenizers``),
  NFC/NFD/NFKC/NFKD (whitespace is a starter no character composes with), strip accents, BERT's
  cleaning, SentencePiece's precompiled map (grapheme-wise; the cut is a grapheme boundary),
  right strip, and replacements whose pattern is all whitespace (into whitespace) or has none
  (into non-blank text): no match spans the cut. The character before the cut must not
  normalise to nothing or to a trailing blank (``blank_when_normalized``: NFKC and lowercase
  never do that to a letter, number, punctuation or symbol, SentencePiece's nmt_nfkc map turns
  U+2581 into a space);
- pre-tokenizers split at that whitespace: BERT's, Whitespace(Split), byte-level BPE's regex (no
  match spans "non-space then whitespace", and it has no look-behind), Metaspace with
  ``split=True``; Digits and Punctuation only split further;
- the model (WordPiece, BPE without dropout, Unigram, WordLevel) tokenises each pre-token alone;
- no added token contains whitespace, and none occurs touching the cut (an ``lstrip`` / ``rstrip``
  / ``single_word`` token reads its neighbour);
- truncation keeps the first ``max_length`` minus the special tokens of the concatenated
  content, and the post-processor frames it (checked on two probes when the pieces are made).

A tokenizer outside these rules (a Split regex, Prepend, left strip, transformers' XLM with its
Moses rules) is tokenised whole, up to ``MAX_UNCUT_CHARS`` characters, and refused beyond.

BERT's pipeline (BertNormalizer or lowercase/NFD/strip accents, BertPreTokenizer, WordPiece)
also cuts before punctuation and CJK ideographs (each its own pre-token), inside whitespace runs,
and skips a word longer than the largest piece: WordPiece makes a word of more than
``max_input_chars_per_word`` (100) normalised characters one ``[UNK]`` whatever it holds, so a
100 MB "word" costs a scan. A byte-level BPE or Unigram pre-token has no such property (merges
and Viterbi paths can depend on the whole word), so for those a stretch of more than
``MAX_UNCUT_CHARS`` characters without a safe cut (a 1 MB run with no whitespace) is refused
with a ValueError naming the text, never tokenised differently.
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

# The longest text, or stretch of a text without a safe cut, that is tokenised whole (about
# 150 MB of tokenizer memory): beyond it a ValueError names the text.
MAX_UNCUT_CHARS = 1 << 20
# First piece: characters per token of max_length (English: about 4.5 characters per token, so
# the first piece holds about 3.5 x max_length tokens); pieces double up to LAST_PIECE_FACTOR.
FIRST_PIECE_FACTOR = 16
LAST_PIECE_FACTOR = 256

_ASCII_WHITESPACE = " \t\n\r"
_ASCII_PUNCTUATION = "".join(chr(c) for c in range(33, 127) if not chr(c).isalnum())
# Before a cut: a letter, number, punctuation mark or symbol (never blank after normalisation),
# except U+FFFD (BERT's cleaning drops it) and grapheme "Prepend" letters (they join the next
# character, the cut's whitespace, into one grapheme).
_BEFORE_CUT_CATEGORIES = frozenset({"Lu", "Ll", "Lt", "Lm", "Lo", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe",
                                    "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So"})
_PREPEND_LETTERS = frozenset(map(chr, [0x0D4E, 0x111C2, 0x111C3, 0x1193F, 0x11941, 0x11A3A, *range(0x11A84, 0x11A8A),
                                       0x11D46, 0x11F02]))
# BERT's CJK ideographs (each its own pre-token). tokenizers and transformers disagree on one
# block (0x2B820-0x2B91F), left out of cuts and counted as CJK for words.
_CJK_CERTAIN = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
                (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))
_CJK_ANY = _CJK_CERTAIN + ((0x2B820, 0x2B91F),)
# How far a cut inside whitespace looks for an added token that strips that whitespace.
_STRIP_REACH = 256
_WORD_CATEGORIES = frozenset({"Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Sm", "Sc", "Sk",
                              "So"})


def _ranges_class(ranges) -> str:
    return "".join(f"{re.escape(chr(lo))}-{re.escape(chr(hi))}" for lo, hi in ranges)


def _is_cjk(char: str, ranges=_CJK_ANY) -> bool:
    code = ord(char)
    return any(lo <= code <= hi for lo, hi in ranges)


@functools.cache
def _cjk_punctuation() -> str:
    """Punctuation of the CJK and fullwidth blocks (ideographic full stop and comma, corner
    brackets, fullwidth comma...): BERT splits there."""
    chars = [chr(c) for c in (*range(0x3000, 0x3040), *range(0xFF00, 0xFF66))]
    return "".join(c for c in chars if unicodedata.category(c).startswith("P"))


@functools.cache
def _not_word_char() -> re.Pattern:
    """A character that may end a BERT pre-token (the complement of characters that are certainly
    inside one: letters, marks, numbers, non-ASCII symbols; never whitespace, punctuation, CJK,
    controls or unassigned code points). Built once, on the first long word (~0.3 s)."""
    ranges: list[list[int]] = []
    for code in range(0x110000):
        char = chr(code)
        if (unicodedata.category(char) in _WORD_CATEGORIES and not char.isspace()
                and char not in _ASCII_PUNCTUATION and not _is_cjk(char)):
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1][1] = code
            else:
                ranges.append([code, code])
    return re.compile(f"[^{_ranges_class(ranges)}]")


@dataclass(frozen=True)
class AddedToken:
    content: str
    normalized: bool  # matched on the normalised text


@dataclass(frozen=True)
class CutRules:
    """Where a tokenizer's texts may be cut (see the module's docstring).

    ``cut_chars``: characters a cut may come before. ``after_blank``: a cut may follow
    whitespace (pre-tokenizers that drop it). ``bert``: BERT's pipeline (cuts before punctuation
    and CJK too, long words skipped as one ``unk_id``). ``anywhere``: every position is a cut
    (ByT5's bytes)."""

    cut_chars: str
    after_blank: bool = False
    bert: bool = False
    chinese: bool = False
    anywhere: bool = False
    unk_id: int | None = None
    max_word_chars: int | None = None
    added: tuple[AddedToken, ...] = ()
    words_hold_no_added: bool = False  # every added token holds a character that ends a BERT word
    normalize: Callable[[str], str] | None = field(default=None, compare=False)
    # Letters, numbers, punctuation or symbols this normalizer makes blank or ends with whitespace
    # (SentencePiece's nmt_nfkc map: U+2581 becomes a space): no cut after them.
    blank_when_normalized: frozenset[str] = frozenset()

    def candidates(self) -> re.Pattern:
        chars = self.cut_chars
        if self.bert:
            chars += _ASCII_PUNCTUATION + _cjk_punctuation()
        pattern = f"[{re.escape(chars)}{_ranges_class(_CJK_CERTAIN) if self.chinese else ''}]"
        if not self.after_blank:
            pattern = f"(?<![{re.escape(_ASCII_WHITESPACE)}]){pattern}"
        return re.compile(pattern)


def _replace_is_local(spec: dict) -> bool:
    """A Replace normalizer no match of which spans a cut (pattern all whitespace into
    whitespace, or without whitespace into non-blank text)."""
    pattern, content = spec.get("pattern") or {}, spec.get("content", "")
    if "String" in pattern:
        text = pattern["String"]
        if text and all(c.isspace() for c in text):
            return bool(content) and all(c.isspace() for c in content)
        return bool(text) and not any(c.isspace() for c in text) and bool(content) and \
            not any(c.isspace() for c in content)
    regex = pattern.get("Regex")
    # A regex made of whitespace atoms only (" {2,}", "\s{2,}|[\n\r\t]") matches whitespace only.
    if isinstance(regex, str) and re.fullmatch(r"(?:\\s|\\n|\\r|\\t|\\f|\\v| |\||\(\?:|[()\[\]+*?]|\{\d*,?\d*\})+",
                                               regex):
        try:
            if re.fullmatch(regex, ""):  # an empty match would insert text anywhere
                return False
        except re.error:
            return False
        return bool(content) and all(c.isspace() for c in content)
    return False


def _normalizers(spec: dict | None) -> tuple[list[dict], str | None]:
    """The normalizer chain, or a reason it may not be cut."""
    if spec is None:
        return [], None
    chain = spec.get("normalizers", []) if spec.get("type") == "Sequence" else [spec]
    flat: list[dict] = []
    for step in chain:
        if step.get("type") == "Sequence":
            inner, reason = _normalizers(step)
            if reason:
                return [], reason
            flat += inner
            continue
        kind = step.get("type")
        local = (kind in ("BertNormalizer", "Lowercase", "NFC", "NFD", "NFKC", "NFKD", "StripAccents", "Precompiled")
                 or (kind == "Strip" and not step.get("strip_left", True))  # a piece starts with whitespace
                 or (kind == "Replace" and _replace_is_local(step)))
        if not local:
            return [], f"a {kind} normalizer"
        flat.append(step)
    return flat, None


def _pre_tokenizers(spec: dict | None) -> tuple[str, bool, str | None]:
    """(cut characters, whether whitespace is dropped) of a pre-tokenizer chain, or a reason."""
    if spec is None:
        return "", False, "no pre-tokenizer (the whole text is one word)"
    chain = spec.get("pretokenizers", []) if spec.get("type") == "Sequence" else [spec]
    cut_chars, drops_blank, split = "", False, False
    for step in chain:
        kind = step.get("type")
        if kind in ("Digits", "Punctuation"):  # only split pieces further
            continue
        if split:  # the text is already split at whitespace: later steps work within pieces
            if kind in ("BertPreTokenizer", "Whitespace", "WhitespaceSplit", "Metaspace", "ByteLevel"):
                continue
            return "", False, f"a {kind} pre-tokenizer"
        if kind in ("BertPreTokenizer", "Whitespace", "WhitespaceSplit"):
            cut_chars, drops_blank = _ASCII_WHITESPACE, True
        elif kind == "ByteLevel" and step.get("use_regex", True):
            # add_prefix_space puts a space before a piece unless it starts with one
            cut_chars = " " if step.get("add_prefix_space") else _ASCII_WHITESPACE
        elif kind == "Metaspace" and step.get("split", True):
            cut_chars = " "  # only spaces become the split mark
        else:
            return "", False, f"a {kind} pre-tokenizer" + (" that does not split" if kind in ("ByteLevel", "Metaspace")
                                                          else "")
        split = True
    if not split:
        return "", False, "no pre-tokenizer that splits at whitespace"
    return cut_chars, drops_blank, None


def rules_from_json(data: dict, added: Sequence[AddedToken], normalize: Callable[[str], str] | None,
                    ) -> tuple[CutRules | None, str]:
    """The cut rules of a ``tokenizers`` pipeline (tokenizer.json ``data``), or None and why not."""
    model = data.get("model") or {}
    kind = model.get("type")
    if kind not in ("WordPiece", "BPE", "Unigram", "WordLevel"):
        return None, f"a {kind} model"
    if kind == "BPE" and model.get("dropout"):
        return None, "BPE dropout (random tokens)"
    normalizers, reason = _normalizers(data.get("normalizer"))
    if reason:
        return None, reason
    pre = data.get("pre_tokenizer")
    cut_chars, drops_blank, reason = _pre_tokenizers(pre)
    if reason:
        return None, reason
    if any(any(c.isspace() for c in token.content) for token in added):
        return None, "an added token holding whitespace"
    chinese = any(step.get("type") == "BertNormalizer" and step.get("handle_chinese_chars", True)
                  for step in normalizers)
    bert = (kind == "WordPiece" and (pre or {}).get("type") == "BertPreTokenizer"
            and all(step.get("type") in ("BertNormalizer", "Lowercase", "NFD", "StripAccents") for step in normalizers))
    if chinese and not bert:  # BERT's CJK spacing would put blanks before a cut elsewhere
        return None, "BertNormalizer's CJK spacing outside BERT's pipeline"
    unk_id = max_word_chars = None
    if bert:
        vocab = model.get("vocab") or {}
        unk_id = vocab.get(model.get("unk_token"))
        max_word_chars = model.get("max_input_chars_per_word")
    blank: frozenset[str] = frozenset()
    if normalize is not None and not bert:  # BERT's cuts do not depend on the character before
        blank = _blank_when_normalized(normalize)
    holds_no_added = bool(bert and unk_id is not None and isinstance(max_word_chars, int) and all(
        any(not _certain_word_char(c) for c in token.content) for token in added))
    return CutRules(cut_chars=cut_chars, after_blank=drops_blank, bert=bert, chinese=chinese and bert,
                    unk_id=unk_id, max_word_chars=max_word_chars, added=tuple(added),
                    words_hold_no_added=holds_no_added, normalize=normalize, blank_when_normalized=blank), ""


def _blank_when_normalized(normalize: Callable[[str], str]) -> frozenset[str]:
    """The characters that may precede a cut which ``normalize`` empties or ends with whitespace,
    each normalised alone (the normalizers accepted act per character, or per grapheme, and a
    cut is a grapheme boundary). All of Unicode: about 0.25 s, once per tokenizer."""
    blank = []
    for code in range(0x110000):
        char = chr(code)
        if unicodedata.category(char) in _BEFORE_CUT_CATEGORIES:
            normalized = normalize(char)
            if not normalized or normalized[-1].isspace():
                blank.append(char)
    return frozenset(blank)


def _certain_word_char(char: str) -> bool:
    return (unicodedata.category(char) in _WORD_CATEGORIES and not char.isspace()
            and char not in _ASCII_PUNCTUATION and not _is_cjk(char))


def rules_for_python(family: str, added: Sequence[AddedToken]) -> tuple[CutRules | None, str]:
    """The cut rules of a transformers Python tokenizer (``PythonTokenizer.family``)."""
    if any(any(c.isspace() for c in token.content) for token in added):
        return None, "an added token holding whitespace"
    if family == "ProphetNetTokenizer":  # BERT's basic tokenizer (whitespace dropped) + WordPiece
        return CutRules(cut_chars=_ASCII_WHITESPACE, after_blank=True, added=tuple(added)), ""
    if family == "ByT5Tokenizer":  # one token per UTF-8 byte
        return CutRules(cut_chars=_ASCII_WHITESPACE, after_blank=True, anywhere=True, added=tuple(added)), ""
    return None, f"transformers' {family} (context-dependent pre-tokenisation)"


class PieceTokenizer:
    """Token ids of long texts, truncated to ``max_length``, from bounded pieces.

    ``content_ids(piece)``: a piece's tokens without special tokens or truncation. ``prefix`` /
    ``suffix``: the special tokens framing every text; ``frame(content)``, where given, frames
    the kept tokens instead (transformers' ByT5 adds no ``</s>`` after one the text holds).
    ``first_chars``: the first piece's length in characters (pieces double from there up to 16
    times that)."""

    def __init__(self, rules: CutRules, content_ids: Callable[[str], list[int]], prefix: np.ndarray,
                 suffix: np.ndarray, max_length: int, *, first_chars: int,
                 max_uncut_chars: int = MAX_UNCUT_CHARS, frame: Callable[[list[int]], list[int]] | None = None):
        self.rules = rules
        self._content_ids = content_ids
        self._prefix = [int(i) for i in prefix]
        self._suffix = [int(i) for i in suffix]
        self._frame = frame
        self.keep = max_length - len(self._prefix) - len(self._suffix)  # content tokens kept
        self.first_chars = int(first_chars)
        self.last_chars = self.first_chars * (LAST_PIECE_FACTOR // FIRST_PIECE_FACTOR)
        self.max_uncut_chars = int(max_uncut_chars)
        self._candidates = rules.candidates()
        self._longest_added = max((len(t.content) for t in rules.added), default=0)

    def encode(self, text: str, index: int) -> tuple[np.ndarray, bool]:
        """(ids, truncated) of ``text`` (item ``index`` of the call, for errors)."""
        ids, truncated, _end = self.encode_prefix(text, index)
        return ids, truncated

    def encode_prefix(self, text: str, index: int) -> tuple[np.ndarray, bool, int]:
        """(ids, truncated, end): :meth:`encode`, and where the pieces read stopped. When the text
        is truncated, ``text[:end]`` has the same ids and is truncated too: ``end`` is a safe cut
        (or the end), and the pieces before it already hold more tokens than truncation keeps."""
        content: list[int] = []
        position, size, length = 0, self.first_chars, len(text)
        while position < length and len(content) <= self.keep:
            target = position + size
            end = length
            if target < length:
                found = self._next_cut(text, target, min(length, target + self.last_chars))
                if found is None and self.rules.bert:
                    word = self._long_word(text, position, target)
                    if word is not None:
                        word_start, word_end = word
                        if word_start > position:
                            content += self._content_ids(text[position:word_start])
                        content.append(int(self.rules.unk_id))  # type: ignore[arg-type]
                        position, size = word_end, min(size * 2, self.last_chars)
                        continue
                if found is None:
                    found = self._next_cut(text, target + self.last_chars,
                                           min(length, position + self.max_uncut_chars + 1))
                if found is None and length - position > self.max_uncut_chars:
                    raise ValueError(
                        f"text {index}: {length:,} characters, with no point between characters {position:,} "
                        f"and {position + self.max_uncut_chars:,} where this tokenizer's input can be cut "
                        f"without changing its tokens (whitespace, for most tokenizers); a stretch of more "
                        f"than {self.max_uncut_chars:,} characters is not tokenised whole (memory): break "
                        "the text with whitespace or shorten it")
                if found is not None:
                    end = found
            content += self._content_ids(text[position:end])
            position, size = end, min(size * 2, self.last_chars)
        truncated = len(content) > self.keep
        kept = content[:self.keep]
        ids = self._frame(kept) if self._frame is not None else self._prefix + kept + self._suffix
        return np.asarray(ids, dtype=np.int64), truncated, position

    # -- cuts -----------------------------------------------------------------------------------

    def _next_cut(self, text: str, start: int, stop: int) -> int | None:
        """The first safe cut i with start <= i < stop, or None."""
        if self.rules.anywhere:
            for i in range(start, min(stop, start + 4 * self._longest_added + 2)):
                if not self._touches_added(text, i):
                    return i
        for match in self._candidates.finditer(text, start, stop):
            if self.safe_at(text, match.start()):
                return match.start()
        return None

    def is_cut(self, text: str, i: int) -> bool:
        """Whether the pieces may be cut before character ``i`` (0 < i < len(text)): tokenising
        ``text[:i]`` and ``text[i:]`` gives the tokens of ``text``."""
        if self.rules.anywhere:
            return not self._touches_added(text, i)
        return self._candidates.match(text, i) is not None and self.safe_at(text, i)

    def safe_at(self, text: str, i: int) -> bool:
        """Whether position ``i`` (0 < i < len(text)) is a safe cut (the module's docstring)."""
        if text[i - 1] == "\r" and text[i] == "\n":  # one grapheme (SentencePiece's map reads graphemes)
            return False
        if not self.rules.bert:  # BERT splits before a cut character whatever precedes it
            before = text[i - 1]
            printable = (unicodedata.category(before) in _BEFORE_CUT_CATEGORIES and before != "\ufffd"
                         and before not in _PREPEND_LETTERS and before not in self.rules.blank_when_normalized)
            if not printable and not (self.rules.after_blank and before in _ASCII_WHITESPACE):
                return False
        return not self._touches_added(text, i)

    def _touches_added(self, text: str, i: int) -> bool:
        """Whether an added token occurs covering character i - 1 or i or, where a cut may sit
        inside whitespace, next to that whitespace (an lstrip / rstrip token takes it: a run of
        more than ``_STRIP_REACH`` characters is not followed; its whitespace makes no token,
        so only that added token's character span could differ, which rapidscore never reads)."""
        if not self.rules.added:
            return False
        low = high = i
        if self.rules.after_blank:
            floor, ceiling = max(0, i - _STRIP_REACH), min(len(text), i + _STRIP_REACH)
            while low > floor and text[low - 1].isspace():
                low -= 1
            while high < ceiling and text[high].isspace():
                high += 1
        span = self._longest_added
        start, stop = max(0, low - span), min(len(text), high + span)
        window = text[start:stop]
        folded = window.casefold()
        normalized = None
        for token in self.rules.added:
            for haystack, needle in ((window, token.content), (folded, token.content.casefold())):
                found = haystack.find(needle)
                while found != -1:
                    if start + found <= high and start + found + len(needle) >= low:
                        return True
                    found = haystack.find(needle, found + 1)
            if token.normalized and self.rules.normalize is not None:
                if normalized is None:
                    normalized = self.rules.normalize(window)
                if self.rules.normalize(token.content) in normalized:  # anywhere near: conservative
                    return True
        return False

    def _long_word(self, text: str, position: int, target: int) -> tuple[int, int] | None:
        """BERT: the word around ``target`` (start, end) where it is longer than the largest piece
        and can be taken as the one [UNK] WordPiece makes of a word over max_input_chars_per_word
        characters; None where that cannot be shown safe."""
        rules = self.rules
        if not rules.words_hold_no_added or rules.unk_id is None or rules.max_word_chars is None:
            return None
        not_word = _not_word_char()
        if not_word.match(text, target):
            return None
        found = not_word.search(text, target)
        word_end = len(text) if found is None else found.start()
        if word_end - target <= self.last_chars:
            return None
        word_start = target  # pieces never exceed last_chars, so the word starts after ``position``
        while word_start > position and not not_word.match(text, word_start - 1):
            word_start -= 1
        # Both ends must be characters BERT splits at in any Unicode version, and no added token
        # may touch them (an added token holds a character that ends a word, so none is inside).
        if word_start > 0 and not _splits_bert(text[word_start - 1], rules.chinese):
            return None
        if word_end < len(text) and not _splits_bert(text[word_end], rules.chinese):
            return None
        if any(0 < cut < len(text) and self._touches_added(text, cut) for cut in (word_start, word_end)):
            return None
        sample = text[word_start:min(word_end, word_start + 8 * (rules.max_word_chars + 1))]
        normalized = rules.normalize(sample) if rules.normalize is not None else sample
        if len(normalized) <= rules.max_word_chars:  # mostly characters that normalise away
            return None
        return word_start, word_end


def _splits_bert(char: str, chinese: bool) -> bool:
    """Whether BERT's pre-tokenizer certainly splits at ``char`` (whatever Unicode version)."""
    return (char in _ASCII_WHITESPACE or char in _ASCII_PUNCTUATION or char in _cjk_punctuation()
            or (chinese and _is_cjk(char, _CJK_CERTAIN)))


def rust_added_tokens(tokenizer) -> list[AddedToken]:
    return [AddedToken(token.content, bool(token.normalized))
            for token in tokenizer.get_added_tokens_decoder().values()]


def tokenizer_data(tokenizer) -> dict:
    return json.loads(tokenizer.to_str())

