"""Fixtures of the tests that read rapidscore's sources with ``ast`` (test_design_rules.py,
test_import_graph.py): the import graph reader beside this file, loaded once by path (tests/common
is no package, and pytest imports test modules without putting their folder on ``sys.path``)."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest


def _load_beside(stem: str) -> ModuleType:
    name = f"rapidscore_tests_{stem}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{stem}.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture(scope="session")
def graph_reader() -> ModuleType:
    """``import_graph_reader.py``: the import graph of rapidscore read from its sources."""
    return _load_beside("import_graph_reader")


@pytest.fixture(scope="session")
def package_sources(graph_reader) -> dict[str, tuple[Path, ast.Module]]:
    """``{module name: (path, ast tree)}`` of every module of python/rapidscore."""
    return {graph_reader.module_name(path): (path, ast.parse(path.read_text(encoding="utf-8")))
            for path in sorted(graph_reader.PACKAGE_ROOT.rglob("*.py"))}
