"""Abstention evaluation over a concept taxonomy (SELECT benchmark).

- :mod:`.taxonomy`: load taxonomies (SELECT nested JSON, generic ``children`` JSON, edge-list
  CSV); ancestors / descendants / siblings / depth / path.
- :mod:`.detectors`: refusal detectors (``detect_refusal``): SELECT's ``phrase``, ``keyword``,
  ``phr+kw``, ``heuristic`` with identical decisions, presets, phrase/regex, embedding, callable;
  :mod:`.classifier`: a trained refusal classifier (``method="classifier", model=DIR``).
- :mod:`.results`: SELECT results files (``.json.gz``) and flat tables.
- :mod:`.pipeline`: SELECT's pipeline, fast: :func:`find_experiments` (every experiment under a
  folder, paired with its taxonomy), :func:`evaluate` (stored flag first or ``recompute``, files
  decoded and decided in worker processes, per-(seed, concept) counts).
- :mod:`.metrics`: abstention rate, generalization, specificity, aggregation with Student-t
  intervals, performance score, per-level breakdown, Spearman correlations.
- :mod:`.report`: the paper's summary tables as text / markdown / LaTeX / CSV / JSON with
  readable names; :class:`AbstentionReport` (summary + signature) from :func:`build_report`.
- :mod:`.rgb`: RGB's negative rejection (:func:`rgb_negative_rejection`: the share of questions
  without a supporting document whose response declines, Wilson intervals; ``rapidscore rgb``).
"""

from __future__ import annotations

from rapidscore.common.lazy import lazy_exports

# Names load on first use, so that rapidscore.abstention.cli (the argument parser) stays light.
_EXPORTS = {
    **{name: "rapidscore.abstention.detectors" for name in (
        "CallableDetector", "Detector", "EmbeddingDetector", "PhraseDetector", "SelectDetector",
        "detect_refusal", "get_detector")},
    **{name: "rapidscore.abstention.rates" for name in (
        "aggregate", "concept_scores", "performance_score", "spearman", "student_t_ppf", "summarize")},
    **{name: "rapidscore.abstention.results" for name in (
        "Record", "ResultsError", "load_flat_table", "load_results_tree", "load_select_file")},
    **{name: "rapidscore.abstention.report" for name in ("AbstentionReport", "abstention_signature", "build_report")},
    **{name: "rapidscore.abstention.pipeline" for name in (
        "DecisionStats", "Evaluation", "Experiment", "evaluate", "find_experiments")},
    **{name: "rapidscore.abstention.rgb" for name in (
        "FlagError", "RGBRejectionResult", "rgb_negative_rejection", "wilson_interval")},
    "ClassifierDetector": "rapidscore.abstention.classifier",
    "ClassifierLabelError": "rapidscore.abstention.classifier",
    "Taxonomy": "rapidscore.abstention.taxonomy",
    "TaxonomyError": "rapidscore.abstention.taxonomy",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
