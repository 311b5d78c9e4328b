"""NER evaluation: DMBertA (span alignment x label meaning) and the SemEval-2013 schemes.

>>> from rapidscore import ner
>>> result = ner.evaluate(gold_records, predicted_records)          # one model
>>> table = ner.compare(gold_records, {"gliner": g, "spacy": s})    # several models
>>> print(table.table())
>>> print(ner.tag_report(y_true, y_pred, scheme="IOB2", mode="strict"))  # token labels, as seqeval

See docs/ner.md for the definition, the input formats and the differences from nervaluate.
"""

from __future__ import annotations

from rapidscore.common.lazy import lazy_exports

# Names load on first use, so that rapidscore.ner.cli (the argument parser) stays light.
_EXPORTS = {
    **{name: "rapidscore.ner.alignment" for name in ("BatchAlignment", "PackedSpans", "align_batch", "align_spans")},
    **{name: "rapidscore.ner.evaluation" for name in ("Comparison", "NerResult", "compare", "evaluate",
                                                      "semeval_summary", "ner_signature")},
    **{name: "rapidscore.ner.formats" for name in ("FORMATS", "Entity", "detect_format", "parse_seed_key",
                                                   "to_entities")},
    "LabelSimilarity": "rapidscore.ner.labels",
    "normalize_label": "rapidscore.ner.labels",
    "Repairs": "rapidscore.ner.normalize",
    "normalize_entities": "rapidscore.ner.normalize",
    **{name: "rapidscore.ner.records" for name in ("Record", "read_jsonl", "read_combined_jsonl")},
    **{name: "rapidscore.ner.tags" for name in ("TagError", "TagReport", "TagScores", "tag_report")},
    **{name: "rapidscore.ner.tag_decoding" for name in ("SCHEMES", "TagSpan", "decode_tags", "detect_scheme",
                                                        "tags_to_entities", "tags_to_records")},
    **{name: "rapidscore.ner.conll" for name in ("ConllSentences", "conll_report", "read_conll", "write_conll")},
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
