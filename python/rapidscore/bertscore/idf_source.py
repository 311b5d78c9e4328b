"""The one decision of which idf weights a BERTScore call scores with.

Every way of asking for idf resolves here, once, where the call comes in: ``BERTScore(idf=...)``
(False, True, a dict, an idf file path, a ``DocumentFrequencies``), ``score_iter(idf=...)``,
the CLI's ``--idf`` / ``--idf-file`` (both: the file), the service's ``idf`` / ``idf_file``
(both: the file), Ray's ``idf=`` and the adapters. The result, an :class:`IdfSource`, says which
source runs and gives the signature's idf field; the scorer, the stream and the finishing step
read it and nothing else.

Sources (``IdfSource.kind``) and their signature field:

=============  ==========================================================  ==================
kind           weights                                                     signature
=============  ==========================================================  ==================
none           every token 1 (special tokens 0)                            ``idf:no``
references     idf of the call's own references; with ``counts``: of       ``idf:yes``
               every reference of a stream or dataset, counted first
sentences      idf of ``idf_sents`` (``BERTScore.compute_idf``)            ``idf:yes``
dict           the given token id -> weight dict                           ``idf:dict``
file           document counts from an idf file or a DocumentFrequencies   ``idf:file=<sha8>``
=============  ==========================================================  ==================

``<sha8>``: the first 8 hex digits of :attr:`IdfSource.digest`, the sha256 of the counts as
``DocumentFrequencies.save`` writes them (for a file ``save`` wrote: the file's own sha256), so
that a file and the counts loaded from it sign alike. ``idf:yes`` stays bert-score's meaning
(weights from the references scored), and the reference hash (``BERTScore.hash``) keeps
bert-score's ``_idf`` for every source but ``none``.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import Any

from rapidscore.bertscore.idf import DocumentFrequencies, check_idf_dict

__all__ = ["IdfSource", "resolve_idf_source", "counts_sha256"]

_KINDS = ("none", "references", "sentences", "dict", "file")


def counts_sha256(counts: DocumentFrequencies) -> str:
    """The sha256 of ``counts`` as ``DocumentFrequencies.save`` writes them."""
    return hashlib.sha256(json.dumps(counts.to_dict()).encode("utf-8")).hexdigest()


@dataclass(frozen=True, eq=False)
class IdfSource:
    """Which idf weights run (see the module's table). Frozen, hashable and picklable (it is part
    of ``BERTScoreSettings`` and travels to Ray workers): it holds document counts, a dict or
    sentences, never the derived weights, whose ``defaultdict`` cannot be pickled;
    :meth:`weights` derives them (once per scorer or stream).

    ``counts``: the document counts (kinds ``file``, ``sentences`` once counted, and
    ``references`` counted over a whole stream or dataset first); ``table``: the dict (kind
    ``dict``); ``sentences``: ``idf_sents`` not counted yet (kind ``sentences``: the scorer counts
    them with its tokenizer); ``digest``: the sha256 of what the weights come from (the counts as
    saved, the dict, the sentences; None for none and for each call's references);
    ``path``: the idf file read, if any (for messages). Two sources are equal when their kind
    and digest are: the same weights, whatever object or file they were read from."""

    kind: str
    counts: DocumentFrequencies | None = None
    table: dict | None = None
    digest: str | None = None
    path: str | None = None
    sentences: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"idf source kind must be one of {_KINDS}, got {self.kind!r}")
        if self.digest is None:  # computed once: equality and hashing read it
            object.__setattr__(self, "digest", _content_sha256(self))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IdfSource):
            return NotImplemented
        return (self.kind, self.digest) == (other.kind, other.digest)

    def __hash__(self) -> int:
        return hash((self.kind, self.digest))

    @classmethod
    def none(cls) -> IdfSource:
        return cls("none")

    @classmethod
    def references(cls, counts: DocumentFrequencies | None = None) -> IdfSource:
        """idf from the references being scored: the call's own (``counts`` None), or every
        reference of a stream or dataset, counted in a first pass (``counts``)."""
        return cls("references", counts=counts)

    @classmethod
    def from_sentences(cls, sentences: tuple[str, ...]) -> IdfSource:
        """idf of ``idf_sents`` (``BERTScore(idf=True, idf_sents=...)``), counted by the scorer
        with its tokenizer."""
        return cls("sentences", sentences=tuple(sentences))

    @classmethod
    def from_counts(cls, counts: DocumentFrequencies, path: str | None = None) -> IdfSource:
        return cls("file", counts=counts, digest=counts_sha256(counts), path=path)

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> IdfSource:
        """An idf file, read and validated now (ValueError / FileNotFoundError naming it)."""
        path = os.fspath(path)
        return cls.from_counts(DocumentFrequencies.load(path), path)

    @property
    def enabled(self) -> bool:
        """Whether tokens are weighted by idf at all."""
        return self.kind != "none"

    @property
    def fixed(self) -> bool:
        """Whether the weights are known before the call (otherwise: from each call's references)."""
        return self.kind == "none" or self.counts is not None or self.table is not None

    @property
    def signature_value(self) -> str:
        """The signature's ``idf`` field."""
        if self.kind == "none":
            return "no"
        if self.kind == "dict":
            return "dict"
        if self.kind == "file":
            assert self.digest is not None
            return f"file={self.digest[:8]}"
        return "yes"

    def weights(self) -> dict | None:
        """The fixed weights (token id -> idf; a defaultdict for counts), or None: no idf, or
        idf from each call's references."""
        if self.counts is not None:
            return self.counts.idf()
        return self.table

    def check_model(self, model: str) -> None:
        """ValueError unless counts made with another model's tokenizer are absent (the file named)."""
        if self.counts is not None:
            try:
                self.counts.check_model(model)
            except ValueError as exc:
                raise ValueError(f"{self.path}: {exc}" if self.path else str(exc)) from None

    def describe(self) -> str:
        """How a message names the source."""
        if self.kind == "file":
            return f"idf file {self.path}" if self.path else "idf document counts"
        return {"none": "no idf", "references": "idf from the references", "sentences": "idf from idf_sents",
                "dict": "an idf dict"}[self.kind]


def _content_sha256(source: IdfSource) -> str | None:
    """The sha256 of what ``source``'s weights come from, or None (no idf; each call's references)."""
    if source.counts is not None:
        return counts_sha256(source.counts)
    if source.table is not None:
        items = sorted((int(token), float(weight)) for token, weight in source.table.items())
        return hashlib.sha256(json.dumps(items).encode("utf-8")).hexdigest()
    if source.sentences is not None:
        return hashlib.sha256(json.dumps(list(source.sentences), ensure_ascii=False).encode(
            "utf-8", "surrogatepass")).hexdigest()
    return None


def resolve_idf_source(idf: Any = False, idf_file: str | os.PathLike | None = None) -> IdfSource:
    """The :class:`IdfSource` of any spelling: ``idf`` False / None (no idf), True (from the
    references), a dict token id -> weight, an idf file path (str or ``os.PathLike``), a
    ``DocumentFrequencies``, or an ``IdfSource``; ``idf_file``: an idf file given beside a
    boolean ``idf`` (the CLI's ``--idf-file``, the service's ``idf_file``). An idf file implies
    idf: ``idf_file`` with ``idf`` True or False is the file. With a dict or counts as ``idf``
    it is a ValueError (two sets of weights)."""
    if idf_file is not None:
        if not isinstance(idf, (bool, type(None))):
            raise ValueError(f"give idf weights ({type(idf).__name__}) or an idf file ({os.fspath(idf_file)}), "
                             "not both")
        return IdfSource.from_file(idf_file)
    if isinstance(idf, IdfSource):
        return idf
    if idf is None or idf is False:
        return IdfSource.none()
    if idf is True:
        return IdfSource.references()
    if isinstance(idf, DocumentFrequencies):
        return IdfSource.from_counts(idf)
    if isinstance(idf, dict):
        return IdfSource("dict", table=check_idf_dict(idf))
    if isinstance(idf, (str, os.PathLike)):
        return IdfSource.from_file(idf)
    raise TypeError(f"idf must be a bool, a dict token id -> weight, an idf file path or a DocumentFrequencies, "
                    f"got {type(idf).__name__}")
