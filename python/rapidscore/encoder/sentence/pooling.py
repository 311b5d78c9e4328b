"""sentence-transformers' Pooling module: token vectors -> one vector per sentence.

Each mode is one entry of the table ``_MODES``: a numpy function over a flat store (sentence
k's token vectors are ``embeddings[offsets[k]:offsets[k + 1]]``; ONNX Runtime, OpenVINO) and a
torch function over a padded batch on the model's device (right padding), both following
sentence-transformers 6.2's ``Pooling._forward_padded``. The two read the same per-sentence token
positions (``Pooling.spans``) and differ only in how they reduce: segment reductions for the flat
store, masked sums for the padded batch (which is why each mode keeps one function per array
kind: each must give the same bits as before).

No torch at import: the numpy path runs without it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from rapidscore.encoder.sentence.config import module_config

__all__ = ["POOLING_MODES", "Pooling", "check_mode"]

# The boolean keys of configs saved before 6.x, in the order their vectors are concatenated.
_LEGACY_MODE_KEYS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}


@dataclass(frozen=True)
class Pooling:
    """Token vectors -> one vector per sentence: each mode's vector, concatenated in ``modes`` order.

    ``include_prompt=False``: the prompt's tokens (its length as sentence-transformers counts it)
    take no part in pooling."""

    modes: tuple[str, ...] = ("mean",)
    include_prompt: bool = True
    dimension: int | None = None  # the token vectors' size the config declares

    @property
    def name(self) -> str:
        name = ",".join(self.modes)
        return name if self.include_prompt else f"{name}-noprompt"

    @classmethod
    def load(cls, folder: Path) -> Pooling:
        """The Pooling saved in ``folder`` (its config.json: ``pooling_mode``, or the boolean keys
        of configs saved before sentence-transformers 6, none set meaning mean)."""
        file = folder / "config.json"
        config = module_config(folder, "Pooling")
        if "pooling_mode" in config:
            mode = config["pooling_mode"]
            modes = (mode,) if isinstance(mode, str) else tuple(mode) if isinstance(mode, list) and mode else None
            if modes is None:
                raise ValueError(f"{file}: pooling_mode must be a mode name or a non-empty list of them, got {mode!r}")
        else:
            modes = tuple(mode for key, mode in _LEGACY_MODE_KEYS.items() if config.get(key)) or ("mean",)
        for mode in modes:
            if mode not in POOLING_MODES:
                raise ValueError(f"{file}: pooling mode {mode!r} is not one of {POOLING_MODES}")
        include_prompt = config.get("include_prompt", True)
        if not isinstance(include_prompt, bool):
            raise ValueError(f"{file}: include_prompt must be true or false, got {include_prompt!r}")
        dimension = config.get("embedding_dimension", config.get("word_embedding_dimension"))
        if dimension is not None and (isinstance(dimension, bool) or not isinstance(dimension, int)):
            raise ValueError(f"{file}: embedding_dimension must be an int, got {dimension!r}")
        return cls(modes=modes, include_prompt=include_prompt, dimension=dimension)

    def spans(self, counts: np.ndarray, prompt_length: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per sentence of ``counts`` tokens (right padded): the position of its cls token, of its
        last token, and how many tokens pooling keeps once the prompt's are left out.

        sentence-transformers zeroes the first ``prompt_length`` positions of the mask; cls is the
        first position left (position 0 when none is), the last token the last one left."""
        skip = (np.minimum(counts, prompt_length) if prompt_length and not self.include_prompt
                else np.zeros_like(counts))
        kept = counts - skip
        first = np.where(kept > 0, skip, 0)
        last = np.maximum(counts - 1, 0)
        return first, last, kept

    def forward_flat(self, embeddings: np.ndarray, offsets: np.ndarray, prompt_length: int = 0) -> np.ndarray:
        """Pooled vectors (n, modes x dim) float32 of the sentences of a flat array: sentence k's
        token vectors are ``embeddings[offsets[k]:offsets[k + 1]]``. ``prompt_length``: the leading
        tokens of every sentence that are the prompt (excluded when ``include_prompt`` is False).

        A sentence left with no token (a prompt as long as max_seq_length) pools to zeros, cls
        to its first token, as in sentence-transformers, except max: -inf there (NaN once
        normalised), zeros here."""
        tokens = _FlatTokens(embeddings, np.asarray(offsets, dtype=np.int64), self, prompt_length)
        parts = []
        for mode in self.modes:
            rows, vectors = _MODES[mode].flat(tokens)
            out = np.zeros((len(tokens.counts), embeddings.shape[-1]), dtype=np.float32)
            out[rows] = vectors
            parts.append(out)
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)

    def forward_padded(self, hidden: Any, attention_mask: np.ndarray, prompt_length: int,
                       to_device: Callable[[np.ndarray], Any]) -> Any:
        """Pooled vectors (B, modes x dim) of a padded batch: ``hidden`` (B, L, dim) a torch tensor,
        ``attention_mask`` (B, L) the host mask (right padding), ``to_device``: numpy -> a tensor
        on hidden's device. Sentences left with no token as in ``forward_flat``."""
        import torch

        tokens = _PaddedTokens(hidden, attention_mask, self, prompt_length, to_device)
        parts = [_MODES[mode].padded(tokens) for mode in self.modes]
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)


