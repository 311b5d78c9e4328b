"""ONNX Runtime: the exported graph on the CPU, or on CUDA with onnxruntime-gpu.

ONNX Runtime ships as two PyPI packages that share the ``onnxruntime`` import and must not be
installed together: ``onnxruntime`` (CPU; the ``[cpu]`` extra) and ``onnxruntime-gpu`` (CUDA and
CPU; the ``[gpu]`` extra). See docs/gpu.md.

On CUDA the runner binds its inputs and output with IOBinding: the hidden states are written
straight into a torch tensor on the GPU (no copy to the host), so the encoder's token store stays
on the device like the torch backend's. On the CPU the plain ``InferenceSession.run`` is the
default (measured as fast as IOBinding there, docs/gpu.md); ``io_binding=True`` runs the same
binding path on the CPU, which is how the tests exercise it without a GPU.

``CAPABILITIES`` (the end of the module): fp32 on the CPU and CUDA, int8 on the CPU; the unpadded
graph; the CPU session made on the first call (it holds a copy of the weights).
"""

from __future__ import annotations

import contextlib
import importlib.util
from pathlib import Path
from typing import Any

import numpy as np

from rapidscore.encoder.runtime.capabilities import Capabilities, RunnerBase
from rapidscore.threads import thread_budget

CPU_PACKAGE, GPU_PACKAGE = "onnxruntime", "onnxruntime-gpu"


def import_onnxruntime(purpose: str) -> Any:
    """``import onnxruntime``, or an ImportError that names the extras providing it."""
    if importlib.util.find_spec("onnxruntime") is None:
        raise ImportError(
            f"{purpose} needs ONNX Runtime, which is not installed: pip install 'rapidscore[cpu]' "
            f"({CPU_PACKAGE}) or, for CUDA, 'rapidscore[gpu]' ({GPU_PACKAGE}); install exactly one of the two",
            name="onnxruntime")
    import onnxruntime

    return onnxruntime


def installed_onnxruntime_packages() -> list[str]:
    """The ONNX Runtime distributions installed here (both names share one import)."""
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in (CPU_PACKAGE, GPU_PACKAGE):
        with contextlib.suppress(PackageNotFoundError):
            found.append(f"{name} {version(name)}")
    return found


def missing_cuda_provider_message(available: list[str], installed: list[str]) -> str:
    """Why device='cuda' cannot run on this ONNX Runtime, and what to install instead."""
    message = (f"device='cuda' with backend='onnx' needs ONNX Runtime's CUDAExecutionProvider, which this "
               f"installation lacks (installed: {', '.join(installed) or 'unknown'}; providers: {available}). ")
    if len(installed) > 1:
        message += (f"{CPU_PACKAGE} and {GPU_PACKAGE} are both installed and overwrite each other's files: "
                    f"pip uninstall -y {CPU_PACKAGE} {GPU_PACKAGE} && pip install 'rapidscore[gpu]'. ")
    else:
        message += (f"Install {GPU_PACKAGE} in place of {CPU_PACKAGE}: pip uninstall -y {CPU_PACKAGE} && "
                    "pip install 'rapidscore[gpu]'. ")
    return message + "Or use backend='torch' with a CUDA build of torch (docs/gpu.md)."


_SHARED_CPU_ARENA: list[int] = []  # the reserve of the process's one CPU arena, once registered
# Regions the arena grows by past its reserve: powers of two from 32 MiB, at most 256 MiB each;
# each is given back by the run that leaves it empty (the run option below).
_GROWTH_FIRST_BYTES = 32 * 2**20
_GROWTH_LARGEST_BYTES = 256 * 2**20
_SHRINK_AFTER_RUN = ("memory.enable_memory_arena_shrinkage", "cpu:0")


