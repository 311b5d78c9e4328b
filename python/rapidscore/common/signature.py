"""Reproducibility signatures in the style of sacrebleu's: ``name|key:value|key:value|...``.

Every metric builds its signature here so that all of them read alike: ordered fields, values
formatted one way (floats with ``:g``, booleans as yes/no, None as none), version fields last.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rapidscore._version import __version__

__all__ = ["Signature", "build_signature", "format_value", "package_version", "version_fields"]


def format_value(value: Any) -> str:
    """How a field value is written: floats ``:g``, booleans yes/no, None none, else ``str``."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "none"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


@functools.cache  # metadata lookups scan sys.path: once per process and package
def package_version(name: str) -> str:
    """Installed version of a distribution, or ``"none"`` when it is not installed."""
    from importlib.metadata import PackageNotFoundError, version  # slow to import: only when needed

    try:
        return version(name)
    except PackageNotFoundError:
        return "none"


def version_fields(*packages: str) -> list[tuple[str, str]]:
    """``("version", rapidscore's version)`` then ``(package, its version)`` for each package."""
    return [("version", __version__), *((name, package_version(name)) for name in packages)]


@dataclass(frozen=True)
class Signature:
    """An ordered set of ``key:value`` fields, optionally led by the metric's name.

    ``str(signature)`` is the signature string; ``Signature.parse`` reads one back.
    """

    fields: tuple[tuple[str, str], ...]
    name: str | None = None

    def __init__(self, fields: Iterable[tuple[str, Any]], name: str | None = None):
        formatted = []
        for key, value in fields:
            text = format_value(value)
            if not key or any(c in key for c in "|:"):
                raise ValueError(f"signature key {key!r} must be non-empty, without '|' or ':'")
            formatted.append((key, text))
        object.__setattr__(self, "fields", tuple(formatted))
        object.__setattr__(self, "name", name)

    def __str__(self) -> str:
        parts = [f"{key}:{value}" for key, value in self.fields]
        return "|".join([self.name, *parts] if self.name else parts)

    def as_dict(self) -> dict[str, str]:
        return dict(self.fields)

    def extend(self, fields: Iterable[tuple[str, Any]]) -> Signature:
        """A new signature with more fields after these."""
        return Signature([*self.fields, *fields], self.name)

    @classmethod
    def parse(cls, text: str) -> Signature:
        """Read ``str(signature)`` back (a leading part without ':' is the name; values holding
        '|', such as an odd model path, do not round-trip)."""
        parts = text.split("|")
        name = None
        if parts and ":" not in parts[0]:
            name, parts = parts[0], parts[1:]
        fields = []
        for part in parts:
            key, sep, value = part.partition(":")
            if not sep:
                raise ValueError(f"signature part {part!r} is not key:value")
            fields.append((key, value))
        return cls(fields, name)


def build_signature(fields: Iterable[tuple[str, Any]], name: str | None = None) -> str:
    """The signature string of ordered ``(key, value)`` fields, e.g.
    ``build_signature([("model", m), ("layer", 6), *version_fields("onnxruntime")])``.

    Scorers rebuild their signature on every call; the strings of recent field lists are kept.
    """
    fields = tuple(fields)
    # The value's type is part of the key: True == 1 but formats as "yes", 1.0 as "1".
    key = (tuple((k, type(v), v) for k, v in fields), name)
    try:
        return _cached_signature(key)
    except TypeError:  # an unhashable value
        return str(Signature(fields, name))


@functools.lru_cache(maxsize=256)
def _cached_signature(key) -> str:
    typed_fields, name = key
    return str(Signature(((k, v) for k, _, v in typed_fields), name))
