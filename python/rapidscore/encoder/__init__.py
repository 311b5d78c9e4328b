"""The shared encoder: contextual token embeddings and sentence embeddings of BERT-family models.

Models run as ONNX graphs in ONNX Runtime (exported once, cached) or, with ``backend="torch"``,
as the Hugging Face torch model. Tokenisation uses the Rust ``tokenizers`` library.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from rapidscore.encoder.batching import default_batch_tokens, pad_batch, plan_batches
from rapidscore.encoder.runtime import BACKENDS, DEVICES, OnnxRunner, OpenVinoRunner, TorchRunner
from rapidscore.encoder.tokenization import BatchTokenizer, TokenizerSpec, load_spec
from rapidscore.errors import TruncationWarning, check_positive_int
from rapidscore.model_source import DEFAULT_MODEL, num_layers, read_config, resolve_model

PRECISIONS = ("fp32", "bf16")
POOLINGS = ("mean", "cls")

__all__ = ["Encoder", "EncodedTexts", "DEFAULT_MODEL", "check_texts"]


def check_texts(texts, name: str = "texts") -> list[str]:
    """Validate a list of strings; raise TypeError naming the first offending item."""
    if isinstance(texts, (str, bytes)) or not isinstance(texts, Sequence) and not hasattr(texts, "__iter__"):
        raise TypeError(f"{name} must be a list of strings, got {type(texts).__name__}")
    texts = list(texts)
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"{name}[{index}] must be a str, got {type(text).__name__}: {text!r}")
    return texts


@dataclass
class EncodedTexts:
    """Token ids and embeddings of a list of texts, stored flat.

    Text ``k`` owns rows ``offsets[k]:offsets[k + 1]`` of ``ids`` and of ``embeddings``
    (shape (tokens, dim), or (layers + 1, tokens, dim) for an all-layers encoder).
    """

    ids: np.ndarray
    embeddings: np.ndarray
    offsets: np.ndarray
    truncated: int

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def token_ids(self, k: int) -> np.ndarray:
        return self.ids[self.offsets[k]:self.offsets[k + 1]]

    def token_embeddings(self, k: int) -> np.ndarray:
        return self.embeddings[..., self.offsets[k]:self.offsets[k + 1], :]


class Encoder:
    """A BERT-family encoder giving contextual token embeddings at a chosen layer.

    Parameters
    ----------
    model: hub id or local directory. "all-MiniLM-L6-v2" resolves to the embedded copy offline.
    layer: transformer layer whose output is used: hidden_states[layer], 0 = embedding output,
        None = last layer, "all" = every hidden state (arrays get a leading layer axis).
    backend: "onnx" (ONNX Runtime; exported and cached on first use), "openvino" (the same ONNX
        graph compiled by OpenVINO; faster on CPUs) or "torch". None (default): "onnx" for fp32,
        "openvino" for bf16.
    device: "cpu" or "cuda".
    precision: "fp32" (exact) or "bf16" (fast mode: OpenVINO on CPUs with bf16 instructions;
        BERTScore within about 1e-4 of fp32, see docs/performance.md).
    max_length: truncation length in tokens, special tokens included (default: the model's maximum).
    batch_tokens: padded tokens per batch (batch size x longest sequence). The default depends on
        where the model runs: on CPUs small batches keep activations in cache and run faster per
        token (1024 in fp32, 2048 in bf16, measured in docs/performance.md); on GPUs 16384.
    max_batch_size: sequences per batch at most.
    num_threads: intra-op threads (default: the CPUs available to this process).
    cache_dir: where ONNX exports live (default $RAPIDSCORE_CACHE or ~/.cache/rapidscore).
    add_prefix_space: for byte-level BPE tokenizers (RoBERTa); None keeps the tokenizer as saved,
        which is what bert-score 0.3.13 gives under transformers 5.
    progress: show a progress bar over batches.
    """

    def __init__(self, model: str | os.PathLike = DEFAULT_MODEL, layer: int | str | None = None,
                 backend: str | None = None,
                 device: str = "cpu", precision: str = "fp32", *, max_length: int | None = None,
                 batch_tokens: int | None = None, max_batch_size: int = 256, num_threads: int | None = None,
                 cache_dir: str | os.PathLike | None = None, add_prefix_space: bool | None = None,
                 progress: bool = False):
        if backend is None:
            backend = "openvino" if precision == "bf16" else "onnx"
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if device not in DEVICES:
            raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        if precision == "bf16" and backend != "openvino":
            raise ValueError(f"precision='bf16' runs on backend='openvino' (CPU), got backend={backend!r}")
        if max_length is not None and (not isinstance(max_length, int) or max_length < 2):
            raise ValueError(f"max_length must be an int >= 2, got {max_length!r}")
        self.model_dir = resolve_model(model)
        self.model_name = os.fspath(model)
        config = read_config(self.model_dir)
        self.num_layers = num_layers(config)
        self.hidden_size = int(config.get("hidden_size") or config.get("dim"))
        self.model_type = config.get("model_type")
        self.layer = self._check_layer(layer)
        self.backend, self.device, self.precision = backend, device, precision
        if batch_tokens is None:
            batch_tokens = default_batch_tokens(device, precision)
        self.batch_tokens = check_positive_int(batch_tokens, "batch_tokens")
        self.max_batch_size = check_positive_int(max_batch_size, "max_batch_size")
        self.progress = progress
        self.exported = False

        if backend in ("onnx", "openvino"):
            from rapidscore.encoder.onnx_export import cached_export

            # One fp32 graph serves every precision: the runtime decides how to execute it.
            entry, self.exported = cached_export(self.model_dir, self.layer, "fp32", add_prefix_space,
                                                 cache_dir=Path(cache_dir) if cache_dir else None)
            self.cache_entry = entry
            spec = load_spec(entry / "tokenizer_spec.json")
            self.tokenizer = BatchTokenizer(entry / "tokenizer.json", spec, max_length)
            if backend == "onnx":
                self._runner = OnnxRunner(entry / "model.onnx", device, num_threads)
            else:
                self._runner = OpenVinoRunner(entry / "model.onnx", device, precision, num_threads,
                                              compile_cache=entry.parent.parent / "openvino")
        else:
            from rapidscore.encoder.torch_model import load_tokenizer, tokenizer_spec

            hf_tokenizer, hf_config = load_tokenizer(self.model_dir, add_prefix_space)
            spec = tokenizer_spec(hf_tokenizer, hf_config)
            self.cache_entry = None
            self.tokenizer = BatchTokenizer(hf_tokenizer.backend_tokenizer.to_str(), spec, max_length)
            self._runner = TorchRunner(self.model_dir, self.layer, device, num_threads)
        self.provider = self._runner.provider

    def _check_layer(self, layer):
        if layer is None:
            return self.num_layers
        if layer == "all":
            return "all"
        if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)):
            raise TypeError(f"layer must be an int, None or 'all', got {type(layer).__name__}: {layer!r}")
        if not 0 <= layer <= self.num_layers:
            raise ValueError(f"layer must be in [0, {self.num_layers}] for {self.model_name!r} "
                             f"({self.num_layers} layers), got {layer}")
        return int(layer)

    @property
    def spec(self) -> TokenizerSpec:
        return self.tokenizer.spec

    @property
    def max_length(self) -> int:
        return self.tokenizer.max_length

    def __repr__(self) -> str:
        return (f"Encoder(model={self.model_name!r}, layer={self.layer!r}, backend={self.backend!r}, "
                f"device={self.device!r}, precision={self.precision!r}, max_length={self.max_length})")

    # -- core ---------------------------------------------------------------------------------

    def tokenize(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Token ids per text (special tokens included, truncated to ``max_length``)."""
        ids, _ = self.tokenizer.encode(check_texts(texts))
        return ids

    def encode(self, texts: Sequence[str], *, warn_truncation: bool = True) -> EncodedTexts:
        """Token ids and embeddings of ``texts`` in input order, flat (see EncodedTexts).

        Duplicate texts are encoded once; texts are sorted by length and batched under the token
        budget. Truncated texts are counted and reported with a TruncationWarning.
        """
        texts = check_texts(texts)
        unique_texts, inverse = _unique(texts)
        ids, truncated = self.tokenizer.encode(unique_texts)
        unique_embeddings = self._embed_ids(ids)
        if truncated and warn_truncation:
            warnings.warn(
                f"{truncated} of {len(unique_texts)} distinct texts were longer than {self.max_length} "
                f"tokens and were truncated", TruncationWarning, stacklevel=2)
        lengths = np.array([len(ids[u]) for u in inverse], dtype=np.int64)
        offsets = np.zeros(len(texts) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        if len(unique_texts) == len(texts):  # no duplicates: unique order is input order
            flat_ids = np.concatenate(ids) if ids else np.zeros(0, np.int64)
            flat = unique_embeddings
        else:
            unique_offsets = np.zeros(len(ids) + 1, dtype=np.int64)
            np.cumsum([len(i) for i in ids], out=unique_offsets[1:])
            rows = np.concatenate([np.arange(unique_offsets[u], unique_offsets[u + 1]) for u in inverse]) \
                if texts else np.zeros(0, np.int64)
            flat_ids = np.concatenate([ids[u] for u in inverse]) if texts else np.zeros(0, np.int64)
            flat = unique_embeddings[..., rows, :]
        return EncodedTexts(ids=flat_ids, embeddings=flat, offsets=offsets, truncated=truncated)

    def _embed_ids(self, ids: list[np.ndarray]) -> np.ndarray:
        """Run the model over id sequences; rows of all sequences concatenated in input order."""
        lengths = np.array([len(i) for i in ids], dtype=np.int64)
        offsets = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        out = None
        batches = plan_batches(lengths, self.batch_tokens, self.max_batch_size)
        if self.progress and len(batches) > 1:
            from tqdm.auto import tqdm

            batches = tqdm(batches, desc="encoding", unit="batch", leave=False)
        for batch in batches:
            input_ids, attention_mask = pad_batch([ids[k] for k in batch], self.spec.pad_id)
            hidden = self._runner(input_ids, attention_mask)
            if out is None:
                shape = hidden.shape[:-3] + (int(offsets[-1]), hidden.shape[-1])
                out = np.empty(shape, dtype=np.float32)
            for row, k in enumerate(batch):
                out[..., offsets[k]:offsets[k + 1], :] = hidden[..., row, : lengths[k], :]
        if out is None:  # no texts
            out = np.zeros((0, 0), dtype=np.float32)
        return out

    # -- public conveniences ----------------------------------------------------------------------

    def token_embeddings(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Per text an array (n_tokens, dim) float32, special tokens included, in input order.

        With ``layer="all"`` each array is (layers + 1, n_tokens, dim).
        """
        encoded = self.encode(texts)
        return [encoded.token_embeddings(k) for k in range(len(encoded))]

    def sentence_embeddings(self, texts: Sequence[str], pooling: str = "mean", normalize: bool = True) -> np.ndarray:
        """One vector per text, (n, dim) float32.

        ``pooling="mean"`` averages the token vectors over the attention mask (special tokens
        included), as sentence-transformers does; ``"cls"`` takes the first token. ``normalize``
        scales each vector to unit L2 norm (a zero vector stays zero).
        """
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        if self.layer == "all":
            raise ValueError("sentence_embeddings needs a single layer, not layer='all'")
        encoded = self.encode(texts)
        n = len(encoded)
        if n == 0:
            return np.zeros((0, self.hidden_size), dtype=np.float32)
        starts, ends = encoded.offsets[:-1], encoded.offsets[1:]
        counts = ends - starts
        pooled = np.zeros((n, encoded.embeddings.shape[-1]), dtype=np.float32)
        nonempty = counts > 0  # a tokenizer without special tokens gives no token for ""
        if pooling == "mean":
            sums = np.add.reduceat(encoded.embeddings, starts[nonempty], axis=0)
            pooled[nonempty] = sums / counts[nonempty, None].astype(np.float32)
        else:
            pooled[nonempty] = encoded.embeddings[starts[nonempty]]
        pooled = pooled.astype(np.float32, copy=False)
        if normalize:
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            pooled = pooled / np.maximum(norms, 1e-12)
        return pooled


def _unique(texts: list[str]) -> tuple[list[str], list[int]]:
    index: dict[str, int] = {}
    inverse = [index.setdefault(text, len(index)) for text in texts]
    return list(index), inverse
