"""The extension points of the encoder, each used as a maintainer would (docs/architecture.md):
a backend added from outside the package (a capability table and a runner class), and a
sentence-transformers module type added to the sentence pipeline (a loader of its folder)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

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


@dataclass(frozen=True)
class Scale:
    """A new sentence-transformers module type: every vector times ``factor`` (its config.json)."""

    factor: float
    name = "scale"

    @classmethod
    def load(cls, folder: Path) -> Scale:
        return cls(float(json.loads((folder / "config.json").read_text(encoding="utf-8"))["factor"]))

    def forward(self, x: np.ndarray) -> np.ndarray:
        return x * np.float32(self.factor)


@pytest.mark.slow  # builds a tiny sentence-transformers model (imports sentence_transformers)
def test_a_pipeline_module_added_from_outside_loads_and_runs(tiny_models_root, tmp_path) -> None:
    pytest.importorskip("sentence_transformers", reason="builds the tiny sentence-transformers model")
    from rapidscore.encoder.sentence.modules import register_module, unregister_module
    from rapidscore.testing.tiny_sentence_models import tiny_sentence_model_dir

    plain = tiny_sentence_model_dir("mean", tiny_models_root)  # mean pooling, no Normalize
    scaled = tmp_path / "scaled"
    shutil.copytree(plain, scaled)
    modules = json.loads((scaled / "modules.json").read_text(encoding="utf-8"))
    modules.append({"idx": len(modules), "name": str(len(modules)), "path": "9_Scale",
                    "type": "my_extension.modules.Scale"})
    (scaled / "modules.json").write_text(json.dumps(modules), encoding="utf-8")
    (scaled / "9_Scale").mkdir()
    (scaled / "9_Scale" / "config.json").write_text(json.dumps({"factor": 2.0}), encoding="utf-8")
    with pytest.raises(ValueError, match=r"my_extension\.modules\.Scale"):  # not known yet: refused by name
        Encoder(str(scaled), cache_dir=tmp_path).sentence_embeddings(TEXTS)
    register_module("my_extension.modules.Scale", Scale.load)
    try:
        encoder = Encoder(str(scaled), cache_dir=tmp_path)
        assert encoder.sentence.pipeline.name == "mean+scale"
        got = encoder.sentence_embeddings(TEXTS)
        want = Encoder(str(plain), cache_dir=tmp_path).sentence_embeddings(TEXTS) * np.float32(2.0)
        assert got.tobytes() == want.tobytes()
        with pytest.raises(ValueError, match="has a loader already"):
            register_module("my_extension.modules.Scale", Scale.load)
    finally:
        unregister_module("my_extension.modules.Scale")
