"""Smoke test of the compiled extension rapidscore._core and its submodules."""

import rapidscore
import rapidscore._core as core


def test_core_module_builds_and_reports_its_build():
    info = core.build_info
    assert info.version == core.__version__
    assert rapidscore.__version__ == core.__version__
    assert info.cplusplus >= 201703  # C++17 or later
    assert info.debug is False or info.debug is True
    assert isinstance(info.compiler, str) and info.compiler
    assert info.hardware_threads() >= 1


def test_core_submodules_mirror_the_python_packages():
    assert {"build_info", "matching", "alignment", "phrases"} <= set(vars(core))
    assert callable(core.matching.greedy_match) and callable(core.matching.pairwise_match)
    assert callable(core.alignment.align_spans_batch)
    assert callable(core.phrases.FuzzyPhraseMatcher)
    # The flat names of the old layout are gone: every caller uses the submodules.
    assert not hasattr(core, "greedy_match") and not hasattr(core, "align_spans_batch")


def test_type_stub_lists_exactly_the_native_names():
    """python/rapidscore/_core.pyi describes every submodule, function and class of _core."""
    import ast
    from pathlib import Path

    stub = ast.parse((Path(rapidscore.__file__).parent / "_core.pyi").read_text())
    classes = {node.name: node for node in stub.body if isinstance(node, ast.ClassDef)}
    submodules = {
        node.target.id: classes[node.annotation.id]
        for node in stub.body
        if isinstance(node, ast.AnnAssign) and isinstance(node.annotation, ast.Name) and node.annotation.id in classes
    }
    assert set(submodules) == {name for name, value in vars(core).items() if type(value).__name__ == "module"}
    for name, body in submodules.items():
        declared = {
            node.target.id if isinstance(node, ast.AnnAssign) else node.name
            for node in body.body
            if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AnnAssign))
        }
        public = {attr for attr in vars(getattr(core, name)) if not attr.startswith("__")}
        assert declared == public, name
    assert (Path(rapidscore.__file__).parent / "py.typed").is_file()
