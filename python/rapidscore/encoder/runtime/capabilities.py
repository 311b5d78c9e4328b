"""The runner contract and the capability table each runtime module declares (``CAPABILITIES``).

``rapidscore.encoder.runtime`` collects the tables; the encoder's option checks, ``make_runner``,
``precision="fast"`` and the model cache read them, so a backend is described in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

__all__ = ["Capabilities", "OutputHead", "Runner", "RunnerBase", "RUNNER_MEMBERS", "either"]


class Runner(Protocol):
    """What runs a model: every member any caller uses (the encoder, the model cache, the device
    engines). :class:`RunnerBase` gives each a default; every runner derives from it."""

    provider: str  # a short name of where it runs (signatures, logs)
    returns: str  # "numpy" (host arrays) or "torch" (tensors on the runner's device)
    thread_safe: bool  # whether many threads may call it at once (else the encoder serialises calls)
    device: str  # where its outputs live ("cpu", "cuda")
    model: Any  # the torch module it runs, or None (a graph runtime)
    graphs: Any  # its CUDA-graph buckets (``device.cuda_graphs.GraphedForward``), or None

    @property
    def packed(self) -> bool:  # whether ``run_packed`` covers this model and layer
        ...

    def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> Any: ...

    def to_device(self, array: np.ndarray) -> Any: ...

    def run_packed(self, ids: list[np.ndarray]) -> Any: ...

    def run_feed(self, feed: dict[str, np.ndarray]) -> np.ndarray: ...


class RunnerBase:
    """The defaults of the :class:`Runner` members: host arrays out, calls serialised, on the
    CPU, no torch module, no packed forward, no CUDA graphs, no unpadded graph. A runner derives
    from it and overrides what it has."""

    provider: str = "runner"
    returns: str = "numpy"
    thread_safe: bool = False
    device: str = "cpu"
    model: Any = None
    graphs: Any = None

    @property
    def packed(self) -> bool:
        return False

    def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not run a model")

    def to_device(self, array: np.ndarray) -> Any:
        """A host array as a torch tensor on the runner's device."""
        import torch

        return torch.from_numpy(array).to(self.device)

    def run_packed(self, ids: list[np.ndarray]) -> Any:
        raise ValueError(f"{type(self).__name__} ({self.provider}) has no packed forward (packed is False)")

    def run_feed(self, feed: dict[str, np.ndarray]) -> np.ndarray:
        raise ValueError(f"{type(self).__name__} ({self.provider}) does not run the unpadded graph")


class OutputHead(Protocol):
    """What a runner of the model itself (a backend without ``onnx_graph``: torch) loads from the
    model directory and returns: the encoder's hidden states at a layer (``runtime.torch.HiddenStates``,
    the default), or a head of the model's own (the sequence classifier's logits,
    ``encoder/classifier.py``). A backend that runs an exported graph has the head in the graph."""

    @property
    def purpose(self) -> str:  # who needs the torch stack (the ImportError that names the extra)
        ...

    @property
    def layer(self) -> int | str | None:  # the hidden state read (an int or "all"); None: a head of the model's own
        ...

    @property
    def token_outputs(self) -> bool:  # one vector per token, (batch, seq, dim): CUDA-graph buckets, packed forward
        ...

    def load(self, model_dir: Path, device: str) -> Any:  # the torch module, in eval mode, on the CPU
        ...

    def read(self, model: Any, input_ids: Any, attention_mask: Any) -> Any:  # its output of device tensors
        ...


#: the members of the runner contract (``Runner``), for checks of a runner assigned from outside
RUNNER_MEMBERS = ("provider", "returns", "thread_safe", "device", "model", "packed", "graphs", "to_device",
                  "run_packed", "run_feed")


def either(option: str, values: tuple[str, ...]) -> str:
    """``device='cpu'``, or ``device='cpu' or device='cuda'``: the values an option may take."""
    return " or ".join(f"{option}={value!r}" for value in values)


@dataclass(frozen=True)
class Capabilities:
    """What one backend runs.

    - ``backend``: its name (``Encoder(backend=...)``; also in ``common.choices.BACKENDS``, which
      the command-line parsers read without loading the encoder).
    - ``devices``: the devices it runs on.
    - ``precisions``: each precision it runs, with the devices it runs it on.
    - ``thread_safe``, ``returns``: its runner's contract (``rapidscore.encoder.runtime``).
    - ``needs``: the extras that install it, any one of them (``pip install 'rapidscore[EXTRA]'``).
    - ``onnx_graph``: it runs the exported ONNX graph (``onnx_export``), else the Hugging Face model.
    - ``make``: its runner, ``make(source, layer=, device=, precision=, num_threads=,
      compile_cache=)``; ``source`` is the graph file, or the model directory; a backend without
      ``onnx_graph`` also takes ``head=`` (an :class:`OutputHead`, for a model with a head of its
      own: the classifier's), where one is given.
    - ``fast``: what ``precision="fast"`` is on each device, where the machine has it
      (``encoder/precision.py``).
    - ``native_bf16``: ``native_bf16(device)``, whether the device runs its bf16 natively.
    - ``notes``: a few words on where a precision runs, for the errors that name it.
    - ``check``: ``check(precision, device)``, its own checks beyond the table (a ValueError).
    - ``unpadded``: the devices where it runs the unpadded graph (``Encoder.embed_ids(unpadded=True)``).
    - ``lazy_devices``: devices where its runner is made on the first call, not with the model.
    - ``unnamed_fast``: device -> its rank among the backends whose fast mode ``precision="fast"``
      tries on that device when no backend is named (lower first; ``encoder/precision.py``).
    - ``classifier``: the precisions it runs a sequence classifier in, each "exact" or
      "approximate" (``encoder/classifier.py``).
    """

    backend: str
    devices: tuple[str, ...]
    precisions: Mapping[str, tuple[str, ...]]
    thread_safe: bool
    returns: str
    needs: tuple[str, ...]
    onnx_graph: bool
    make: Callable[..., Runner]
    fast: Mapping[str, str] = field(default_factory=dict)
    native_bf16: Callable[[str], bool] | None = None
    notes: Mapping[str, str] = field(default_factory=dict)
    check: Callable[[str, str], None] | None = None
    unpadded: tuple[str, ...] = ()
    lazy_devices: tuple[str, ...] = ()
    classifier: Mapping[str, str] = field(default_factory=dict)
    unnamed_fast: Mapping[str, int] = field(default_factory=dict)

    def where(self, precision: str) -> str:
        """Where this backend runs ``precision``, as errors say it: ``backend='onnx' with
        device='cpu' (ONNX Runtime's int8 kernels)``."""
        devices = self.precisions[precision]
        text = f"backend={self.backend!r}"
        if devices != self.devices:
            text += " with " + either("device", devices)
        note = self.notes.get(precision)
        return f"{text} ({note})" if note else text

    def check_device(self, device: str) -> None:
        """A ValueError naming the devices of this backend when ``device`` is not one of them."""
        if device not in self.devices:
            raise ValueError(f"backend={self.backend!r} runs on {either('device', self.devices)}, "
                             f"got device={device!r}")
