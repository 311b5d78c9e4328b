"""Abstention evaluation over a concept taxonomy (SELECT benchmark).

- :mod:`.taxonomy`: load taxonomies (SELECT nested JSON, generic ``children`` JSON, edge-list
  CSV); ancestors / descendants / siblings / depth / path.
- :mod:`.detectors`: refusal detectors (``detect_refusal``): SELECT's ``phrase``, ``keyword``,
  ``phr+kw``, ``heuristic`` with identical decisions, presets, phrase/regex, embedding, callable.
- :mod:`.results`: SELECT results files (``.json.gz``) and flat tables.
- :mod:`.metrics`: abstention rate, generalization, specificity, aggregation with Student-t
  intervals, performance score, per-level breakdown, Spearman correlations.
- :mod:`.report`: the paper's summary table as text / JSON / CSV.
"""

from rapidscore.abstention.detectors import (
    CallableDetector,
    Detector,
    EmbeddingDetector,
    PhraseDetector,
    SelectDetector,
    detect_refusal,
    get_detector,
)
from rapidscore.abstention.metrics import (
    aggregate,
    concept_scores,
    performance_score,
    spearman,
    student_t_ppf,
    summarize,
)
from rapidscore.abstention.results import Record, ResultsError, load_flat_table, load_results_tree, load_select_file
from rapidscore.abstention.taxonomy import Taxonomy, TaxonomyError

__all__ = [
    "CallableDetector", "Detector", "EmbeddingDetector", "PhraseDetector", "SelectDetector",
    "detect_refusal", "get_detector", "aggregate", "concept_scores", "performance_score",
    "spearman", "student_t_ppf", "summarize", "Record", "ResultsError", "load_flat_table",
    "load_results_tree", "load_select_file", "Taxonomy", "TaxonomyError",
]
