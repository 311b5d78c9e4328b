"""The sequence classifier on the encoders' runtime stack (issue 47, item 3): its sessions and
models are made by the runtime modules' runners (the torch one through the classifier's output
head), and its batches run through ``ModelRuntime`` (a runner that is not thread-safe is called
under its lock)."""

from __future__ import annotations

import ast
import importlib.util
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import rapidscore

pytest.importorskip("transformers", reason="the tiny classifiers are built with transformers")

PACKAGE = Path(rapidscore.__file__).parent
RUNTIME_DIR = PACKAGE / "encoder" / "runtime"
TEXTS = ["I'm sorry, but I can't help with that.", "The capital of France is Paris.", "", "Abstained.",
         "Sure! Mix flour, eggs and milk, then fry."]
BACKENDS = ["onnx", "torch"] + (["openvino"] if importlib.util.find_spec("openvino") else [])


@pytest.fixture(scope="module")
def classifier_model(tiny_models_root) -> Path:
    from rapidscore.testing.tiny_classifiers import tiny_classifier_dir

    return tiny_classifier_dir("bert", 2, tiny_models_root)


def _calls(tree: ast.AST) -> list[tuple[str, ast.Call]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            found.append((name, node))
    return found


def test_the_classifier_makes_no_session_model_or_batch_itself() -> None:
    # sessions, models, batching, padding and locks belong to encoder/runtime and model_runtime.py
    forbidden_imports = {"onnxruntime", "openvino", "torch", "transformers"}
    forbidden_calls = {"InferenceSession", "compile_model", "from_pretrained", "prepare_torch", "inference_mode",
                       "plan_batches", "pad_batch", "equal_length_batches", "load_truncated_model"}
    paths = [PACKAGE / "encoder" / "classifier.py", *sorted((PACKAGE / "abstention").glob("*.py"))]
    for path in paths:
        imports, calls = forbidden_imports, forbidden_calls
        if path == paths[0]:  # the classifier's runner lock is the runtime's
            imports, calls = imports | {"threading"}, calls | {"Lock"}
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                names = []
            wrong = [name for name in names if name.split(".")[0] in imports]
            assert not wrong, f"{path.name}:{node.lineno} imports {wrong}"
            if isinstance(node, ast.ClassDef):  # a runner of its own
                bases = {ast.unparse(base) for base in node.bases}
                assert not bases & {"RunnerBase", "runtime.RunnerBase"}, f"{path.name}: class {node.name}{bases}"
        called = {name for name, _ in _calls(tree)}
        assert not called & calls, f"{path.name} calls {sorted(called & calls)}"
    # the classification model is loaded only by the head's load, which the torch runner calls
    tree = ast.parse((PACKAGE / "encoder" / "classifier.py").read_text(encoding="utf-8"))
    for klass in (node for node in tree.body if isinstance(node, ast.ClassDef)):
        for method in (node for node in klass.body if isinstance(node, ast.FunctionDef)):
            for name, call in _calls(method):
                if name == "load_classification_model":
                    assert (klass.name, method.name) == ("ClassifierLogits", "load"), call.lineno
    outside = [call.lineno for node in tree.body if isinstance(node, ast.FunctionDef)
               for name, call in _calls(node) if name == "load_classification_model"]
    assert not outside, outside


@pytest.mark.slow  # exports the tiny classifier (about 20 s on 2 busy cores)
@pytest.mark.parametrize("backend", BACKENDS)
def test_every_session_and_model_of_a_classifier_is_made_by_a_runtime_module(backend, classifier_model,
                                                                             tmp_path, monkeypatch) -> None:
    import transformers

    from rapidscore.encoder import classifier as classifier_module
    from rapidscore.encoder.export.classifier_export import cached_classifier_export
    from rapidscore.encoder.runtime import RunnerBase

    cached_classifier_export(classifier_model, cache_dir=tmp_path)  # the export's own checks are not counted
    made: list[tuple[str, list[str]]] = []

    def recording(kind, original):
        def record(*args, **kwargs):
            made.append((kind, [frame.filename for frame in traceback.extract_stack()]))
            return original(*args, **kwargs)

        return record

    import onnxruntime

    monkeypatch.setattr(onnxruntime, "InferenceSession", recording("onnx session", onnxruntime.InferenceSession))
    auto = transformers.AutoModelForSequenceClassification
    monkeypatch.setattr(auto, "from_pretrained", recording("torch model", auto.from_pretrained))
    if backend == "openvino":
        import openvino

        monkeypatch.setattr(openvino.Core, "compile_model", recording("openvino model", openvino.Core.compile_model))
    monkeypatch.setattr(classifier_module, "_LOADED", classifier_module.KeyedCache(4))  # nothing loaded yet
    classifier = classifier_module.SequenceClassifier(classifier_model, backend=backend, cache_dir=tmp_path)
    logits = classifier.logits(TEXTS)
    assert logits.shape == (len(TEXTS), 2) and np.isfinite(logits).all()
    assert made, "nothing was made: the test saw no session or model"
    for kind, stack in made:
        assert any(str(RUNTIME_DIR) in name for name in stack), f"a {kind} made outside encoder/runtime: {stack}"
    runner = classifier.runtime.runner
    assert isinstance(runner, RunnerBase) and type(runner).__module__.startswith("rapidscore.encoder.runtime.")


def test_the_torch_runner_of_a_classifier_head_has_no_token_outputs(classifier_model) -> None:
    from rapidscore.encoder.classifier import ClassifierLogits
    from rapidscore.encoder.runtime import make_runner

    runner = make_runner("torch", model_dir=classifier_model, head=ClassifierLogits())
    assert runner.packed is False and runner.graphs is None and runner.layer is None
    with pytest.raises(ValueError, match="one row per text"):
        runner.enable_graphs()
    with pytest.raises(ValueError, match="no packed forward"):
        runner.run_packed([np.array([1, 2])])
    rows = runner(np.array([[1, 5, 2]]), np.ones((1, 3), dtype=np.int64))
    assert tuple(rows.shape) == (1, 2)
    with pytest.raises(ValueError, match="head is in the graph"):
        make_runner("onnx", onnx_path=classifier_model / "model.onnx", head=ClassifierLogits())
    with pytest.raises(ValueError, match="needs model_dir and layer"):
        make_runner("torch", model_dir=classifier_model)


class _OneAtATime:
    """An ONNX Runtime runner behind a backend that says it is not thread-safe, which records how
    many calls overlap."""

    def __init__(self, graph: Path) -> None:
        from rapidscore.encoder.runtime.onnx import OnnxRunner

        self.inner = OnnxRunner(graph, "cpu", 1)
        self.running = self.most = 0
        self.guard = threading.Lock()

    def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        with self.guard:
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            time.sleep(0.01)  # room for another thread to come in, were it let
            return self.inner(input_ids, attention_mask)
        finally:
            with self.guard:
                self.running -= 1


@pytest.mark.slow  # exports the tiny classifier, then 8 threads of batches (about 4 s)
def test_a_classifier_runner_that_is_not_thread_safe_is_called_one_call_at_a_time(classifier_model,
                                                                                  tmp_path) -> None:
    from rapidscore.encoder.classifier import SequenceClassifier
    from rapidscore.encoder.runtime import Capabilities, RunnerBase, register_backend, unregister_backend

    made: list = []

    class SerialRunner(RunnerBase):
        provider, returns, thread_safe = "serial-onnx", "numpy", False

        def __init__(self, graph: Path) -> None:
            self.calls = _OneAtATime(graph)
            made.append(self.calls)

        def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
            return self.calls(input_ids, attention_mask)

    def make(source, *, layer, device, precision, num_threads, compile_cache) -> SerialRunner:
        return SerialRunner(source)

    register_backend(Capabilities(backend="serial", devices=("cpu",), precisions={"fp32": ("cpu",)},
                                  thread_safe=False, returns="numpy", needs=("cpu",), onnx_graph=True, make=make,
                                  classifier={"fp32": "exact"}))
    try:
        serial = SequenceClassifier(classifier_model, backend="serial", cache_dir=tmp_path, max_batch_size=2)
        reference = SequenceClassifier(classifier_model, backend="onnx", cache_dir=tmp_path, max_batch_size=2)
        batches = [[f"{text} ({k})" for text in TEXTS[k % 3:]] for k in range(8)]
        with ThreadPoolExecutor(4) as pool:
            got = list(pool.map(serial.logits, batches))
        assert len(made) == 1 and made[0].most == 1  # one runner, never two calls at once
        for batch, logits in zip(batches, got):
            assert logits.tobytes() == reference.logits(batch).tobytes()
    finally:
        unregister_backend("serial")
