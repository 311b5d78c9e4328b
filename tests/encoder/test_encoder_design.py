"""The encoder's design as tests (issue 47): settings resolved once into one frozen object."""

from __future__ import annotations

import ast
import dataclasses
import importlib
from pathlib import Path

import numpy as np
import pytest

import rapidscore
from rapidscore.encoder import Encoder, EncoderSettings, get_encoder, resolve_encoder_settings
from rapidscore.encoder.shared import clear_cache


def test_equal_spellings_give_equal_settings(tiny_bert) -> None:
    plain = resolve_encoder_settings(tiny_bert)
    assert plain.layer == plain.num_layers and plain.backend == "onnx" and plain.precision == "fp32"
    spelled = resolve_encoder_settings(tiny_bert + "/", layer=plain.num_layers, backend="onnx",
                                       max_batch_size=256, long_texts="truncate", unpadded=False)
    assert spelled == plain and hash(spelled) == hash(plain) and spelled.options == ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        plain.layer = 0  # type: ignore[misc]
    sized = resolve_encoder_settings(tiny_bert, max_length=16, cache_dir=tiny_bert)
    assert sized != plain and sized.options == (("cache_dir", tiny_bert), ("max_length", 16))
    assert sized.option("max_length") == 16 and sized.option("batch_tokens", 7) == 7


def test_fast_resolved_to_int8_keys_apart_from_explicit_int8(tiny_bert, monkeypatch) -> None:
    import rapidscore.encoder.settings as settings_module

    monkeypatch.setattr(settings_module, "resolve_precision", lambda precision, device, backend: (
        ("int8", "onnx") if precision == "fast" else (precision, backend)))
    fast = resolve_encoder_settings(tiny_bert, precision="fast")
    named = resolve_encoder_settings(tiny_bert, precision="int8")
    assert fast.precision == named.precision == "int8" and fast.requested_precision == "fast"
    assert fast != named  # the model may refuse int8: "fast" then runs fp32 where "int8" raises


@pytest.mark.parametrize(("options", "error", "message"), [
    ({"layer": 99}, ValueError, r"layer must be in \[0, "),
    ({"layer": True}, TypeError, "layer must be an int"),
    ({"precision": "fp64"}, ValueError, "precision must be one of"),
    ({"backend": "tensorrt"}, ValueError, "backend must be one of"),
    ({"max_length": 1}, ValueError, "max_length must be an int >= 2"),
    ({"max_length": 10**6}, ValueError, "exceeds the .* positions"),
    ({"unpadded": 1}, TypeError, "unpadded must be a bool"),
    ({"add_prefix_space": "yes"}, TypeError, "add_prefix_space must be a bool or None"),
    ({"batch_tokens": 0}, ValueError, "batch_tokens must be a positive int"),
    ({"long_texts": "cut"}, ValueError, "long_texts must be one of"),
    ({"num_thread": 2}, TypeError, "unexpected keyword argument 'num_thread'"),
    ({"progress": True}, TypeError, "progress"),
])
def test_every_check_happens_when_settings_are_resolved(tiny_bert, options, error, message) -> None:
    with pytest.raises(error, match=message):
        resolve_encoder_settings(tiny_bert, **options)


def test_settings_are_resolved_once_per_encoder(tiny_bert, monkeypatch) -> None:
    # every module that may call it is patched: a second resolution anywhere would be counted
    calls: list[EncoderSettings] = []

    def counting(*args, **kwargs):
        calls.append(resolve_encoder_settings(*args, **kwargs))
        return calls[-1]

    for name in ("rapidscore.encoder.settings", "rapidscore.encoder.shared", "rapidscore.encoder.encoder"):
        module = importlib.import_module(name)
        if hasattr(module, "resolve_encoder_settings"):
            monkeypatch.setattr(module, "resolve_encoder_settings", counting)
    clear_cache()
    encoder = get_encoder(tiny_bert, layer=1, precision="fp32")
    assert len(calls) == 1 and encoder.settings is calls[0]
    assert get_encoder(calls[0]) is encoder and len(calls) == 1  # the settings are the cache key
    calls.clear()
    direct = Encoder(tiny_bert, 1)
    assert len(calls) == 1 and direct.settings == encoder.settings
    assert Encoder.from_settings(encoder.settings).settings is encoder.settings and len(calls) == 1
    with pytest.raises(TypeError, match="takes no other argument"):
        get_encoder(encoder.settings, layer=2)


PACKAGE = Path(rapidscore.__file__).parent


