"""The model run over token ids, batch by batch (``ModelRuntime.embed``): the padded path
(``run_batches``: each batch's real tokens gathered and scattered to their texts' rows in one
vectorised copy, on the host or the device) and the unpadded path (``run_unpadded``: length-sorted
chunks of real tokens through the unpadded graph), windows' kept rows included; and the one lock
per runner object that serialises calls of runners that are not thread-safe."""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from rapidscore.encoder.store import row_ranges
from rapidscore.encoder.tokens.batching import unpadded_inputs

if TYPE_CHECKING:
    from rapidscore.encoder.model_runtime import ModelRuntime
    from rapidscore.encoder.runtime.capabilities import Runner

__all__ = ["Placement", "empty_rows", "lock_of", "place_batch", "place_tokens", "put_rows", "run_batches",
           "run_unpadded"]

_RUNNER_LOCKS: dict[int, threading.Lock] = {}
_RUNNER_LOCKS_GUARD = threading.Lock()
_PINNED_RUNNERS: list = []  # runners without weak references: kept alive, so their ids stay theirs


def lock_of(runner) -> threading.Lock:
    """One lock per runner object, shared by every encoder that uses it."""
    key = id(runner)
    with _RUNNER_LOCKS_GUARD:
        lock = _RUNNER_LOCKS.get(key)
        if lock is None:
            lock = _RUNNER_LOCKS[key] = threading.Lock()
            try:  # dict.pop: atomic, no guard, so the finaliser may run at any moment
                weakref.finalize(runner, _RUNNER_LOCKS.pop, key, None)
            except TypeError:
                _PINNED_RUNNERS.append(runner)
        return lock


class Placement(NamedTuple):
    """Where one batch's kept token vectors go: ``rows``, their rows in the store (a host array,
    or an index tensor on the model's device), and ``real``, their flat positions in the batch's
    (batch x longest) hidden states (None: every real token, read through the attention mask)."""

    rows: Any
    real: Any


def place_batch(offsets: np.ndarray, lengths: np.ndarray, destinations: list[np.ndarray] | None, batch,
                attention_mask: np.ndarray, to_device=None) -> Placement:
    """The ``Placement`` of ``batch`` (input k fills rows offsets[k]:offsets[k] + lengths[k], or,
    given ``destinations`` (windows), the rows ``destinations[k]`` names; -1: dropped).
    ``to_device``: for hidden states that are torch tensors, the indices become index tensors on
    their device (an index gather, not a boolean mask: a mask's size is data-dependent, so on a
    GPU it would wait for the device on every batch)."""
    kept = None
    if destinations is None:
        rows: Any = row_ranges(offsets[batch], lengths[batch])
    else:
        rows, kept = _kept_rows(destinations, batch)
    if to_device is None:
        real = None if kept is None else np.flatnonzero(attention_mask.ravel())[kept]
        return Placement(rows, real)
    real = np.flatnonzero(attention_mask.ravel())
    return Placement(to_device(rows), to_device(real if kept is None else real[kept]))


def place_tokens(offsets: np.ndarray, lengths: np.ndarray, destinations: list[np.ndarray] | None, batch,
                 to_device=None) -> Placement:
    """The ``Placement`` of a packed batch (its sentences' tokens in a row, no padding): ``real``
    None where every token is kept (no windows), else the kept positions."""
    if destinations is None:
        rows, kept = row_ranges(offsets[batch], lengths[batch]), None
    else:
        rows, kept = _kept_rows(destinations, batch)
    if to_device is None:
        return Placement(rows, kept)
    return Placement(to_device(rows), None if kept is None else to_device(kept))


def empty_rows(hidden, rows: int) -> Any:
    """An uninitialised store of ``rows`` token vectors like ``hidden`` (numpy or a torch tensor on
    its device; an all-layers leading axis kept)."""
    shape = hidden.shape[:-3] + (rows, hidden.shape[-1])
    if isinstance(hidden, np.ndarray):
        return np.empty(shape, dtype=np.float32)
    import torch

    return torch.empty(shape, dtype=torch.float32, device=hidden.device)


