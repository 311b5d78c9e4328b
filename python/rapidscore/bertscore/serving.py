"""How the service batches BERTScore requests (``rapidscore.serve.batching``): a task
prepares a request in the caller's thread, runs a batch of requests in the worker, and encodes a
request larger than a batch in pieces. Results equal the direct call's exactly."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

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

    def warm_up(self) -> None:
        """Capture the CUDA graphs of small batches (a torch runner on CUDA; else nothing)."""
        from rapidscore.device.cuda_graphs import warm_up_graphs

        warm_up_graphs(self.scorer.encoder)

    def prepare(self, cands: Sequence[str], refs: Any, *, reference_batch_size: int | None = None,
                limits: Any = None) -> tuple[Any, int]:
        from rapidscore.errors import check_positive_int

        if reference_batch_size is not None:
            reference_batch_size = check_positive_int(reference_batch_size, "reference_batch_size")
        plan = self.scorer.plan(cands, refs)
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

    def run_piece(self, payload: Any, start: int, stop: int, alone: bool) -> Any:
        """Token embeddings of the request's distinct texts ``start:stop`` (a sentence's do not
        depend on the other sentences of its call: the same rows as one call of them all)."""
        scorer = self.solo if alone and self.solo is not None else self.scorer
        return scorer.encoder.embed_ids(payload[1][start:stop], unpadded=True)

    def finish_pieces(self, payload: Any, stores: list, alone: bool) -> Any:
        from rapidscore.encoder.store import TokenStore

        plan, ids, truncated, reference_batch_size = payload
        scorer = self.solo if alone and self.solo is not None else self.scorer
        lengths = self.units(payload)
        offsets = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        embeddings: Any
        if all(store.on_host for store in stores):
            embeddings = np.concatenate([store.embeddings for store in stores], axis=-2)
        else:
            import torch

            embeddings = torch.cat([store.embeddings for store in stores], dim=-2)
        store = TokenStore(ids=np.concatenate([store.ids for store in stores]), offsets=offsets,
                           embeddings=embeddings, order=np.arange(len(ids), dtype=np.int64), truncated=truncated)
        return scorer.finish(plan, store, reference_batch_size=reference_batch_size)

    def run(self, payloads: list, alone: bool) -> list:
        from rapidscore.encoder.store import TokenStore, row_ranges

        scorer = self.solo if alone and self.solo is not None else self.scorer
        union: dict[str, int] = {}
        union_ids: list[np.ndarray] = []
        positions = []
        for plan, ids, _, _ in payloads:
            index = np.empty(len(plan.texts), dtype=np.int64)
            for k, text in enumerate(plan.texts):
                slot = union.setdefault(text, len(union))
                if slot == len(union_ids):
                    union_ids.append(ids[k])
                index[k] = slot
            positions.append(index)
        # Unpadded where the encoder has that graph: the batch's sentences of every length in one
        # call, no padding (bit-identical to the padded graph a direct call runs).
        store = scorer.encoder.embed_ids(union_ids, unpadded=True)
        if scorer.weights_fixed and all(payload[3] is None for payload in payloads):
            return scorer.finish_plans([plan for plan, _, _, _ in payloads], store, positions,
                                       [truncated for _, _, truncated, _ in payloads])
        results = []
        for (plan, _, truncated, reference_batch_size), index in zip(payloads, positions):
            # The request's own sentences, in its plan's order: a store like a direct call's.
            lengths = store.lengths()[index]
            offsets = np.zeros(len(index) + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
            rows = row_ranges(store.offsets[index], lengths)
            own = TokenStore(ids=store.ids[rows], offsets=offsets, embeddings=store.embeddings[..., rows, :],
                             order=np.arange(len(index), dtype=np.int64), truncated=truncated)
            results.append(scorer.finish(plan, own, reference_batch_size=reference_batch_size))
        return results
