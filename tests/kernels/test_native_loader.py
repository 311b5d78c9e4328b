"""One loader of the native extension (rapidscore.kernels._native) and the choice of implementation
(RAPIDSCORE_IMPLEMENTATION = auto | native | python), as RapidFuzz chooses between its C++ modules
and their ``*_py`` twins:

- only ``rapidscore.kernels`` imports ``rapidscore._core`` (read from the sources with ``ast``), and
  within it only ``kernels/_native.py`` at run time;
- with the extension hidden (``sys.modules["rapidscore._core"] = None`` in a fresh interpreter),
  ``import rapidscore``, BERTScore matching, NER alignment and keyword refusal detection still work
  and give the native results, with one RapidscoreWarning naming the import error; ``native``
  makes that an ImportError; ``python`` never imports the extension and never warns.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rapidscore
from rapidscore.kernels import _native

PACKAGE_ROOT = Path(rapidscore.__file__).resolve().parent


def _core_imports(tree: ast.AST) -> list[tuple[int, bool]]:
    """(line, inside ``if TYPE_CHECKING:``) of every import of rapidscore._core in a module: ``import
    rapidscore._core``, ``from rapidscore import _core``, ``from rapidscore._core import x``, their
    relative spellings, and ``import_module("rapidscore._core")`` / ``__import__`` calls."""
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only.update(id(child) for statement in node.body for child in ast.walk(statement))
    found = []
    for node in ast.walk(tree):
        hit = False
        if isinstance(node, ast.Import):
            hit = any(alias.name == "rapidscore._core" or alias.name.startswith("rapidscore._core.")
                      for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            hit = (module.split(".")[-1] == "_core" or "._core." in f".{module}."
                   or (module in ("rapidscore", "") and any(alias.name == "_core" for alias in node.names))
                   or (node.level > 0 and any(alias.name == "_core" for alias in node.names)))
        elif isinstance(node, ast.Call):
            hit = any(isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.endswith("._core")
                      for arg in node.args)
        if hit:
            found.append((node.lineno, id(node) in typing_only))
    return found


def test_only_the_kernels_loader_imports_the_extension():
    outside, inside = [], []
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        relative = path.relative_to(PACKAGE_ROOT).as_posix()
        for line, typing_only in _core_imports(ast.parse(path.read_text(encoding="utf-8"))):
            if not relative.startswith("kernels/"):
                outside.append(f"{relative}:{line}")
            elif relative != "kernels/_native.py" and not typing_only:
                inside.append(f"{relative}:{line}")
    assert not outside, f"only rapidscore.kernels may import rapidscore._core: {outside}"
    assert not inside, f"the kernels load rapidscore._core through kernels/_native.py only: {inside}"


def test_the_import_finder_sees_each_spelling():
    sources = {
        "import rapidscore._core": 1, "from rapidscore import _core": 1, "from rapidscore._core import matching": 1,
        "from .. import _core": 1, "from .._core import phrases": 1, "importlib.import_module('rapidscore._core')": 1,
        "from rapidscore import threads": 0, "import rapidscore.core_tools": 0,
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from rapidscore._core import _Phrases": 1,
    }
    for source, count in sources.items():
        assert len(_core_imports(ast.parse(source))) == count, source
    typing_only = "if TYPE_CHECKING:\n    from rapidscore._core import _Phrases\nfrom rapidscore import _core"
    assert sorted(_core_imports(ast.parse(typing_only))) == [(2, True), (3, False)]


def test_exact_fp32_imports_neither_the_encoder_nor_the_kernels():
    from rapidscore.device import tf32
    from rapidscore.encoder.runtime import torch as torch_runtime

    assert torch_runtime.exact_fp32 is tf32.exact_fp32  # the runner's documented name still works
    source = (PACKAGE_ROOT / "device" / "tf32.py").read_text(encoding="utf-8")
    imports = [node for node in ast.walk(ast.parse(source)) if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert not [node for node in imports if "rapidscore" in ast.unparse(node)]
    top_level = [node for node in ast.parse(source).body if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert not [node for node in top_level if "torch" in ast.unparse(node)]  # torch only inside the function
    with tf32.exact_fp32("cpu"):
        pass


@pytest.mark.parametrize("value, expected", [("", "native"), ("auto", "native"), (" Native ", "native"),
                                             ("python", "python"), ("PYTHON", "python")])
def test_the_variable_chooses(monkeypatch, value, expected):
    monkeypatch.setenv(_native.ENV_VAR, value)
    assert _native.implementation() == expected
    assert _native.core().__name__ == "rapidscore._core"  # an explicit native call loads it whatever


def test_an_unknown_choice_is_refused(monkeypatch):
    monkeypatch.setenv(_native.ENV_VAR, "cpp")
    with pytest.raises(ValueError, match="RAPIDSCORE_IMPLEMENTATION must be 'auto', 'native' or 'python', got 'cpp'"):
        _native.implementation()
    from rapidscore.ner.alignment import align_spans

    with pytest.raises(ValueError, match="RAPIDSCORE_IMPLEMENTATION"):
        align_spans([(0, 2)], [(0, 2)])


# The same calls in a fresh interpreter: a BERTScore matching (pairs with and without bert-score's
# padding, and pairwise), a NER alignment and keyword refusal detection. Prints JSON.
PROGRAM = r"""
import json, sys, warnings
if HIDE:
    sys.modules["rapidscore._core"] = None  # as if the extension were missing or failed to load
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    import rapidscore
    import numpy as np
    from rapidscore.abstention.detectors import KeywordMatcher, detect_refusal
    from rapidscore.kernels.matching import flatten_sentences, greedy_match, pairwise_match
    from rapidscore.kernels.padding import padding_floors
    from rapidscore.ner.alignment import align_spans

    out = {"imported": "rapidscore._core" in sys.modules and sys.modules["rapidscore._core"] is not None}
    rng = np.random.default_rng(0)
    E, o, w = flatten_sentences([rng.standard_normal((n, 8)) for n in (3, 5, 1, 4)])
    pairs = np.array([[0, 1], [1, 2], [3, 0], [2, 2]])
    try:
        out["greedy"] = np.stack(greedy_match(E, o, w, pairs)).tolist()
        out["padded"] = np.stack(greedy_match(E, o, w, pairs, bert_score_batch_size=2)).tolist()
        out["floors"] = np.stack(greedy_match(E, o, w, pairs, floors=padding_floors(o, pairs, 2))).tolist()
        out["pairwise"] = np.stack(pairwise_match(E, o, w, [0, 1], [2, 3])).tolist()
        out["aligned"] = align_spans([(0, 4), (10, 20), (30, 35)], [(0, 4), (12, 20), (29, 36), (31, 33)])
        texts = ["I'm sorry, but I cannot help with that request.", "Rivers flow into the sea, mostly.",
                 "Abstained", "As an AI language model I can't answer questions about banks, sorry about that."]
        out["keyword"] = detect_refusal(texts, "keyword").tolist()
        out["matched"] = KeywordMatcher().match(texts)[1].tolist()
    except ImportError as error:
        out["error"] = f"{type(error).__name__}: {error}"
    out["imported_after"] = "rapidscore._core" in sys.modules and sys.modules["rapidscore._core"] is not None
    out["warnings"] = [f"{w.category.__name__}: {w.message}" for w in caught
                       if issubclass(w.category, rapidscore.RapidscoreWarning)]
