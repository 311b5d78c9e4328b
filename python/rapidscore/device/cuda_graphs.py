"""Small batches of the torch model through captured CUDA graphs (issue 39: one pair's latency).

A short pair through MiniLM on a GPU is launch-bound: every operation of the model is a kernel
launched from Python, and the GPU waits for the launches. A CUDA graph records the launches of
one forward pass once and replays them with one call. A graph has fixed shapes and addresses, so
:class:`GraphedForward` keeps **shape buckets** and static buffers:

- **Buckets.** ``rows`` in ``BUCKET_ROWS`` (1, 2, 4, 8) by lengths in multiples of
  ``LENGTH_STEP`` (16) up to the model's positions (512 for BERT-sized models), only those of
  ``rows * length <= MAX_BUCKET_TOKENS`` (2048). A batch of B sequences padded to L runs in the
  smallest bucket that holds it: B rounded up to the next row count, L up to the next multiple
  of 16. Multiples of 16 rather than powers of two: a row never gets more than 15 padding
  tokens (powers of two double a 257-token pair's work, about 0.5 ms of MiniLM in exact fp32 on
  an H100, a quarter of the latency target), and 16 keeps the matrix shapes aligned for the
  tensor cores. It costs more graphs (112 for a 512-position model against 23) and so more
  capture time at warm-up, paid once.
- **Padding.** Extra columns get the model's pad id and mask 0, extra rows pad ids with only
  their first position unmasked (a row with every key masked gives NaN in some attention
  kernels; those rows are never read). The real tokens' vectors are the eager pass's up to
  float rounding: masked keys get the dtype's minimum before the softmax. Models whose outputs
  depend on padding (``torch_model.padding_sensitive``: ConvBERT) do not get graphs.
- **Static buffers, shared.** One input buffer (ids and mask of ``MAX_BUCKET_TOKENS`` tokens)
  and one output buffer (``MAX_BUCKET_TOKENS x dim`` float32, times the hidden states of
  ``layer="all"``) serve every bucket: a bucket reads and writes the front of them, viewed at its
  shape. Each graph ends with a copy of the model's output into the output buffer, so the
  model's own output is an intermediate of the graph's memory pool, which all graphs share
  (``torch.cuda.graph_pool_handle``): intermediates of one capture are reused by the next.
- **Memory bound.** Static buffers: ``MAX_BUCKET_TOKENS * (16 + 4 * dim * hidden_states)``
  bytes: 3.0 MiB for MiniLM (dim 384), 8 MiB for a 1024-wide model. The shared pool holds about
  one forward pass of the largest bucket's intermediates (2048 tokens); ``stats()`` reports the
  device memory the warm-up reserved (``reserved_bytes``). Without sharing, the static outputs
  of 112 buckets alone would hold 76,544 tokens x dim x 4 bytes (117 MiB for MiniLM).
- **Copying out.** The next replay of any bucket overwrites the output buffer, so each call
  returns a clone of its ``[:B, :L]`` slice, made before the lock is released (a copy of B x L x
  dim floats, microseconds); the caller owns it.
- **Thread safety.** One lock serialises the copy in, the replay and the copy out of every
  bucket (they share buffers and the pool). A replay is enqueued on the caller's current CUDA
  stream; a replay from another stream than the previous one first waits for that stream, so
  replays never overlap on the device. Captures hold the lock too.
- **Capture.** ``warm_up`` captures the buckets, at most once each, with warm-up iterations on a
  side stream before each capture (lazy initialisation of cuBLAS and the attention kernels
  happens there, not in the graph), as PyTorch documents, and ``capture_error_mode=
  "thread_local"`` (other threads may keep using the GPU meanwhile). A bucket not captured runs
  the plain eager forward: batches over the largest bucket, and every batch before the
  warm-up. Nothing is captured on first use: capture takes the GPU and the lock for a while
  and needs the first call to be a warm-up, so it belongs to load time, never to a request.
  A model whose forward cannot be captured (a host synchronisation inside it) turns the graphs
  off for its runner with a RapidscoreWarning and runs eagerly.

**When the buckets are captured.** On the scorer's warm-up, not at model load:
``BERTScore.warm_up()`` captures its runner's buckets up to the encoder's ``max_length``
(:func:`warm_up_graphs`), and ``rapidscore serve`` warms every served BERTScore engine before
it turns ready (``BERTScoreMetric.serve_warm_up``). Loading a model for batch scoring, whose
batches are larger than the buckets, pays neither the capture time nor the pool's memory.

**On the CPU** the same code runs: buckets, padding, shared buffers, lock and copy out; "capture"
there records a plain call of the forward on the static buffers and "replay" makes it. CI has no
GPU: the tests exercise everything but the ``torch.cuda.CUDAGraph`` calls this way
(``TorchRunner.enable_graphs()``). It is off by default on the CPU: no launch overhead to save.

**Switches.** On by default for ``backend="torch"`` on CUDA; ``RAPIDSCORE_CUDA_GRAPHS=0`` (or
``false``, ``no``, ``off``) turns it off for runners made afterwards; ``runner.disable_graphs()``
for one runner.

torch is imported when a :class:`GraphedForward` is made, never by importing this module.
"""