def check_mode(mode: Any, name: str = "pooling") -> str:
    """``mode`` when it is one of ``POOLING_MODES``; a ValueError naming ``name`` else."""
    if mode not in POOLING_MODES:
        raise ValueError(f"{name} must be one of {POOLING_MODES}, got {mode!r}")
    return mode


# ------------------------------------------------------------------------------------------------
# What the mode functions read
# ------------------------------------------------------------------------------------------------

class _FlatTokens:
    """The sentences of a flat store: boundaries, kept positions; the sums mean and
    mean_sqrt_len_tokens share, made once."""

    def __init__(self, embeddings: np.ndarray, offsets: np.ndarray, pooling: Pooling, prompt_length: int):
        self.embeddings, self.offsets = embeddings, offsets
        self.starts, self.ends = offsets[:-1], offsets[1:]
        self.counts = self.ends - self.starts
        self.first, self.last, self.kept = pooling.spans(self.counts, prompt_length)
        self.has = self.counts > 0  # a tokenizer without special tokens gives no token for "": a zero vector
        self.live = self.kept > 0

    @cached_property
    def sums(self) -> np.ndarray:
        """Sums of the kept token vectors of the live sentences."""
        return _segment_reduce(np.add, self.embeddings, self.ends - self.kept, self.ends, self.live)


class _PaddedTokens:
    """A padded batch on the device: the mask with the prompt's positions zeroed, the rows with
    tokens left; the sums and counts mean and mean_sqrt_len_tokens share, made once."""

    def __init__(self, hidden: Any, attention_mask: np.ndarray, pooling: Pooling, prompt_length: int,
                 to_device: Callable[[np.ndarray], Any]):
        import torch

        self.torch, self.hidden, self.to_device = torch, hidden, to_device
        counts = attention_mask.sum(axis=1).astype(np.int64)
        self.first, self.last, kept = pooling.spans(counts, prompt_length)
        mask = attention_mask.astype(np.float32, copy=True)
        excluded = counts - kept  # leading prompt tokens left out of pooling
        if excluded.any():
            mask[np.arange(mask.shape[1])[None, :] < excluded[:, None]] = 0.0
        self.mask = to_device(mask).to(hidden.dtype)
        self.rows = torch.arange(hidden.shape[0], device=hidden.device)
        self.live = to_device(kept > 0)[:, None]

    @cached_property
    def sums(self) -> Any:
        return (self.hidden * self.mask[..., None]).sum(dim=1)

    @cached_property
    def kept_counts(self) -> Any:
        return self.mask.sum(dim=1, keepdim=True).clamp_min(1e-9)


# ------------------------------------------------------------------------------------------------
# The modes. Flat: (rows, their vectors), every other row zero. Padded: (B, dim).
# ------------------------------------------------------------------------------------------------

def _cls_flat(t: _FlatTokens) -> tuple[np.ndarray, np.ndarray]:
    return t.has, t.embeddings[t.starts[t.has] + t.first[t.has]]


def _cls_padded(t: _PaddedTokens) -> Any:
    return t.hidden[t.rows, t.to_device(t.first)]


def _max_flat(t: _FlatTokens) -> tuple[np.ndarray, np.ndarray]:
    return t.live, _segment_reduce(np.maximum, t.embeddings, t.ends - t.kept, t.ends, t.live)


def _max_padded(t: _PaddedTokens) -> Any:
    maxima = t.hidden.masked_fill(t.mask[..., None] == 0, float("-inf")).max(dim=1).values
    return t.torch.where(t.live, maxima, 0.0)


def _mean_flat(t: _FlatTokens) -> tuple[np.ndarray, np.ndarray]:
    return t.live, t.sums / t.kept[t.live].astype(np.float32)[:, None]


def _mean_padded(t: _PaddedTokens) -> Any:
    return t.sums / t.kept_counts


def _mean_sqrt_flat(t: _FlatTokens) -> tuple[np.ndarray, np.ndarray]:
    return t.live, t.sums / np.sqrt(t.kept[t.live].astype(np.float32))[:, None]