def put_rows(out, hidden, attention_mask: np.ndarray | None, placement: Placement) -> None:
    """Copy a batch's kept token vectors from its hidden states into their rows of ``out``."""
    rows, real = placement
    if not isinstance(hidden, np.ndarray):  # (a packed forward's (tokens, dim) has no batch axes)
        flat = hidden if hidden.dim() == 2 else hidden.reshape(*hidden.shape[:-3], -1, hidden.shape[-1])
        out[..., rows, :] = flat if real is None else flat.index_select(-2, real)
    elif real is None:
        assert attention_mask is not None  # (only a packed batch, always a tensor, comes without one)
        out[..., rows, :] = hidden[..., attention_mask.astype(bool), :]
    else:  # windows: the kept positions only, gathered in one indexing
        flat = hidden.reshape(*hidden.shape[:-3], -1, hidden.shape[-1])
        out[..., rows, :] = flat[..., real, :]


def run_batches(runtime: ModelRuntime, ids, lengths, offsets, batches, progress: bool, keep_on_device: bool,
                destinations: list[np.ndarray] | None = None) -> Any:
    """Embeddings (offsets[-1] rows) of the model inputs ``ids`` batch by batch (``batches``:
    the plan), run by ``runtime`` (``hidden_batches``), each batch's vectors put in place as
    ``place_batch`` says."""
    to_device = runtime.to_device if runtime.runs_torch else None
    out: Any = None  # np.ndarray, or a torch tensor when the runner returns tensors
    for batch, attention_mask, hidden in runtime.hidden_batches(ids, batches, progress):
        # Scattered writes in the caller's order also fault a fresh buffer in faster than one
        # sequential sweep: on Linux with transparent huge pages, sequential first touches
        # stalled in compaction (W1: 0.35 s against 0.05 s).
        placement = place_batch(offsets, lengths, destinations, batch, attention_mask,
                                None if isinstance(hidden, np.ndarray) else to_device)
        if out is None:
            out = empty_rows(hidden, int(offsets[-1]))
        put_rows(out, hidden, attention_mask, placement)
    if out is None:  # no texts
        out = np.zeros((0, runtime.hidden_size), dtype=np.float32)
        if keep_on_device:
            import torch

            out = torch.from_numpy(out).to(runtime.device)
    elif not isinstance(out, np.ndarray) and not keep_on_device:
        out = out.cpu().numpy()  # the CPU kernels take host arrays (no copy on the CPU)
    return out


def run_unpadded(runner: Runner, ids, lengths: np.ndarray, offsets: np.ndarray,
                 destinations: list[np.ndarray] | None = None, *, hidden_size: int, batch_tokens: int,
                 max_batch_size: int, pad_id: int, roberta_positions: bool) -> np.ndarray:
    """Embeddings (total tokens, dim) through the unpadded graph's ``runner``: length-sorted
    chunks of up to ``batch_tokens`` real tokens (attention, the padded part, stays small), one
    call each. ``destinations``: as in ``run_batches``."""
    out = np.empty((int(offsets[-1]), hidden_size), dtype=np.float32)
    order = [int(k) for k in np.argsort(-lengths, kind="stable") if lengths[k] > 0]  # "" has no row
    start = 0
    while start < len(order):
        end, tokens = start + 1, int(lengths[order[start]])
        while end < len(order) and end - start < max_batch_size and \
                tokens + int(lengths[order[end]]) <= batch_tokens:
            tokens += int(lengths[order[end]])
            end += 1
        chunk = np.asarray(order[start:end], dtype=np.int64)
        feed = unpadded_inputs([ids[k] for k in chunk], pad_id, roberta_positions)
        if destinations is None:
            out[row_ranges(offsets[chunk], lengths[chunk])] = runner.run_feed(feed)
        else:
            rows, kept = _kept_rows(destinations, chunk)
            hidden = runner.run_feed(feed)
            out[rows] = hidden if kept is None else hidden[kept]
        start = end
    return out


def _kept_rows(destinations: list[np.ndarray], batch) -> tuple[np.ndarray, np.ndarray | None]:
    """Store rows of a batch's kept positions (inputs in batch order, positions row after row)
    and which positions those are (None: all)."""
    rows = np.concatenate([destinations[k] for k in batch])
    kept = rows >= 0
    if kept.all():
        return rows, None
    return rows[kept], np.flatnonzero(kept)
