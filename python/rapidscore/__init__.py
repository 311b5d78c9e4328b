"""rapidscore: fast, reference-exact evaluation metrics for LLM and NER outputs.

Public names are imported lazily so that ``import rapidscore`` stays fast and never imports
torch or transformers.
"""

from __future__ import annotations

from importlib import import_module as _import_module

from rapidscore._version import __version__
from rapidscore.errors import (
    IntegrationInputError,
    IntegrationTypeError,
    ModelNotFoundError,
    OverloadedError,
    RapidscoreError,
    RapidscoreWarning,
    TruncationWarning,
)

# name -> module that defines it; resolved on first attribute access.
_LAZY_ATTRIBUTES = {
    "Encoder": "rapidscore.encoder",
    "get_encoder": "rapidscore.encoder",
    "resolve_model": "rapidscore.encoder.model_source",
    "negative_rejection": "rapidscore.nrr.scoring",
    "BERTScore": "rapidscore.bertscore",
    "score_table": "rapidscore.streaming",
    # Exception classes defined beside the code that raises them (all subclass RapidscoreError).
    "ColumnError": "rapidscore.common.metric",
    "TableError": "rapidscore.common.tables",
    "ResumeError": "rapidscore.common.stream_io",
    "RecordTooLongError": "rapidscore.common.read_bounds",
    "OutputError": "rapidscore.common.output_checks",
    "DamagedCacheError": "rapidscore.encoder.onnx_export",
    "ExportMismatchError": "rapidscore.encoder.onnx_export",
    "ResultsError": "rapidscore.abstention.results",
    "TaxonomyError": "rapidscore.abstention.taxonomy",
    "RequestTooLargeError": "rapidscore.serve.batching",
    "BatchError": "rapidscore.integrations.ray",
    "TagError": "rapidscore.ner.tags",
    "FlagError": "rapidscore.abstention.rgb",
    "SemevalOptionError": "rapidscore.ner.semeval",
    "Int8Error": "rapidscore.encoder.int8",
    "UnsafeWeightsError": "rapidscore.encoder.model_source",
    "FiguresUnavailable": "rapidscore.report.figures",
    "ClassifierLabelError": "rapidscore.abstention.classifier",
    "NotAClassifierError": "rapidscore.encoder.classifier_export",
}
_LAZY_SUBMODULES = {"bert_score", "bertscore", "nrr", "abstention", "ner", "encoder", "cli"}

__all__ = ["__version__", "RapidscoreError", "ModelNotFoundError", "OverloadedError", "IntegrationInputError",
           "IntegrationTypeError", "RapidscoreWarning",
           "TruncationWarning", *_LAZY_ATTRIBUTES]


def __getattr__(name):
    if name in _LAZY_ATTRIBUTES:
        module = _import_module(_LAZY_ATTRIBUTES[name])
        value = getattr(module, name) if hasattr(module, name) else module
    elif name in _LAZY_SUBMODULES:
        value = _import_module(f"rapidscore.{name}")
    else:
        raise AttributeError(f"module 'rapidscore' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY_ATTRIBUTES) | _LAZY_SUBMODULES)
