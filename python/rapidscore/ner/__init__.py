"""NER evaluation: DMBertA (span alignment x label meaning) and the SemEval-2013 schemes.

>>> from rapidscore import ner
>>> result = ner.evaluate(gold_records, predicted_records)          # one model
>>> table = ner.compare(gold_records, {"gliner": g, "spacy": s})    # several models
>>> print(table.table())

See docs/ner.md for the definition, the input formats and the differences from nervaluate.
"""

from rapidscore.ner.alignment import BatchAlignment, PackedSpans, align_batch, align_spans
from rapidscore.ner.evaluation import Comparison, NerResult, compare, evaluate, semeval_summary
from rapidscore.ner.formats import FORMATS, Entity, detect_format, parse_seed_key, to_entities
from rapidscore.ner.labels import LabelSimilarity, normalize_label
from rapidscore.ner.normalize import Repairs, normalize_entities
from rapidscore.ner.records import Record, read_combined_jsonl, read_jsonl

__all__ = [
    "evaluate", "compare", "NerResult", "Comparison", "semeval_summary",
    "Entity", "FORMATS", "to_entities", "detect_format", "parse_seed_key",
    "normalize_entities", "Repairs", "LabelSimilarity", "normalize_label",
    "align_spans", "align_batch", "PackedSpans", "BatchAlignment",
    "Record", "read_jsonl", "read_combined_jsonl",
]
