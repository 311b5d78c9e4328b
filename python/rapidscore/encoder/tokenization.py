"""Batch tokenisation with the Rust ``tokenizers`` library, with counted truncation."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np


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
    whole with ``truncate=False``: the windows of ``long_texts="window"`` cut them later)."""

    def __init__(self, tokenizer_json: Path | str, spec: TokenizerSpec, max_length: int | None = None, *,
                 truncate: bool = True):
        """``tokenizer_json``: a tokenizer.json path, or its JSON text; or, for families with only a
        Python tokenizer (XLM, ProphetNet), a directory transformers saved it in, or the object."""
        from tokenizers import Tokenizer

        from rapidscore.encoder.python_tokenizer import PythonTokenizer

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

    def encode(self, texts: list[str]) -> tuple[list[np.ndarray], int]:
        """Token ids per text and the number of texts that were truncated."""
        encodings: list
        if len(texts) < 32:
            # Small inputs (latency): handing them to the batch call's thread pool costs more than
            # it saves (MiniLM, after a model call: 2 texts 0.22 vs 0.11 ms, 31 texts 1.06 vs 0.96).
            encodings = [self._tokenizer.encode(text, add_special_tokens=True) for text in texts]
        else:
            encodings = self._tokenizer.encode_batch(texts, add_special_tokens=True)
        ids = [np.asarray(enc.ids, dtype=np.int64) for enc in encodings]
        truncated = sum(1 for enc in encodings if enc.overflowing)
        return ids, truncated

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


def load_spec(path: Path) -> TokenizerSpec:
    with open(path, encoding="utf-8") as handle:
        return TokenizerSpec.from_json(json.load(handle))
