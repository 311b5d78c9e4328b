"""How the test suite and bench/ share data and models (tests/README.md, "Shared data"): through
``rapidscore.testing`` and conftest.py fixtures, never by editing ``sys.path``, never by a test
importing a bench script, and with each conftest fixture defined once."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TESTS, BENCH = REPO / "tests", REPO / "bench"
# The one test folder that runs bench scripts (it loads bench/bench_gpu.py and runs it as a script).
BENCH_TESTS = TESTS / "bench"
# Built from parts so that this file does not match itself.
SYS_PATH_EDITS = tuple("sys.path." + verb for verb in ("insert", "append", "extend")) + ("syspath_" + "prepend",)


def _files(root: Path, suffixes: tuple[str, ...] | None = None) -> list[Path]:
    return sorted(path for path in root.rglob("*") if path.is_file() and "__pycache__" not in path.parts
                  and (suffixes is None or path.suffix in suffixes))


def _python(root: Path) -> list[Path]:
    return _files(root, (".py",))


def test_no_file_of_tests_or_bench_edits_sys_path():
    """No exception: a bench script run as ``python bench/x.py`` has bench/ as its sys.path[0], so
    it imports its siblings (common.py) as they are; data and models that tests and bench share are
    in ``rapidscore.testing``; a process that must import another build of rapidscore gets it on
    PYTHONPATH (bench/compare_revisions.py, bench/bench_serve_options.py)."""
    found = []
    for path in _files(TESTS) + _files(BENCH):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary results
        for number, line in enumerate(text.splitlines(), 1):
            if any(edit in line for edit in SYS_PATH_EDITS):
                found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not found, "sys.path edited (use rapidscore.testing or a conftest.py fixture):\n" + "\n".join(found)


def _code_strings(tree: ast.AST) -> list[str]:
    """String constants of the code, docstrings left out."""
    docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)
                  and isinstance(node.value, ast.Constant)}
    return [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
            and isinstance(node.value, str) and id(node) not in docstrings]


def test_tests_do_not_import_bench_scripts():
    """What a test needs from a benchmark (W1 pairs, model builders) is in ``rapidscore.testing``;
    only tests/bench/ loads bench scripts (it tests them)."""
    bench_modules = {path.stem for path in _python(BENCH)}
    found = []
    for path in _python(TESTS):
        if BENCH_TESTS in path.parents or path == Path(__file__).resolve():  # this file names bench/ to scan it
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            found += [f"{path.relative_to(REPO)}: imports {name}" for name in names
                      if name.split(".")[0] in bench_modules | {"bench"}]
        found += [f"{path.relative_to(REPO)}: names {text!r}" for text in _code_strings(tree)
                  if text == "bench" or text.startswith("bench/")]
    assert not found, "\n".join(found)


def _fixtures(path: Path) -> set[str]:
    """Names of the functions of ``path`` decorated with ``pytest.fixture`` (called or not)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                if isinstance(target, ast.Attribute) and target.attr == "fixture":
                    names.add(node.name)
    return names


def _conftest_fixtures_above(path: Path) -> dict[str, Path]:
    """Fixture -> the conftest.py that defines it, for every conftest.py that applies to ``path``
    (its folder and the folders above it, up to tests/), ``path`` itself left out."""
    found: dict[str, Path] = {}
    for folder in [path.parent, *path.parent.parents]:
        conftest = folder / "conftest.py"
        if conftest.is_file() and conftest != path:
            found.update(dict.fromkeys(_fixtures(conftest), conftest))
        if folder == TESTS:
            break
    return found


def test_a_conftest_fixture_is_defined_once():
    """A shared model or data set has one fixture: a test module (or a deeper conftest.py) does not
    define again a fixture that a conftest.py above it defines."""
    found = []
    for path in _python(TESTS):
        above = _conftest_fixtures_above(path)
        found += [f"{path.relative_to(REPO)}: {name} (defined in {above[name].relative_to(REPO)})"
                  for name in sorted(_fixtures(path) & set(above))]
    assert not found, "\n".join(found)


def test_the_checks_see_what_they_look_for(tmp_path):
    module = tmp_path / "test_x.py"
    module.write_text("import pytest\nimport common\nfrom bench_gpu import main\n\n"
                      "@pytest.fixture(scope='module')\ndef minilm_path():\n    pass\n\n"
                      "@pytest.fixture\ndef other():\n    '''bench/ named in a docstring only'''\n",
                      encoding="utf-8")
    assert _fixtures(module) == {"minilm_path", "other"}
    assert "minilm_path" in _conftest_fixtures_above(TESTS / "common" / "test_x.py")
    tree = ast.parse(module.read_text(encoding="utf-8"))
    assert not [text for text in _code_strings(tree) if text.startswith("bench")]
    line = "sys.path" + ".insert(0, folder)"
    assert any(edit in line for edit in SYS_PATH_EDITS)


@pytest.mark.parametrize("name", ["similarity_model", "tiny_bert", "w1_pairs", "minilm_path"])
def test_shared_models_and_data_are_root_fixtures(name):
    assert name in _fixtures(TESTS / "conftest.py")
