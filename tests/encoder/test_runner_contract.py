"""The runner contract (``encoder/runtime/capabilities.py``, issue 47 item 3): every member a
caller uses on a runner is declared by ``Runner``, and every runner each registered runtime makes,
the encoder's and the sequence classifier's, has every member and keeps what its table says."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import numpy as np
import pytest

import rapidscore
from rapidscore.encoder.runtime import RUNNER_MEMBERS, RUNTIMES, RunnerBase

PACKAGE = Path(rapidscore.__file__).parent


def _runner_expression(node: ast.expr) -> bool:
    """``runner``, ``self._runner``, ``encoder.runner``, ``loaded.runner``...: an expression that
    names a runner (not a constant such as ``_RUNNER_LOCKS``)."""
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return name.lstrip("_") == "runner"


def test_every_member_a_caller_uses_on_a_runner_is_declared() -> None:
    used: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parent == PACKAGE / "encoder" / "runtime":
            continue  # the runners themselves
        tree = ast.parse(path.read_text(encoding="utf-8"))
        decorators = {id(d) for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
                      for d in node.decorator_list}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _runner_expression(node.value) and id(node) not in decorators:
                used.setdefault(node.attr, []).append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert used, "no runner use found: the scan reads nothing"
    undeclared = {name: places for name, places in used.items() if name not in RUNNER_MEMBERS}
    assert not undeclared, undeclared


BACKENDS = [name if name != "openvino" or importlib.util.find_spec("openvino")
            else pytest.param(name, marks=pytest.mark.skip(reason="OpenVINO is not installed"))
            for name in RUNTIMES]


def _check(runner, backend: str) -> None:
    caps = RUNTIMES[backend]
    assert isinstance(runner, RunnerBase), type(runner)
    missing = [name for name in RUNNER_MEMBERS if not hasattr(runner, name)]
    assert not missing, (backend, type(runner).__name__, missing)
    assert isinstance(runner.provider, str) and runner.provider and runner.device == "cpu"
    assert runner.thread_safe == caps.thread_safe and isinstance(runner.packed, bool)
    assert runner.returns in ("numpy", "torch")
    out = runner(np.array([[1, 5, 2]], dtype=np.int64), np.ones((1, 3), dtype=np.int64))
    if runner.returns == "numpy":
        assert isinstance(out, np.ndarray) and out.dtype == np.float32
    else:
        import torch

        assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    host = runner.to_device(np.zeros(2, dtype=np.int64))
    assert tuple(host.shape) == (2,)


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_registered_runtime_gives_the_encoder_a_runner_with_the_whole_contract(backend, tiny_bert) -> None:
    from rapidscore.encoder import Encoder

    _check(Encoder(tiny_bert, 2, backend=backend).runner, backend)


@pytest.mark.slow  # exports the tiny classifier (about 6 s)
@pytest.mark.parametrize("backend", BACKENDS)
def test_every_registered_runtime_gives_the_classifier_a_runner_with_the_whole_contract(backend,
                                                                                        tiny_models_root) -> None:
    pytest.importorskip("transformers", reason="the tiny classifier is built with transformers")
    from rapidscore.encoder.classifier import SequenceClassifier
    from rapidscore.testing.tiny_classifiers import tiny_classifier_dir

    classifier = SequenceClassifier(tiny_classifier_dir("bert", 2, tiny_models_root), backend=backend)
    _check(classifier.runtime.runner, backend)
