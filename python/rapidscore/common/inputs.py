"""Input normalisation shared by every metric: one error style for every caller.

Text inputs may be a list, a tuple, a 1-D numpy string/object array, a pandas Series, a
pyarrow Array/ChunkedArray or a Hugging Face dataset's column (``dataset["text"]``). pandas,
pyarrow and datasets are never imported here: an object from those libraries can only exist once
its library is loaded, so the type check imports nothing new. Whole tables are read by
``rapidscore.common.tables``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["as_list", "as_texts", "check_encodable", "normalize_inputs"]


def _library_of(values: Any) -> str:
    return type(values).__module__.partition(".")[0]


def as_list(values: Any, name: str, expected: str = "a list of strings") -> list:
    """The items of a text container as a plain list (no element check).

    Raises TypeError ``"{name} must be {expected}, got {type}"`` for a single string, a mapping or
    anything that is not one of the supported containers.
    """
    library = _library_of(values)
    if library == "numpy":
        import numpy as np  # already loaded: the value is a numpy object

        if isinstance(values, np.ndarray):
            if values.ndim != 1:
                raise TypeError(f"{name} must be {expected}, got a {values.ndim}-D numpy array")
            return values.tolist()
    elif library == "pandas":
        pandas = sys.modules["pandas"]
        if isinstance(values, (pandas.Series, pandas.Index)):
            return values.tolist()
    elif library == "pyarrow":
        pyarrow = sys.modules["pyarrow"]
        if isinstance(values, (pyarrow.Array, pyarrow.ChunkedArray)):
            return values.to_pylist()
    elif library == "datasets":
        # dataset["column"]: a list in datasets < 4 (handled below), a lazy Column object since
        column_type = getattr(sys.modules.get("datasets.arrow_dataset"), "Column", None)
        if column_type is not None and isinstance(values, column_type):
            return list(values)
    if isinstance(values, (str, bytes, bytearray)) or not isinstance(values, Sequence):
        raise TypeError(f"{name} must be {expected}, got {type(values).__name__}")
    return list(values)


def check_encodable(texts: list[str], name: str) -> None:
    """ValueError naming the item and position of the first lone surrogate (e.g. from a JSON
    ``"\\ud800"`` escape): Python accepts it in a str, but it is not Unicode text, and the
    tokenizers refuse it with a message that names neither the argument nor the item."""
    for i, text in enumerate(texts):
        if text.isascii():
            continue
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(
                f"{name}[{i}] holds a lone surrogate {text[exc.start]!r} at position {exc.start}, which is not "
                "valid Unicode text; remove it or clean the text first, e.g. "
                "text.encode('utf-8', 'replace').decode('utf-8')") from None


def _check_strings(items: list, name: str) -> list[str]:
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise TypeError(f"{name}[{i}] must be a str, got {type(item).__name__}: {item!r}")
    check_encodable(items, name)
    # numpy.str_ items (a str subclass) become plain str, so outputs never carry numpy scalars.
    return [item if type(item) is str else str(item) for item in items]


def as_texts(values: Any, name: str) -> list[str]:
    """``values`` as ``list[str]``, from any supported container.

    TypeError names the argument and the first bad index: ``"cands[3] must be a str, got int: 5"``.
    """
    return _check_strings(as_list(values, name), name)


def _reference_group(ref: Any, label: str) -> list:
    if isinstance(ref, str):
        return [ref]
    try:
        return as_list(ref, label)
    except TypeError:
        raise TypeError(f"{label} must be a str or a list of str, got {type(ref).__name__}: {ref!r}") from None


def normalize_inputs(cands: Any, refs: Any, *, names: tuple[str, str] = ("cands", "refs"),
                     ) -> tuple[list[str], list[list[str]]]:
    """Validate candidates and references; references become one list per candidate.

    A reference cell may be one string or a list/tuple/numpy array of strings (several references).
    ``names`` are the argument names the error messages use.
    """
    cands_name, refs_name = names
    cands = as_list(cands, cands_name, "a list of strings")
    refs = as_list(refs, refs_name, "a list of strings or of lists of strings")
    if len(cands) != len(refs):
        raise ValueError(f"Different number of candidates and references: {len(cands)} != {len(refs)}")
    cands = _check_strings(cands, cands_name)
    groups = []
    for i, ref in enumerate(refs):
        group = _reference_group(ref, f"{refs_name}[{i}]")
        if len(group) == 0:
            raise ValueError(f"{refs_name}[{i}] is an empty list of references")
        groups.append(_check_strings(group, f"{refs_name}[{i}]"))
    return cands, groups
