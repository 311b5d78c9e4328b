"""Exceptions and warning categories raised by rapidscore, and the shared argument checks.

Every exception class rapidscore defines derives from :class:`RapidscoreError` and from the
builtin it has always been (``ValueError`` for bad input, ``RuntimeError`` for a state that
prevents the work), so ``except ValueError`` and ``except RapidscoreError`` both catch, say, a
``TaxonomyError``. The classes live beside the code that raises them; ``rapidscore`` exports
them all (``rapidscore.TaxonomyError``, ...). Argument checks (:func:`check_positive_int` and the
like) raise plain ``ValueError`` / ``TypeError`` naming the argument.
"""

from __future__ import annotations

import numbers


class RapidscoreWarning(UserWarning):
    """Base class of every warning rapidscore emits."""


class TruncationWarning(RapidscoreWarning):
    """Some inputs were longer than the model's maximum length and were truncated."""


class RapidscoreError(Exception):
    """Base class of every exception class rapidscore defines (each also subclasses a builtin)."""


class ModelNotFoundError(RapidscoreError, ValueError):
    """A model name is neither a local directory, the embedded model, nor reachable."""


class IntegrationInputError(RapidscoreError, ValueError):
    """What a framework handed an adapter of ``rapidscore.integrations`` cannot be scored: a
    missing or empty field, inputs of different lengths. The message names the field and row.
    Defined here, not beside each adapter, so that it is importable without the framework."""


class IntegrationTypeError(RapidscoreError, TypeError):
    """A framework object or input of the wrong kind given to an adapter of
    ``rapidscore.integrations`` (named with its type and position)."""


def check_positive_int(value, name: str) -> int:
    """``value`` as an int >= 1 (numpy integers accepted; bools and floats are not), else a
    ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


class OverloadedError(RapidscoreError, RuntimeError):
    """A batching scorer's queue is full (or it is shutting down): the request was not accepted.

    Raised at once by ``submit`` instead of queueing without bound; nothing was computed, so the
    caller may retry after ``retry_after`` seconds (the HTTP server answers 503 with that
    Retry-After header)."""

    def __init__(self, message: str, retry_after: float = 1.0):
        super().__init__(message)
        self.retry_after = retry_after
