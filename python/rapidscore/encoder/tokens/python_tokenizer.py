"""A transformers Python tokenizer behind the part of ``tokenizers.Tokenizer`` that
``BatchTokenizer`` uses.

Some families of bert-score's table have no Rust tokenizer: XLM (Moses pre-tokenisation, then BPE)
and ProphetNet (its own WordPiece with [X_SEP]). bert-score tokenizes them with transformers'
Python classes, and so does rapidscore: the same ids, token for token, at Python speed. Loading
one needs transformers (and XLM's needs sacremoses), not torch.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

# A cache entry keeps such a tokenizer as transformers saves it, in this folder.
SAVED_DIRECTORY = "python_tokenizer"


@dataclass
class Encoding:
    """What ``BatchTokenizer`` reads of a ``tokenizers.Encoding``."""

    ids: list[int]
    overflowing: list[int] = field(default_factory=list)


class PythonTokenizer:
    """Encodes as bert-score does: ``encode(text, add_special_tokens=True, max_length=L,
    truncation=True)`` keeps the first L minus the special tokens' count of the text's tokens.

    Thread-safe: calls are serialised (the Python tokenizers keep caches of their own)."""

    def __init__(self, tokenizer) -> None:
        self._tokenizer = tokenizer
        self._specials = int(tokenizer.num_special_tokens_to_add(pair=False))
        self._max_length: int | None = None
        self._lock = threading.Lock()

    @classmethod
    def load(cls, source) -> PythonTokenizer:
        """From a directory saved by transformers, or a transformers tokenizer object."""
        if isinstance(source, (str, os.PathLike)):
            from transformers import AutoTokenizer

            return cls(AutoTokenizer.from_pretrained(str(source), use_fast=False, trust_remote_code=False))
        return cls(source)

    @staticmethod
    def is_source(source) -> bool:
        """Whether ``source`` (a LoadedModel's tokenizer_source) is a Python tokenizer."""
        if isinstance(source, Path):
            return source.is_dir()
        return not isinstance(source, str)

    def no_padding(self) -> None:
        """Never pads (``BatchTokenizer`` pads its batches itself)."""

    def enable_truncation(self, max_length: int) -> None:
        self._max_length = int(max_length)

    def no_truncation(self) -> None:
        self._max_length = None

    def encode(self, text: str, add_special_tokens: bool = True) -> Encoding:
        """One text's token ids (truncated as set) and what truncation cut off. Named and called
        as ``tokenizers.Tokenizer.encode`` (``BatchTokenizer`` calls either): tokenisation only."""
        with self._lock:
            content = list(self._tokenizer.encode(text, add_special_tokens=False))
            limit = None
            if self._max_length is not None:
                limit = max(self._max_length - (self._specials if add_special_tokens else 0), 0)
            overflowing = content[limit:] if limit is not None and len(content) > limit else []
            if overflowing:
                content = content[:limit]
            ids = self._tokenizer.build_inputs_with_special_tokens(content) if add_special_tokens else content
        return Encoding([int(i) for i in ids], overflowing)

    def encode_batch(self, texts: list[str], add_special_tokens: bool = True) -> list[Encoding]:
        """``encode`` of each text, as ``tokenizers.Tokenizer.encode_batch``."""
        return [self.encode(text, add_special_tokens) for text in texts]

    def content_ids(self, text: str) -> list[int]:
        """The tokens of ``text`` without special tokens or truncation (a piece of a long text,
        ``rapidscore.encoder.tokens.bounded``)."""
        with self._lock:
            return [int(i) for i in self._tokenizer.encode(text, add_special_tokens=False)]

    def frame(self, content: list[int]) -> list[int]:
        """``content`` with the special tokens ``encode`` adds around a text's tokens."""
        with self._lock:
            return [int(i) for i in self._tokenizer.build_inputs_with_special_tokens(content)]

    @property
    def family(self) -> str:
        """The transformers class (``XLMTokenizer``, ``ProphetNetTokenizer``, ``ByT5Tokenizer``...)."""
        return type(self._tokenizer).__name__

    def added_token_contents(self) -> list[str]:
        """The texts of the tokens transformers splits off before tokenising (special ones included)."""
        with self._lock:
            return [str(token) for token in self._tokenizer.added_tokens_decoder.values()]

    def id_to_token(self, token_id: int) -> str | None:
        with self._lock:
            return self._tokenizer.convert_ids_to_tokens(int(token_id))
