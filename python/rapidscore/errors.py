"""Exceptions and warning categories raised by rapidscore, and the shared argument checks."""

from __future__ import annotations

import numbers


class RapidscoreWarning(UserWarning):
    """Base class of every warning rapidscore emits."""


class TruncationWarning(RapidscoreWarning):
    """Some inputs were longer than the model's maximum length and were truncated."""


class ModelNotFoundError(ValueError):
    """A model name is neither a local directory, the embedded model, nor reachable."""


def check_positive_int(value, name: str) -> int:
    """``value`` as an int >= 1 (numpy integers accepted; bools and floats are not), else a
    ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


class OverloadedError(RuntimeError):
    """A batching scorer's queue is full (or it is shutting down): the request was not accepted.

    Raised at once by ``submit`` instead of queueing without bound; nothing was computed, so the
    caller may retry after ``retry_after`` seconds (the HTTP server answers 503 with that
    Retry-After header)."""

    def __init__(self, message: str, retry_after: float = 1.0):
        super().__init__(message)
        self.retry_after = retry_after
