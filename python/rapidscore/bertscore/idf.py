"""Inverse document frequency weights over token ids, as BERTScore defines them."""

from __future__ import annotations

import json
import math
import numbers
import os
from collections import Counter, defaultdict

import numpy as np


def idf_from_ids(documents: list[np.ndarray]) -> defaultdict:
    """idf(w) = ln((M + 1) / (df(w) + 1)) over M documents (token id arrays); df counts each
    document's id *set*. Unseen ids get ln(M + 1). Returned as a defaultdict like the reference."""
    frequencies = DocumentFrequencies()
    frequencies.add(documents)
    return frequencies.idf()


IDF_FORMAT = "rapidscore-idf"
IDF_FORMAT_VERSION = 1


def _model_name(model) -> str | None:
    """The name an idf file records: the embedded model's short name ("all-MiniLM-L6-v2") is
    written as its hub id, so that files of the one model carry one name."""
    if model is None:
        return None
    from rapidscore.encoder.model_source import DEFAULT_MODEL

    name = os.fspath(model)
    return DEFAULT_MODEL if name == DEFAULT_MODEL.rsplit("/", 1)[-1] else name


def _model_identity(model: str) -> str:
    """What two names of one model have in common: the hub id for the embedded model's names
    and its directory, the resolved path for any other existing directory ("dir/", "./dir", a
    link to it), else the name itself."""
    from rapidscore.encoder.model_source import DEFAULT_MODEL, is_embedded_model

    name = _model_name(model)
    assert name is not None
    if is_embedded_model(name):  # the one rule the baselines follow too
        return DEFAULT_MODEL
    return os.path.realpath(name) if os.path.isdir(name) else name


def same_model(a: str, b: str) -> bool:
    """Whether two model names (hub ids or directories) name one model."""
    return a == b or _model_identity(a) == _model_identity(b)


class DocumentFrequencies:
    """Document counts per token id over M documents: what idf is computed from, mergeable.

    Counts add up exactly, so idf over a stream (``add`` chunk by chunk) or over a cluster (one
    ``DocumentFrequencies`` per block, merged) equals idf over the whole list at once.
    Saved as JSON (:meth:`save`, :meth:`load`; format in docs/scale.md). Not thread-safe to
    mutate.
    """

    def __init__(self, counts: dict[int, int] | None = None, n_documents: int = 0, *, tokenizer: str | None = None):
        self.counts: Counter = Counter(counts or {})
        self.n_documents = int(n_documents)
        self.tokenizer = _model_name(tokenizer)  # what produced the ids (model name), checked when loading

    def add(self, documents) -> DocumentFrequencies:
        """Count token id sequences (each a document: its id *set* counts once)."""
        counts = self.counts
        for ids in documents:
            counts.update(set(ids.tolist() if isinstance(ids, np.ndarray) else map(int, ids)))
            self.n_documents += 1
        return self

    def merge(self, other: DocumentFrequencies) -> DocumentFrequencies:
        """Add another block's counts into this one (returns self)."""
        if self.tokenizer and other.tokenizer and not same_model(self.tokenizer, other.tokenizer):
            raise ValueError(f"cannot merge document counts of {other.tokenizer!r} into {self.tokenizer!r}")
        self.counts.update(other.counts)
        self.n_documents += other.n_documents
        self.tokenizer = self.tokenizer or other.tokenizer
        return self

    def check_model(self, model) -> None:
        """ValueError unless these counts were made with ``model``'s tokenizer (any name of the
        model: see :func:`same_model`; counts that name no model pass)."""
        if self.tokenizer and not same_model(self.tokenizer, os.fspath(model)):
            raise ValueError(f"the idf counts were made with {self.tokenizer!r}, the scorer uses {os.fspath(model)!r}")

    def idf(self) -> defaultdict:
        """idf(w) = ln((M + 1) / (df(w) + 1)); unseen ids ln(M + 1) (a defaultdict)."""
        m = self.n_documents
        unseen = math.log(m + 1)
        weights: defaultdict[int, float] = defaultdict(lambda: unseen)
        weights.update({token: math.log((m + 1) / (count + 1)) for token, count in self.counts.items()})
        return weights

    def to_dict(self) -> dict:
        return {"format": IDF_FORMAT, "version": IDF_FORMAT_VERSION, "tokenizer": self.tokenizer,
                "n_documents": self.n_documents,
                "document_counts": {str(token): int(count) for token, count in sorted(self.counts.items())}}

    @classmethod
    def from_dict(cls, data: dict, source: str = "idf data") -> DocumentFrequencies:
        """Counts from the JSON ``save`` writes, validated: every count a non-negative integer no
        larger than ``n_documents`` (JSON's ``Infinity``, ``NaN``, ``true``, ``1.5`` and ``"3"``
        are refused, not converted); a ValueError names ``source`` (the file), the key and the value."""
        if not isinstance(data, dict) or data.get("format") != IDF_FORMAT:
            raise ValueError(f"{source}: not a rapidscore idf file (expected \"format\": \"{IDF_FORMAT}\")")
        version = data.get("version")
        if type(version) is not int or version != IDF_FORMAT_VERSION:  # true == 1 in Python: type first
            raise ValueError(f"{source}: idf file version {_shown(version)}, this rapidscore reads "
                             f"version {IDF_FORMAT_VERSION}")
        for key in ("n_documents", "document_counts"):
            if key not in data:
                raise ValueError(f"{source}: malformed idf file: no key {key!r}")
        n_documents = _count(data["n_documents"], source, "n_documents")
        document_counts = data["document_counts"]
        if not isinstance(document_counts, dict):
            raise ValueError(f"{source}: malformed idf file: \"document_counts\" must be an object token id -> "
                             f"count, got {_shown(document_counts)}")
        tokenizer = data.get("tokenizer")
        if tokenizer is not None and not isinstance(tokenizer, str):
            raise ValueError(f"{source}: malformed idf file: \"tokenizer\" must be a model name or null, got "
                             f"{_shown(tokenizer)}")
        counts = {}
        for token, count in document_counts.items():
            if not (isinstance(token, str) and token.isascii() and token.isdigit()):
                raise ValueError(f"{source}: malformed idf file: key {_shown(token)} of \"document_counts\" is not "
                                 "a token id (a non-negative integer)")
            where = f"document_counts[{_shown(token)}]"
            value = _count(count, source, where)
            if value > n_documents:
                raise ValueError(f"{source}: {where} = {value} is more than n_documents = {n_documents} (a token "
                                 f"occurs in at most every document); document counts must lie in "
                                 f"[0, n_documents={n_documents}]")
            counts[int(token)] = value
        return cls(counts, n_documents, tokenizer=tokenizer)

    def save(self, path) -> None:
        """Write the counts as JSON (atomically: a temporary file renamed into place)."""
        from rapidscore.common.outputs import open_output

        with open_output(path, "idf file") as handle:
            json.dump(self.to_dict(), handle)

    @classmethod
    def load(cls, path) -> DocumentFrequencies:
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no such idf file: {path}")
        try:
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not valid JSON: {exc.msg}") from None
        except UnicodeDecodeError as exc:  # a binary file: the bare error named no file
            raise ValueError(f"{path}: not an idf file: byte {exc.object[exc.start]:#04x} at offset {exc.start} is "
                             "not UTF-8 text (idf files are the JSON that DocumentFrequencies.save writes)") from None
        except RecursionError:
            raise ValueError(f"{path}: not an idf file: JSON nested too deeply") from None
        return cls.from_dict(data, path)

    def __eq__(self, other) -> bool:
        return isinstance(other, DocumentFrequencies) and self.n_documents == other.n_documents and \
            +self.counts == +other.counts

    def __repr__(self) -> str:
        return f"DocumentFrequencies(n_documents={self.n_documents}, tokens={len(self.counts)})"


