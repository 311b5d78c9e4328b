"""The generic front ends name no metric (issues 37, 47): the shared layer (common/), the service
(serve/), the streaming runner and Ray's batch classes find every metric in the registry and in
the metrics' own declarations (names, older names, options, batch class names, dataset passes),
so none of them holds a string that is a built-in metric's name or alias, nor a string,
attribute or keyword that is an option only some metrics declare (``idf_file``, ``num_layers``,
``threshold``, ...), nor a string that is a flag of one metric's own command (``seg_level``,
``memory_budget``: whether a flag can change a number is declared with the flag); and the metric
contract has no serving hooks: ``Metric``'s methods and class attributes are the allowed few.
Read from the sources with ``ast`` (docstrings left out: prose may name a metric)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import rapidscore

PACKAGE_ROOT = Path(rapidscore.__file__).resolve().parent
FRONT_ENDS = ("integrations/ray.py", "streaming.py",
              *sorted(str(path.relative_to(PACKAGE_ROOT)) for folder in ("common", "serve")
                      for path in (PACKAGE_ROOT / folder).glob("*.py")))

# The metric contract (issue 47): the names a metric author learns, and no more. Anything a front
# end needs beyond these is declared in ``options``, ``rows`` or ``front_ends``, or computed from
# the declarations.
CONTRACT = {
    # what the metric is
    "name", "inputs", "outputs", "options",
    # what it does
    "settings", "build", "score", "stream", "totals", "task", "signature",
    # the row facts and the front ends' presentation, one declared object each (defaults: a metric
    # declares only what differs)
    "rows", "front_ends",
}


def _metric_names() -> set[str]:
    from rapidscore.metrics import BUILTIN, get_metric

    return {name for builtin in BUILTIN for name in (builtin, *get_metric(builtin).front_ends.aliases)}


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


def test_the_checked_names_are_the_builtin_metrics_and_aliases() -> None:
    assert _metric_names() >= {"bertscore", "nrr", "similarity", "ner", "refusal"}


@pytest.mark.parametrize("module", FRONT_ENDS)
def test_front_end_holds_no_metric_name(module) -> None:
    found = metric_names_in((PACKAGE_ROOT / module).read_text(encoding="utf-8"), _metric_names())
    assert not found, f"{module} names metrics (line, string): {found}"


def test_the_check_sees_a_name() -> None:
    source = ('"""A docstring naming bertscore is prose."""\n'
              'CLASSES = {"bertscore": 1}\n'
              'def f(x="NER"):\n    """nrr"""\n    return f"{x}" + "similarity"\n')
    assert metric_names_in(source, _metric_names()) == [(2, "bertscore"), (3, "NER"), (5, "similarity")]


def _one_metric_options() -> set[str]:
    """Option names some registered metrics declare and others do not: one metric's concern.
    The engine keywords and the server's own settings (model, layer, long_texts, ...) are every
    front end's vocabulary."""
    import builtins
    from dataclasses import fields

    from rapidscore.common.engine_options import ENGINE_KEYWORDS
    from rapidscore.metrics import BUILTIN, get_metric
    from rapidscore.serve.config import ServeConfig

    declared = [{option.name for option in get_metric(name).options} for name in BUILTIN]
    # Python's own names (NER's ``format`` is the builtin's name too: a keyword of pandas and pyarrow)
    shared = set.intersection(*declared) | set(ENGINE_KEYWORDS) | {f.name for f in fields(ServeConfig)} | set(
        dir(builtins))
    return set.union(*declared) - shared


# Python's own methods of its built-in types (``"...".split``): an attribute of that name is not an
# option
_BUILTIN_ATTRIBUTES = {name for kind in (str, bytes, dict, list, tuple, set) for name in dir(kind)}

# A name that is an option of one metric and, here, something else: (module, name) -> what it is
NOT_OPTIONS = {
    ("serve/app.py", "method"): "the ASGI scope's HTTP method",
}


def _parser_dests(add_arguments) -> set[str]:
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return {action.dest for action in parser._actions}


