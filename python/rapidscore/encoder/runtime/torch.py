"""The Hugging Face torch model, on the CPU or a GPU; hidden states stay on its device.

Precision: ``fp32`` (exact; on CUDA the model's matrix products run without TF32, see
:func:`exact_fp32`), ``fp16`` (weights and activations in half precision; CUDA only) or ``bf16``
(CUDA with bf16 support, or a CPU with native bf16 instructions). Hidden states come back as
float32 in every mode, so similarities and sums downstream are computed in float32/float64.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rapidscore.device.cuda_graphs import cuda_graphs_wanted
from rapidscore.device.tf32 import exact_fp32, no_cudnn_attention
from rapidscore.encoder.runtime.capabilities import Capabilities, OutputHead, RunnerBase

if TYPE_CHECKING:
    import torch

    from rapidscore.device.cuda_graphs import GraphedForward

__all__ = ["TorchRunner", "HiddenStates", "bf16_supported", "check_torch_precision", "exact_fp32", "prepare_torch",
           "require_torch_stack", "CAPABILITIES"]


#: what the torch backend needs (exporting a graph needs onnx and onnxscript besides)
TORCH_MODULES = ("torch", "transformers")


def require_torch_stack(purpose: str, modules: tuple[str, ...] = TORCH_MODULES) -> None:
    """Raise an ImportError naming the extra to install when one of ``modules`` is missing.

    Checked before any work starts: without it a missing onnxscript surfaced deep inside
    torch.onnx.export as "No module named 'onnxscript'", with no hint of the extra.
    """
    import importlib.util

    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        raise ImportError(f"{purpose} needs {', '.join(missing)}, part of the [export] extra: "
                          "pip install 'rapidscore[export]'", name=missing[0])


def check_torch_precision(precision: str, device: str) -> None:
    """A clear ValueError for a precision this device cannot run (before anything loads)."""
    if precision == "fp16" and device != "cuda":
        raise ValueError(f"precision='fp16' needs device='cuda' (got device={device!r}): half-precision "
                         "matrix products on CPUs are slow and lose accuracy; use precision='fp32', or "
                         "'bf16' on a CPU with bf16 instructions")
    if precision == "bf16" and not bf16_supported(device):
        where = "this GPU" if device == "cuda" else "this CPU"
        raise ValueError(f"precision='bf16' with backend='torch' needs native bf16 support, which {where} "
                         "lacks (CPUs: AVX512_BF16 or AMX; GPUs: compute capability 8.0+); use precision='fp32'")


def bf16_supported(device: str) -> bool:
    """Whether ``device`` computes in bf16 natively.

    CPUs: torch's own dispatch checks (``torch.cpu._is_avx512_bf16_supported`` /
    ``_is_amx_tile_supported``, what its oneDNN kernels use). Without them torch emulates bf16
    in float32 (slower than fp32), so that counts as unsupported. GPUs:
    ``torch.cuda.is_bf16_supported(including_emulation=False)``.
    """
    import torch

    if device == "cuda":
        if not torch.cuda.is_available():
            return False
        try:
            return bool(torch.cuda.is_bf16_supported(including_emulation=False))
        except TypeError:  # older torch without the argument
            return bool(torch.cuda.is_bf16_supported())
    checks = [getattr(torch.cpu, name, None) for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")]
    return any(bool(check()) for check in checks if check is not None)


def prepare_torch(device: str, precision: str, num_threads: int | None,
                  purpose: str = "backend='torch'") -> tuple[Any, Any]:
    """``(torch, dtype)`` for a model run on ``device`` in ``precision`` (the torch runners':
    the encoder's and the classifier's): the torch stack, a CUDA device and the precision checked,
    the thread count set."""
    require_torch_stack(purpose)
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device='cuda' with backend='torch' needs a CUDA build of torch and a GPU")
    check_torch_precision(precision, device)
    if num_threads:
        torch.set_num_threads(num_threads)
    return torch, {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]


class HiddenStates:
    """The torch runner's default output head (``runtime.OutputHead``): the encoder cut at ``layer``
    as bert-score reads it (``torch_model.hidden_state_of``), (batch, seq, dim), or
    (layers + 1, batch, seq, dim) for ``layer="all"``."""

    purpose = "backend='torch'"
    token_outputs = True

    def __init__(self, layer: int | str):
        self.layer = layer

    def load(self, model_dir: Path, device: str) -> torch.nn.Module:
        from rapidscore.encoder.torch_model import load_truncated_model

        # SDPA's fused kernels pay off on GPUs; on a 2-core EPYC MiniLM ran 3.80 s under SDPA
        # against 3.68 s eager (28,900 tokens), so the CPU keeps the eager attention.
        attention = "sdpa" if device == "cuda" else "eager"
        all_layers = self.layer == "all"
        return load_truncated_model(model_dir, None if all_layers else int(self.layer), all_layers, attention=attention)

    def read(self, model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        from rapidscore.encoder.torch_model import hidden_state_of

        return hidden_state_of(model, input_ids, attention_mask, self.layer)


class TorchRunner(RunnerBase):
    """The torch model in inference mode, read through its output ``head`` (``runtime.OutputHead``;
    default :class:`HiddenStates` at ``layer``: the truncated encoder). Returns float32 tensors on
    its device.

    On CUDA, the encoder's attention runs through PyTorch's scaled-dot-product attention (SDPA)
    where the model family supports it, else the eager implementation (``attention`` says which;
    the CPU runs eager, measured no slower), never through cuDNN's attention kernels
    (``device.tf32.no_cudnn_attention``: a plan built per batch shape made the first call ten
    times slower), and inputs go through pinned host memory with non-blocking copies.

    Thread-safe: an eval-mode forward pass under ``torch.inference_mode`` keeps no state between
    calls, so threads may share the model.
    """

    returns = "torch"
    thread_safe = True

    def __init__(self, model_dir: Path, layer: int | str | None, device: str, num_threads: int | None,
                 precision: str = "fp32", *, head: OutputHead | None = None):
        if head is None:
            if layer is None:
                raise ValueError("a torch runner needs a layer, or an output head of the model's own")
            head = HiddenStates(layer)
        self.head: OutputHead = head
        torch, dtype = prepare_torch(device, precision, num_threads, head.purpose)
        self._torch = torch
        self.device = device
        self.layer = head.layer
        self.precision = precision
        model = head.load(model_dir, device)
        self.attention = getattr(model.config, "_attn_implementation", "eager")
        self.model = model.to(device=device, dtype=dtype)
        self.provider = f"torch-{device}"
        self._pin = device == "cuda"
        # Small batches through captured CUDA graphs (device/cuda_graphs.py): on by default
        # on CUDA (RAPIDSCORE_CUDA_GRAPHS=0 turns them off), captured by the scorer's warm-up.
        # Their buckets hold token outputs: a head of one row per text runs without them.
        self.graphs: GraphedForward | None = None
        if device == "cuda" and head.token_outputs and cuda_graphs_wanted(self.model):
            self.enable_graphs()

    def to_device(self, array: np.ndarray) -> torch.Tensor:
        """A host array on the model's device: through pinned memory and a non-blocking copy on
        CUDA (the copy is ordered before later work on the stream), a zero-copy view on the CPU."""
        tensor = self._torch.from_numpy(array)
        if not self._pin:
            return tensor
        return tensor.pin_memory().to(self.device, non_blocking=True)

    def enable_graphs(self, **options: Any) -> GraphedForward:
        """Run small batches through shape buckets of static buffers (``cuda_graphs.GraphedForward``,
        ``options`` its keywords): replayed CUDA graphs on a GPU; on the CPU (tests) the same buckets
        run eagerly. Buckets are captured by ``graphs.warm_up()``; until then batches run as before."""
        from rapidscore.device.cuda_graphs import GraphedForward, model_limits

        if not self.head.token_outputs:
            raise ValueError("CUDA-graph buckets hold token outputs; this runner's head gives one row per text")
        self.graphs = GraphedForward(self.forward, self.device, to_device=self.to_device,
                                     **{**model_limits(self.model), **options})
        return self.graphs

    def disable_graphs(self) -> None:
        """Every batch through the plain forward (the captured graphs are dropped)."""
        self.graphs = None

    def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> torch.Tensor:
        graphs = self.graphs
        if graphs is not None:  # batches without a captured bucket fall through to forward
            return graphs(input_ids, attention_mask)
        return self.forward(self.to_device(input_ids), self.to_device(attention_mask))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The head's output, float32, of inputs already on the device: hidden states (batch, seq,
        dim), or (layers + 1, batch, seq, dim); a head of the model's own its rows (batch, labels)."""
        torch = self._torch
        with torch.inference_mode(), exact_fp32(self.device if self.precision == "fp32" else "cpu"), \
                no_cudnn_attention():
            return self.head.read(self.model, input_ids, attention_mask).float()

    @functools.cached_property
    def packed(self) -> bool:
        """Whether :meth:`run_packed` covers this model and layer (``device.packed``: the
        families of ``model_source.UNPADDED_FAMILIES`` at an int layer >= 1; never "all")."""
        from rapidscore.device.packed import packed_supported

        return self.head.token_outputs and packed_supported(self.model, self._packed_layer())

    def run_packed(self, ids: list[np.ndarray]) -> torch.Tensor:
        """Hidden states (T, dim), float32 on the runner's device, of the T tokens of ``ids`` (one
        or more non-empty int token id sequences, T their total length), sentence after sentence,
        without padding (``device.packed.packed_hidden``: the padded forward's vectors, within
        1e-5 in fp32). A ValueError naming the model type where :attr:`packed` is False, or for
        an empty list or sequence. RoBERTa-style positions are numbered from the model's
        ``pad_token_id``, as the padded forward numbers them."""
        from rapidscore.device.packed import check_packed, packed_feed, packed_hidden

        check_packed(self.model, self._packed_layer())
        tensors = {name: self.to_device(array) for name, array in packed_feed(self.model, ids).items()}
        torch = self._torch
        with torch.inference_mode(), exact_fp32(self.device if self.precision == "fp32" else "cpu"), \
                no_cudnn_attention():
            return packed_hidden(self.model, tensors).float()

    def _packed_layer(self) -> int | str:
        layer = self.layer
        if layer is None:  # (packed is False: a head of the model's own)
            raise ValueError("a runner of a head of the model's own has no packed forward")
        return layer if layer == "all" else int(layer)


def make(source: Path, *, layer: int | str | None, device: str, precision: str, num_threads: int | None,
         compile_cache: Path | None, head: OutputHead | None = None) -> TorchRunner:
    """The runner of the model directory ``source`` cut at ``layer``, or read through ``head``."""
    return TorchRunner(source, layer, device, num_threads, precision, head=head)


# The capability table (``rapidscore.encoder.runtime``): fp16 on CUDA, bf16 where it is native.
CAPABILITIES = Capabilities(
    backend="torch", devices=("cpu", "cuda"), precisions={"fp32": ("cpu", "cuda"), "bf16": ("cpu", "cuda"),
                                                          "fp16": ("cuda",)},
    thread_safe=TorchRunner.thread_safe, returns=TorchRunner.returns, needs=("export",), onnx_graph=False,
    make=make, fast={"cuda": "fp16", "cpu": "bf16"}, native_bf16=bf16_supported, check=check_torch_precision,
    classifier={"fp32": "exact", "bf16": "approximate", "fp16": "approximate"}, unnamed_fast={"cuda": 1})
