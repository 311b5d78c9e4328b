"""Streaming refusal detection: one decision per streamed response.

The streaming runner (``rapidscore.streaming.score_stream``) with the refusal metric's usual
options; also importable from ``rapidscore.streaming`` (its older home). Reads its input lazily,
one chunk at a time. Thread safety: a generator is one stream's; the detector behind it is
built once per call.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from rapidscore.abstention.refusal import METRIC
from rapidscore.common.metric_stream import stream_metric

__all__ = ["refusal_iter"]


def refusal_iter(responses: Iterable, method: Any = "heuristic", *, chunk_size: int = 4096,
                 **options) -> Iterator[bool]:
    """One refusal decision per response (True = refusal), as
    ``rapidscore.abstention.detect_refusal`` decides them; the detector is built once."""
    for row in stream_metric(METRIC, responses, chunk_size=chunk_size, method=method, **options):
        yield row["refusal"]
