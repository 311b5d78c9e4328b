"""The protocol every metric result implements, and the helpers behind it.

``to_dict()`` is JSON-serialisable (numpy arrays and scalars become lists and Python numbers),
``to_frame()`` is a pandas DataFrame (pandas imported on call), ``str(result)`` is a one-line
summary holding the signature, so a printed result says how it was computed.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Protocol, runtime_checkable

__all__ = ["MetricResult", "import_pandas", "jsonable"]


@runtime_checkable
class MetricResult(Protocol):
    signature: str

    def to_dict(self) -> dict: ...

    def to_frame(self) -> Any: ...

    def __str__(self) -> str: ...


def import_pandas() -> ModuleType:
    """pandas, or an ImportError saying what to install (it is not a dependency of rapidscore)."""
    try:
        import pandas
    except ImportError as exc:
        raise ImportError("to_frame() needs pandas: pip install pandas") from exc
    return pandas


def jsonable(value: Any) -> Any:
    """``value`` with numpy arrays/scalars turned into lists and Python numbers, recursively."""
    if isinstance(value, dict):
        return {key: jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    if type(value).__module__ == "numpy":  # arrays and scalars (np.float32, np.bool_, ...)
        return value.tolist()
    return value