print(json.dumps(out))
"""


def _run(hide: bool, implementation: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != _native.ENV_VAR}
    if implementation is not None:
        env[_native.ENV_VAR] = implementation
    code = PROGRAM.replace("HIDE", str(hide))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def native_run() -> dict:
    out = _run(hide=False, implementation=None)
    assert out["imported_after"] and out["warnings"] == [] and "error" not in out
    return out


def _assert_same_results(got: dict, want: dict) -> None:
    # the numpy reference computes similarities in float64, the C++ kernel in float32
    for key in ("greedy", "padded", "floors", "pairwise"):
        np.testing.assert_allclose(got[key], want[key], rtol=0, atol=1e-6, err_msg=key)
    for key in ("aligned", "keyword", "matched"):
        assert got[key] == want[key], key


def test_without_the_extension_everything_falls_back_with_one_warning(native_run):
    got = _run(hide=True, implementation=None)
    assert "error" not in got and not got["imported_after"]
    _assert_same_results(got, native_run)
    assert native_run["keyword"] == [True, False, False, True] and native_run["aligned"][0] == [0, 0, 1.0]
    assert len(got["warnings"]) == 1, got["warnings"]
    warning = got["warnings"][0]
    assert warning.startswith("RapidscoreWarning: rapidscore's native extension rapidscore._core cannot be imported")
    assert "import of rapidscore._core halted; None in sys.modules" in warning  # the import error itself
    assert "RAPIDSCORE_IMPLEMENTATION=python" in warning


def test_native_without_the_extension_is_an_import_error():
    got = _run(hide=True, implementation="native")
    assert got["error"].startswith("ImportError: rapidscore's native extension rapidscore._core cannot be imported")
    assert "None in sys.modules" in got["error"] and got["warnings"] == []


@pytest.mark.parametrize("hide", [False, True], ids=["built", "hidden"])
def test_python_never_imports_the_extension_nor_warns(native_run, hide):
    got = _run(hide=hide, implementation="python")
    assert "error" not in got and not got["imported"] and not got["imported_after"]
    assert got["warnings"] == []
    _assert_same_results(got, native_run)


def test_finishing_with_floors_goes_through_the_wrapper_bit_identically(monkeypatch):
    """bertscore/finishing.py matches a host store with per-pair padding floors through
    kernels.matching.greedy_match(floors=...): the numbers of the direct native call."""
    from types import SimpleNamespace

    from rapidscore.bertscore.finishing import match_store
    from rapidscore.encoder.store import TokenStore
    from rapidscore.kernels.matching import flatten_sentences
    from rapidscore.kernels.padding import padding_floors

    monkeypatch.setenv(_native.ENV_VAR, "native")
    rng = np.random.default_rng(5)
    lengths = [4, 9, 1, 6, 12, 3]
    E, offsets, weights = flatten_sentences([rng.standard_normal((n, 16)) for n in lengths], normalize=True)
    pairs = rng.integers(0, len(lengths), size=(40, 2))
    floors = padding_floors(offsets, pairs, 7)
    want = _native.core().matching.greedy_match(E, offsets, weights, pairs, 1, floors)
    store = TokenStore(ids=np.zeros(len(E), np.int64), offsets=offsets, embeddings=E.copy(),
                       order=np.arange(len(lengths)), unit_rows=True)
    options = SimpleNamespace(num_threads=1, all_layers=False)
    got = match_store(store, weights, pairs, options, padding_floors=floors)  # type: ignore[arg-type]
    np.testing.assert_array_equal(got, np.stack(want, axis=-1))
    monkeypatch.setenv(_native.ENV_VAR, "python")
    twin = match_store(store, weights, pairs, options, padding_floors=floors)  # type: ignore[arg-type]
    np.testing.assert_allclose(twin, got, rtol=0, atol=1e-6)
