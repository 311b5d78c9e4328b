"""Exceptions and warning categories raised by rapidscore, and the shared argument checks.

Every exception class rapidscore defines is here and derives from :class:`RapidscoreError` and
from the builtin it has always been (``ValueError`` for bad input, ``RuntimeError`` for a state
that prevents the work), so ``except ValueError`` and ``except RapidscoreError`` both catch, say,
a ``TaxonomyError``. The top level (``rapidscore``) names the base classes and the few a user
catches most; every class stays importable from the module that raises it
(``rapidscore.abstention.taxonomy.TaxonomyError``) and as ``rapidscore.X`` (an alias). Warning
categories other than the base and :class:`TruncationWarning` stay beside the code that emits
them. Argument checks (:func:`check_positive_int` and the like) raise plain ``ValueError`` /
``TypeError`` naming the argument. Imports only the standard library.
"""

from __future__ import annotations

import numbers

__all__ = ["RapidscoreError", "RapidscoreWarning", "TruncationWarning", "ModelNotFoundError", "OverloadedError",
           "IntegrationInputError", "IntegrationTypeError", "ColumnError", "TableError",
           "RecordTooLongError", "ResumeError", "OutputError", "DamagedCacheError", "ExportMismatchError",
           "Int8Error", "UnsafeWeightsError", "NotAClassifierError", "ResultsError", "TaxonomyError",
           "FlagError", "ClassifierLabelError", "TagError", "SemevalOptionError", "RequestTooLargeError",
           "BatchError", "FiguresUnavailable", "PairingError", "check_positive_int"]


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


# -- inputs, tables, streams and output files (rapidscore.common) ------------------------------

class ColumnError(RapidscoreError, ValueError):
    """Rows given as columns that do not fit the metric: a missing column, unequal lengths."""


class TableError(RapidscoreError, TypeError):
    """An object given as a table that is not one (or a stream of rows that is not dict rows)."""


class RecordTooLongError(RapidscoreError, ValueError):
    """A line or record over ``max_record_bytes`` (common/read_bounds.py): the file is not read further (nor read
    again as another format, which would hold it whole)."""


class ResumeError(RapidscoreError, ValueError):
    """The output cannot be resumed (no state, other settings, other input)."""


class OutputError(RapidscoreError, ValueError):
    """An output that would destroy an input or another output, or that cannot be written."""


# -- models and the encoder (rapidscore.encoder) -----------------------------------------------

class DamagedCacheError(RapidscoreError, ValueError):
    """A cache entry's files do not match the sizes and hashes its export recorded, and it cannot be
    exported again here (torch or another part of the [export] extra is missing)."""


class ExportMismatchError(RapidscoreError, RuntimeError):
    """The ONNX graph of a model does not reproduce the model (a family whose forward pass depends
    on the input's shape in Python: Longformer's and LED's sliding-window padding). Remembered in
    the cache (``<key>.no-onnx.json``), so later loads fall back to torch without re-exporting."""


class Int8Error(RapidscoreError, ValueError):
    """A model that ``precision="int8"`` cannot run: no weight matrices to quantise, or a
    quantised graph that does not reproduce the exact one."""


class UnsafeWeightsError(RapidscoreError, ValueError):
    """A pickled weights file (``pytorch_model.bin``) holds objects other than tensors, so
    ``torch.load(weights_only=True)`` refused to unpickle it: unpickled in full, such a file can run
    any code. Nothing of it ran; the message names the file and says how to get safetensors."""


class NotAClassifierError(RapidscoreError, ValueError):
    """The model has no sequence-classification head (a plain encoder such as all-MiniLM-L6-v2), a
    regression head, or needs remote code: it cannot be a refusal classifier."""


# -- the metrics (rapidscore.abstention, rapidscore.ner) ---------------------------------------

class ResultsError(RapidscoreError, ValueError):
    """A results file or table is malformed; the message names the file and key."""


class TaxonomyError(RapidscoreError, ValueError):
    """A taxonomy file or structure is invalid (cycle, duplicate id, bad shape)."""


class FlagError(RapidscoreError, TypeError):
    """A no-support flag that is not a bool (the message names its position and value), or an
    option the RGB phrase check does not take."""


class ClassifierLabelError(RapidscoreError, ValueError):
    """The refusal label of a classifier is unknown or ambiguous (the message lists its labels)."""


class TagError(RapidscoreError, ValueError):
    """Bad token-label input: an unknown scheme or mode, sequences of different lengths, a label
    the scheme does not allow, a bad CoNLL line (the message names the sequence, label or line).
    Raised, never shared: thread safety does not apply."""


class SemevalOptionError(RapidscoreError, ValueError):
    """An unknown SemEval scheme or matching, or spans packed without label ids."""


# -- the front ends (rapidscore.serve, rapidscore.integrations, rapidscore.report) -------------

class RequestTooLargeError(RapidscoreError, ValueError):
    """A request over a per-request limit (texts or tokens): refused before it is queued.

    ``limit``: the setting's name (``max_texts``, ``max_tokens``), ``value``: the request's
    count, ``maximum``: the limit, ``field``: the request's argument that carries the texts (the
    HTTP server answers 413 naming it)."""

    def __init__(self, message: str, *, limit: str, value: int, maximum: int, field: str):
        super().__init__(message)
        self.limit, self.value, self.maximum, self.field = limit, value, maximum, field


class BatchError(RapidscoreError, ValueError):
    """A row of a batch cannot be scored; the message names the row (and its id column)."""


class FiguresUnavailable(RapidscoreError, ImportError):
    """No figures: matplotlib is not installed, or this build lacks a figure function."""


class PairingError(RapidscoreError, ValueError):
    """Systems that cannot be compared item by item (rapidscore.compare): different item counts,
    references or gold, items unmatched between systems, no per-item scores; the message names the
    systems or files."""
