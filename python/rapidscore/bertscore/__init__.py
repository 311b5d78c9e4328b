"""BERTScore: precision, recall and F1 from contextual token embeddings.

Native API (numpy results, no torch at run time once the model is exported)::

    from rapidscore.bertscore import BERTScore
    scorer = BERTScore()                      # embedded all-MiniLM-L6-v2, last layer
    result = scorer.score(candidates, references)
    result.f1, result.mean_f1, result.signature

For an exact drop-in of the ``bert-score`` package (torch tensors), use ``rapidscore.bert_score``.
Names load on first use, so that ``rapidscore.bertscore.cli`` (the argument parser) stays light.
"""

from __future__ import annotations

from rapidscore.common.lazy import lazy_exports

_EXPORTS = {
    "BERTScore": "rapidscore.bertscore.scorer",
    "BERTScoreResult": "rapidscore.bertscore.result",
    "score": "rapidscore.bertscore.scorer",
    "compute_baseline": "rapidscore.bertscore.baseline_maker",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
