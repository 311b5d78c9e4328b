"""No module of rapidscore uses another module's private names (issue 27), read from the sources
with ``ast`` as the layer rank test reads imports.

The rule. A name is private when it starts with one underscore and is not a dunder (``_prf``,
``_core``; not ``__version__``). A private name belongs to what holds it: a private function,
class or constant to its module, a private module (``_core``, ``_version``, ``kernels/_checks.py``,
``abstention/_text.py``) to its package. A module may use a private name only from inside its
owner: ``rapidscore.kernels.matching`` may import ``rapidscore.kernels._checks`` (same package)
and any module may import ``rapidscore._core`` or ``rapidscore._version`` (private to the root
package, which holds every module), but ``rapidscore.streaming`` may not import
``rapidscore.ner.evaluation._prf``. Checked for ``from ... import`` and for attribute chains off
an imported module (``import rapidscore.x as m; m._name``).

Beyond imports: ``obj._name`` reads a private attribute of another object, and is allowed only
where ``obj`` is ``self``, ``cls``, ``super()``, ``type(self)``, a class defined in the same
module or an instance of one made there (``Model(...)._pairs``, or ``model = Model(...)`` then
``model._pairs``: a name so assigned anywhere in the module counts); ``getattr``, ``hasattr`` and
``setattr`` with a private name in a string count too. namedtuple's underscored methods are its
public API. The few other uses (third-party names that are the only way to a needed value, and
a type that exists only in the stub ``_core.pyi``) are in ``ALLOWED``: each entry names the
module that uses the name, and says why.
"""

from __future__ import annotations

import ast
from pathlib import Path

import rapidscore

PACKAGE_ROOT = Path(rapidscore.__file__).resolve().parent

# (module that uses it, private name): why.
ALLOWED: dict[tuple[str, str], str] = {
    ("rapidscore.cli", "_actions"): "argparse lists a parser's subcommands nowhere else",
    ("rapidscore.cli", "_SubParsersAction"): "argparse's type of the subcommands action, to find it",
    ("rapidscore.common.cli_options", "_ArgumentGroup"): "argparse's type of add_argument_group()'s result",
    ("rapidscore.common.stream_io", "_ArgumentGroup"): "argparse's type of add_argument_group()'s result",
    ("rapidscore.kernels.phrases", "_Phrases"): "the stub _core.pyi's type of the native submodule "
                                               "(imported for typing only; kernels wraps _core)",
    ("rapidscore.encoder.runtime.torch", "_attn_implementation"): "transformers' config holds the attention "
                                                                  "implementation only there",
}

# namedtuple's public API is underscored so as not to clash with field names (documented).
NAMEDTUPLE_API = {"_asdict", "_replace", "_fields", "_make", "_field_defaults"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__")) and name != "_"


def _foreign_private(importer: str, dotted: str) -> bool:
    """Whether the rapidscore name ``dotted`` has a private component that ``importer`` may not
    use: the owner of ``a.b._c`` is ``a.b``, and ``importer`` may use ``_c`` when it is ``a.b``
    or a module below it, or ``ALLOWED`` lists it."""
    parts = dotted.split(".")
    for end in range(1, len(parts)):
        if _is_private(parts[end]):
            owner = ".".join(parts[:end])
            inside = importer == owner or importer.startswith(owner + ".")
            if not inside and (importer, parts[end]) not in ALLOWED:
                return True
    return False


def _dotted(node: ast.AST) -> list[str] | None:
    """``a.b.c`` as ["a", "b", "c"]; None for anything but a chain of names."""
    names: list[str] = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(names)]


