"""The ONNX Runtime runner: its IOBinding path (the one CUDA uses) run on the CPU against the
plain ``InferenceSession.run`` path, the errors that name the package to install, and the
packaging rule that keeps onnxruntime and onnxruntime-gpu out of one environment."""

from __future__ import annotations

import importlib.util
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from rapidscore.encoder import Encoder
from rapidscore.encoder.runtime import onnx as onnx_runtime
from rapidscore.encoder.runtime.onnx import OnnxRunner

REPO_ROOT = Path(__file__).resolve().parents[2]
TEXTS = ["The cat sat on the mat.", "Short.", "", "A longer sentence, with punctuation; and numbers 12345.",
         "Paris is the capital of France.", "x " * 60]


def _runners(encoder: Encoder) -> tuple[OnnxRunner, OnnxRunner]:
    path = encoder.cache_entry / "model.onnx"
    return OnnxRunner(path, "cpu", 1, io_binding=False), OnnxRunner(path, "cpu", 1, io_binding=True)


def _batches(encoder: Encoder):
    """Padded id batches of several shapes (one sequence, many, long and short)."""
    from rapidscore.encoder.tokens.batching import pad_batch

    ids = encoder.tokenize(TEXTS)
    for group in ([ids[0]], ids[:3], ids, ids[::-1], [ids[-1], ids[1]]):
        yield pad_batch(group, encoder.spec.pad_id)


@pytest.mark.parametrize("layer", [2, "all"])
@pytest.mark.parametrize("tiny_model", ["bert", "roberta"], indirect=True)
def test_io_binding_on_cpu_is_bit_exact_with_run(tiny_model, layer):
    encoder = Encoder(str(tiny_model), layer=layer)
    plain, bound = _runners(encoder)
    assert plain.returns == bound.returns == "numpy"
    assert not plain.io_binding and bound.io_binding
    for input_ids, attention_mask in _batches(encoder):
        expected = plain(input_ids, attention_mask)
        got = bound(input_ids, attention_mask)
        assert got.shape == expected.shape == bound.output_shape(*input_ids.shape)
        assert got.dtype == np.float32
        # Same graph, same kernels, same thread count: identical bits.
        np.testing.assert_array_equal(got, expected)


def test_io_binding_runner_in_the_encoder_gives_the_same_embeddings(tiny_model_path):
    encoder = Encoder(str(tiny_model_path("bert")), layer=2)
    expected_tokens = encoder.token_embeddings(TEXTS)
    expected_sentences = encoder.sentence_embeddings(TEXTS)
    plain = encoder.runner
    try:
        encoder.runner = OnnxRunner(encoder.cache_entry / "model.onnx", "cpu", None, io_binding=True)
        got_tokens = encoder.token_embeddings(TEXTS)
        got_sentences = encoder.sentence_embeddings(TEXTS)
    finally:
        encoder.runner = plain
    for got, expected in zip(got_tokens, expected_tokens):
        np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got_sentences, expected_sentences)


