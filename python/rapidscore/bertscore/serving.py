"""How the service batches BERTScore requests (``rapidscore.serve.batching``): a task
prepares a request in the caller's thread (here: the plan and the token ids), runs a batch of
requests in the worker, and encodes a request larger than a batch in pieces (the worker's side:
``bertscore/batch_worker.py``). Results equal the direct call's exactly."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rapidscore.bertscore import batch_worker

__all__ = ["BERTScoreTask"]


class BERTScoreTask:
    """BERTScore: plan + tokenise per request; one encoder pass over the batch's distinct
    sentences; one matching pass over every request's pairs when the token weights do not
    depend on the call (``finish_plans``), else each request finished from its own rows (idf
    from its own references). Either way exactly what ``scorer.score`` gives.
    ``solo``: the same scorer with more runtime threads, for batches that run alone."""

    def __init__(self, scorer: Any, solo: Any = None):
        self.scorer = scorer
        self.solo = solo
        self.encoder = scorer.encoder

    def prepare(self, cands: Sequence[str], refs: Any, *, reference_batch_size: int | None = None,
                limits: Any = None) -> tuple[Any, int]:
        from rapidscore.bertscore.plan import make_plan
        from rapidscore.errors import check_positive_int

        if reference_batch_size is not None:
            reference_batch_size = check_positive_int(reference_batch_size, "reference_batch_size")
        plan = make_plan(cands, refs, self.scorer.long_texts)
        if limits is not None:  # before tokenising: a count of what was sent
            limits.check_texts(plan.n_candidates + len(plan.pairs), "references", "candidates and references")
        ids, truncated = self.encoder.tokenizer.encode(plan.texts)
        tokens = sum(len(i) for i in ids)
        if limits is not None:
            limits.check_tokens(tokens, "references", "its distinct texts tokenised")
        return (plan, ids, truncated, reference_batch_size), tokens

    @staticmethod
    def units(payload: Any) -> np.ndarray:
        return np.fromiter((len(i) for i in payload[1]), dtype=np.int64, count=len(payload[1]))

    # the worker's side, written in bertscore/batch_worker.py
    warm_up = batch_worker.warm_up
    run = batch_worker.run
    run_piece = batch_worker.run_piece
    finish_pieces = batch_worker.finish_pieces