def share_cpu_arena(reserve_bytes: int) -> None:
    """Give every ONNX Runtime CPU session made after this call one arena of the process, instead
    of malloc per tensor: a first region of ``reserve_bytes`` kept for the life of the process
    (address space; pages count in RSS once a batch has used them), and regions past it given
    back by the run that leaves them empty. For a process that only serves: its memory then stays
    at the high-water mark its batches reached inside the reserve instead of rising and falling
    with each batch, and never holds more than the reserve past the batches in flight. Idempotent
    (the first reserve stays)."""
    if _SHARED_CPU_ARENA:
        return
    reserve = int(reserve_bytes)
    if not 0 < reserve < 2**31:  # OrtArenaCfg's sizes are C ints
        raise ValueError(f"the shared arena's reserve must be 1 byte to 2 GiB - 1, got {reserve_bytes!r}")
    ort = import_onnxruntime("a shared CPU arena")
    info = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT)
    # arena_extend_strategy 0 (kNextPowerOfTwo): the first region is the reserve and is never
    # shrunk; with 1 (kSameAsRequested) every tensor that found no free block got a region of its
    # own size, blocks never merged across regions, and a server's arena grew 0.65 -> 1.7 GiB
    # over 7 minutes of mixed shapes (bench/RESULTS.md, soak).
    config = ort.OrtArenaCfg({"max_mem": 0, "arena_extend_strategy": 0, "initial_chunk_size_bytes": reserve,
                              "initial_growth_chunk_size_bytes": _GROWTH_FIRST_BYTES,
                              "max_power_of_two_extend_bytes": _GROWTH_LARGEST_BYTES})
    ort.create_and_register_allocator(info, config)
    _SHARED_CPU_ARENA.append(reserve)