from __future__ import annotations

import math
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from rapidscore.errors import RapidscoreWarning

if TYPE_CHECKING:
    import torch

__all__ = ["GraphedForward", "graphs_enabled", "warm_up_graphs", "cuda_graphs_wanted", "model_limits",
           "ENVIRONMENT_VARIABLE", "BUCKET_ROWS", "LENGTH_STEP", "MAX_BUCKET_TOKENS", "DEFAULT_MAX_LENGTH",
           "WARMUP_ITERATIONS"]

#: set to 0 / false / no / off to keep CUDA runners eager
ENVIRONMENT_VARIABLE = "RAPIDSCORE_CUDA_GRAPHS"
#: batch rows of the buckets: one text, one pair, and small batches of a few
BUCKET_ROWS = (1, 2, 4, 8)
#: bucket lengths are the multiples of this, up to the model's positions
LENGTH_STEP = 16
#: buckets hold at most this many tokens (rows x length): bounds the static buffers and the pool
MAX_BUCKET_TOKENS = 2048
#: the longest bucket of a model whose config names no max_position_embeddings (T5's relative positions)
DEFAULT_MAX_LENGTH = 512
#: eager passes of a bucket on a side stream before its capture (CUDA)
WARMUP_ITERATIONS = 2

_OFF = frozenset({"0", "false", "no", "off"})


def graphs_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``RAPIDSCORE_CUDA_GRAPHS`` leaves CUDA graphs on (the default)."""
    value = (os.environ if environ is None else environ).get(ENVIRONMENT_VARIABLE, "")
    return value.strip().lower() not in _OFF


def cuda_graphs_wanted(model: Any) -> bool:
    """Whether a CUDA runner of the torch ``model`` gets graphs: ``RAPIDSCORE_CUDA_GRAPHS`` leaves
    them on, and the model's outputs do not depend on the padding beside a sentence (the buckets
    pad further than the batch)."""
    from rapidscore.encoder.torch_model import padding_sensitive

    return graphs_enabled() and not padding_sensitive(model)


def model_limits(model: Any) -> dict[str, int]:
    """:class:`GraphedForward`'s ``pad_id`` and ``max_length`` for the torch ``model``: the pad id
    of its config (0 where it names none) and its positions (``max_position_embeddings``, else
    ``DEFAULT_MAX_LENGTH``). Padding tokens past a sentence never need a position of their own
    beyond that: BERT numbers them by index (the bucket stays within the positions), RoBERTa gives
    them the pad id's."""
    config = model.config
    pad = getattr(config, "pad_token_id", None)
    positions = getattr(config, "max_position_embeddings", None)
    return {"pad_id": pad if isinstance(pad, int) and not isinstance(pad, bool) and pad >= 0 else 0,
            "max_length": positions if isinstance(positions, int) and positions >= LENGTH_STEP else DEFAULT_MAX_LENGTH}


