"""Smoke test of the compiled extension rapidscore._core."""

import rapidscore
import rapidscore._core as core


def test_core_module_builds_and_reports_its_build():
    info = core.build_info()
    assert info["version"] == core.__version__
    assert rapidscore.__version__ == core.__version__
    assert info["cplusplus"] >= 201703  # C++17 or later
    assert info["debug"] is False or info["debug"] is True
    assert info["hardware_threads"] >= 1
