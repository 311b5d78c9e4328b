"""Every exception class rapidscore defines derives from RapidscoreError and keeps the builtin it
has always been (issue 27), is defined in rapidscore.errors, and keeps its older names
(``rapidscore.X``, the module that raises it; issue 47). The classes are found by importing every
module of the package, so a new error class without the base fails here."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import rapidscore
from rapidscore.errors import RapidscoreError, RapidscoreWarning

# The builtin each class subclassed before RapidscoreError existed: `except <builtin>` must keep
# catching it. A new class adds its line here.
BUILTIN_OF = {
    "rapidscore.errors.ModelNotFoundError": ValueError,
    "rapidscore.errors.OverloadedError": RuntimeError,
    "rapidscore.errors.RequestTooLargeError": ValueError,
    "rapidscore.errors.ResultsError": ValueError,
    "rapidscore.errors.TaxonomyError": ValueError,
    "rapidscore.errors.ExportMismatchError": RuntimeError,
    "rapidscore.errors.DamagedCacheError": ValueError,
    "rapidscore.errors.UnsafeWeightsError": ValueError,
    "rapidscore.errors.ResumeError": ValueError,
    "rapidscore.errors.RecordTooLongError": ValueError,
    "rapidscore.errors.BatchError": ValueError,
    "rapidscore.errors.IntegrationInputError": ValueError,
    "rapidscore.errors.IntegrationTypeError": TypeError,
    "rapidscore.errors.TagError": ValueError,
    "rapidscore.errors.FlagError": TypeError,
    "rapidscore.errors.TableError": TypeError,
    "rapidscore.errors.ColumnError": ValueError,
    "rapidscore.errors.OutputError": ValueError,
    "rapidscore.errors.SemevalOptionError": ValueError,
    "rapidscore.errors.Int8Error": ValueError,
    "rapidscore.errors.FiguresUnavailable": ImportError,
    "rapidscore.errors.ClassifierLabelError": ValueError,
    "rapidscore.errors.NotAClassifierError": ValueError,
    "rapidscore.errors.PairingError": ValueError,
}
# The module that raises each class, where it was defined before rapidscore.errors held them all:
# importing it from there keeps working.
RAISED_IN = {
    "ColumnError": "rapidscore.common.metric", "TableError": "rapidscore.common.tables",
    "ResumeError": "rapidscore.common.stream_io", "RecordTooLongError": "rapidscore.common.read_bounds",
    "OutputError": "rapidscore.common.output_checks", "DamagedCacheError": "rapidscore.encoder.export.onnx_export",
    "ExportMismatchError": "rapidscore.encoder.export.onnx_export", "ResultsError": "rapidscore.abstention.results",
    "TaxonomyError": "rapidscore.abstention.taxonomy", "RequestTooLargeError": "rapidscore.serve.batching",
    "BatchError": "rapidscore.integrations.ray", "TagError": "rapidscore.ner.tags",
    "FlagError": "rapidscore.abstention.rgb", "SemevalOptionError": "rapidscore.ner.semeval",
    "Int8Error": "rapidscore.encoder.export.int8", "UnsafeWeightsError": "rapidscore.encoder.model_source",
    "FiguresUnavailable": "rapidscore.report.figures", "ClassifierLabelError": "rapidscore.abstention.classifier",
    "NotAClassifierError": "rapidscore.encoder.export.classifier_export",
}
# The error and warning classes the top level names (rapidscore/__init__.py says why these).
TOP_LEVEL = {"RapidscoreError", "RapidscoreWarning", "ModelNotFoundError", "OverloadedError", "TruncationWarning"}
# Never leaves its module: the HTTP app turns it into a 4xx answer.
PRIVATE = {"rapidscore.serve.app._ClientError"}


def _package_modules() -> list[str]:
    names = [info.name for info in pkgutil.walk_packages(rapidscore.__path__, "rapidscore.")]
    return [name for name in names if not name.endswith("__main__")]  # __main__ runs the CLI


def _defined_exception_classes() -> dict[str, type]:
    """Exception classes defined (not imported) in every importable module, by qualified name."""
    found: dict[str, type] = {}
    for name in _package_modules():
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:  # an optional extra that is not installed here
            if (exc.name or "").startswith("rapidscore"):
                raise
            continue
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == name:
                found[f"{name}.{value.__qualname__}"] = value
    return found


def _instance(cls: type) -> BaseException:
    if cls.__name__ == "RequestTooLargeError":  # its details are keyword-only and required
        return cls("too large", limit="max_texts", value=2, maximum=1, field="texts")
    return cls("a message")


def _public_errors() -> dict[str, type]:
    return {name: cls for name, cls in _defined_exception_classes().items()
            if not issubclass(cls, Warning) and name not in PRIVATE}


def test_every_exception_class_derives_from_rapidscore_error() -> None:  # issue 27
    classes = _defined_exception_classes()
    assert set(BUILTIN_OF) <= set(classes), "an error class was not found: is its module still importable?"
    errors = {name: cls for name, cls in _public_errors().items() if cls is not RapidscoreError}
    without_base = sorted(name for name, cls in errors.items() if not issubclass(cls, RapidscoreError))
    assert not without_base, f"subclass RapidscoreError (and the builtin it is): {without_base}"
    without_builtin = sorted(name for name, cls in errors.items()
                             if not any(base.__module__ == "builtins" and base is not Exception
                                        for base in cls.__mro__[1:-2]))
    assert not without_builtin, f"derive from a builtin too (ValueError, RuntimeError, ...): {without_builtin}"
    warnings = sorted(name for name, cls in classes.items()
                      if issubclass(cls, Warning) and not issubclass(cls, RapidscoreWarning))
    assert not warnings, f"warning categories derive from RapidscoreWarning: {warnings}"


@pytest.mark.parametrize("qualified_name", sorted(BUILTIN_OF))
def test_except_builtin_still_catches_it(qualified_name: str) -> None:  # issue 27
    module_name, _, class_name = qualified_name.rpartition(".")
    cls = getattr(importlib.import_module(module_name), class_name)
    builtin = BUILTIN_OF[qualified_name]
    for handler in (builtin, RapidscoreError):
        with pytest.raises(handler) as caught:
            raise _instance(cls)
        assert type(caught.value) is cls
    assert str(_instance(cls))  # the message survives the second base


def test_errors_holds_every_error_class() -> None:  # issue 47
    import rapidscore.errors

    errors = _public_errors()
    assert set(BUILTIN_OF) <= set(errors)
    elsewhere = sorted(name for name in errors if not name.startswith("rapidscore.errors."))
    assert not elsewhere, f"define the error class in rapidscore/errors.py: {elsewhere}"
    missing = sorted(cls.__name__ for cls in errors.values() if cls.__name__ not in rapidscore.errors.__all__)
    assert not missing, f"list in rapidscore.errors.__all__: {missing}"


def test_top_level_names_the_base_classes_and_the_common_ones() -> None:  # issue 47
    exported = {name for name in rapidscore.__all__
                if isinstance(getattr(rapidscore, name), type) and issubclass(getattr(rapidscore, name), BaseException)}
    assert exported == TOP_LEVEL


@pytest.mark.parametrize("qualified_name", sorted(BUILTIN_OF))
def test_old_names_of_an_error_class_still_work(qualified_name: str) -> None:  # issue 27, 47
    import rapidscore.errors

    name = qualified_name.rpartition(".")[2]
    cls = getattr(rapidscore.errors, name)
    assert getattr(rapidscore, name) is cls  # rapidscore.X: the class itself, or its alias
    assert name in dir(rapidscore)
    if name in RAISED_IN:  # imported from the module that raises it, as before
        assert getattr(importlib.import_module(RAISED_IN[name]), name) is cls


def test_base_is_exported_from_the_package_and_errors() -> None:  # issue 27
    import rapidscore.errors

    assert rapidscore.RapidscoreError is rapidscore.errors.RapidscoreError
    assert "RapidscoreError" in rapidscore.__all__
    assert RapidscoreError.__bases__ == (Exception,)