def warm_up_graphs(encoder: Any, max_length: int | None = None) -> GraphedForward | None:
    """Capture the buckets of ``encoder``'s runner up to ``max_length`` (default: the encoder's
    ``max_length``), where the runner has graphs (a torch runner on CUDA, or one given
    ``enable_graphs()``); returns them, or None. A runner not made yet (a CPU ONNX Runtime
    session, made on first use) is not made here."""
    if not encoder.runtime.runs_torch:
        return None
    graphs = encoder.runner.graphs
    if not isinstance(graphs, GraphedForward):
        return None
    graphs.warm_up(encoder.max_length if max_length is None else max_length)
    return graphs


class GraphedForward:
    """A runner's ``forward(input_ids, attention_mask)`` (tensors on ``device``) for small batches
    through shape buckets: replayed CUDA graphs on a GPU, the same buckets run eagerly on the CPU
    (the module's docstring has the design).

    Called as the runner is: ``graphs(input_ids, attention_mask)``, int64 host arrays (B, L) ->
    the forward's output (B, L, dim), or (hidden states, B, L, dim), float32 on the device; a
    batch without a captured bucket goes through ``forward(to_device(ids), to_device(mask))``.
    ``warm_up`` captures the buckets. Thread-safe.

    ``pad_id``: the id the model treats as padding (RoBERTa numbers positions from it);
    ``max_length``: the longest bucket, rounded down to a multiple of ``step``.
    """

    def __init__(self, forward: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], device: str, *,
                 to_device: Callable[[np.ndarray], torch.Tensor] | None = None, pad_id: int = 0,
                 max_length: int = DEFAULT_MAX_LENGTH, rows: Sequence[int] = BUCKET_ROWS,
                 step: int = LENGTH_STEP, max_tokens: int = MAX_BUCKET_TOKENS,
                 warmup_iterations: int = WARMUP_ITERATIONS):
        import torch

        for name, value in (("max_length", max_length), ("step", step), ("max_tokens", max_tokens),
                            ("warmup_iterations", warmup_iterations), *(("rows", r) for r in rows)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if not rows:
            raise ValueError("rows must name at least one batch size")
        self.torch = torch
        self.forward = forward
        self.device = str(device)
        self.cuda = self.device.split(":")[0] == "cuda"
        self.to_device = to_device if to_device is not None else self._copy_to_device
        self.pad_id = int(pad_id)
        self.step = step
        self.rows = tuple(sorted(set(rows)))
        self.max_tokens = max_tokens
        self.max_length = max_length // step * step
        self.warmup_iterations = warmup_iterations
        #: bucket (rows, length) -> its replay (the graph's on CUDA, a plain call on the CPU)
        self.captures: dict[tuple[int, int], Callable[[], None]] = {}
        #: why the graphs were turned off (a capture failed), or None
        self.failure: str | None = None
        self.warm_up_seconds = 0.0  # every warm_up's capture time, summed
        self.reserved_bytes = 0  # device memory the warm-ups reserved (CUDA; other threads' use included)
        self.replays = 0  # calls that went through a bucket
        self._lock = threading.Lock()
        # ids (first max_tokens) and mask (last max_tokens): a bucket's both as one (2, rows, length) view
        self._inputs = torch.zeros(2 * max_tokens, dtype=torch.int64, device=self.device)
        self._output: torch.Tensor | None = None  # made at the first capture, of the forward's width
        self._leading: tuple[int, ...] = ()  # the output's axes before (rows, length, dim): hidden states
        self._pool = torch.cuda.graph_pool_handle() if self.cuda else None
        self._last_stream: Any = None  # the CUDA stream of the last replay or capture

    # -- buckets --------------------------------------------------------------------------------

    def bucket(self, batch: int, length: int) -> tuple[int, int] | None:
        """The bucket (rows, length) a batch of ``batch`` sequences padded to ``length`` runs in,
        captured or not; None for one larger than every bucket."""
        rows = next((r for r in self.rows if r >= batch), None)
        padded = -(-max(length, 1) // self.step) * self.step
        if rows is None or padded > self.max_length or rows * padded > self.max_tokens:
            return None
        return rows, padded

    def buckets(self, max_length: int | None = None) -> Iterator[tuple[int, int]]:
        """Every bucket (rows, length), shortest first, of lengths up to ``max_length`` rounded up
        to the step (all when None)."""
        top = self.max_length if max_length is None else min(self.max_length, -(-max_length // self.step) * self.step)
        for length in range(self.step, top + 1, self.step):
            for rows in self.rows:
                if rows * length <= self.max_tokens:
                    yield rows, length

    def captured(self, batch: int, length: int) -> bool:
        """Whether a batch of this shape replays a captured bucket."""
        bucket = self.bucket(batch, length)
        return bucket is not None and bucket in self.captures

    @property
    def static_bytes(self) -> int:
        """Bytes of the static buffers (inputs and the shared output; the pool not counted)."""
        output = 0 if self._output is None else self._output.numel() * self._output.element_size()
        return self._inputs.numel() * self._inputs.element_size() + output

    def stats(self) -> dict[str, Any]:
        """What the graphs hold and did: buckets captured, warm-up seconds, static and reserved
        bytes, replays, and the failure that turned them off (or None)."""
        return {"captured": len(self.captures), "buckets": sum(1 for _ in self.buckets()), "device": self.device,
                "warm_up_seconds": self.warm_up_seconds, "static_bytes": self.static_bytes,
                "reserved_bytes": self.reserved_bytes, "replays": self.replays, "failure": self.failure}

    # -- running --------------------------------------------------------------------------------

    def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> torch.Tensor:
        batch, length = input_ids.shape
        bucket = self.bucket(batch, length)
        replay = None if bucket is None else self.captures.get(bucket)
        if replay is None or bucket is None:
            return self.forward(self.to_device(input_ids), self.to_device(attention_mask))
        rows, padded = bucket
        feed = np.empty((2, rows, padded), dtype=np.int64)  # padded on the host: one copy to the device
        feed[0].fill(self.pad_id)
        feed[0, :batch, :length] = input_ids
        feed[1].fill(0)
        feed[1, :batch, :length] = attention_mask
        feed[1, batch:, 0] = 1  # extra rows: one unmasked key each (never an all-masked row)
        host = self.torch.from_numpy(feed)
        if self.cuda:
            host = host.pin_memory()
        torch = self.torch
        with self._lock, torch.inference_mode():
            self._follow_last_stream()
            self._inputs[:2 * rows * padded].view(2, rows, padded).copy_(host, non_blocking=self.cuda)
            replay()
            self.replays += 1
            out = self._output_view(rows, padded)[..., :batch, :length, :]
            return out.clone(memory_format=torch.contiguous_format)  # the next replay overwrites the buffer

    def _copy_to_device(self, array: np.ndarray) -> torch.Tensor:
        return self.torch.from_numpy(array).to(self.device)

    def _follow_last_stream(self) -> None:
        """On CUDA, order this replay after the previous one when it was enqueued on another
        stream (held by the lock): the graphs share their buffers and memory pool."""
        if not self.cuda:
            return
        current = self.torch.cuda.current_stream(self.device)
        last = self._last_stream
        if last is not None and last != current:
            current.wait_stream(last)
        self._last_stream = current

    def _output_view(self, rows: int, length: int) -> torch.Tensor:
        assert self._output is not None
        dim = self._output.shape[-1]
        count = math.prod(self._leading) * rows * length
        return self._output[:count].view(*self._leading, rows, length, dim)

    # -- capture --------------------------------------------------------------------------------

    def warm_up(self, max_length: int | None = None) -> int:
        """Capture every bucket of lengths up to ``max_length`` (all when None) not captured yet;
        returns how many this call captured. Its time adds to ``warm_up_seconds``. A failed
        capture turns the graphs off (``failure``; a RapidscoreWarning): eager from then on."""
        torch = self.torch
        start = time.perf_counter()
        reserved = torch.cuda.memory_reserved(self.device) if self.cuda else 0
        count = 0
        for bucket in self.buckets(max_length):
            with self._lock:
                if self.failure is not None:
                    break
                if bucket in self.captures:
                    continue
                try:
                    self.captures[bucket] = self._capture(*bucket)
                except Exception as exc:  # a host synchronisation in the forward, out of memory, ...
                    self._turn_off(f"capturing the bucket {bucket} failed: {type(exc).__name__}: {exc}")
                    break
                count += 1
        if self.cuda:
            torch.cuda.synchronize(self.device)
            self.reserved_bytes += max(0, torch.cuda.memory_reserved(self.device) - reserved)
        self.warm_up_seconds += time.perf_counter() - start
        return count

    def _turn_off(self, reason: str) -> None:
        self.failure = reason
        self.captures.clear()
        warnings.warn(f"CUDA graphs off for this model ({reason}); it runs eagerly", RapidscoreWarning,
                      stacklevel=4)

    def _capture(self, rows: int, length: int) -> Callable[[], None]:
        """The replay of bucket (rows, length): its forward on the static buffers, captured into a
        CUDA graph (CUDA) or called as is (CPU). Held by the lock."""
        torch = self.torch
        inputs = self._inputs[:2 * rows * length].view(2, rows, length)
        ids, mask = inputs[0], inputs[1]
        with torch.inference_mode():
            if not self.cuda:
                hidden = self._fill_and_run(ids, mask, 1)
                out = self._output_for(hidden, rows, length)

                def run() -> None:
                    out.copy_(self.forward(ids, mask))

                return run
            current = torch.cuda.current_stream(self.device)
            side = torch.cuda.Stream(self.device)
            side.wait_stream(current)
            if self._last_stream is not None and self._last_stream != current:
                side.wait_stream(self._last_stream)  # a replay still reading the buffers
            with torch.cuda.stream(side):
                hidden = self._fill_and_run(ids, mask, self.warmup_iterations)
            current.wait_stream(side)
            out = self._output_for(hidden, rows, length)  # allocated outside the graph's pool
            del hidden
            torch.cuda.synchronize(self.device)  # as torch.cuda.graph: the warm-up done (and its errors raised)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.stream(side):
                graph.capture_begin(self._pool, capture_error_mode="thread_local")
                try:
                    out.copy_(self.forward(ids, mask))
                finally:
                    graph.capture_end()
            current.wait_stream(side)
            self._last_stream = current
            return graph.replay

    def _fill_and_run(self, ids: torch.Tensor, mask: torch.Tensor, iterations: int) -> torch.Tensor:
        """Eager passes of the forward on the static buffers holding a padded batch (every row
        with a masked tail, as most real batches): what the capture records runs once before it."""
        ids.fill_(self.pad_id)
        mask.fill_(1)
        mask[:, -1] = 0
        hidden = self.forward(ids, mask)
        for _ in range(iterations - 1):
            hidden = self.forward(ids, mask)
        return hidden

    def _output_for(self, hidden: torch.Tensor, rows: int, length: int) -> torch.Tensor:
        """The output buffer's view for bucket (rows, length), the buffer made on first use from
        the forward's output ``hidden`` (its width and leading axes)."""
        if self._output is None:
            self._leading = tuple(hidden.shape[:-3])
            width = math.prod(self._leading) * self.max_tokens * hidden.shape[-1]
            self._output = self.torch.empty(width, dtype=hidden.dtype, device=self.device).view(-1, hidden.shape[-1])
        expected = (*self._leading, rows, length, self._output.shape[-1])
        if tuple(hidden.shape) != expected:
            raise RuntimeError(f"the forward returned shape {tuple(hidden.shape)} for the bucket ({rows}, {length}), "
                               f"expected {expected}")
        return self._output_view(rows, length)
