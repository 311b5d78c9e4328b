"""The worker's side of the service's BERTScore batches (``BERTScoreTask``'s ``run``,
``run_piece``, ``finish_pieces`` and ``warm_up``, bound to the task in ``bertscore/serving.py``,
whose ``prepare`` runs in the caller's thread): one encoder pass over a batch's distinct
sentences, then the finishing step. Results equal the direct call's exactly."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from rapidscore.bertscore.serving import BERTScoreTask

__all__ = ["warm_up", "run", "run_piece", "finish_pieces"]


def warm_up(task: BERTScoreTask) -> None:
    """Capture the CUDA graphs of small batches (a torch runner on CUDA; else nothing)."""
    from rapidscore.device.cuda_graphs import warm_up_graphs

    warm_up_graphs(task.scorer.encoder)


def _scorer(task: BERTScoreTask, alone: bool) -> Any:
    """The scorer of a batch: the solo one (more threads) when the batch runs by itself."""
    return task.solo if alone and task.solo is not None else task.scorer


def run_piece(task: BERTScoreTask, payload: Any, start: int, stop: int, alone: bool) -> Any:
    """Token embeddings of the request's distinct texts ``start:stop`` (a sentence's do not
    depend on the other sentences of its call: the same rows as one call of them all)."""
    return _scorer(task, alone).encoder.embed_ids(payload[1][start:stop], unpadded=True)


def finish_pieces(task: BERTScoreTask, payload: Any, stores: list, alone: bool) -> Any:
    from rapidscore.encoder.store import TokenStore

    plan, ids, truncated, reference_batch_size = payload
    lengths = np.fromiter((len(i) for i in ids), dtype=np.int64, count=len(ids))
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
    return _scorer(task, alone).finish(plan, store, reference_batch_size=reference_batch_size)


def run(task: BERTScoreTask, payloads: list, alone: bool) -> list:
    from rapidscore.encoder.store import TokenStore, row_ranges

    scorer = _scorer(task, alone)
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