def _is_own_object(node: ast.AST, own_classes: set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id in {"self", "cls"} | own_classes
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id in {"super"} | own_classes:  # super(), or an instance made here
            return True
        if node.func.id == "type" and len(node.args) == 1:
            return _is_own_object(node.args[0], own_classes)
    return False


def _violations(module: str, source: str) -> list[str]:
    """Every use of another module's private name in one module's source."""
    tree = ast.parse(source)
    own_classes = {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    own_classes |= {  # names bound to an instance of a class of this module: `model = Model(...)`
        target.id for node in ast.walk(tree) if isinstance(node, ast.Assign) and _is_own_object(node.value, own_classes)
        for target in node.targets if isinstance(target, ast.Name)}
    aliases: dict[str, str] = {}  # local name -> the rapidscore module or name it stands for
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("rapidscore"):
                    if _foreign_private(module, alias.name):
                        found.append(f"{module}:{node.lineno} imports {alias.name}")
                    if alias.asname:
                        aliases[alias.asname] = alias.name
                    else:
                        aliases[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rapidscore"):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if _foreign_private(module, full):
                    found.append(f"{module}:{node.lineno} imports {full}")
                aliases[alias.asname or alias.name] = full
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr", "setattr") and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
                and _is_private(node.args[1].value) and not _is_own_object(node.args[0], own_classes)
                and (module, node.args[1].value) not in ALLOWED):
            found.append(f"{module}:{node.lineno} reads {ast.unparse(node)}")
        if not isinstance(node, ast.Attribute) or not _is_private(node.attr):
            continue
        chain = _dotted(node)
        if chain is not None and chain[0] in aliases:  # off an imported rapidscore module or name
            full = ".".join([aliases[chain[0]], *chain[1:]])
            if _foreign_private(module, full):
                found.append(f"{module}:{node.lineno} uses {full}")
            continue
        if _is_own_object(node.value, own_classes) or node.attr in NAMEDTUPLE_API:
            continue
        if (module, node.attr) not in ALLOWED:
            found.append(f"{module}:{node.lineno} reads {ast.unparse(node)}")
    return found


def _all_violations() -> list[str]:
    return [violation for path in sorted(PACKAGE_ROOT.rglob("*.py"))
            for violation in _violations(_module_name(path), path.read_text(encoding="utf-8"))]


def test_no_module_uses_another_modules_private_names() -> None:  # issue 27
    violations = _all_violations()
    assert not violations, "private names used from outside their module:\n" + "\n".join(violations)


def test_every_allowed_name_is_still_used() -> None:  # issue 27: the list stays short
    sources = {_module_name(path): path.read_text(encoding="utf-8") for path in PACKAGE_ROOT.rglob("*.py")}
    stale = [key for key in ALLOWED if key[1] not in sources.get(key[0], "")]
    assert not stale, f"remove from ALLOWED: {stale}"


def test_the_check_sees_each_kind_of_use() -> None:  # issue 27
    source = "\n".join([
        "from rapidscore.ner.evaluation import _prf",
        "import rapidscore.kernels.padding as padding",
        "from rapidscore.kernels import _checks",
        "from rapidscore import _core",
        "import argparse",
        "class Scorer:",
        "    def f(self, other):",
        "        self._ok, Scorer._ok, type(self)._ok, super()._ok",
        "        padding._floors(other._state)",
        "        Scorer()._ok, Other()._not_ours, getattr(self, '_ok'), getattr(other, '_state', None)",
        "        made = Scorer(); made._ok; elsewhere = Other(); elsewhere._not_ours",
        "        return other._replace(x=1)",
    ])
    assert sorted(_violations("rapidscore.streaming", source)) == sorted([
        "rapidscore.streaming:1 imports rapidscore.ner.evaluation._prf",
        "rapidscore.streaming:3 imports rapidscore.kernels._checks",
        "rapidscore.streaming:9 uses rapidscore.kernels.padding._floors",
        "rapidscore.streaming:9 reads other._state",
        "rapidscore.streaming:10 reads Other()._not_ours",
        "rapidscore.streaming:10 reads getattr(other, '_state', None)",
        "rapidscore.streaming:11 reads elsewhere._not_ours",
    ])
    # a private module is open to its own package; _core to every module of rapidscore
    assert _violations("rapidscore.kernels.matching", "from rapidscore.kernels import _checks\n"
                       "from rapidscore import _core\nfrom rapidscore._version import __version__") == []
    assert _violations("rapidscore.kernels", "from rapidscore.kernels._checks import check") == []
    assert _violations("rapidscore.ner.evaluation", "from rapidscore.ner.evaluation import _prf") == []
    assert _violations("rapidscore.kernels.matching", "from rapidscore.kernels._checks import _helper") == [
        "rapidscore.kernels.matching:1 imports rapidscore.kernels._checks._helper"]
    # an allowed name is allowed only in the module that the list names
    assert _violations("rapidscore.cli", "import argparse\nargparse._SubParsersAction") == []
    assert _violations("rapidscore.nrr.cli", "import argparse\nargparse._SubParsersAction") == [
        "rapidscore.nrr.cli:2 reads argparse._SubParsersAction"]
