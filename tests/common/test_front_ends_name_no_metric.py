"""The generic front ends name no metric (issue 37): Ray's batch classes and the streaming
runner find every metric in the registry and in the metrics' own declarations (names, older
names, batch class names, dataset passes), so neither module holds a string that is a built-in
metric's name or alias. Read from the sources with ``ast`` (docstrings left out: prose may name
a metric)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import rapidscore

PACKAGE_ROOT = Path(rapidscore.__file__).resolve().parent
FRONT_ENDS = ("integrations/ray.py", "streaming.py")


def _metric_names() -> set[str]:
    from rapidscore.metrics import BUILTIN, get_metric

    return {name for builtin in BUILTIN for name in (builtin, *get_metric(builtin).aliases)}


def _docstrings(tree: ast.Module) -> set[int]:
    """ids of the docstring nodes of the module, its classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and \
                    isinstance(first.value.value, str):
                found.add(id(first.value))
    return found


def metric_names_in(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, string) of every string constant (f-string parts included, docstrings not) that is
    one of ``names``, compared without case or surrounding spaces."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    return sorted((node.lineno, node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                  and node.value.strip().lower() in names)


def test_the_checked_names_are_the_builtin_metrics_and_aliases():
    assert _metric_names() >= {"bertscore", "nrr", "similarity", "ner", "refusal"}


@pytest.mark.parametrize("module", FRONT_ENDS)
def test_front_end_holds_no_metric_name(module):
    found = metric_names_in((PACKAGE_ROOT / module).read_text(encoding="utf-8"), _metric_names())
    assert not found, f"{module} names metrics (line, string): {found}"


def test_the_check_sees_a_name():
    source = ('"""A docstring naming bertscore is prose."""\n'
              'CLASSES = {"bertscore": 1}\n'
              'def f(x="NER"):\n    """nrr"""\n    return f"{x}" + "similarity"\n')
    assert metric_names_in(source, _metric_names()) == [(2, "bertscore"), (3, "NER"), (5, "similarity")]
