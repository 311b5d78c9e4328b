"""The idf weights a BERTScore stream scores with: a first pass counting documents over a
stream's references (``document_frequencies``), and the choice between given counts, an idf
file, the scorer's own weights and that first pass (``resolve_idf``)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from rapidscore.bertscore.idf import DocumentFrequencies
from rapidscore.common.stream import chunks, is_one_shot, iter_pairs
from rapidscore.errors import check_positive_int

# The scorer is passed in, not imported: scorer.py imports the streaming module, which imports this.
BERTScore = Any

__all__ = ["document_frequencies", "resolve_idf"]


def document_frequencies(scorer: BERTScore, pairs: Iterable, *, chunk_size: int = 4096) -> DocumentFrequencies:
    """The first idf pass: document counts over the references of ``pairs`` (every reference of
    every pair is a document, duplicates counted, as ``BERTScore.score`` computes idf)."""
    counts = DocumentFrequencies(tokenizer=scorer.model_name)
    for chunk in chunks(iter_pairs(pairs), check_positive_int(chunk_size, "chunk_size")):
        counts.add(scorer.encoder.tokenizer.encode([r.strip() for _cand, refs in chunk for r in refs])[0])
    return counts


def resolve_idf(scorer: BERTScore, pairs: Iterable, idf) -> dict | None:
    """The idf weights a stream scores with: ``idf`` (a DocumentFrequencies, a dict token id ->
    weight, or the path of an idf file), else the scorer's own (a dict, ``idf_sents``), else,
    for ``idf=True``, a first pass over the stream's references (which needs a re-iterable
    input: a list, a tuple, a file reader that can start again)."""
    if scorer.idf is False:
        if idf is not None:
            raise ValueError("idf= was given but the scorer was created with idf=False")
        return None
    if idf is not None:
        if isinstance(idf, (str, os.PathLike)):
            idf = DocumentFrequencies.load(idf)
        if isinstance(idf, DocumentFrequencies):
            idf.check_model(scorer.model_name)  # any name of the model: "all-MiniLM-L6-v2" = its hub id
            return idf.idf()
        if isinstance(idf, dict):
            return idf
        raise TypeError(f"idf must be a DocumentFrequencies, a dict or an idf file path, got {type(idf).__name__}")
    if scorer.idf_dict is not None:
        return scorer.idf_dict
    if is_one_shot(pairs):
        raise ValueError("idf=True over a one-shot iterator needs a first pass over the references: pass a "
                         "re-iterable input (a list, or a DocumentFrequencies / idf file from "
                         "rapidscore.bertscore.document_frequencies)")
    return document_frequencies(scorer, pairs).idf()
