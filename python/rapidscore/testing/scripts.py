"""A script of bench/ or tools/ loaded as a module by the tests, without touching ``sys.path``."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["load_file", "load_script"]


def load_file(name: str, path: Path) -> ModuleType:
    """The Python file ``path`` executed as a module named ``name`` (not put in ``sys.modules``)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_script(path: Path, name: str, siblings: tuple[str, ...] = ("common",)) -> ModuleType:
    """The script ``path`` as a module named ``name``. Run as a script, its folder is its
    ``sys.path[0]`` and it imports its ``siblings`` (bench/common.py ...) by their bare names: they
    are loaded first and named so only while the script's top runs."""
    saved = {sibling: sys.modules.get(sibling) for sibling in siblings}
    for sibling in siblings:
        sys.modules[sibling] = load_file(sibling, path.parent / f"{sibling}.py")
    try:
        return load_file(name, path)
    finally:
        for sibling, module in saved.items():
            if module is None:
                del sys.modules[sibling]
            else:
                sys.modules[sibling] = module
