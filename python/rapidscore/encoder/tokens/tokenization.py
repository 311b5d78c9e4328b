"""Batch tokenisation with the Rust ``tokenizers`` library, with counted truncation; and the
tokenizer settings of sentence-transformers models (``prompt_token_count``,
``lowercase_tokenizer_json``)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rapidscore.encoder.tokens.bounded import (
    FIRST_PIECE_FACTOR,
    MAX_UNCUT_CHARS,
    AddedToken,
    PieceTokenizer,
    rules_for_python,
    rules_from_json,
    rust_added_tokens,
)
from rapidscore.encoder.tokens.windows import check_window_texts, split_windows


@dataclass(frozen=True)
class TokenizerSpec:
    """What the runtime needs to know about a tokenizer besides tokenizer.json."""

    max_length: int
    pad_id: int
    special_ids: tuple[int, ...]
    cls_id: int | None
    sep_id: int | None

    def to_json(self) -> dict:
        return {
            "max_length": self.max_length, "pad_id": self.pad_id, "special_ids": list(self.special_ids),
            "cls_id": self.cls_id, "sep_id": self.sep_id,
        }

    @classmethod
    def from_json(cls, data: dict) -> TokenizerSpec:
        return cls(
            max_length=int(data["max_length"]), pad_id=int(data["pad_id"]),
            special_ids=tuple(int(i) for i in data["special_ids"]),
            cls_id=data.get("cls_id"), sep_id=data.get("sep_id"),
        )


class BatchTokenizer:
    """Turns texts into token id arrays (special tokens added, truncated to ``max_length``, or
    whole with ``truncate=False``: the windows of ``long_texts="window"`` cut them later).

    A truncated text longer than ``piece_chars`` (16 x max_length) characters is tokenised in
    bounded pieces that stop past the truncation point, with the same ids and truncation count
    as the whole text (``rapidscore.encoder.tokens.bounded``): memory in proportion to max_length. A
    text the tokenizer cannot cut safely is tokenised whole up to ``MAX_UNCUT_CHARS``
    characters, and refused beyond (ValueError naming it); so is, with ``truncate=False``, a
    text over ``windows.MAX_WINDOW_TEXT_CHARS`` (its every token is embedded).
    """

    def __init__(self, tokenizer_json: Path | str, spec: TokenizerSpec, max_length: int | None = None, *,
                 truncate: bool = True):
        """``tokenizer_json``: a tokenizer.json path, or its JSON text; or, for families with only a
        Python tokenizer (XLM, ProphetNet), a directory transformers saved it in, or the object."""
        from tokenizers import Tokenizer

        from rapidscore.encoder.tokens.python_tokenizer import PythonTokenizer

        self.spec = spec
        self.max_length = spec.max_length if max_length is None else int(max_length)
        if self.max_length < 2:
            raise ValueError(f"max_length must be >= 2, got {self.max_length}")
        self._tokenizer: Tokenizer | PythonTokenizer
        if PythonTokenizer.is_source(tokenizer_json):
            self._tokenizer = PythonTokenizer.load(tokenizer_json)
        elif isinstance(tokenizer_json, Path):
            self._tokenizer = Tokenizer.from_file(str(tokenizer_json))
        else:
            self._tokenizer = Tokenizer.from_str(tokenizer_json)
        self._tokenizer.no_padding()
        self.truncate = truncate
        if truncate:
            self._tokenizer.enable_truncation(self.max_length)
        else:
            self._tokenizer.no_truncation()
        self._framing: tuple[np.ndarray, np.ndarray] | None = None
        self.piece_chars = FIRST_PIECE_FACTOR * self.max_length
        self._pieces: tuple[PieceTokenizer | None, str] | None = None  # made on the first long text
        self._pieces_lock = threading.Lock()

    def tokenize_ids(self, texts: list[str]) -> tuple[list[np.ndarray], int]:
        """Token ids per text and the number of texts that were truncated."""
        if not self.truncate:  # windows embed every token: a bounded length
            check_window_texts(texts)
        long = [k for k, text in enumerate(texts) if len(text) > self.piece_chars] if self.truncate else []
        short = texts
        if long:
            taken = set(long)
            short = [text for k, text in enumerate(texts) if k not in taken]
        encodings: list
        if len(short) < 32:
            # Small inputs (latency): handing them to the batch call's thread pool costs more than
            # it saves (MiniLM, after a model call: 2 texts 0.22 vs 0.11 ms, 31 texts 1.06 vs 0.96).
            encodings = [self._tokenizer.encode(text, add_special_tokens=True) for text in short]
        else:
            # encode_batch_fast skips character offsets, which nothing here reads: the same ids
            # and overflow, 15% less time (20,000 texts: 0.38 s against 0.44 s on 2 cores)
            batch = getattr(self._tokenizer, "encode_batch_fast", self._tokenizer.encode_batch)
            encodings = batch(short, add_special_tokens=True)
        ids = [np.asarray(enc.ids, dtype=np.int64) for enc in encodings]
        truncated = sum(1 for enc in encodings if enc.overflowing)
        for k in long:  # in input order, so each goes back to its place
            text_ids, cut = self._tokenize_long(texts[k], k)
            ids.insert(k, text_ids)
            truncated += cut
        return ids, truncated

    # The name the metrics' tokenising calls still use: ``tokenize_ids`` (it runs no model).
    encode = tokenize_ids

    def _tokenize_long(self, text: str, index: int) -> tuple[np.ndarray, bool]:
        """(ids, truncated) of a text over ``piece_chars`` characters: in bounded pieces where the
        tokenizer can be cut, else whole up to ``MAX_UNCUT_CHARS``."""
        pieces, reason = self.piece_tokenizer()
        if pieces is not None:
            return pieces.encode(text, index)
        if len(text) > MAX_UNCUT_CHARS:
            raise ValueError(f"text {index}: {len(text):,} characters, over the {MAX_UNCUT_CHARS:,} that are "
                             f"tokenised whole, and this tokenizer cannot be cut into bounded pieces without "
                             f"risking other tokens ({reason}); shorten the text")
        enc = self._tokenizer.encode(text, add_special_tokens=True)
        return np.asarray(enc.ids, dtype=np.int64), bool(enc.overflowing)

    def held_text(self, text: str) -> str:
        """The part of a stripped ``text`` that a stream needs to hold: its shortest prefix read
        by the bounded pieces when that prefix has the same ids and truncation as the whole text
        (a long truncated text: about ``piece_chars`` characters, whatever its length), else
        ``text`` itself. A text that cannot be cut is kept whole (tokenising it names the error)."""
        if not self.truncate or len(text) <= self.piece_chars:
            return text
        pieces, _reason = self.piece_tokenizer()
        if pieces is None:
            return text
        try:
            _ids, truncated, end = pieces.encode_prefix(text, 0)
        except ValueError:  # no safe cut: scoring the text raises, naming it
            return text
        return text[:end] if truncated and end < len(text) else text

    def piece_tokenizer(self) -> tuple[PieceTokenizer | None, str]:
        """What tokenises this tokenizer's long texts in bounded pieces (made on first use), or
        None and the reason it cannot be cut safely."""
        if self._pieces is None:
            with self._pieces_lock:
                if self._pieces is None:
                    self._pieces = self._make_piece_tokenizer()
        return self._pieces

    def _make_piece_tokenizer(self) -> tuple[PieceTokenizer | None, str]:
        from tokenizers import Tokenizer

        from rapidscore.encoder.tokens.python_tokenizer import PythonTokenizer

        content_ids: Callable[[str], list[int]]
        frame = None
        if isinstance(self._tokenizer, PythonTokenizer):
            rules, reason = rules_for_python(
                self._tokenizer.family, [AddedToken(t, False) for t in self._tokenizer.added_token_contents()])
            content_ids, frame = self._tokenizer.content_ids, self._tokenizer.frame
        else:
            normalizer = self._tokenizer.normalizer
            rules, reason = rules_from_json(
                json.loads(self._tokenizer.to_str()), rust_added_tokens(self._tokenizer),
                normalizer.normalize_str if normalizer is not None else None)
            whole = Tokenizer.from_str(self._tokenizer.to_str())  # pieces: no truncation
            whole.no_truncation()
            whole.no_padding()
            content_ids = _content_ids_of(whole)
        if rules is None:
            return None, reason
        try:
            prefix, suffix = self.framing
        except ValueError as error:
            return None, str(error)
        pieces = PieceTokenizer(rules, content_ids, prefix, suffix, self.max_length,
                                        first_chars=self.piece_chars, frame=frame)
        if pieces.keep < 1:
            return None, f"max_length={self.max_length} holds only the special tokens"
        # The pieces' framing must be the tokenizer's own truncation, on a short and a long probe.
        for probe in ("a b", " ".join(["a"] * (2 * self.max_length))):
            enc = self._tokenizer.encode(probe, add_special_tokens=True)
            got, cut = pieces.encode(probe, 0)
            if got.tolist() != list(enc.ids) or cut != bool(enc.overflowing):
                return None, "the special tokens do not frame the truncated text"
        return pieces, ""

    def model_inputs(self, ids: list[np.ndarray], lengths: np.ndarray,
                     offsets: np.ndarray) -> tuple[list[np.ndarray], np.ndarray, list[np.ndarray] | None]:
        """What the model runs for sequences ``ids`` (``lengths``, store ``offsets``): the
        sequences themselves, or, when this tokenizer does not truncate (``long_texts="window"``)
        and a sequence is over ``max_length``, their windows, with each window's destination rows
        in the store (-1: dropped)."""
        if not self.truncate and len(ids) and int(lengths.max()) > self.max_length:
            # Only calls with a long text take this path: others run exactly as with truncation.
            windows = split_windows(ids, offsets, self.max_length, *self.framing)
            inputs = windows.inputs
            return inputs, np.fromiter((len(i) for i in inputs), dtype=np.int64, count=len(inputs)), \
                windows.destinations
        return ids, lengths, None

    @property
    def framing(self) -> tuple[np.ndarray, np.ndarray]:
        """The special tokens the tokenizer puts before and after a sequence's own tokens
        (BERT: [CLS], [SEP]), read off its own output for a probe text: how a window of a long
        text is framed as a model input. ValueError where the output is not such a framing."""
        if self._framing is None:
            probe = "a"
            framed = self._tokenizer.encode(probe, add_special_tokens=True).ids
            plain = self._tokenizer.encode(probe, add_special_tokens=False).ids
            empty = self._tokenizer.encode("", add_special_tokens=True).ids
            starts = [i for i in range(len(framed) - len(plain) + 1) if framed[i:i + len(plain)] == plain]
            if not plain or not starts or framed[:starts[0]] + framed[starts[0] + len(plain):] != empty:
                raise ValueError(f"cannot read the tokenizer's special-token framing ({framed} for {probe!r}, "
                                 f"{plain} without special tokens, {empty} for ''), so long texts cannot be "
                                 "cut into windows; use long_texts='truncate'")
            start = starts[0]
            self._framing = (np.asarray(framed[:start], dtype=np.int64),
                             np.asarray(framed[start + len(plain):], dtype=np.int64))
        return self._framing

    def id_to_token(self, token_id: int) -> str | None:
        return self._tokenizer.id_to_token(int(token_id))


def _content_ids_of(tokenizer) -> Callable[[str], list[int]]:
    """A piece's ids from a ``tokenizers.Tokenizer`` without truncation, special tokens left out."""
    def content_ids(piece: str) -> list[int]:
        return tokenizer.encode(piece, add_special_tokens=False).ids

    return content_ids


