"""OpenVINO: the exported ONNX graph compiled for the CPU (faster fp32, and the bf16 fast mode).

``CAPABILITIES`` (the end of the module): fp32 and bf16 on the CPU; bf16 is the fast mode where the
CPU has bf16 instructions.
"""

from __future__ import annotations

import functools
import queue
import threading
from pathlib import Path
from typing import Any

import numpy as np

from rapidscore.encoder.runtime.capabilities import Capabilities, RunnerBase
from rapidscore.threads import thread_budget


def _has_bf16(core: Any) -> bool:
    return "BF16" in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")


@functools.cache
def _cpu_bf16() -> bool:
    try:
        import openvino
    except ImportError:
        return False
    return _has_bf16(openvino.Core())


def native_bf16(device: str) -> bool:
    """Whether OpenVINO runs bf16 natively on ``device``: its CPU plugin's capability (AVX512_BF16
    or AMX); False when OpenVINO is not installed."""
    return device == "cpu" and _cpu_bf16()


class OpenVinoRunner(RunnerBase):
    """The exported ONNX graph compiled by OpenVINO for the CPU.

    Measured here (AMD EPYC, 2 cores, MiniLM): fp32 about 1.3x ONNX Runtime, bf16 about 2.4x.
    ``precision="fp32"`` forces f32 inference: OpenVINO would otherwise pick bf16 by itself on
    CPUs that support it, which is not exact.

    ``num_threads`` below the thread budget is each call's share: the model is compiled with
    budget // num_threads streams of that many threads, so concurrent callers (a server's workers,
    each given its share) run side by side as they do on ONNX Runtime, instead of queueing on one
    stream.

    Thread-safe: an infer request holds its input and output buffers, so one request shared by two
    threads fails ("Infer Request is busy") or returns the other thread's output. Each call takes
    a request from a pool (created on demand, at most ``max_requests``; more callers wait) and
    copies the output before handing the request back.
    """

    returns = "numpy"
    thread_safe = True

    def __init__(self, onnx_path: Path, device: str, precision: str, num_threads: int | None,
                 compile_cache: Path | None = None, max_requests: int = 8):
        try:
            import openvino as ov
        except ImportError as exc:
            raise ImportError("backend='openvino' needs OpenVINO: pip install 'rapidscore[openvino]'") from exc
        CAPABILITIES.check_device(device)
        core = ov.Core()
        if precision == "bf16" and not _has_bf16(core):
            raise ValueError("precision='bf16' needs a CPU with bf16 instructions (AVX512_BF16 or AMX); "
                             "this CPU has none, use precision='fp32'")
        config: dict = {
            "INFERENCE_PRECISION_HINT": "bf16" if precision == "bf16" else "f32",
            "PERFORMANCE_HINT": "LATENCY",
            "INFERENCE_NUM_THREADS": num_threads or thread_budget(),
        }
        budget = thread_budget()
        if num_threads is not None and num_threads < budget:
            # ``num_threads`` is each call's share, as for ONNX Runtime's intra-op threads: the rest of
            # the budget serves concurrent callers (a server's workers share this runner) in streams of
            # their own. One stream would run them one after another: two callers of a 1-thread
            # stream made 33 calls/s together, of two 1-thread streams 50 (bf16, MiniLM, 2 cores).
            streams = min(budget // num_threads, max_requests)
            config.update({"NUM_STREAMS": streams, "INFERENCE_NUM_THREADS": num_threads * streams})
            del config["PERFORMANCE_HINT"]  # the hint would override the stream count
        if compile_cache is not None:
            config["CACHE_DIR"] = str(compile_cache)
        self.compiled = core.compile_model(core.read_model(str(onnx_path)), "CPU", config)
        self._inputs = {port.get_any_name() for port in self.compiled.inputs}
        self._idle: queue.LifoQueue = queue.LifoQueue()
        self._idle.put(self.compiled.create_infer_request())
        self._created = 1
        self._max_requests = max_requests
        self._lock = threading.Lock()
        self.provider = f"openvino-cpu-{precision}"

    def _take_request(self):
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            if self._created < self._max_requests:
                self._created += 1
                return self.compiled.create_infer_request()
        return self._idle.get()  # all requests busy: wait for one

    def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        feed = {"input_ids": input_ids, "attention_mask": attention_mask}
        request = self._take_request()
        try:
            result = request.infer({k: v for k, v in feed.items() if k in self._inputs})
            return np.array(result[0], dtype=np.float32, copy=True)  # the request reuses its buffers
        finally:
            self._idle.put(request)


def make(source: Path, *, layer: int | str | None, device: str, precision: str, num_threads: int | None,
         compile_cache: Path | None) -> OpenVinoRunner:
    """The runner of the graph ``source``, compiled for ``precision`` (models compiled before are
    found in ``compile_cache``)."""
    return OpenVinoRunner(source, device, precision, num_threads, compile_cache=compile_cache)


CAPABILITIES = Capabilities(
    backend="openvino", devices=("cpu",), precisions={"fp32": ("cpu",), "bf16": ("cpu",)},
    thread_safe=OpenVinoRunner.thread_safe, returns=OpenVinoRunner.returns, needs=("openvino",), onnx_graph=True,
    make=make, fast={"cpu": "bf16"}, native_bf16=native_bf16, notes={"bf16": "CPU"},
    classifier={"fp32": "exact", "bf16": "approximate"}, unnamed_fast={"cpu": 1})
