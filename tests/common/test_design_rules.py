"""Design rules of python/rapidscore, read from the sources with ``ast`` (issue 47):

- no stand-in for a class: no module-level ``Name = Any`` where Name is a class of the package
  (the structure it hides belongs in an import, under ``if TYPE_CHECKING:`` if need be);
- no import cycle of any kind (the graph of ``import_graph_reader.py``: import statements,
  ``import_module``, module ``__getattr__`` tables; ``TYPE_CHECKING`` imports left out);
- no file over 500 lines unless its module docstring says why, in a sentence starting
  "Over 500 lines because";
- no ``getattr(`` on a runner: the ``Runner`` protocol declares every member a caller uses, so a
  caller reads it directly;
- helpers written once: no two module-level functions with the same name and the same body in
  two modules.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import rapidscore

PACKAGE_ROOT = Path(rapidscore.__file__).resolve().parent
MAX_LINES = 500
WHY_LONG = "Over 500 lines because"


def _package_classes(sources: dict[str, tuple[Path, ast.Module]]) -> set[str]:
    return {node.name for _path, tree in sources.values() for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}


def class_stand_ins(sources: dict[str, tuple[Path, ast.Module]]) -> list[str]:
    """``module:line Name = Any`` for each module-level alias of ``Any`` named as a class of the package."""
    classes = _package_classes(sources)
    found = []
    for module, (_path, tree) in sources.items():
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, ast.AnnAssign) and node.value is not None else []
            value = getattr(node, "value", None)
            is_any = (isinstance(value, ast.Name) and value.id == "Any") or \
                (isinstance(value, ast.Attribute) and value.attr == "Any")
            for target in targets:
                if is_any and isinstance(target, ast.Name) and target.id in classes:
                    found.append(f"{module}:{node.lineno} {target.id} = Any")
    return found


def long_files(sources: dict[str, tuple[Path, ast.Module]]) -> list[str]:
    found = []
    for module, (path, tree) in sources.items():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES and WHY_LONG not in " ".join((ast.get_docstring(tree) or "").split()):
            found.append(f"{module}: {lines} lines")
    return found


def _ends_in_runner(node: ast.AST) -> bool:
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return name.lower().endswith("runner")


def runner_getattrs(sources: dict[str, tuple[Path, ast.Module]]) -> list[str]:
    """``module:line`` of each ``getattr(x.runner, ...)`` / ``getattr(runner, ...)`` call."""
    return [f"{module}:{node.lineno}" for module, (_path, tree) in sources.items() for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
            and node.args and _ends_in_runner(node.args[0])]


def _body_dump(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]  # a docstring may differ: the code is what is written twice
    return ast.dump(ast.Module(body=body, type_ignores=[])) + ast.dump(function.args)


def helpers_written_twice(sources: dict[str, tuple[Path, ast.Module]]) -> list[str]:
    """``name: module, module`` for module-level functions of one name and one body in two modules."""
    places: dict[tuple[str, str], list[str]] = defaultdict(list)
    for module, (_path, tree) in sources.items():
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                places[(node.name, _body_dump(node))].append(module)
    return sorted(f"{name}: {', '.join(modules)}" for (name, _body), modules in places.items() if len(modules) > 1)


def test_no_class_stand_ins(package_sources) -> None:
    found = class_stand_ins(package_sources)
    assert not found, f"a class stood in for by Any (import it, under TYPE_CHECKING if need be): {found}"


def test_no_import_cycle_of_any_kind(graph_reader) -> None:
    cycle = graph_reader.find_cycle(graph_reader.import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_file_over_500_lines_without_a_reason(package_sources) -> None:
    found = long_files(package_sources)
    assert not found, f"split by job, or say '{WHY_LONG} ...' in the module docstring: {found}"


def test_no_getattr_on_a_runner(package_sources) -> None:
    found = runner_getattrs(package_sources)
    assert not found, f"declare the member on the Runner protocol and read it directly: {found}"


def test_helpers_written_once(package_sources) -> None:
    found = helpers_written_twice(package_sources)
    assert not found, f"one helper, imported where it is used: {found}"


def test_the_rules_see_what_they_forbid(tmp_path: Path) -> None:
    """Each rule finds its case in a made-up package (a rule that finds nothing proves nothing)."""
    code = {
        "a": "from typing import Any\nBERTScore = Any\ndef helper(x):\n    return x + 1\n"
             "def read(encoder):\n    return getattr(encoder.runner, 'graphs', None)\n",
        "b": "class BERTScore:\n    pass\ndef helper(x):\n    '''other words'''\n    return x + 1\n"
             "def helper2(x):\n    return x + 2\n",
        "c": '"""A long module. Over 500 lines because it is a table."""\n' + "x = 1\n" * 501,
        "d": '"""A long module."""\n' + "x = 1\n" * 501,
    }
    sources = {}
    for name, text in code.items():
        path = tmp_path / f"{name}.py"
        path.write_text(text)
        sources[name] = (path, ast.parse(text))
    assert class_stand_ins(sources) == ["a:2 BERTScore = Any"]
    assert runner_getattrs(sources) == ["a:6"]
    assert helpers_written_twice(sources) == ["helper: a, b"]
    assert long_files(sources) == ["d: 502 lines"]
