"""The memory of requests between their pieces is bounded by a budget (issue 46 item 6): a
request starting in pieces reserves its tokens of the batcher's ``held_tokens``, and one that
would go over it waits, so partial results hold at most max(budget, one request). Without the
bound, every large request of a busy server held its partial embeddings at once (32 clients with
window requests: RSS swinging by hundreds of MiB with the queue's mix)."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

from rapidscore.serve import MicroBatcher
from rapidscore.serve.micro_batcher import Job


class CountingTask:
    """A piecewise task whose payload is a list of text sizes (tokens); it records the tokens
    whose partial results are held by unfinished requests after each piece."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.held = 0
        self.peak = 0
        self.order: list[int] = []

    def prepare(self, sizes: list[int], *, limits: Any = None) -> tuple[list[int], int]:
        return list(sizes), sum(sizes)

    def units(self, payload: list[int]) -> np.ndarray:
        return np.asarray(payload, dtype=np.int64)

    def run_piece(self, payload: list[int], start: int, stop: int, alone: bool) -> int:
        piece = int(sum(payload[start:stop]))
        with self.lock:
            self.held += piece
            self.peak = max(self.peak, self.held)
        return piece

    def finish_pieces(self, payload: list[int], partials: list[int], alone: bool) -> int:
        with self.lock:
            self.held -= sum(partials)
        return sum(partials)

    def run(self, payloads: list[list[int]], alone: bool) -> list[int]:
        return [sum(p) for p in payloads]


def run_requests(held_tokens: int | None, n_requests: int = 12, texts: int = 40) -> CountingTask:
    task = CountingTask()
    gate = threading.Event()
    batcher = MicroBatcher(batch_tokens=16, piece_tokens=4, held_tokens=held_tokens)
    try:
        blocker = batcher.call(gate.wait, 30)  # every request queues before the first runs
        futures = []
        for _ in range(n_requests):
            sizes = [1] * texts
            payload, tokens = task.prepare(sizes)
            futures.append(batcher.put(Job(task=task, payload=payload, tokens=tokens, units=task.units(payload))))
        gate.set()
        blocker.result(30)
        results = [future.result(60) for future in futures]
    finally:
        batcher.close()
    assert results == [texts] * n_requests  # every request answered, in full
    assert task.held == 0
    return task


def test_requests_in_pieces_hold_at_most_the_budget() -> None:
    bounded = run_requests(held_tokens=80)  # two requests of 40 tokens
    assert bounded.peak <= 80, bounded.peak


def test_a_request_larger_than_the_budget_still_runs_alone() -> None:
    single = run_requests(held_tokens=8, n_requests=3)
    assert single.peak <= 40, single.peak


def test_without_the_budget_every_queued_request_holds_partials() -> None:
    # what the budget prevents: 12 requests of 40 tokens in pieces of 4, all started at once
    unbounded = run_requests(held_tokens=10**9)
    assert unbounded.peak > 4 * 40, unbounded.peak


def test_the_budget_is_a_positive_int() -> None:
    with pytest.raises(ValueError, match="held_tokens"):
        MicroBatcher(held_tokens=0)


def test_a_large_request_waiting_for_the_budget_is_not_passed_by_smaller_ones() -> None:
    # requests start in pieces in arrival order: a smaller request that would fit the budget left
    # does not start before an older, larger one that waits for it
    task = CountingTask()
    started: list[int] = []
    real = task.run_piece

    def recording(payload: list[int], start: int, stop: int, alone: bool) -> int:
        if start == 0:
            started.append(len(payload))
        return real(payload, start, stop, alone)

    task.run_piece = recording  # type: ignore[method-assign]
    gate = threading.Event()
    batcher = MicroBatcher(batch_tokens=16, piece_tokens=4, held_tokens=64)
    try:
        blocker = batcher.call(gate.wait, 30)
        sizes = [40, 48, 20, 20]  # 40 starts; 48 must wait for it; the 20s must wait behind 48
        futures = [batcher.put(Job(task=task, payload=[1] * n, tokens=n, units=np.ones(n, dtype=np.int64)))
                   for n in sizes]
        gate.set()
        blocker.result(30)
        assert [future.result(60) for future in futures] == sizes
    finally:
        batcher.close()
    assert started.index(48) < started.index(20), started