def _one_metric_flags() -> set[str]:
    """The flags (argparse dests) of one built-in metric's own command that no other metric's
    command has and that no shared layer declares (the common options, the streaming options, the
    generic command's flags): ``seg_level``, ``memory_budget``, ``gold``, ..."""
    import builtins
    from collections import Counter
    from dataclasses import fields
    from importlib import import_module

    from rapidscore.common.cli_options import add_common_options, add_long_texts_option
    from rapidscore.common.engine_options import ENGINE_KEYWORDS
    from rapidscore.common.stream_io import add_stream_arguments
    from rapidscore.metric_cli import MetricCommand
    from rapidscore.metrics import BUILTIN, get_metric
    from rapidscore.serve.config import ServeConfig

    def shared_layers(parser) -> None:
        add_common_options(parser)
        add_stream_arguments(parser)
        add_long_texts_option(parser)

    commands = {name: get_metric(name).front_ends.command for name in BUILTIN}
    generic = next(name for name, module in commands.items() if module is None)
    shared = _parser_dests(shared_layers) | _parser_dests(MetricCommand(generic).add_arguments) | set(
        ENGINE_KEYWORDS) | {f.name for f in fields(ServeConfig)} | set(dir(builtins))
    flags = Counter(dest for module in set(commands.values()) if module is not None
                    for dest in _parser_dests(import_module(module).add_arguments))
    return {dest for dest, count in flags.items() if count == 1} - shared


def option_names_in(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, name) of every string constant (docstrings left out), attribute (not a built-in
    type's method) and keyword argument that is one of ``names``."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            value = node.value.strip()
        elif isinstance(node, ast.Attribute) and node.attr not in _BUILTIN_ATTRIBUTES:
            value = node.attr
        elif isinstance(node, ast.keyword) and node.arg is not None:
            value = node.arg
        else:
            continue
        if value in names:
            found.append((getattr(node, "lineno", 0), value))
    return sorted(found)


def test_the_checked_options_are_single_metrics() -> None:
    names = _one_metric_options()
    assert {"idf_file", "num_layers", "rescale_with_baseline", "lang", "threshold", "method",
            "similarity_threshold", "refusal_model", "label_similarity"} <= names
    assert not names & {"model", "backend", "num_threads", "long_texts", "layer"}


@pytest.mark.parametrize("module", FRONT_ENDS)
def test_front_end_holds_no_option_of_one_metric(module) -> None:
    found = [(line, name) for line, name in option_names_in((PACKAGE_ROOT / module).read_text(encoding="utf-8"),
                                                            _one_metric_options())
             if (module, name) not in NOT_OPTIONS]
    assert not found, f"{module} names options of one metric (line, name): {found}"


def test_the_option_check_sees_a_name() -> None:
    source = ('"""idf_file in prose."""\n'
              'x = options["idf_file"]\n'
              'y = config.num_layers\n'
              'z = build(threshold=0.5)\n')
    assert option_names_in(source, {"idf_file", "num_layers", "threshold"}) == [
        (2, "idf_file"), (3, "num_layers"), (4, "threshold")]


def test_the_checked_flags_are_single_metric_commands() -> None:
    flags = _one_metric_flags()
    assert {"seg_level", "memory_budget", "cache_tokens", "verbose", "gold", "threshold"} <= flags
    assert not flags & {"threads", "chunk_size", "resume", "json", "quiet", "progress", "max_record_bytes", "input"}


@pytest.mark.parametrize("module", FRONT_ENDS)
def test_front_end_holds_no_flag_of_one_metric(module) -> None:
    """A flag's name as a string (a list of flags by name, as ``RUN_ONLY_OPTIONS`` was) is one
    metric's knowledge in a shared layer: a property of a flag is declared where the flag is."""
    found = [(line, name) for line, name in metric_names_in((PACKAGE_ROOT / module).read_text(encoding="utf-8"),
                                                            _one_metric_flags())
             if (module, name) not in NOT_OPTIONS]
    assert not found, f"{module} names flags of one metric's command (line, name): {found}"


def _class_names(tree: ast.Module, name: str) -> set[str]:
    """The methods and class attributes of the class ``name`` in ``tree``."""
    cls = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == name)
    names = set()
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(target.id for target in node.targets if isinstance(target, ast.Name))
    return {name for name in names if not (name.startswith("__") and name.endswith("__"))}


def test_the_metric_contract_has_no_serving_hook() -> None:
    names = _class_names(ast.parse((PACKAGE_ROOT / "common" / "metric.py").read_text(encoding="utf-8")), "Metric")
    assert not [name for name in names if name.startswith("serv")], names
    assert names <= CONTRACT, f"names on Metric beyond the contract: {sorted(names - CONTRACT)}"
    from rapidscore.common.metric import Metric

    public = {name for name in dir(Metric) if not name.startswith("_")}
    assert public <= CONTRACT, sorted(public - CONTRACT)


def test_the_contract_check_sees_a_hook() -> None:
    source = "class Metric:\n    name = 'x'\n    def serve_engine(self): ...\n    def __repr__(self): ...\n"
    assert _class_names(ast.parse(source), "Metric") == {"name", "serve_engine"}
