"""How the service runs refusal detection requests (``rapidscore.serve.batching``): each request's
responses are judged by the detector in the worker, one request after another (no shared encoder
pass); a request larger than a batch is judged in pieces of whole responses, between other
requests. Decisions equal ``detector.detect``'s."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["DetectorTask"]


class DetectorTask:
    """A refusal detector: requests run one by one in the worker (no merged encoder pass)."""

    def __init__(self, detector: Any):
        self.detector = detector

    def prepare(self, responses: Any, *, limits: Any = None) -> tuple[Any, int]:
        from rapidscore.abstention.detectors import response_texts

        texts = response_texts(responses)
        if limits is not None:
            limits.check_texts(len(texts), "responses", "responses")
        tokens = max(1, sum(len(t) for t in texts) // 4)  # characters / 4 ~ tokens; not merged
        if limits is not None:
            limits.check_tokens(tokens, "responses", "estimated as characters / 4")
        return texts, tokens

    def run(self, payloads: list, alone: bool) -> list:
        return [self.detector.detect(texts) for texts in payloads]

    @staticmethod
    def units(payload: Any) -> np.ndarray:
        return np.fromiter((max(1, len(t) // 4) for t in payload), dtype=np.int64, count=len(payload))

    def run_piece(self, payload: Any, start: int, stop: int, alone: bool) -> Any:
        return self.detector.detect(payload[start:stop])  # each response is judged on its own

    def finish_pieces(self, payload: Any, pieces: list, alone: bool) -> Any:
        return np.concatenate(pieces).astype(bool, copy=False)