def _modules(folder: Path):
    for path in sorted(folder.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"))


def _imported(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_the_encoder_writes_no_command_state() -> None:
    # the encoder records what it loaded (encoder/loaded.py); a command run asks (common/file_run.py)
    for path, tree in _modules(PACKAGE / "encoder"):
        wrong = {name for name in _imported(tree) if name.startswith(("rapidscore.common.outputs",
                                                                       "rapidscore.common.file_run.note_"))}
        assert not wrong, f"{path.relative_to(PACKAGE)} imports {sorted(wrong)}"


def test_the_package_never_imports_its_sentence_pipeline_shim() -> None:
    for path, tree in _modules(PACKAGE):
        if path.name == "sentence_pipeline.py":
            continue
        assert "rapidscore.encoder.sentence_pipeline" not in _imported(tree), path.relative_to(PACKAGE)


def test_no_getattr_on_a_runner() -> None:
    # every member a caller uses is declared by runtime.Runner and present on every runner
    for path, tree in _modules(PACKAGE):
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
                    and node.args:
                target = ast.unparse(node.args[0])
                assert "runner" not in target.lower(), f"{path.relative_to(PACKAGE)}:{node.lineno}: getattr({target}"


def _runner_classes() -> list[type]:
    from rapidscore.encoder.runtime.onnx import OnnxRunner
    from rapidscore.encoder.runtime.openvino import OpenVinoRunner
    from rapidscore.encoder.runtime.torch import TorchRunner
    from rapidscore.testing.simulated_device import SimulatedDevice

    return [OnnxRunner, OpenVinoRunner, TorchRunner, SimulatedDevice]


def test_the_runner_protocol_declares_what_callers_use_and_every_runner_has_it() -> None:
    from rapidscore.encoder.runtime.capabilities import RUNNER_MEMBERS, Runner, RunnerBase

    declared = set(Runner.__annotations__) | {name for name in vars(Runner) if not name.startswith("_")}
    assert declared == set(RUNNER_MEMBERS)
    for runner in _runner_classes():
        assert issubclass(runner, RunnerBase), runner
        missing = [name for name in RUNNER_MEMBERS if not hasattr(runner, name)]
        assert not missing, (runner, missing)


def test_a_runner_without_the_contract_is_refused_by_name(tiny_bert) -> None:
    encoder = get_encoder(tiny_bert, layer=1)

    def bare(input_ids, attention_mask):
        raise AssertionError("never called")

    with pytest.raises(TypeError, match="provider, returns, thread_safe"):
        encoder.runner = bare  # type: ignore[assignment]


def test_loaded_models_are_recorded_by_the_encoder_and_asked_for_by_a_run(tiny_bert) -> None:
    import argparse

    from rapidscore.common.file_run import command_run, set_model_source
    from rapidscore.encoder.loaded import loaded_models, models_used_since
    from rapidscore.encoder.model_source import resolve_model

    model_dir = str(resolve_model(tiny_bert))
    get_encoder(tiny_bert, layer=1)  # before the run: not the run's unless it uses it again
    assert model_dir in loaded_models()
    set_model_source(models_used_since)
    try:
        with command_run([], argparse.Namespace()) as run:
            assert run.fingerprint().get("models") is None
            get_encoder(tiny_bert, layer=1)  # a cache hit is a use
            models = run.fingerprint()["models"]
        assert models == [loaded_models()[model_dir]()]
    finally:
        import rapidscore.cli  # noqa: F401  (the command layer's own source, registered at import)
        from rapidscore.cli import _models_used_since

        set_model_source(_models_used_since)


def test_the_encoder_is_a_thin_facade() -> None:
    # its jobs live in collaborators: settings, tokenizer, runtime, sentence (docs/architecture.md)
    path = PACKAGE / "encoder" / "encoder.py"
    source = path.read_text(encoding="utf-8")
    assert len(source.splitlines()) <= 250
    tree = ast.parse(source)
    encoder = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Encoder")
    public = [node.name for node in encoder.body
              if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")]
    assert len(set(public)) <= 12, sorted(set(public))


def test_the_old_encoder_names_are_aliases_of_the_collaborators(tiny_bert) -> None:
    from rapidscore.encoder.aliases import MOVED

    encoder = get_encoder(tiny_bert, layer=1)
    lengths = np.array([3, 5, 4])
    assert [b.tolist() for b in encoder.batch_plan(lengths)] == \
        [b.tolist() for b in encoder.runtime.batch_plan(lengths, encoder.batch_tokens, encoder.max_batch_size)]
    assert encoder.runs_torch == encoder.runtime.runs_torch and encoder.sentence_pipeline is encoder.sentence.pipeline
    assert encoder.sentence_max_length == encoder.sentence.max_length
    for name in MOVED:
        getattr(encoder, name)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        encoder.nothing  # noqa: B018


def test_backend_facts_live_in_the_capability_tables() -> None:
    from rapidscore.common.choices import BACKENDS
    from rapidscore.encoder.classifier import CLASSIFIER_PRECISIONS
    from rapidscore.encoder.runtime import RUNTIMES, hf_backend

    assert tuple(BACKENDS) == tuple(RUNTIMES)  # the parsers read choices without loading the encoder
    assert hf_backend() == "torch"
    from rapidscore.encoder.precision import unnamed_backends

    assert (unnamed_backends("cpu"), unnamed_backends("cuda")) == (("openvino", "onnx"), ("torch",))
    assert CLASSIFIER_PRECISIONS == {"onnx": {"fp32": "exact"}, "openvino": {"fp32": "exact", "bf16": "approximate"},
                                     "torch": {"fp32": "exact", "bf16": "approximate", "fp16": "approximate"}}
    assert {name: caps.unpadded for name, caps in RUNTIMES.items()} == {"onnx": ("cpu",), "openvino": (),
                                                                         "torch": ()}
    for path in (PACKAGE / "encoder" / "encoder.py", PACKAGE / "encoder" / "cache.py",
                 PACKAGE / "encoder" / "classifier.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare) and any(isinstance(c, ast.Constant) and c.value in RUNTIMES
                                                     for c in node.comparators):
                raise AssertionError(f"{path.name}:{node.lineno}: {ast.unparse(node)} (a backend fact)")
