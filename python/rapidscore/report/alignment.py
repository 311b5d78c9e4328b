"""The token alignment of one BERTScore pair: which reference token each candidate token matched,
and how similar they are (and the other way round, for recall).

BERTScore's greedy matching takes, for each candidate token, the most similar reference token
(cosine of the token embeddings at the scorer's layer); P is the mean of those maxima, R the
same from the reference's side, F their harmonic mean. As in the scores, the maxima run over
every token of the other side, its [CLS] and [SEP] included, while the means run over the real
tokens only; without idf weights the mean of the shown similarities is the pair's P (R),
before baseline rescaling. The matrix is the one ``bertscore.plot.similarity_matrix`` draws
(the reference's ``plot_example``; ``rapidscore bertscore --show`` draws it), kept whole here so
the maxima are the scores'.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Alignment", "TokenMatch", "align_pair"]


@dataclass(frozen=True)
class TokenMatch:
    """One token (``token``) and its most similar token on the other side (``matched``,
    ``special`` when that is a [CLS]/[SEP]-like framing token), with their cosine ``similarity``."""

    token: str
    matched: str
    similarity: float
    special: bool = False


@dataclass(frozen=True)
class Alignment:
    """The alignment of ``candidate`` with ``reference`` (item ``line`` of its system):
    ``precision_side`` (one match per candidate token), ``recall_side`` (one per reference
    token), the pair's ``precision``, ``recall``, ``f1`` from these maxima (no idf, not
    rescaled) and the ``signature`` of the scorer that made them."""

    line: int
    candidate: str
    reference: str
    precision_side: tuple[TokenMatch, ...]
    recall_side: tuple[TokenMatch, ...]
    precision: float
    recall: float
    f1: float
    signature: str


def align_pair(scorer: Any, candidate: str, reference: str, line: int = 1) -> Alignment:
    """The :class:`Alignment` of one pair with a ``rapidscore.bertscore.BERTScore`` scorer (a
    single layer). Texts are stripped, as the scorer strips them; tokens are shown readable
    (``figures.readable_token``)."""
    import numpy as np

    from rapidscore.bertscore.plot import token_similarity
    from rapidscore.report.figures import readable_token

    encoder = scorer.encoder
    sim, cand_ids, ref_ids = token_similarity(scorer, candidate, reference)  # framing tokens too

    def names(token_id: int) -> str:
        return readable_token(encoder.tokenizer.id_to_token(token_id))

    cand_tokens = [names(i) for i in cand_ids]
    ref_tokens = [names(i) for i in ref_ids]
    # the framing tokens are first and last ([CLS] ... [SEP]): matched against, never averaged
    cand_real, ref_real = range(1, len(cand_tokens) - 1), range(1, len(ref_tokens) - 1)

    def side(rows: range, matrix: Any, own: list[str], other: list[str]) -> tuple[TokenMatch, ...]:
        last = len(other) - 1
        return tuple(TokenMatch(own[i], other[int(matrix[i].argmax())], float(matrix[i].max()),
                                int(matrix[i].argmax()) in (0, last)) for i in rows)

    precision_side = side(cand_real, sim, cand_tokens, ref_tokens)
    recall_side = side(ref_real, sim.T, ref_tokens, cand_tokens)
    p = float(np.mean([m.similarity for m in precision_side])) if precision_side else 0.0
    r = float(np.mean([m.similarity for m in recall_side])) if recall_side else 0.0
    f = 2 * p * r / (p + r) if p + r > 0 else 0.0
    return Alignment(line, candidate, reference, precision_side, recall_side, p, r, f, scorer.signature)
