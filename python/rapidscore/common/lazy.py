"""Package namespaces whose public names load on first access.

A package ``__init__`` that imports its modules eagerly makes ``import rapidscore.X.cli`` (the
argument definitions) load numpy and the kernels too; with these hooks it loads nothing.
"""

from __future__ import annotations

import sys
from importlib import import_module
from typing import Any, Callable

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list]]:
    """``(__getattr__, __dir__)`` for ``package``: ``exports`` maps a public name to the module
    defining it; any other name is tried as a submodule."""

    def __getattr__(name: str) -> Any:
        module_name = exports.get(name)
        if module_name is None:
            try:
                return import_module(f"{package}.{name}")  # the import binds it on the package
            except ModuleNotFoundError as exc:
                if exc.name != f"{package}.{name}":
                    raise
                raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(import_module(module_name), name)
        setattr(sys.modules[package], name, value)  # later lookups skip this hook
        return value

    def __dir__() -> list:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__
