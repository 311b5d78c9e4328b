"""Fixtures of the serving tests."""

from __future__ import annotations

import threading

import pytest


class Gate:
    """Holds a batcher's worker busy until opened, so that requests queue up deterministically."""

    def __init__(self, batcher):
        self.event = threading.Event()
        started = threading.Event()

        def hold() -> None:
            started.set()
            self.event.wait(60)

        self.future = batcher.call(hold)
        assert started.wait(60), "the worker never took the gate"

    def open(self) -> None:
        self.event.set()


@pytest.fixture
def hold_worker():
    """``hold_worker(batcher) -> Gate``: the worker (of a one-worker batcher) waits until
    ``gate.open()``; every gate opens at teardown, so a failing test leaves no worker stuck."""
    gates: list[Gate] = []

    def hold(batcher) -> Gate:
        gates.append(Gate(batcher))
        return gates[-1]

    yield hold
    for gate in gates:
        gate.open()