class OnnxRunner(RunnerBase):
    """An ONNX Runtime session. Thread-safe: ``InferenceSession.run`` may be called from many
    threads at once; they share the session's intra-op pool (sized to the thread budget). The
    IOBinding path makes a binding per call (bindings are not shared between threads).

    ``io_binding``: None (default) binds on CUDA and runs plainly on the CPU; True / False force
    either path. On CUDA with a CUDA build of torch the call returns a torch tensor on the GPU
    (``returns == "torch"``); without torch the output is copied to a host array.
    """

    returns = "numpy"
    thread_safe = True

    def __init__(self, onnx_path: Path, device: str, num_threads: int | None, *, io_binding: bool | None = None):
        ort = import_onnxruntime("backend='onnx'")

        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = num_threads or thread_budget()
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3
        # The intra-op threads still spin between operators within a run, but stop when it ends:
        # otherwise they spin on for a while after it, taking the cores from whatever runs next
        # (another session, the tokenizer's pool, a server's event loop). MiniLM, one short pair
        # per call, two sessions called in turn on 2 cores: 15.0 -> 5.7 ms; one session called
        # back to back: 4.22 -> 4.27 ms.
        options.add_session_config_entry("session.force_spinning_stop", "1")
        # No CPU memory arena: it keeps every region it ever grew by, and concurrent runs of many
        # shapes (a server's window requests) kept finding no free block of their size, so it grew
        # without bound; malloc gives large blocks back when a run ends (bench/RESULTS.md, soak).
        options.enable_cpu_mem_arena = False
        self._run_options: Any = None
        if device != "cuda" and _SHARED_CPU_ARENA:
            options.enable_cpu_mem_arena = True
            options.add_session_config_entry("session.use_env_allocators", "1")
            self._run_options = ort.RunOptions()
            self._run_options.add_run_config_entry(*_SHRINK_AFTER_RUN)
        self._torch: Any = None
        self._device_id = 0
        if device == "cuda":
            available = ort.get_available_providers()
            if "CUDAExecutionProvider" not in available:
                raise RuntimeError(missing_cuda_provider_message(available, installed_onnxruntime_packages()))
            self._torch = _torch_with_cuda()
            if self._torch is not None:
                # The GPU torch works on, so that the output tensor and the session share a device.
                self._device_id = self._torch.cuda.current_device()
            providers: list[Any] = [("CUDAExecutionProvider", {"device_id": self._device_id}),
                                    "CPUExecutionProvider"]
        else:
            providers = ["CPUExecutionProvider"]
        self.session = ort.InferenceSession(str(onnx_path), options, providers=providers)
        self.provider = self.session.get_providers()[0]
        self.device = device
        self.io_binding = device == "cuda" if io_binding is None else bool(io_binding)
        if self.io_binding and self._torch is not None:
            self.returns = "torch"  # instance attribute: this runner's output stays on the GPU
        # The exporter drops inputs a graph does not use (layer 0 ignores the attention mask).
        self._inputs = {i.name for i in self.session.get_inputs()}
        output = self.session.get_outputs()[0]
        self._output_name = output.name
        # (batch, sequence, dim) or (layers + 1, batch, sequence, dim): the symbolic axes are
        # batch then sequence, in that order; the others are fixed by the export.
        self._output_dims = list(output.shape)

    def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> Any:
        feed = {"input_ids": input_ids, "attention_mask": attention_mask}
        feed = {k: v for k, v in feed.items() if k in self._inputs}
        if not self.io_binding:
            return self.session.run(None, feed, self._run_options)[0]
        return self._run_bound(feed, input_ids.shape)

    def run_feed(self, feed: dict[str, np.ndarray]) -> np.ndarray:
        """Run the graph on named host inputs (those it declares) and return its output on the
        host: the unpadded graph's call (``Encoder.embed_ids(unpadded=True)``)."""
        return self.session.run(None, {k: v for k, v in feed.items() if k in self._inputs}, self._run_options)[0]

    def output_shape(self, batch: int, sequence: int) -> tuple[int, ...]:
        """Shape of the hidden states for a (batch, sequence) input."""
        symbolic = iter((batch, sequence))
        return tuple(dim if isinstance(dim, int) else next(symbolic) for dim in self._output_dims)

    def _run_bound(self, feed: dict[str, np.ndarray], input_shape: tuple[int, ...]) -> Any:
        binding = self.session.io_binding()
        for name, array in feed.items():
            # Host inputs; ONNX Runtime copies them to the device the graph runs on.
            binding.bind_cpu_input(name, np.ascontiguousarray(array))
        shape = self.output_shape(*input_shape)
        out: Any
        if self._torch is not None:
            torch = self._torch
            out = torch.empty(shape, dtype=torch.float32, device=f"cuda:{self._device_id}")
            # ONNX Runtime writes from its own stream: torch's pending work on this memory (the
            # caching allocator may hand back a block that queued kernels still use) ends first.
            torch.cuda.current_stream(out.device).synchronize()
            pointer, device_type = out.data_ptr(), "cuda"
        elif self.device == "cuda":
            # No torch to hold device memory: let ONNX Runtime allocate it, then copy to the host.
            binding.bind_output(self._output_name, "cuda", self._device_id)
            self.session.run_with_iobinding(binding)
            return binding.copy_outputs_to_cpu()[0]
        else:
            out = np.empty(shape, dtype=np.float32)
            pointer, device_type = out.ctypes.data, "cpu"
        # The output is written in place into ``out``: no allocation by ONNX Runtime, no copy.
        binding.bind_output(self._output_name, device_type, self._device_id, np.float32, list(shape), pointer)
        # run_with_iobinding returns after the CUDA provider synchronised its stream (the
        # session's default), so the tensor is complete when torch reads it.
        self.session.run_with_iobinding(binding, self._run_options)
        return out


def _torch_with_cuda() -> Any:
    """torch when it is installed with CUDA and a GPU is visible, else None."""
    if importlib.util.find_spec("torch") is None:
        return None
    import torch

    return torch if torch.cuda.is_available() else None


def make(source: Path, *, layer: int | str | None, device: str, precision: str, num_threads: int | None,
         compile_cache: Path | None) -> OnnxRunner:
    """The runner of the graph ``source`` (int8 is a graph of its own: no precision to set here)."""
    return OnnxRunner(source, device, num_threads)


CAPABILITIES = Capabilities(
    backend="onnx", devices=("cpu", "cuda"), precisions={"fp32": ("cpu", "cuda"), "int8": ("cpu",)},
    thread_safe=OnnxRunner.thread_safe, returns=OnnxRunner.returns, needs=("cpu", "gpu"), onnx_graph=True,
    make=make, fast={"cpu": "int8"}, notes={"int8": "ONNX Runtime's int8 kernels"}, unpadded=("cpu",),
    lazy_devices=("cpu",), classifier={"fp32": "exact"}, unnamed_fast={"cpu": 2})
