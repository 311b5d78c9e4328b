"""Fixtures of the kernel tests: run a test module on both implementations of the kernels.

``kernel_implementation`` sets ``RAPIDSCORE_IMPLEMENTATION`` to "native" (the C++ extension) or
"python" (the pure-Python twins) for every test of a module that uses it
(``pytestmark = pytest.mark.usefixtures("kernel_implementation")``), so each test case runs on
both. It is module-scoped, so hypothesis tests may use it (one setting for all their examples).
"""

from __future__ import annotations

import pytest

KERNEL_IMPLEMENTATIONS = ("native", "python")


@pytest.fixture(scope="module", params=KERNEL_IMPLEMENTATIONS)
def kernel_implementation(request):
    """The implementation the kernels run for this module's tests: "native" or "python"."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAPIDSCORE_IMPLEMENTATION", request.param)
        yield request.param
