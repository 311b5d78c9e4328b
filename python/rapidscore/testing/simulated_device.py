"""A simulated accelerator for measuring the host side of the device engines on a CPU.

``SimulatedDevice`` takes the place of a model runner (``Encoder.runner = SimulatedDevice(...)``):
each call returns correctly shaped hidden states after a delay proportional to the batch's
padded tokens, sleeping (the GIL released) as a thread waiting on a GPU does. Its hidden states
are a fixed random vector per token id (a lookup, computed inside the delay), so scores are
deterministic and equal between engines that run the same batches, whatever the overlap.

What it is for: the end-to-end time of a call over ``busy_seconds`` (the time the simulated
device worked) says how much of the host's work (tokenisation, padding, placing rows, matching
and copies) is hidden behind the device; 1.0 is a device that never waits for the host.
bench/bench_pipeline.py reports it; tests/bertscore/test_pipeline_overlap.py bounds it.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

import numpy as np

from rapidscore.encoder.runtime.capabilities import RunnerBase

if TYPE_CHECKING:
    import torch

__all__ = ["SimulatedDevice"]


class SimulatedDevice(RunnerBase):
    """A model runner that simulates a device taking ``seconds_per_token`` per padded token.

    ``hidden_size``: width of the vectors; ``vocab_size``: token ids are taken modulo it.
    ``busy_seconds`` / ``calls`` / ``tokens`` accumulate over calls (``reset`` clears them);
    ``late_seconds`` is time a call's lookup took beyond its delay (a simulation too fast for
    this host: then the device time measured is the lookup's, not the delay's).

    Not thread-safe as a device (``thread_safe = False``: the encoder serialises its calls, as
    one GPU stream does); its counters are guarded by a lock.
    """

    returns = "torch"
    thread_safe = False
    provider = "simulated-device"

    def __init__(self, hidden_size: int, seconds_per_token: float, vocab_size: int = 30522, seed: int = 0):
        import torch

        if seconds_per_token < 0:
            raise ValueError(f"seconds_per_token must be >= 0, got {seconds_per_token!r}")
        generator = torch.Generator().manual_seed(seed)
        self.table = torch.randn(vocab_size, hidden_size, generator=generator, dtype=torch.float32)
        self._table = self.table.numpy()
        self.vocab_size = vocab_size
        self.seconds_per_token = float(seconds_per_token)
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.busy_seconds = 0.0
            self.late_seconds = 0.0
            self.calls = 0
            self.tokens = 0
            self.intervals: list[tuple[float, float]] = []  # the device's (start, end) per call, perf_counter
            self._free_at = 0.0  # when the device finished its last batch
            self._overshoot = 0.0  # how late the last call's sleep woke up

    def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> torch.Tensor:
        import torch

        called = time.perf_counter()
        delay = input_ids.size * self.seconds_per_token
        # A GPU runs queued batches back to back: a call that arrives no later than the last
        # sleep's wake-up delay after the previous batch ended (time.sleep wakes a scheduler tick
        # late, 0.1-0.5 ms here) starts when that batch ended, not when the host woke up.
        begin = self._free_at if called - self._free_at <= self._overshoot else called
        # numpy's gather: one thread, as a device's work takes none of the host's cores (torch's
        # would start an OpenMP team that competes with the host threads being measured)
        hidden = torch.from_numpy(self._table[np.remainder(input_ids, self.vocab_size)])
        done = time.perf_counter()
        finish = max(begin + delay, done)
        if done < finish:
            time.sleep(finish - done)
        woke = time.perf_counter()
        with self._lock:
            self.busy_seconds += finish - begin
            self.late_seconds += max(0.0, done - (begin + delay))
            self.calls += 1
            self.tokens += int(input_ids.size)
            self.intervals.append((begin, finish))
            self._free_at, self._overshoot = finish, max(0.0, woke - finish)
        return hidden

    def idle(self, start: float, end: float) -> dict[str, float]:
        """Where the simulated device waited during [start, end] (perf_counter times of a call
        that used it): before its first batch, between batches, after its last."""
        if not self.intervals:
            return {"before": end - start, "between": 0.0, "after": 0.0}
        spans = sorted(self.intervals)
        between = sum(max(0.0, b[0] - a[1]) for a, b in zip(spans, spans[1:]))
        return {"before": spans[0][0] - start, "between": between, "after": end - spans[-1][1]}
