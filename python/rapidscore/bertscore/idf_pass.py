"""The idf weights a BERTScore stream scores with: a first pass counting documents over a
stream's references (``document_frequencies``), and the choice between given counts, an idf
file, the scorer's own weights and that first pass (``resolve_idf``)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from rapidscore.bertscore.idf import DocumentFrequencies
from rapidscore.bertscore.idf_source import IdfSource, resolve_idf_source
from rapidscore.common.stream import MAX_CHUNK_CHARS, chunks, is_one_shot, item_chars, iter_pairs
from rapidscore.errors import check_positive_int

if TYPE_CHECKING:
    from rapidscore.bertscore.scorer import BERTScore

__all__ = ["document_frequencies", "resolve_idf"]


def document_frequencies(scorer: BERTScore, pairs: Iterable, *, chunk_size: int = 4096,
                         digest: Any = None) -> DocumentFrequencies:
    """The first idf pass: document counts over the references of ``pairs`` (every reference of
    every pair is a document, duplicates counted, as ``BERTScore.score`` computes idf).
    ``digest``: a ``hashlib`` object updated with each pair's references as read (one JSON list
    and a newline per pair), so that a resume can tell whether idf came from the same column."""
    counts = DocumentFrequencies(tokenizer=scorer.model_name)
    size = check_positive_int(chunk_size, "chunk_size")
    for chunk in chunks(iter_pairs(pairs), size, item_chars, MAX_CHUNK_CHARS):  # rows of MBs: a few at a time
        if digest is not None:
            for _cand, refs in chunk:
                digest.update(json.dumps(list(refs), ensure_ascii=False, separators=(",", ":")).encode(
                    "utf-8", "surrogatepass") + b"\n")
        counts.add(scorer.encoder.tokenizer.encode([r.strip() for _cand, refs in chunk for r in refs])[0])
    return counts


def resolve_idf(scorer: BERTScore, pairs: Iterable, idf) -> tuple[IdfSource, dict | None]:
    """The idf source of a stream and its weights: ``idf`` (a DocumentFrequencies, a dict token
    id -> weight, the path of an idf file, an ``IdfSource``), else the scorer's own (an idf file,
    a dict, ``idf_sents``), else, for ``idf=True``, a first pass over the stream's references
    (which needs a re-iterable input: a list, a tuple, a file reader that can start again)."""
    own = scorer.idf_source
    if not own.enabled:
        if idf is not None:
            raise ValueError("idf= was given but the scorer was created with idf=False")
        return own, None
    source = None if idf is None or idf is True else resolve_idf_source(idf)  # True: the scorer's own
    if source is not None:
        if not source.enabled:
            raise ValueError(f"idf={idf!r} gives no weights: leave it out (the scorer's own), or create the scorer "
                             "with idf=False")
        if source.fixed:
            source.check_model(scorer.model_name)  # any name of the model: "all-MiniLM-L6-v2" = its hub id
            return source, source.weights()
    if scorer.idf_dict is not None:
        return own, scorer.idf_dict
    if is_one_shot(pairs):
        raise ValueError("idf=True over a one-shot iterator needs a first pass over the references: pass a "
                         "re-iterable input (a list, or a DocumentFrequencies / idf file from "
                         "rapidscore.bertscore.document_frequencies)")
    counts = document_frequencies(scorer, pairs)
    return IdfSource.references(counts), counts.idf()