def load_spec(path: Path) -> TokenizerSpec:
    with open(path, encoding="utf-8") as handle:
        return TokenizerSpec.from_json(json.load(handle))


def prompt_token_count(ids: Sequence[int] | np.ndarray, special_ids: Sequence[int]) -> int:
    """sentence-transformers' prompt length from the prompt tokenised alone (special tokens
    included): its tokens, less a trailing special token (EOS, SEP)."""
    count = len(ids)
    if count and int(ids[-1]) in set(special_ids):
        count -= 1
    return count


def lowercase_tokenizer_json(tokenizer_json: str) -> str:
    """A tokenizer.json text that lowercases first, as sentence-transformers' do_lower_case does
    (a Lowercase normalizer put before the tokenizer's own, unless that one has a Lowercase)."""
    data = json.loads(tokenizer_json)
    normalizer = data.get("normalizer")
    if _has_lowercase(normalizer):
        return tokenizer_json
    sequence = [{"type": "Lowercase"}]
    if normalizer is not None:
        sequence += list(normalizer["normalizers"]) if normalizer.get("type") == "Sequence" else [normalizer]
    data["normalizer"] = {"type": "Sequence", "normalizers": sequence}
    return json.dumps(data)


def _has_lowercase(normalizer: dict | None) -> bool:
    if not normalizer:
        return False
    if normalizer.get("type") == "Lowercase":
        return True
    return normalizer.get("type") == "Sequence" and any(
        n.get("type") == "Lowercase" for n in normalizer.get("normalizers", []))
