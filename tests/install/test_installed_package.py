"""The installed-package test set: what a wheel (or a fallback install) must do once installed.

Runs in the main suite against the editable install, and against an installed wheel from outside
the source tree (cibuildwheel's test command, tests/install/test_wheels.py) with
``-c tests/install/installed.ini``. Only numpy and the package's own dependencies are needed: no
model, no torch, no onnxruntime. Environment, set by those runners:

- ``RAPIDSCORE_TEST_INSTALLED=1``: rapidscore must come from site-packages, not a source tree;
- ``RAPIDSCORE_TEST_EXPECT=python``: a fallback install (no extension): the kernels run their
  pure-Python twins after one RapidscoreWarning; default ``native``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import rapidscore
from rapidscore.kernels import _native, matching_ref
from rapidscore.kernels.matching import flatten_sentences, greedy_match, pairwise_match
from rapidscore.ner.alignment import align_spans

EXPECTED = os.environ.get("RAPIDSCORE_TEST_EXPECT", "native")
INSTALLED = os.environ.get("RAPIDSCORE_TEST_INSTALLED") == "1"


@pytest.fixture(scope="module", autouse=True)
def implementation() -> str:
    """The implementation the kernels run, checked once; a fallback's one warning is taken here."""
    if EXPECTED == "python" and _native.requested() == "auto":
        with pytest.warns(rapidscore.RapidscoreWarning) as caught:
            chosen = _native.implementation()
        assert len(caught) == 1
        message = str(caught[0].message)
        assert "rapidscore._core" in message and "docs/install.md" in message, message
    else:
        chosen = _native.implementation()
    return chosen


def test_the_kernels_run_the_expected_implementation(implementation) -> None:
    assert implementation == EXPECTED
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _native.implementation() == EXPECTED  # the fallback warns once per process


@pytest.mark.skipif(not INSTALLED, reason="the editable install is a source tree (RAPIDSCORE_TEST_INSTALLED=1 "
                                          "is set where a wheel is tested)")
def test_rapidscore_is_the_installed_package() -> None:
    location = Path(rapidscore.__file__).resolve()
    assert "site-packages" in location.parts, location
    assert not (location.parent.parent / "csrc").exists(), f"{location} is a source tree"


@pytest.mark.skipif(EXPECTED != "native", reason="a fallback install has no extension")
def test_the_extension_is_a_release_build_of_this_version() -> None:
    info = _native.core().build_info
    assert info.version == rapidscore.__version__
    assert info.debug is False
    assert info.hardware_threads() >= 1


def _store(rng, lengths, dim):
    shared = rng.standard_normal(dim)
    rows = [rng.standard_normal((n, dim)) + 2.0 * shared for n in lengths]
    return flatten_sentences([r / np.linalg.norm(r, axis=1, keepdims=True) for r in rows])


def test_greedy_matching_agrees_with_the_numpy_specification() -> None:
    rng = np.random.default_rng(7)
    E, offsets, weights = _store(rng, [1, 7, 0, 23, 40, 16, 9, 33], 384)
    pairs = rng.integers(0, 8, size=(64, 2)).astype(np.int64)
    got = greedy_match(E, offsets, weights, pairs)
    want = matching_ref.greedy_match(E, offsets, weights, pairs)
    # float32 dot products (native) against float64 (the specification): the kernels' tolerance
    np.testing.assert_allclose(np.stack(got), np.stack(want), rtol=0, atol=1e-6)
    assert np.all(np.stack(got)[:, 2] == 0) is np.False_  # real scores, not a zero-filled result


def test_pairwise_matching_agrees_with_pair_matching() -> None:
    rng = np.random.default_rng(8)
    E, offsets, weights = _store(rng, [5, 12, 3, 30, 17], 64)
    candidates, references = np.array([0, 1, 4]), np.array([2, 3])
    grid = pairwise_match(E, offsets, weights, candidates, references)
    pairs = np.array([[c, r] for c in candidates for r in references], dtype=np.int64)
    flat = greedy_match(E, offsets, weights, pairs)
    for g, f in zip(grid, flat):
        np.testing.assert_array_equal(np.asarray(g).reshape(-1), f)


def test_span_alignment_pairs_overlapping_spans() -> None:
    assert align_spans([(0, 4), (10, 20), (30, 35)], [(0, 4), (12, 20), (29, 36), (31, 33)]) == [
        (0, 0, 1.0), (1, 1, 0.8), (2, 2, pytest.approx(5 / 7))]


def test_the_command_line_runs() -> None:
    done = subprocess.run([sys.executable, "-m", "rapidscore", "--version"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert rapidscore.__version__ in done.stdout