def _mean_sqrt_padded(t: _PaddedTokens) -> Any:
    return t.sums / t.kept_counts.sqrt()


def _weightedmean_flat(t: _FlatTokens) -> tuple[np.ndarray, np.ndarray]:
    return t.live, _weighted_means(t.embeddings, t.offsets, t.counts - t.kept)[t.live]


def _weightedmean_padded(t: _PaddedTokens) -> Any:
    """Position weights 1, 2, ... from the first token (right padding)."""
    weights = t.mask * t.torch.arange(1, t.mask.shape[1] + 1, device=t.hidden.device, dtype=t.hidden.dtype)
    sums = (t.hidden * weights[..., None]).sum(dim=1)
    return sums / weights.sum(dim=1, keepdim=True).clamp_min(1e-9)


def _lasttoken_flat(t: _FlatTokens) -> tuple[np.ndarray, np.ndarray]:
    return t.live, t.embeddings[t.starts[t.live] + t.last[t.live]]


def _lasttoken_padded(t: _PaddedTokens) -> Any:
    return t.torch.where(t.live, t.hidden[t.rows, t.to_device(t.last)], 0.0)


@dataclass(frozen=True)
class _Mode:
    flat: Callable[[_FlatTokens], tuple[np.ndarray, np.ndarray]]
    padded: Callable[[_PaddedTokens], Any]


_MODES = {
    "cls": _Mode(_cls_flat, _cls_padded),
    "max": _Mode(_max_flat, _max_padded),
    "mean": _Mode(_mean_flat, _mean_padded),
    "mean_sqrt_len_tokens": _Mode(_mean_sqrt_flat, _mean_sqrt_padded),
    "weightedmean": _Mode(_weightedmean_flat, _weightedmean_padded),
    "lasttoken": _Mode(_lasttoken_flat, _lasttoken_padded),
}
# sentence-transformers 6.2's Pooling.POOLING_MODES, in its order.
POOLING_MODES = tuple(_MODES)


# ------------------------------------------------------------------------------------------------
# numpy kernels of the flat store
# ------------------------------------------------------------------------------------------------

def _segment_reduce(ufunc: np.ufunc, values: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                    live: np.ndarray) -> np.ndarray:
    """``ufunc`` over ``values[starts[k]:ends[k]]`` for the ``live`` (non-empty) segments, in order.

    One ``reduceat`` over (start, end) pairs; the odd entries (the gaps between segments, e.g. the
    next sentence's prompt tokens) are dropped."""
    starts, ends = starts[live], ends[live]
    if len(starts) == 0:
        return np.zeros((0, values.shape[-1]), dtype=np.float32)
    bounds = np.empty(2 * len(starts), dtype=np.int64)
    bounds[0::2], bounds[1::2] = starts, ends
    if bounds[-1] == len(values):
        bounds = bounds[:-1]  # the last segment runs to the end
    return ufunc.reduceat(values, bounds, axis=0)[0::2]


_WEIGHTED_CHUNK = 1 << 16  # tokens weighted at once (bounds the weighted copy of the store)


def _weighted_means(values: np.ndarray, offsets: np.ndarray, skip: np.ndarray) -> np.ndarray:
    """Per sentence, sum((p + 1) * x_p) / sum(p + 1) over its positions p >= skip (zero where no
    position is left): sentence-transformers' weightedmean under right padding."""
    n, dim = len(offsets) - 1, values.shape[-1]
    out = np.zeros((n, dim), dtype=np.float32)
    begin = 0
    while begin < n:
        # Whole sentences, up to _WEIGHTED_CHUNK tokens (at least one sentence).
        end = max(begin + 1, int(np.searchsorted(offsets, offsets[begin] + _WEIGHTED_CHUNK, side="right")) - 1)
        end = min(end, n)
        lo, hi = int(offsets[begin]), int(offsets[end])
        counts = np.diff(offsets[begin:end + 1])
        positions = np.arange(hi - lo, dtype=np.int64) - np.repeat(offsets[begin:end] - lo, counts)
        weights = (positions + 1).astype(np.float32)
        weights[positions < np.repeat(skip[begin:end], counts)] = 0.0
        live = (counts - skip[begin:end]) > 0
        starts, ends = offsets[begin:end] - lo, offsets[begin + 1:end + 1] - lo
        sums = _segment_reduce(np.add, values[lo:hi] * weights[:, None], starts, ends, live)
        totals = _segment_reduce(np.add, weights[:, None], starts, ends, live)
        out[begin:end][live] = sums / np.maximum(totals, np.float32(1e-9))
        begin = end
    return out
