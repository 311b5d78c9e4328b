"""Process-wide torch switches held while a block runs: TF32 off for exact fp32 on CUDA
(:func:`exact_fp32`), cuDNN's attention off (:func:`no_cudnn_attention`). Shared by the torch
model runner (``rapidscore.encoder.runtime.torch``, the classifier) and the torch matching of
BERTScore (``rapidscore.device.matching_torch`` through ``rapidscore.device.engine`` and
``rapidscore.bertscore.finishing``).

torch's switches are process-wide. A :class:`_CountedSwitch` counts the threads inside its
blocks: the first one in saves the process's setting and sets its own, the last one out restores
it. While any thread is inside, other work of the process runs under the switch too: that is the
documented cost; the setting never stays changed after the blocks end.

It imports nothing of rapidscore, so the encoder and the kernels can both use it without
importing each other. torch is imported only inside the blocks.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["exact_fp32", "no_cudnn_attention"]


class _CountedSwitch:
    """A process-wide setting (``read``: the current value; ``write``: set one) held at ``value``
    while any thread is inside :meth:`held`."""

    def __init__(self, read: Callable[[Any], Any], write: Callable[[Any, Any], None], value: Any):
        self._read, self._write, self._value = read, write, value
        self._lock = threading.Lock()
        self._users = 0
        self._saved: Any = None

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        import torch

        with self._lock:
            if self._users == 0:
                self._saved = self._read(torch)
                self._write(torch, self._value)
            self._users += 1
        try:
            yield
        finally:
            with self._lock:
                self._users -= 1
                if self._users == 0:
                    self._write(torch, self._saved)
                    self._saved = None


def _set_tf32(torch, value: tuple[bool, bool]) -> None:
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = value


_TF32 = _CountedSwitch(lambda torch: (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32),
                       _set_tf32, (False, False))
_CUDNN_ATTENTION = _CountedSwitch(lambda torch: torch.backends.cuda.cudnn_sdp_enabled(),
                                  lambda torch, value: torch.backends.cuda.enable_cudnn_sdp(value), False)


def _on_cuda(device) -> bool:
    return str(device).split(":")[0] == "cuda"


@contextlib.contextmanager
def exact_fp32(device) -> Iterator[None]:
    """Turn TF32 off for CUDA matrix products (and cuDNN) while the block runs; a no-op off CUDA."""
    if not _on_cuda(device):
        yield
        return
    with _TF32.held():
        yield


@contextlib.contextmanager
def no_cudnn_attention() -> Iterator[None]:
    """Keep scaled-dot-product attention off cuDNN's kernels while the block runs (flash, the
    memory-efficient kernel or the math path are taken instead; the same attention up to float
    rounding). cuDNN's attention builds an execution plan for every new batch shape: on an H200
    (torch 2.11, cuDNN 9.19) the first fp16 call over 10,000 MiniLM pairs (245 batch shapes)
    took 18.3 s against 1.8 s once the plans existed, and without cuDNN 1.47 s from the first
    call and the same afterwards (bench/RESULTS_GPU.md, 2026-12-04). The switch is a flag of
    torch's: on the CPU, which never runs cuDNN, it is set and restored all the same (the path
    CI runs)."""
    with _CUDNN_ATTENTION.held():
        yield