def _shown(value) -> str:
    """A JSON value as the file spells it (``Infinity``, ``true``, ``"3"``), shortened."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _count(value, source: str, key: str) -> int:
    """``value`` if it is a non-negative JSON integer, else a ValueError naming the file and key."""
    if type(value) is not int or value < 0:
        raise ValueError(f"{source}: {key} = {_shown(value)}: a document count must be a non-negative integer")
    return value


def is_any_of(ids: np.ndarray, values) -> np.ndarray:
    """Boolean mask of ``ids`` equal to one of a few ``values`` (special token ids). One
    comparison per value: for a handful of values this beats np.isin, whose setup dominates the
    short inputs of single-pair latency."""
    mask = np.zeros(len(ids), dtype=bool)
    for value in values:
        mask |= ids == value
    return mask


def token_weights(ids: np.ndarray, idf: dict | None, special_ids: tuple[int, ...]) -> np.ndarray:
    """Per-token weights, float32: with ``idf`` None every token weighs 1 except ``special_ids``
    (0); otherwise the idf value of each id (a plain dict must hold every id that occurs)."""
    if idf is None:
        weights = np.ones(len(ids), dtype=np.float32)
        if len(special_ids):
            weights[is_any_of(ids, special_ids)] = 0.0
        return weights
    unique, inverse = np.unique(ids, return_inverse=True)
    if isinstance(idf, defaultdict):
        values = [idf[int(u)] for u in unique]
    else:
        missing = [int(u) for u in unique if int(u) not in idf]
        if missing:
            raise ValueError(f"idf dict has no weight for token ids {missing[:10]}"
                             f"{' ...' if len(missing) > 10 else ''}; give every id or use a defaultdict")
        values = [idf[int(u)] for u in unique]
    for token, value in zip(unique.tolist(), values):
        if type(value) is not float:  # None and "2.5" would convert silently (to NaN, to 2.5)
            check_idf_weight(token, value)
    with np.errstate(over="ignore", invalid="ignore"):
        table = np.asarray(values, dtype=np.float32)  # beyond float32: inf
    if not np.isfinite(table).all():  # name the first bad weight
        k = int(np.flatnonzero(~np.isfinite(table))[0])
        check_idf_weight(unique[k].item(), values[k])
        raise ValueError(f"idf dict: the weight of token id {unique[k]} is {values[k]!r}, beyond float32")
    return table[inverse]


def check_idf_weight(token, value) -> None:
    """ValueError unless ``value`` is a finite number (None and NaN used to reach the scores as NaN)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"idf dict: the weight of token id {token!r} must be a finite number, got "
                         f"{type(value).__name__}: {value!r}")


def check_idf_dict(idf: dict) -> dict:
    """``idf`` (token id -> weight) with every key an int and every weight a finite number."""
    for token, value in idf.items():
        if isinstance(token, (bool, np.bool_)) or not isinstance(token, numbers.Integral):
            raise TypeError(f"idf dict keys must be int token ids, got {type(token).__name__}: {token!r}")
        check_idf_weight(token, value)
    return idf
