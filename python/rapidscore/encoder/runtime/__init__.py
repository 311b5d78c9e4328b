"""Execution backends behind one contract (the runner), each described by one capability table.

A runner maps int64 ``(input_ids, attention_mask)`` of shape (batch, seq) to float32 hidden
states (batch, seq, dim), or (layers + 1, batch, seq, dim) for an all-layers model; a model with
an output head of its own (the sequence classifier, ``encoder/classifier.py``) to the head's rows
(batch, labels): the same runners, given its exported graph or its :class:`OutputHead`. Each runner
declares:

- ``returns``: "numpy" (host arrays) or "torch" (tensors on the runner's device), so the encoder
  keeps embeddings where they were produced;
- ``thread_safe``: whether many threads may call it at once (the encoder serialises calls of a
  runner that is not);
- ``provider``: a short name of where it runs, for signatures and logs.

Runners size their thread pools from the process-wide budget (``rapidscore.threads``).

Each runtime module (``onnx``, ``openvino``, ``torch``) declares ``CAPABILITIES``, a
:class:`Capabilities`: its devices, the precisions it runs on each, its runner's contract, the
extra that installs it, how to make its runner, what ``precision="fast"`` is there. ``RUNTIMES``
collects them, and everything that chooses or checks a backend reads them: the encoder's option
checks (:func:`check_options`, one call), :func:`make_runner`, ``precision="fast"``
(``encoder/precision.py``) and the model cache (``encoder/cache.py``).

**Adding a backend** is one runtime module with its runner (deriving from :class:`RunnerBase`)
and its table, listed in ``RUNTIMES`` below (and its name in ``common.choices.BACKENDS``, for the
command-line parsers); or, from outside the package, :func:`register_backend` with the table
(the Python API then takes ``backend=`` its name; tests/encoder/test_extension_points.py).
"""

from __future__ import annotations

from pathlib import Path

from rapidscore.common.choices import BACKENDS, DEVICES, PRECISIONS
from rapidscore.encoder.runtime import onnx, openvino, torch
from rapidscore.encoder.runtime.capabilities import RUNNER_MEMBERS, Capabilities, OutputHead, Runner, RunnerBase, either

__all__ = ["BACKENDS", "DEVICES", "Capabilities", "OutputHead", "RUNTIMES", "Runner", "RunnerBase", "RUNNER_MEMBERS",
           "capabilities", "check_options", "check_unpadded", "backend_for", "make_runner", "register_backend",
           "unregister_backend", "hf_backend"]

#: every backend's table, by name; in order of preference (``backend_for``)
RUNTIMES: dict[str, Capabilities] = {caps.backend: caps for caps in (
    onnx.CAPABILITIES, openvino.CAPABILITIES, torch.CAPABILITIES)}
_BUILT_IN = frozenset(RUNTIMES)


def register_backend(table: Capabilities) -> None:
    """Add a backend described by ``table`` (its runner derives from :class:`RunnerBase`): every
    check, ``make_runner`` and the model cache read it from then on. A ValueError for a name
    already taken."""
    if table.backend in RUNTIMES:
        raise ValueError(f"backend {table.backend!r} exists already")
    RUNTIMES[table.backend] = table


def unregister_backend(name: str) -> None:
    """Remove a backend added by :func:`register_backend` (the built-in ones stay)."""
    if name in _BUILT_IN:
        raise ValueError(f"backend {name!r} is built in")
    RUNTIMES.pop(name, None)


def hf_backend() -> str:
    """The backend that runs the Hugging Face model itself (no exported graph): where a model
    whose ONNX export does not reproduce it runs instead."""
    return next(name for name, caps in RUNTIMES.items() if not caps.onnx_graph)


def capabilities(backend: str) -> Capabilities:
    """The table of ``backend``; a ValueError naming the backends for another name."""
    caps = RUNTIMES.get(backend)
    if caps is None:
        raise ValueError(f"backend must be one of {tuple(RUNTIMES)}, got {backend!r}")
    return caps


def backend_for(precision: str) -> str:
    """The first backend that runs ``precision`` (onnx for fp32 and int8, OpenVINO for bf16,
    torch for fp16); onnx for a precision none runs (the option check then names it)."""
    return next((name for name, caps in RUNTIMES.items() if precision in caps.precisions), "onnx")


def check_options(backend: str, device: str, precision: str) -> Capabilities:
    """The table of ``backend`` when it runs ``precision`` on ``device``; else a ValueError naming
    the first option that does not fit and where it would. Loads nothing (the torch backend's own
    check imports torch to read a CPU's bf16 support)."""
    caps = capabilities(backend)
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision not in caps.precisions:
        raise ValueError(_where_it_runs(precision, backend, device))
    caps.check_device(device)
    if caps.check is not None:
        caps.check(precision, device)
    if device not in caps.precisions[precision]:
        raise ValueError(_where_it_runs(precision, backend, device))
    return caps


def _where_it_runs(precision: str, backend: str, device: str) -> str:
    """``precision='int8' runs on backend='onnx' with device='cpu' (...), got backend=..., device=...``:
    the device is named where some backend runs the precision on some of its devices only."""
    offers = [caps for caps in RUNTIMES.values() if precision in caps.precisions]
    got = f"backend={backend!r}"
    if any(caps.precisions[precision] != caps.devices for caps in offers):
        got += f", device={device!r}"
    return f"precision={precision!r} runs on {' or '.join(caps.where(precision) for caps in offers)}, got {got}"


def check_unpadded(backend: str) -> None:
    """A ValueError naming the backends that run the unpadded graph when ``backend`` does not."""
    runs = tuple(name for name, caps in RUNTIMES.items() if caps.unpadded)
    if backend not in runs:
        raise ValueError(f"the unpadded graph runs on {either('backend', runs)}, got {backend!r}")


def make_runner(backend: str, *, onnx_path: Path | None = None, model_dir: Path | None = None,
                layer: int | str | None = None, device: str = "cpu", precision: str = "fp32",
                num_threads: int | None = None, compile_cache: Path | None = None,
                head: OutputHead | None = None) -> Runner:
    """The runner of ``backend`` (its table's ``make``): of the ONNX graph ``onnx_path`` where the
    backend runs the exported graph (onnx, openvino; a model's own head is in its graph), else of
    the model ``model_dir`` at ``layer``, or read through ``head`` (an :class:`OutputHead`: the
    classifier's logits)."""
    caps = capabilities(backend)
    if caps.onnx_graph:
        if onnx_path is None:
            raise ValueError(f"the {backend} backend needs onnx_path")
        if head is not None:
            raise ValueError(f"the {backend} backend runs an exported graph, whose head is in the graph: no head=")
        source = onnx_path
    else:
        if model_dir is None or (layer is None and head is None):
            raise ValueError(f"the {backend} backend needs model_dir and layer (or an output head)")
        source = model_dir
    heads = {} if head is None else {"head": head}  # (a table's make without a head keeps its old signature)
    return caps.make(source, layer=layer, device=device, precision=precision, num_threads=num_threads,
                     compile_cache=compile_cache, **heads)
