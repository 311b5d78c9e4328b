"""The TF32 switch of torch's CUDA matrix products, shared by the torch model runner
(``rapidscore.encoder.runtime.torch``, the classifier) and the torch matching of BERTScore
(``rapidscore.device.matching_torch`` through ``rapidscore.device.engine`` and
``rapidscore.bertscore.finishing``).

It imports nothing of rapidscore, so the encoder and the kernels can both use it without
importing each other. torch is imported only inside :func:`exact_fp32`, on CUDA.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

__all__ = ["exact_fp32"]

_TF32_LOCK = threading.Lock()
_TF32_USERS = 0
_TF32_SAVED: tuple[bool, bool] | None = None


@contextlib.contextmanager
def exact_fp32(device) -> Iterator[None]:
    """Turn TF32 off for CUDA matrix products (and cuDNN) while the block runs; a no-op off CUDA.

    torch's TF32 switches are process-wide. This counts the threads inside such blocks: the first
    one in saves the process's setting and turns TF32 off, the last one out restores it. While
    any thread is inside, other CUDA work of the process also runs without TF32: that is the
    documented cost; the setting never stays changed after the blocks end.
    """
    global _TF32_USERS, _TF32_SAVED
    if str(device).split(":")[0] != "cuda":
        yield
        return
    import torch

    with _TF32_LOCK:
        if _TF32_USERS == 0:
            _TF32_SAVED = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        _TF32_USERS += 1
    try:
        yield
    finally:
        with _TF32_LOCK:
            _TF32_USERS -= 1
            if _TF32_USERS == 0 and _TF32_SAVED is not None:
                torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = _TF32_SAVED
                _TF32_SAVED = None
