"""rapidscore's modules import each other without a cycle, counting imports inside functions too
(layering: common and kernels below the encoder, the encoder below the metrics, the CLI above)."""

from __future__ import annotations

import ast
from pathlib import Path

import rapidscore

PACKAGE_ROOT = Path(rapidscore.__file__).resolve().parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, known: set[str]) -> set[str]:
    """rapidscore modules imported anywhere in the file: a late import inside a function still
    ties the two modules together, so it counts."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
        for name in names:
            if not name.startswith("rapidscore"):
                continue
            while name not in known and "." in name:  # `from pkg import function` -> pkg
                name = name.rsplit(".", 1)[0]
            if name in known:
                found.add(name)
    return found


def _graph() -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in PACKAGE_ROOT.rglob("*.py")}
    known = set(paths) | {"rapidscore._core"}  # the native module has no .py source
    return {name: _imports(path, known) - {name} for name, path in paths.items()}


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
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


def test_graph_is_read_from_the_sources():
    graph = _graph()
    assert "rapidscore.kernels.matching" in graph["rapidscore.bertscore.scorer"] or \
        "rapidscore.encoder.store" in graph["rapidscore.bertscore.scorer"]
    assert "rapidscore.threads" in graph["rapidscore.kernels.matching"]


def test_no_import_cycle():
    cycle = _find_cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_cycle_finder_finds_a_cycle():
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": set()}) is None


# Lower ranks never import higher ones (a module may import within its own rank).
RANKS = {
    "rapidscore._version": 0, "rapidscore._core": 0, "rapidscore.errors": 0, "rapidscore.threads": 0,
    "rapidscore.common": 0, "rapidscore.kernels": 1, "rapidscore.encoder": 1,
    "rapidscore.device": 1,  # the tensor path: the torch runner and the matching dispatcher use it
    "rapidscore.device.engine": 2,  # BERTScore's device engine: uses bertscore/finishing.py
    "rapidscore.bertscore": 2, "rapidscore.bert_score": 2, "rapidscore.nrr": 2, "rapidscore.ner": 2,
    "rapidscore.abstention": 2, "rapidscore.streaming": 2, "rapidscore.metrics": 2, "rapidscore.integrations": 3,
    "rapidscore.serve": 3, "rapidscore.cli": 3, "rapidscore.metric_cli": 3, "rapidscore.__main__": 3, "rapidscore.export_cli": 3,
    "rapidscore.report": 3,  # the HTML report: reads every metric's outputs, like the CLI
    "rapidscore.testing": 3,  # test and benchmark data generators: they may use any metric, none uses them
    "rapidscore": 0,  # the root __init__ loads only _version and errors; public names resolve lazily
}


def _rank(module: str) -> int:
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in RANKS:
            return RANKS[prefix]
    raise AssertionError(f"{module} has no layer in RANKS: add it")


def _area(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_imports_point_down_the_layers():
    graph = _graph()
    upward = [(source, target) for source, targets in graph.items() for target in targets
              if _rank(target) > _rank(source)]
    sideways = [(source, target) for source, targets in graph.items() for target in targets
                if {_area(source), _area(target)} == {"kernels", "encoder"}]
    assert not upward, f"imports up the layers: {upward}"
    assert not sideways, f"kernels and encoder import each other: {sideways}"


def test_rank_check_sees_an_upward_import():
    assert _rank("rapidscore.bertscore.scorer") > _rank("rapidscore.encoder.store")
    assert _area("rapidscore.kernels.matching") == "kernels"
