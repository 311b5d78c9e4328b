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
