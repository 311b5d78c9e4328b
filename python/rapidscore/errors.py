"""Exceptions and warning categories raised by rapidscore."""


class RapidscoreWarning(UserWarning):
    """Base class of every warning rapidscore emits."""


class TruncationWarning(RapidscoreWarning):
    """Some inputs were longer than the model's maximum length and were truncated."""


class ModelNotFoundError(ValueError):
    """A model name is neither a local directory, the embedded model, nor reachable."""
