"""A pickled weights file that carries code is refused clearly, and its code never runs (issue 36 row 10).

``pytorch_model.bin`` is a pickle: unpickled in full it can call anything (here ``os.system``).
Every place rapidscore reads one (the transformer's weights through transformers' from_pretrained,
for the ONNX export and the torch backend; a sentence-transformers Dense module's weights) loads
it with ``torch.load(weights_only=True)``, which refuses such a file; the refusal is an
:class:`~rapidscore.UnsafeWeightsError` (a ValueError) naming the file and what to do, not an
"unexpected" UnpicklingError.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest

from rapidscore.encoder import Encoder, clear_cache
from rapidscore.errors import RapidscoreError

pytest.importorskip("torch")


class _RunsACommand:
    """Unpickled, calls os.system(command): what a malicious pytorch_model.bin does."""

    def __init__(self, command: str):
        self.command = command

    def __reduce__(self) -> tuple:
        return (os.system, (self.command,))


def write_malicious_pickle(path: Path, marker: Path, protocol: int) -> Path:
    payload = _RunsACommand(f"echo pwned > {marker}")
    with open(path, "wb") as handle:
        pickle.dump({"embeddings.word_embeddings.weight": payload}, handle, protocol=protocol)
    return path


@pytest.fixture(params=[2, pickle.HIGHEST_PROTOCOL], ids=["protocol-2", "protocol-highest"])
def malicious_model(request, tiny_model_path, tmp_path) -> tuple[Path, Path]:
    """A copy of the tiny BERT whose weights are a pickle running ``echo pwned > marker``, and
    the marker file (absent unless the pickle ran)."""
    model = tmp_path / "model"
    shutil.copytree(tiny_model_path("bert"), model)
    (model / "model.safetensors").unlink()
    marker = tmp_path / "pwned.txt"
    write_malicious_pickle(model / "pytorch_model.bin", marker, request.param)
    clear_cache()
    return model, marker


def test_the_pickle_is_real(tmp_path) -> None:
    # Without weights_only, unpickling it runs the command: what the refusal protects from.
    marker = tmp_path / "ran.txt"
    path = write_malicious_pickle(tmp_path / "pytorch_model.bin", marker, 2)
    with open(path, "rb") as handle:
        pickle.load(handle)  # the point of this test
    assert marker.read_text().strip() == "pwned"


def _check_refusal(error: BaseException, weights: Path, marker: Path) -> None:
    from rapidscore import UnsafeWeightsError

    assert isinstance(error, UnsafeWeightsError) and isinstance(error, ValueError)
    assert isinstance(error, RapidscoreError)
    message = str(error)
    assert str(weights) in message and "weights_only" in message and "safetensors" in message, message
    assert not marker.exists()


# issue 36 row 10
def test_export_refuses_a_pickle_that_carries_code(malicious_model, tmp_path) -> None:
    model, marker = malicious_model
    with pytest.raises(ValueError) as info:
        Encoder(str(model), layer=1, cache_dir=tmp_path / "cache")
    _check_refusal(info.value, model / "pytorch_model.bin", marker)
    assert not any(p.is_dir() for p in (tmp_path / "cache").iterdir())  # no entry, no staging left


# issue 36 row 10
def test_torch_backend_refuses_a_pickle_that_carries_code(malicious_model) -> None:
    model, marker = malicious_model
    with pytest.raises(ValueError) as info:
        Encoder(str(model), layer=1, backend="torch")
    _check_refusal(info.value, model / "pytorch_model.bin", marker)


# issue 36 row 10 (the reproducer: "error: UnpicklingError: ... (unexpected; ...)")
def test_cli_refusal_is_one_clear_line(malicious_model, tmp_path, monkeypatch, capsys) -> None:
    from rapidscore.cli import main

    model, marker = malicious_model
    monkeypatch.setenv("RAPIDSCORE_CACHE", str(tmp_path / "cache"))
    assert main(["bertscore", "--model", str(model), "-l", "1", "-c", "a cat", "-r", "a cat", "-q"]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "unexpected" not in err and "UnpicklingError" not in err, err
    assert str(model / "pytorch_model.bin") in lines[0] and "safetensors" in lines[0], err
    assert not marker.exists()


# issue 36 row 10: a sentence-transformers Dense module's weights are read the same way
def test_dense_module_refuses_a_pickle_that_carries_code(tiny_model_path, tmp_path) -> None:
    model = tmp_path / "model"
    shutil.copytree(tiny_model_path("bert"), model)
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
               {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}]
    (model / "modules.json").write_text(json.dumps(modules), encoding="utf-8")
    for folder, config in (("1_Pooling", {"word_embedding_dimension": 32, "pooling_mode_mean_tokens": True}),
                           ("2_Dense", {"in_features": 32, "out_features": 8, "bias": True,
                                        "activation_function": "torch.nn.modules.activation.Tanh"})):
        (model / folder).mkdir()
        (model / folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    marker = tmp_path / "pwned.txt"
    weights = write_malicious_pickle(model / "2_Dense" / "pytorch_model.bin", marker, 2)
    with pytest.raises(ValueError) as info:
        Encoder(str(model), cache_dir=tmp_path / "cache").sentence_embeddings(["a cat"])
    _check_refusal(info.value, weights, marker)


# issue 36 row 10: a plain state dict in pytorch_model.bin still loads, as safetensors do
def test_a_pickle_of_tensors_only_still_loads(tiny_model_path, tmp_path) -> None:
    import torch
    from safetensors.torch import load_file

    source = tiny_model_path("bert")
    model = tmp_path / "model"
    shutil.copytree(source, model)
    torch.save(load_file(str(model / "model.safetensors")), model / "pytorch_model.bin")
    (model / "model.safetensors").unlink()
    got = Encoder(str(model), layer=1, cache_dir=tmp_path / "cache").token_embeddings(["a cat sat"])
    want = Encoder(str(source), layer=1, cache_dir=tmp_path / "cache").token_embeddings(["a cat sat"])
    np.testing.assert_allclose(got[0], want[0], rtol=0, atol=1e-6)


@pytest.fixture(params=[2, pickle.HIGHEST_PROTOCOL], ids=["protocol-2", "protocol-highest"])
def malicious_classifier(request, tiny_models_root, tmp_path) -> tuple[Path, Path]:
    """A copy of the tiny BERT classifier whose weights are a pickle running ``echo pwned > marker``."""
    from rapidscore.testing.tiny_classifiers import tiny_classifier_dir

    model = tmp_path / "classifier"
    shutil.copytree(tiny_classifier_dir("bert", 2, tiny_models_root), model)
    (model / "model.safetensors").unlink()
    marker = tmp_path / "pwned.txt"
    write_malicious_pickle(model / "pytorch_model.bin", marker, request.param)
    return model, marker


# issue 46 item 13: a sequence classifier's pickle gave torch's raw UnpicklingError ("unexpected")
@pytest.mark.parametrize("backend", ["onnx", "torch"])
def test_classifier_refuses_a_pickle_that_carries_code(malicious_classifier, backend, tmp_path) -> None:
    from rapidscore.encoder.classifier import SequenceClassifier

    model, marker = malicious_classifier
    with pytest.raises(ValueError) as info:
        SequenceClassifier(str(model), backend=backend, cache_dir=tmp_path / "cache")
    _check_refusal(info.value, model / "pytorch_model.bin", marker)
    if backend == "onnx":
        assert not any(p.is_dir() for p in (tmp_path / "cache").iterdir())  # no entry, no staging left


# issue 46 item 13: the refusal command with a classifier detector says so in one line
def test_refusal_command_refuses_a_classifier_pickle(malicious_classifier, tmp_path, monkeypatch, capsys) -> None:
    from rapidscore.cli import main

    model, marker = malicious_classifier
    monkeypatch.setenv("RAPIDSCORE_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "responses.jsonl"
    source.write_text(json.dumps({"response": "I cannot help with that."}) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert main(["refusal", "-i", str(source), "-o", str(out), "--set", "method=classifier", "--set",
                 f"model={model}", "--set", "threshold=0.5", "-q"]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "unexpected" not in err and "UnpicklingError" not in err, err
    assert str(model / "pytorch_model.bin") in lines[0] and "safetensors" in lines[0], err
    assert not marker.exists() and not out.exists()
