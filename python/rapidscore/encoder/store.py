"""The token store: token ids and embeddings of many texts, flat, on the host or on a device.

Every metric meets the model here. Ids and offsets always live on the host (numpy): the weights,
idf and special-token masks are computed from them. The embeddings live where the runner produced
them: a numpy array for CPU runtimes, a torch tensor on the model's device otherwise, so a GPU
pipeline never copies token embeddings to the host. Matching dispatches on that
(``rapidscore.kernels.matching``).

Sentences are stored in the order of the distinct texts the encoder was given; ``order`` maps the
caller's text number to its stored sentence, so duplicated texts share one stored sentence and
nothing is copied for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rapidscore.common.arrays import is_torch_tensor

__all__ = ["TokenStore", "row_ranges"]



@dataclass
class TokenStore:
    """Token ids and embeddings of ``len(order)`` texts.

    Stored sentence ``s`` owns rows ``offsets[s]:offsets[s + 1]`` of ``ids`` (host int64) and of
    ``embeddings`` ((tokens, dim), or (layers + 1, tokens, dim) for an all-layers encoder; a
    float32 numpy array or a torch tensor). Text ``k`` of the caller is stored sentence
    ``order[k]``. ``truncated`` counts the distinct texts cut at the model's maximum length.

    Not thread-safe to mutate; reading from many threads is safe.
    """

    ids: np.ndarray
    offsets: np.ndarray
    embeddings: Any
    order: np.ndarray
    truncated: int = 0
    unit_rows: bool = False  # embeddings were scaled to unit norm in place (BERTScore's finish does it once)

    def __len__(self) -> int:
        return len(self.order)

    @property
    def n_sentences(self) -> int:
        """Distinct stored sentences (<= len(self) when texts repeat)."""
        return len(self.offsets) - 1

    @property
    def on_host(self) -> bool:
        """Embeddings are a numpy array (else a torch tensor, possibly on a GPU)."""
        return not is_torch_tensor(self.embeddings)

    @property
    def device(self) -> str:
        """"cpu" for host arrays, else the tensor's device ("cuda:0", ...)."""
        return "cpu" if self.on_host else str(self.embeddings.device)

    def lengths(self) -> np.ndarray:
        """Tokens per stored sentence."""
        return np.diff(self.offsets)

    def token_ids(self, k: int) -> np.ndarray:
        """Token ids of text ``k`` (special tokens included)."""
        s = self.order[k]
        return self.ids[self.offsets[s]:self.offsets[s + 1]]

    def token_embeddings(self, k: int) -> Any:  # np.ndarray, or a torch tensor on the model's device
        """Embeddings of text ``k``: a view, (n_tokens, dim) or (layers + 1, n_tokens, dim)."""
        s = self.order[k]
        return self.embeddings[..., self.offsets[s]:self.offsets[s + 1], :]

    def to_host(self) -> TokenStore:
        """The same store with numpy embeddings (a no-op on the host)."""
        if self.on_host:
            return self
        embeddings = self.embeddings.detach().float().cpu().numpy()
        return TokenStore(self.ids, self.offsets, embeddings, self.order, self.truncated, self.unit_rows)

    def in_input_order(self) -> TokenStore:
        """A copy whose sentence k is text k (duplicates repeated): the flat layout of callers that
        index ``ids`` and ``embeddings`` directly."""
        lengths = self.lengths()[self.order]
        offsets = np.zeros(len(self.order) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        identity = np.arange(len(self.order), dtype=np.int64)
        if np.array_equal(self.order, np.arange(self.n_sentences)):
            return TokenStore(self.ids, offsets, self.embeddings, identity, self.truncated, self.unit_rows)
        rows = row_ranges(self.offsets[self.order], lengths)
        embeddings = self.embeddings[..., rows if self.on_host else _as_index(rows, self.embeddings), :]
        return TokenStore(self.ids[rows], offsets, embeddings, identity, self.truncated, self.unit_rows)


def row_ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Row numbers of several blocks of rows: arange(start, start + length) of each pair,
    concatenated, computed without a Python loop."""
    if len(starts) == 1:  # one block (a single-sentence batch): skip the cumulative sums
        return np.arange(int(starts[0]), int(starts[0]) + int(lengths[0]), dtype=np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    shift = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return np.arange(total, dtype=np.int64) + shift


def _as_index(rows: np.ndarray, tensor):
    import torch

    return torch.as_tensor(rows, device=tensor.device)
