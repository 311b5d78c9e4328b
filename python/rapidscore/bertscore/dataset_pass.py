"""BERTScore's pass over a whole dataset before scoring it: idf document counts of every
reference, counted per block (in parallel where the front end can) and merged
(``BERTScoreMetric.rows.dataset_pass``).

Both functions are module-level (they travel to Ray workers by reference) and thread-safe
(``count_documents`` builds its scorer through ``rapidscore.get_encoder``'s shared cache)."""

from __future__ import annotations

from typing import Any

__all__ = ["count_documents", "merge_document_counts"]

# Build options that cannot change the tokenizer (the only thing the counts depend on): left out
# of the scorer that counts, so that counting loads no baseline and checks no idf.
_NOT_MODEL_OPTIONS = frozenset({"idf", "idf_sents", "reference_batch_size", "memory_budget",
                                "rescale_with_baseline", "baseline_path"})


def count_documents(references: list, options: dict) -> Any:
    """The document counts (``DocumentFrequencies``) of one block's reference cells (each a
    reference or a non-empty list of them: every reference is a document), with the tokenizer
    of the scorer that ``options`` (BERTScore's build options) build. A bad cell raises
    TypeError / ValueError naming it as "item N" (its position in ``references``)."""
    from rapidscore.bertscore import BERTScore
    from rapidscore.bertscore.idf_pass import document_frequencies
    from rapidscore.common.metric import check_pairs

    scorer = BERTScore(**{k: v for k, v in options.items() if k not in _NOT_MODEL_OPTIONS})
    pairs = check_pairs([""] * len(references), references, ("candidate", "reference"))
    return document_frequencies(scorer, pairs)


def merge_document_counts(partials: list) -> Any:
    """The counts of every block, merged (a ``DocumentFrequencies``; ValueError if two blocks
    were counted with different tokenizers). The result is a partial too: merging merged
    counts again gives the same total."""
    from rapidscore.bertscore.idf import DocumentFrequencies

    total = DocumentFrequencies()
    for partial in partials:
        total.merge(partial)
    return total
