"""How the service batches similarity / NRR requests (``rapidscore.serve.batching``): a task
prepares a request in the caller's thread, runs a batch of requests in the worker, and encodes a
request larger than a batch in pieces. Results equal the direct call's exactly."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["NRRTask"]


class NRRTask:
    """Sentence similarity / NRR (embedding method): one sentence-embedding pass over the batch's
    distinct texts; each request's similarities from those vectors. ``solo``: as for BERTScore."""

    def __init__(self, model: Any, solo: Any = None):
        self.model = model
        self.solo = solo
        self.encoder = model.encoder

    def prepare(self, generated: Any, references: Any, threshold: float = 0.8, *,
                limits: Any = None) -> tuple[Any, int]:
        from rapidscore.nrr.scoring import check_items, check_threshold

        threshold = check_threshold(threshold)
        generated, groups = check_items(generated, references)
        if limits is not None:  # before tokenising: a count of what was sent
            limits.check_texts(len(generated) + sum(len(group) for group in groups), "references",
                               "answers and references")
        texts = list(dict.fromkeys(generated + [r for group in groups for r in group]))
        lengths = np.fromiter((len(ids) for ids in self.encoder.tokenize(texts)), dtype=np.int64, count=len(texts))
        tokens = int(lengths.sum())
        if limits is not None:
            limits.check_tokens(tokens, "references", "its distinct texts tokenised")
        return (generated, groups, threshold, texts, lengths), tokens

    def units(self, payload: Any) -> np.ndarray | None:
        # method "bertscore" scores each request alone from its texts: nothing to encode in pieces
        return payload[4] if self.model.method == "embedding" else None

    def run_piece(self, payload: Any, start: int, stop: int, alone: bool) -> Any:
        """Sentence vectors of the request's distinct texts ``start:stop``."""
        model = self.solo if alone and self.solo is not None else self.model
        return model.sentence_vectors(payload[3][start:stop], unpadded=True)

    def finish_pieces(self, payload: Any, pieces: list, alone: bool) -> Any:
        generated, groups, threshold, texts, _ = payload
        model = self.solo if alone and self.solo is not None else self.model
        vectors = np.concatenate(pieces)
        row = {text: k for k, text in enumerate(texts)}

        def embed(batch: list[str]) -> np.ndarray:
            return vectors[[row[t] for t in batch]]
        return model.rejection(generated, groups, threshold, embed=embed)

    def run(self, payloads: list, alone: bool) -> list:
        model = self.solo if alone and self.solo is not None else self.model
        union = list(dict.fromkeys(text for payload in payloads for text in payload[3]))
        embed: Callable[[list[str]], np.ndarray] | None = None  # method="bertscore": each request alone
        if model.method == "embedding":
            # as the direct call embeds (the model's own pipeline and prompt); union: distinct texts
            vectors = model.sentence_vectors(union, unpadded=True)
            row = {text: k for k, text in enumerate(union)}

            def embed(texts: list[str]) -> np.ndarray:
                return vectors[[row[t] for t in texts]]
        return [model.rejection(generated, groups, threshold, embed=embed)
                for generated, groups, threshold, _, _ in payloads]
