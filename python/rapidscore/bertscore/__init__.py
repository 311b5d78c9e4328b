"""BERTScore: precision, recall and F1 from contextual token embeddings.

Native API (numpy results, no torch at run time once the model is exported)::

    from rapidscore.bertscore import BERTScore
    scorer = BERTScore()                      # embedded all-MiniLM-L6-v2, last layer
    result = scorer.score(candidates, references)
    result.f1, result.mean_f1, result.signature

For an exact drop-in of the ``bert-score`` package (torch tensors), use ``rapidscore.bert_score``.
"""

from rapidscore.bertscore.baseline_maker import compute_baseline
from rapidscore.bertscore.result import BERTScoreResult
from rapidscore.bertscore.scorer import BERTScore, score

__all__ = ["BERTScore", "BERTScoreResult", "score", "compute_baseline"]
