"""Sequence classifiers run like the encoders: a model with its classification head (exported
once to ONNX with it, ``encoder/export/classifier_export.py``, or the torch model), tokenised by the
encoder's :class:`~rapidscore.encoder.tokens.tokenization.BatchTokenizer`, batched under the same token
budget (``plan_batches`` / ``pad_batch``), on the same runtimes.

Where each precision holds (:data:`CLASSIFIER_PRECISIONS`): ``fp32`` is exact on every backend
(ONNX Runtime on the CPU and CUDA, OpenVINO on the CPU, torch on the CPU and CUDA: logits within
1e-5 of the transformers pipeline); ``bf16`` (OpenVINO on a CPU with bf16 instructions, torch)
and ``fp16`` (torch on CUDA) run but are approximate (probabilities move by about 1e-2); ``int8``
and ``fast`` are refused (int8 is calibrated on the encoders' hidden states, not on a head).
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rapidscore.common.inputs import as_texts
from rapidscore.encoder.cache import KeyedCache
from rapidscore.encoder.export.classifier_export import (
    NotAClassifierError,
    cached_classifier_export,
    classifier_head,
    load_classification_model,
)
from rapidscore.encoder.loaded import record_model
from rapidscore.encoder.model_source import resolve_model
from rapidscore.encoder.runtime import (
    RUNTIMES,
    RunnerBase,
    backend_for,
    capabilities,
    check_options,
    hf_backend,
    make_runner,
)
from rapidscore.encoder.tokens.batching import default_batch_tokens, pad_batch, plan_batches
from rapidscore.encoder.tokens.tokenization import BatchTokenizer, TokenizerSpec, load_spec
from rapidscore.encoder.tokens.windows import check_long_texts, check_window_texts, count_windows, split_windows
from rapidscore.errors import RapidscoreWarning, TruncationWarning, check_positive_int
from rapidscore.threads import check_num_threads

__all__ = ["CLASSIFIER_PRECISIONS", "SequenceClassifier", "NotAClassifierError", "softmax_or_sigmoid"]

#: backend -> precision -> "exact" or "approximate": each capability table's ``classifier``
#: (the devices: the table's precisions)
CLASSIFIER_PRECISIONS: dict[str, dict[str, str]] = {name: dict(caps.classifier) for name, caps in RUNTIMES.items()}
_LOADED = KeyedCache(4)  # loaded classifiers (runner, tokenizer, head), shared by detectors


def softmax_or_sigmoid(logits: np.ndarray, problem_type: str | None) -> np.ndarray:
    """Probabilities (float64) as the transformers pipeline makes them: a sigmoid per logit for a
    single-logit or multi-label head, else the softmax over the logits."""
    logits = np.asarray(logits, dtype=np.float64)
    if logits.shape[-1] == 1 or problem_type == "multi_label_classification":
        return 1.0 / (1.0 + np.exp(-logits))
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


class _TorchClassifier(RunnerBase):
    """The torch model with its head; returns float32 logits on the host. Thread-safe (eval mode,
    inference_mode: no state kept between calls). Set up as the encoder's torch runner is
    (``runtime.torch.prepare_torch``)."""

    returns = "numpy"
    thread_safe = True

    def __init__(self, model_dir: Path, device: str, precision: str, num_threads: int | None):
        from rapidscore.encoder.runtime.torch import prepare_torch

        torch, dtype = prepare_torch(device, precision, num_threads,
                                     "a classifier with backend='torch' or its ONNX export")
        self.model = load_classification_model(model_dir).to(device=device, dtype=dtype)
        self._torch, self.device, self.precision = torch, device, precision
        self.provider = f"torch-{device}"

    def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        from rapidscore.device.tf32 import exact_fp32

        torch = self._torch
        with torch.inference_mode(), exact_fp32(self.device if self.precision == "fp32" else "cpu"):
            logits = self.model(input_ids=torch.from_numpy(input_ids).to(self.device),
                                attention_mask=torch.from_numpy(attention_mask).to(self.device)).logits
            return logits.float().cpu().numpy()


class _Loaded:
    """What a classifier runs with: its runner (made on first use, once), tokenizer, head."""

    def __init__(self, make: Any, spec: TokenizerSpec, tokenizer_source: Any, head: dict, backend: str,
                 entry: Path | None):
        self._make, self._runner, self._lock = make, None, threading.Lock()
        self.spec, self.tokenizer_source, self.head, self.backend, self.cache_entry = (
            spec, tokenizer_source, head, backend, entry)

    @property
    def runner(self) -> Any:
        if self._runner is None:
            with self._lock:
                if self._runner is None:
                    self._runner = self._make()
        return self._runner


def _load(model_dir: Path, backend: str, device: str, precision: str, num_threads: int | None,
          cache_dir: Path | None) -> _Loaded:
    from rapidscore.encoder.export.onnx_export import ExportMismatchError

    head = classifier_head(model_dir)  # no torch: a model without a head fails before any work
    if capabilities(backend).onnx_graph:
        try:
            entry, _ = cached_classifier_export(model_dir, cache_dir=cache_dir)
        except ExportMismatchError as exc:
            warnings.warn(f"{exc}; running this classifier with backend='torch' instead of {backend!r}",
                          RapidscoreWarning, stacklevel=5)
            backend = hf_backend()
        else:
            graph = entry / "model.onnx"

            def make() -> Any:
                return make_runner(backend, onnx_path=graph, device=device, precision=precision,
                                   num_threads=num_threads, compile_cache=entry.parent.parent / "openvino")

            return _Loaded(make, load_spec(entry / "tokenizer_spec.json"), entry / "tokenizer.json", head, backend,
                           entry)
    from rapidscore.encoder.torch_model import load_tokenizer, tokenizer_spec

    tokenizer, config = load_tokenizer(model_dir, None)
    runner = _TorchClassifier(model_dir, device, precision, num_threads)
    return _Loaded(lambda: runner, tokenizer_spec(tokenizer, config), tokenizer.backend_tokenizer.to_str(), head,
                   backend, None)


class SequenceClassifier:
    """A sequence-classification model: texts -> logits (n, num_labels) and probabilities.

    ``model``: a directory or hub id (offline first, ``model_source.resolve_model``) of a model
    that ``AutoModelForSequenceClassification`` loads without remote code; a model without such a
    head is a :class:`NotAClassifierError`. ``backend``, ``device``, ``precision``,
    ``num_threads``, ``batch_tokens``, ``max_batch_size``, ``cache_dir``: as the encoder's
    (:data:`CLASSIFIER_PRECISIONS` says which precisions hold). ``long_texts``: ``"truncate"``
    (default: cut at the model's maximum length, as the pipeline with ``truncation=True``;
    counted, a TruncationWarning) or ``"window"`` (every window of the text, see
    :meth:`window_logits`). ``max_length``: the truncation length (default: the model's).

    Thread-safe: the runners are, and the loaded model is made once (``KeyedCache``).
    """

    def __init__(self, model: str | os.PathLike, *, backend: str | None = None, device: str = "cpu",
                 precision: str = "fp32", num_threads: int | None = None, batch_tokens: int | None = None,
                 max_batch_size: int = 256, cache_dir: str | os.PathLike | None = None,
                 long_texts: str = "truncate", max_length: int | None = None):
        backend = backend_for(precision) if backend is None else backend
        check_options(backend, device, precision)
        if precision not in capabilities(backend).classifier:
            holds = {b: tuple(caps.classifier) for b, caps in RUNTIMES.items()}
            raise ValueError(f"precision={precision!r} does not run a classifier on backend={backend!r}; "
                             f"classifiers run {holds} (fp32 exact)")
        self.long_texts = check_long_texts(long_texts)
        num_threads = check_num_threads(num_threads)
        self.model_dir = model_dir = resolve_model(model)
        record_model(model_dir)  # a command run asks which models it used (encoder/loaded.py)
        self.model_name = os.fspath(model)
        cache = None if cache_dir is None else Path(cache_dir)
        key = (str(self.model_dir), backend, device, precision, num_threads, None if cache is None else str(cache))
        self.loaded = _LOADED.get(key, lambda: _load(self.model_dir, backend, device, precision, num_threads, cache))
        self.backend, self.device, self.precision = self.loaded.backend, device, precision
        self.labels: tuple[str, ...] = tuple(self.loaded.head["labels"])
        self.problem_type: str | None = self.loaded.head["problem_type"]
        self.batch_tokens = check_positive_int(default_batch_tokens(device, precision) if batch_tokens is None
                                               else batch_tokens, "batch_tokens")
        self.max_batch_size = check_positive_int(max_batch_size, "max_batch_size")
        if max_length is not None:
            check_positive_int(max_length, "max_length")
            if max_length > self.loaded.spec.max_length:
                raise ValueError(f"max_length={max_length} exceeds the model's {self.loaded.spec.max_length} tokens")
        self.tokenizer = BatchTokenizer(self.loaded.tokenizer_source, self.loaded.spec, max_length,
                                        truncate=self.long_texts == "truncate")

    @property
    def max_length(self) -> int:
        return self.tokenizer.max_length

    @property
    def multi_label(self) -> bool:
        """Each label's probability is a sigmoid of its own logit (single logit, multi-label head)."""
        return len(self.labels) == 1 or self.problem_type == "multi_label_classification"

    def __repr__(self) -> str:
        return (f"SequenceClassifier(model={self.model_name!r}, backend={self.backend!r}, device={self.device!r}, "
                f"precision={self.precision!r}, labels={self.labels})")

    def _run(self, ids: list[np.ndarray]) -> np.ndarray:
        """Logits (len(ids), num_labels) float32 of token id sequences, batch by batch."""
        out = np.empty((len(ids), len(self.labels)), dtype=np.float32)
        if not ids:
            return out
        lengths = np.fromiter((len(i) for i in ids), dtype=np.int64, count=len(ids))
        runner = self.loaded.runner
        for batch in plan_batches(lengths, self.batch_tokens, self.max_batch_size):
            input_ids, attention_mask = pad_batch([ids[k] for k in batch], self.loaded.spec.pad_id)
            logits = runner(input_ids, attention_mask)
            out[batch] = logits if isinstance(logits, np.ndarray) else logits.float().cpu().numpy()
        return out

    def logits(self, texts: Sequence[str], *, warn_truncation: bool = True) -> np.ndarray:
        """Logits (n, num_labels) float32 (``long_texts="truncate"``: texts cut at ``max_length``,
        counted, a TruncationWarning). Duplicate texts run once."""
        logits, owners = self.window_logits(texts, warn_truncation=warn_truncation, stacklevel=2)
        if len(owners) != len(logits) or not np.array_equal(owners, np.arange(len(owners))):
            raise ValueError("long_texts='window' gives several rows per long text: use window_logits")
        return logits

    def window_logits(self, texts: Sequence[str], *, warn_truncation: bool = True,
                      stacklevel: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """(logits (m, num_labels), owner (m,)): one row per model input, ``owner[j]`` the text it
        belongs to. With ``long_texts="window"`` a text longer than ``max_length`` tokens gives one
        row per window (``encoder/tokens/windows.py``: windows of ``max_length`` tokens, framed by the
        special tokens, half overlapping); every other text one row."""
        texts = as_texts(texts, "texts")
        if self.long_texts == "window":
            check_window_texts(texts, "texts")
        index: dict[str, int] = {}
        inverse = np.fromiter((index.setdefault(t, len(index)) for t in texts), dtype=np.int64, count=len(texts))
        ids, truncated = self.tokenizer.tokenize_ids(list(index))
        if truncated and warn_truncation:
            warnings.warn(f"{truncated} of {len(index)} distinct texts were longer than {self.max_length} tokens "
                          "and were truncated (long_texts='window' classifies every window)", TruncationWarning,
                          stacklevel=stacklevel + 1)
        if self.long_texts == "truncate" or not ids or max(len(i) for i in ids) <= self.max_length:
            return self._run(ids)[inverse], np.arange(len(texts), dtype=np.int64)
        prefix, suffix = self.tokenizer.framing
        lengths = np.fromiter((len(i) for i in ids), dtype=np.int64, count=len(ids))
        offsets = np.concatenate(([0], np.cumsum(lengths)))
        plan = split_windows(ids, offsets, self.max_length, prefix, suffix)
        counts = count_windows(lengths, self.max_length, len(prefix) + len(suffix))
        logits = self._run(plan.inputs)
        starts = np.concatenate(([0], np.cumsum(counts)))
        rows = np.concatenate([np.arange(starts[u], starts[u + 1]) for u in inverse]) if len(texts) else starts[:0]
        owners = np.repeat(np.arange(len(texts), dtype=np.int64), counts[inverse])
        return logits[rows], owners

    def probabilities(self, texts: Sequence[str]) -> np.ndarray:
        """Probabilities (n, num_labels) float64, as the pipeline's scores (:func:`softmax_or_sigmoid`)."""
        return softmax_or_sigmoid(self.logits(texts, warn_truncation=True), self.problem_type)
