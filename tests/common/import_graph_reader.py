"""The import graph of rapidscore read from its sources with ``ast``: every kind of import.

Read by tests/common/test_import_graph.py (no cycle, the layers) and test_design_rules.py. A
module A depends on module B when A's source, anywhere (inside functions too: a late import
still ties the two together):

- imports B (``import B``, ``from B import name``, ``from P import B`` for a submodule B of P);
- calls ``import_module(...)`` (``importlib.import_module`` under any alias) with an argument
  that can name B: a constant string; a name or ``TABLE[key]`` whose values are the strings of
  the module's constant tables (``_COMMANDS`` in cli.py, ``BUILTIN`` in metrics.py); an f-string
  whose holes are filled with those strings, with ``__name__``, or, when the module's own tables
  fill none, with the strings of the tables of the rapidscore modules it imports (and their
  parent packages: ``f"{package}.streams"`` in streaming.py, whose packages come from
  ``metrics.BUILTIN``);
- hands a table to ``lazy_exports(__name__, TABLE)`` (common/lazy.py): its module ``__getattr__``
  imports every module the table names.

Imports under ``if TYPE_CHECKING:`` are left out: they run for the type checker only, never when
the package is imported or used, so they cannot form a cycle at run time.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator
from pathlib import Path

import rapidscore

PACKAGE_ROOT = Path(rapidscore.__file__).resolve().parent
IMPORTERS = {"import_module", "_import_module"}  # importlib.import_module as the package spells it


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_paths() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE_ROOT.rglob("*.py"))}


def _is_type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def walk_run_time(tree: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk`` without the bodies of ``if TYPE_CHECKING:`` (their ``else`` is kept)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if _is_type_checking(node):
            stack.extend(node.orelse)  # type: ignore[attr-defined]
            continue
        stack.extend(ast.iter_child_nodes(node))


def _strings(node: ast.AST) -> list[str]:
    """Every string constant in a module-level table's literal (keys and values, nested)."""
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def constant_tables(tree: ast.Module) -> tuple[dict[str, str], dict[str, list[str]]]:
    """``(constants, tables)`` of a module: names bound at module level to one string, and to a
    dict / set / list / tuple literal (or a comprehension over literals) holding strings."""
    constants: dict[str, str] = {}
    tables: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        for target in targets:
            if not isinstance(target, ast.Name):
                continue
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                constants[target.id] = value.value
            elif isinstance(value, (ast.Dict, ast.Set, ast.List, ast.Tuple, ast.DictComp, ast.SetComp, ast.ListComp,
                                    ast.Call)):
                found = _strings(value)
                if found:
                    tables[target.id] = found
    return constants, tables


def _with_parents(values: list[str]) -> list[str]:
    out = []
    for value in values:
        parts = value.split(".")
        out.extend(".".join(parts[:end]) for end in range(len(parts), 0, -1))
    return out


class _Module:
    def __init__(self, name: str, path: Path):
        self.name = name
        self.tree = ast.parse(path.read_text(encoding="utf-8"))
        self.constants, self.tables = constant_tables(self.tree)

    @property
    def table_strings(self) -> list[str]:
        return [s for values in self.tables.values() for s in values]


def _argument_names(node: ast.AST, module: _Module, imported: list[_Module], known: set[str]) -> set[str]:
    """The modules the argument of an ``import_module`` call can name."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.Name):
        if node.id in module.constants:
            return {module.constants[node.id]}
        return {s for s in module.table_strings if s in known}
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in module.tables:
        return {s for s in module.tables[node.value.id] if s in known}
    if isinstance(node, ast.JoinedStr):
        return _fstring_names(node, module, imported, known)
    return set()


def _fstring_names(node: ast.JoinedStr, module: _Module, imported: list[_Module], known: set[str]) -> set[str]:
    def fill(candidates_of_hole) -> set[str]:
        pieces: list[list[str]] = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                pieces.append([str(part.value)])
                continue
            value = part.value  # type: ignore[attr-defined]
            if isinstance(value, ast.Name) and value.id == "__name__":
                pieces.append([module.name])
            elif isinstance(value, ast.Name) and value.id in module.constants:
                pieces.append([module.constants[value.id]])
            else:
                pieces.append(candidates_of_hole)
        return {"".join(combo) for combo in itertools.product(*pieces)} & known

    found = fill(sorted(set(module.table_strings)))
    if not found:  # the holes come from the tables of what the module imports (metrics.BUILTIN)
        found = fill(sorted(set(_with_parents([s for other in imported for s in other.table_strings]))))
    return found


def _static_imports(module: _Module, known: set[str]) -> set[str]:
    found: set[str] = set()
    for node in walk_run_time(module.tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from P import sub` depends on P.sub (P's __init__ loads for any submodule, as for
            # `import P.sub`); `from P import function` on P
            names = [f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in known else node.module
                     for alias in node.names]
        found.update(_known(name, known) for name in names if name.startswith("rapidscore"))
    found.discard("")
    return found


def _known(name: str, known: set[str]) -> str:
    while name not in known and "." in name:  # `from pkg import function` -> pkg
        name = name.rsplit(".", 1)[0]
    return name if name in known else ""


def _dynamic_imports(module: _Module, imported: list[_Module], known: set[str]) -> set[str]:
    found: set[str] = set()
    for node in walk_run_time(module.tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if called in IMPORTERS:
            names = _argument_names(node.args[0], module, imported, known)
        elif called == "lazy_exports" and len(node.args) > 1 and isinstance(node.args[1], ast.Name):
            names = {s for s in module.tables.get(node.args[1].id, []) if s in known}
        else:
            continue
        found.update(_known(name, known) for name in names)
    found.discard("")
    return found


def import_graph() -> dict[str, set[str]]:
    """module -> the rapidscore modules it depends on (see the module's docstring)."""
    paths = module_paths()
    known = set(paths) | {"rapidscore._core"}  # the native module has no .py source
    modules = {name: _Module(name, path) for name, path in paths.items()}
    static = {name: _static_imports(module, known) for name, module in modules.items()}
    graph = {}
    for name, module in modules.items():
        imported = [modules[other] for other in static[name] if other in modules]
        graph[name] = (static[name] | _dynamic_imports(module, imported, known)) - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return stack[stack.index(target):] + [target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None
