"""The extension points of the encoder, each used as a maintainer would (docs/architecture.md):
a backend added from outside the package (a capability table and a runner class)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from rapidscore.encoder import Encoder
from rapidscore.encoder.runtime import Capabilities, RunnerBase, register_backend, unregister_backend
from rapidscore.encoder.runtime.onnx import OnnxRunner

TEXTS = ["a cat sat on the mat", "the quick brown fox", "", "a cat sat on the mat and purred"]


class WrappedOnnxRunner(RunnerBase):
    """A new backend's runner: ONNX Runtime behind a wrapper that counts its calls."""

    returns, thread_safe = "numpy", True

    def __init__(self, graph, num_threads) -> None:
        self.inner = OnnxRunner(graph, "cpu", num_threads)
        self.provider = "wrapped-onnx"
        self.calls = 0

    def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        self.calls += 1
        return self.inner(input_ids, attention_mask)


def _make(source, *, layer, device, precision, num_threads, compile_cache) -> WrappedOnnxRunner:
    return WrappedOnnxRunner(source, num_threads)


@pytest.fixture
def wrapped_backend() -> Iterator[Capabilities]:
    table = Capabilities(backend="wrapped", devices=("cpu",), precisions={"fp32": ("cpu",)}, thread_safe=True,
                         returns="numpy", needs=("cpu",), onnx_graph=True, make=_make)
    register_backend(table)
    try:
        yield table
    finally:
        unregister_backend("wrapped")


def test_a_backend_added_from_outside_gives_the_onnx_backends_numbers(tiny_bert, tmp_path, wrapped_backend) -> None:
    reference = Encoder(tiny_bert, layer=2, cache_dir=tmp_path).token_embeddings(TEXTS)
    encoder = Encoder(tiny_bert, layer=2, backend="wrapped", cache_dir=tmp_path)
    assert encoder.backend == "wrapped" and encoder.provider == "wrapped-onnx"
    got = encoder.token_embeddings(TEXTS)
    assert encoder.runner.calls > 0
    assert all(a.tobytes() == b.tobytes() for a, b in zip(got, reference))
    with pytest.raises(ValueError, match="got backend='wrapped'"):  # its table is read by every check
        Encoder(tiny_bert, layer=2, backend="wrapped", precision="fp16")
    with pytest.raises(ValueError, match="exists already"):
        register_backend(wrapped_backend)
    with pytest.raises(ValueError, match="built in"):
        unregister_backend("onnx")
