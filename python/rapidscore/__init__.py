"""rapidscore: fast, reference-exact evaluation metrics for LLM and NER outputs.

The top level names what a user calls (docs/api.md):

- :func:`score` (one call) and :class:`BERTScore` (a scorer kept for many calls): BERTScore;
- :func:`score_stream` and :func:`score_table`: any registered metric over a stream of rows or
  a table; :func:`get_metric`: a registered metric by name;
- :func:`negative_rejection` (NRR), :func:`detect_refusal` (refusal), :func:`evaluate_ner` (NER:
  ``rapidscore.ner.evaluate``);
- the base classes :class:`RapidscoreError` and :class:`RapidscoreWarning`, and the few a user
  catches most: :class:`ModelNotFoundError` (a model that cannot be found offline),
  :class:`OverloadedError` (a full scorer queue: retry) and :class:`TruncationWarning` (texts
  cut to the model's length).

Every other error class is in :mod:`rapidscore.errors`. Older top-level names
(``rapidscore.Encoder``, ``rapidscore.TaxonomyError``, ...) keep working as aliases
(``OLD_NAMES``). Names are imported lazily, so that ``import rapidscore`` stays fast and never
imports torch or transformers.
"""

from __future__ import annotations

from importlib import import_module as _import_module
from typing import Any as _Any

from rapidscore._version import __version__
from rapidscore.errors import ModelNotFoundError, OverloadedError, RapidscoreError, RapidscoreWarning, TruncationWarning

# public name -> (module, attribute); resolved on first access
_API = {
    "score": ("rapidscore.bertscore.scorer", "score"),
    "BERTScore": ("rapidscore.bertscore.scorer", "BERTScore"),
    "score_stream": ("rapidscore.streaming", "score_stream"),
    "score_table": ("rapidscore.streaming", "score_table"),
    "get_metric": ("rapidscore.metrics", "get_metric"),
    "negative_rejection": ("rapidscore.nrr.scoring", "negative_rejection"),
    "detect_refusal": ("rapidscore.abstention.detectors", "detect_refusal"),
    "evaluate_ner": ("rapidscore.ner.evaluation", "evaluate"),
}

# Older top-level names, kept as aliases (listed in docs/api.md): the building blocks, and the
# error classes that live in rapidscore.errors.
OLD_NAMES = {
    "Encoder": ("rapidscore.encoder", "Encoder"),
    "get_encoder": ("rapidscore.encoder", "get_encoder"),
    "resolve_model": ("rapidscore.encoder.model_source", "resolve_model"),
    **{name: ("rapidscore.errors", name) for name in (
        "IntegrationInputError", "IntegrationTypeError", "ColumnError", "TableError", "ResumeError",
        "RecordTooLongError", "OutputError", "DamagedCacheError", "ExportMismatchError", "ResultsError",
        "TaxonomyError", "RequestTooLargeError", "BatchError", "TagError", "FlagError", "SemevalOptionError",
        "Int8Error", "UnsafeWeightsError", "FiguresUnavailable", "ClassifierLabelError", "NotAClassifierError",
        "PairingError")},
}
_LAZY_SUBMODULES = {"bert_score", "bertscore", "nrr", "abstention", "ner", "encoder", "cli", "errors", "metrics",
                    "streaming", "compare"}

__all__ = ["__version__", *_API, "RapidscoreError", "RapidscoreWarning", "ModelNotFoundError", "OverloadedError",
           "TruncationWarning"]


def __getattr__(name: str) -> _Any:
    if name in _API or name in OLD_NAMES:
        module, attribute = _API.get(name) or OLD_NAMES[name]
        value = getattr(_import_module(module), attribute)
    elif name in _LAZY_SUBMODULES:
        value = _import_module(f"rapidscore.{name}")
    else:
        raise AttributeError(f"module 'rapidscore' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API) | set(OLD_NAMES) | _LAZY_SUBMODULES)