def test_io_binding_runner_from_many_threads(tiny_model_path):
    encoder = Encoder(str(tiny_model_path("bert")), layer=2)
    plain, bound = _runners(encoder)
    batches = list(_batches(encoder))
    expected = [plain(*batch) for batch in batches]
    failures: list[str] = []

    def work(offset: int) -> None:
        for step in range(20):
            k = (offset + step) % len(batches)
            if not np.array_equal(bound(*batches[k]), expected[k]):
                failures.append(f"thread {offset} batch {k}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_cpu_default_is_the_plain_path(tiny_model_path):
    encoder = Encoder(str(tiny_model_path("bert")), layer=1)
    assert isinstance(encoder.runner, OnnxRunner)
    assert encoder.runner.io_binding is False and encoder.runner.returns == "numpy"


def test_missing_cuda_provider_names_the_package():
    one = onnx_runtime.missing_cuda_provider_message(["CPUExecutionProvider"], ["onnxruntime 1.31.1"])
    assert "CUDAExecutionProvider" in one and "onnxruntime-gpu" in one and "rapidscore[gpu]" in one
    assert "pip uninstall -y onnxruntime " in one and "backend='torch'" in one
    both = onnx_runtime.missing_cuda_provider_message(
        ["CPUExecutionProvider"], ["onnxruntime 1.31.1", "onnxruntime-gpu 1.31.1"])
    assert "both installed" in both and "pip uninstall -y onnxruntime onnxruntime-gpu" in both


@pytest.mark.slow
def test_cuda_request_without_the_provider_raises_before_loading(minilm_path):
    import onnxruntime

    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        pytest.skip("this onnxruntime has the CUDA provider; the error path cannot be exercised")
    encoder = Encoder(str(minilm_path), layer=1)  # exports (or reuses) the graph on the CPU
    with pytest.raises(RuntimeError, match=r"CUDAExecutionProvider.*onnxruntime-gpu"):
        OnnxRunner(encoder.cache_entry / "model.onnx", "cuda", None)


def test_missing_onnxruntime_names_both_extras(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "onnxruntime" else real_find_spec(name, *args))
    with pytest.raises(ImportError, match=r"rapidscore\[cpu\].*rapidscore\[gpu\].*exactly one") as info:
        onnx_runtime.import_onnxruntime("backend='onnx'")
    assert info.value.name == "onnxruntime"


def _pyproject() -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - the suite runs on 3.11 here
        tomllib = pytest.importorskip("tomli", reason="reading pyproject.toml on Python < 3.11 needs tomli")
    with open(REPO_ROOT / "pyproject.toml", "rb") as handle:
        return tomllib.load(handle)


def _names(requirements: list[str]) -> set[str]:
    import re

    return {re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].strip().lower() for requirement in requirements}


def test_packaging_never_installs_both_onnxruntime_builds():
    """Both packages provide the ``onnxruntime`` import; installed together, one overwrites the
    other's files. Neither may be a base dependency, and no extra may pull in both."""
    project = _pyproject()["project"]
    base = _names(project["dependencies"])
    assert not base & {"onnxruntime", "onnxruntime-gpu"}, base
    extras = {name: _names(requirements) for name, requirements in project["optional-dependencies"].items()}
    assert "onnxruntime" in extras["cpu"] and "onnxruntime-gpu" not in extras["cpu"]
    assert "onnxruntime-gpu" in extras["gpu"] and "onnxruntime" not in extras["gpu"]
    for name, packages in extras.items():
        assert not {"onnxruntime", "onnxruntime-gpu"} <= packages, name
    # The test environment (README's setup command, CI) runs the default backend: the CPU build.
    assert "onnxruntime" in extras["test"]


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_cuda_io_binding_keeps_the_output_on_the_gpu(tiny_model_path):
    import onnxruntime
    import torch

    if not torch.cuda.is_available() or "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        pytest.skip("needs a GPU, a CUDA build of torch and onnxruntime-gpu")
    encoder = Encoder(str(tiny_model_path("bert")), layer=2)
    plain = OnnxRunner(encoder.cache_entry / "model.onnx", "cpu", None)
    on_gpu = OnnxRunner(encoder.cache_entry / "model.onnx", "cuda", None)
    assert on_gpu.io_binding and on_gpu.returns == "torch"
    for input_ids, attention_mask in _batches(encoder):
        got = on_gpu(input_ids, attention_mask)
        assert got.is_cuda
        # CUDA and CPU kernels sum in different orders: agreement to float32 rounding.
        np.testing.assert_allclose(got.cpu().numpy(), plain(input_ids, attention_mask), atol=1e-4, rtol=0)


def test_runtime_threads_stop_spinning_when_a_run_ends(tiny_model_path):
    """After a run the intra-op threads sleep instead of spinning on (by default ONNX Runtime's
    spin for tens of milliseconds, taking the cores from whatever the process does next)."""
    import time

    encoder = Encoder(str(tiny_model_path("bert")), layer=2)
    runner = OnnxRunner(encoder.cache_entry / "model.onnx", "cpu", 2)
    options = runner.session.get_session_options()
    assert options.get_session_config_entry("session.force_spinning_stop") == "1"
    input_ids, attention_mask = next(_batches(encoder))
    idle_cpu = []
    for _ in range(3):
        runner(input_ids, attention_mask)
        started = time.process_time()
        time.sleep(0.3)
        idle_cpu.append(time.process_time() - started)
    # Spinning threads burn ~0.04 CPU seconds per run on a 2-core machine; sleeping ones ~0.
    assert min(idle_cpu) < 0.01, idle_cpu
