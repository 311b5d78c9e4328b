"""The runtimes' capability tables (``rapidscore.encoder.runtime``, issue 38): one table per backend,
read by the option checks, ``make_runner``, ``precision="fast"`` and the model cache."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import numpy as np
import pytest

import rapidscore
from rapidscore.common.choices import BACKENDS, DEVICES
from rapidscore.encoder import runtime
from rapidscore.encoder.runtime import RUNTIMES, backend_for, check_options, check_unpadded, make_runner

ROOT = Path(__file__).resolve().parents[2]


def test_one_table_per_backend_named_as_the_command_line_names_them() -> None:
    assert tuple(RUNTIMES) == BACKENDS
    for name, caps in RUNTIMES.items():
        assert caps.backend == name
        assert set(caps.devices) <= set(DEVICES)
        assert all(set(devices) <= set(caps.devices) for devices in caps.precisions.values()), name
        assert set(caps.fast) <= set(caps.devices) and set(caps.fast.values()) <= set(caps.precisions), name
        assert caps.returns in ("numpy", "torch") and isinstance(caps.thread_safe, bool)


def test_the_extras_a_table_needs_exist() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    for caps in RUNTIMES.values():
        assert caps.needs and set(caps.needs) <= set(extras), caps.backend


def test_the_default_backend_of_a_precision_is_the_first_table_that_runs_it() -> None:
    assert [backend_for(p) for p in ("fp32", "bf16", "fp16", "int8", "fp64")] == \
        ["onnx", "openvino", "torch", "onnx", "onnx"]


# The messages the encoder's option checks gave before the tables (issue 38 keeps them).
MESSAGES = {
    ("nope", "cpu", "fp32"): "backend must be one of ('onnx', 'openvino', 'torch'), got 'nope'",
    ("onnx", "tpu", "fp32"): "device must be one of ('cpu', 'cuda'), got 'tpu'",
    ("onnx", "cpu", "fp64"): "precision must be one of ('fp32', 'bf16', 'fp16', 'int8', 'fast'), got 'fp64'",
    ("onnx", "cpu", "bf16"): "precision='bf16' runs on backend='openvino' (CPU) or backend='torch', got backend='onnx'",
    ("openvino", "cpu", "int8"): "precision='int8' runs on backend='onnx' with device='cpu' (ONNX Runtime's int8 "
                                 "kernels), got backend='openvino', device='cpu'",
    ("onnx", "cuda", "int8"): "precision='int8' runs on backend='onnx' with device='cpu' (ONNX Runtime's int8 "
                              "kernels), got backend='onnx', device='cuda'",
    ("onnx", "cpu", "fp16"): "precision='fp16' runs on backend='torch' with device='cuda', got backend='onnx', "
                             "device='cpu'",
    ("openvino", "cuda", "fp32"): "backend='openvino' runs on device='cpu', got device='cuda'",
    ("torch", "cpu", "fp16"): "precision='fp16' needs device='cuda' (got device='cpu')",
}


@pytest.mark.parametrize("options", sorted(MESSAGES))
def test_option_checks_name_what_does_not_fit(options) -> None:
    with pytest.raises(ValueError) as raised:
        check_options(*options)
    assert str(raised.value).startswith(MESSAGES[options])


@pytest.mark.parametrize("options", [("onnx", "cpu", "fp32"), ("onnx", "cuda", "fp32"), ("onnx", "cpu", "int8"),
                                     ("openvino", "cpu", "fp32"), ("torch", "cpu", "fp32"),
                                     ("torch", "cuda", "fp16")])
def test_option_checks_pass_what_a_table_runs(options) -> None:
    assert check_options(*options) is RUNTIMES[options[0]]


def test_unpadded_graph_and_runner_errors() -> None:
    check_unpadded("onnx")
    with pytest.raises(ValueError, match=r"^the unpadded graph runs on backend='onnx', got 'openvino'$"):
        check_unpadded("openvino")
    with pytest.raises(ValueError, match="the onnx backend needs onnx_path"):
        make_runner("onnx")
    with pytest.raises(ValueError, match="the torch backend needs model_dir and layer"):
        make_runner("torch", model_dir=Path("."))
    with pytest.raises(ValueError, match="backend must be one of"):
        make_runner("nope", onnx_path=Path("model.onnx"))


class _Zeros(runtime.RunnerBase):
    provider, returns, thread_safe = "zeros", "numpy", True

    def __init__(self, source: Path, device: str, precision: str):
        self.source, self.device, self.precision = source, device, precision

    def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        return np.zeros((*input_ids.shape, 4), np.float32)


def test_a_new_backend_is_one_table(monkeypatch) -> None:
    def make(source, *, layer, device, precision, num_threads, compile_cache) -> _Zeros:
        return _Zeros(source, device, precision)

    table = runtime.Capabilities(backend="zeros", devices=("cpu",), precisions={"fp32": ("cpu",), "bf16": ("cpu",)},
                                 thread_safe=True, returns="numpy", needs=("cpu",), onnx_graph=True, make=make,
                                 fast={"cpu": "bf16"}, native_bf16=lambda device: True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        table.backend = "other"  # type: ignore[misc]
    monkeypatch.setitem(RUNTIMES, "zeros", table)
    assert check_options("zeros", "cpu", "bf16") is table
    with pytest.raises(ValueError, match="backend='zeros' runs on device='cpu', got device='cuda'"):
        check_options("zeros", "cuda", "fp32")
    runner = make_runner("zeros", onnx_path=Path("graph.onnx"), precision="bf16")
    assert (runner.source, runner.precision) == (Path("graph.onnx"), "bf16")
    assert runner(np.ones((2, 3), np.int64), np.ones((2, 3), np.int64)).shape == (2, 3, 4)
    from rapidscore.encoder.precision import cpu_has_bf16, resolve_precision

    assert cpu_has_bf16("zeros") and resolve_precision("fast", "cpu", "zeros") == ("bf16", "zeros")


def _imported(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_runtimes_import_nothing_of_the_encoder_above_them() -> None:
    """The runners sit below the encoder's other modules: they import the runtime package, the
    torch model they run (``torch_model``, its packed forward ``packed``) and lower layers, never
    the export, the caches or the encoder."""
    runtime_dir = Path(rapidscore.__file__).parent / "encoder" / "runtime"
    torch_model = {"rapidscore.encoder.torch_model", "rapidscore.device.packed"}
    for path in sorted(runtime_dir.glob("*.py")):
        above = {name for name in _imported(path) if name.startswith("rapidscore.encoder")
                 and not name.startswith("rapidscore.encoder.runtime") and name not in torch_model}
        assert not above, f"{path.name} imports {sorted(above)}"
