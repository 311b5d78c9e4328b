"""Sequence classifiers on the encoders' runtime stack: a model with its classification head
(exported once to ONNX with it, ``encoder/export/classifier_export.py``, or the torch model read
through :class:`ClassifierLogits`, its output head), made by the runtimes' ``make_runner``, held
as a ``cache.LoadedModel`` and run by a ``model_runtime.ModelRuntime`` (batches under the token
budget, padding, a lock for a runner that is not thread-safe, rows to the host); tokenised by the
encoder's :class:`~rapidscore.encoder.tokens.tokenization.BatchTokenizer`, long texts windowed by
``encoder/tokens/windows.py``. Nothing here makes a session or a model itself.

Where each precision holds (:data:`CLASSIFIER_PRECISIONS`): ``fp32`` is exact on every backend
(ONNX Runtime on the CPU and CUDA, OpenVINO on the CPU, torch on the CPU and CUDA: logits within
1e-5 of the transformers pipeline); ``bf16`` (OpenVINO on a CPU with bf16 instructions, torch)
and ``fp16`` (torch on CUDA) run but are approximate (probabilities move by about 1e-2); ``int8``
and ``fast`` are refused (int8 is calibrated on the encoders' hidden states, not on a head).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rapidscore.common.inputs import as_texts
from rapidscore.encoder.cache import KeyedCache, LoadedModel
from rapidscore.encoder.export.classifier_export import (
    NotAClassifierError,
    cached_classifier_export,
    classifier_head,
    load_classification_model,
)
from rapidscore.encoder.loaded import record_model
from rapidscore.encoder.model_runtime import ModelRuntime
from rapidscore.encoder.model_source import resolve_model
from rapidscore.encoder.runtime import (
    RUNTIMES,
    Runner,
    backend_for,
    capabilities,
    check_options,
    hf_backend,
    make_runner,
)
from rapidscore.encoder.tokens.batching import default_batch_tokens
from rapidscore.encoder.tokens.tokenization import BatchTokenizer, load_spec
from rapidscore.encoder.tokens.windows import check_long_texts, check_window_texts, count_windows, split_windows
from rapidscore.errors import RapidscoreWarning, TruncationWarning, check_positive_int
from rapidscore.threads import check_num_threads

__all__ = ["CLASSIFIER_PRECISIONS", "ClassifierLogits", "SequenceClassifier", "NotAClassifierError",
           "softmax_or_sigmoid"]

#: backend -> precision -> "exact" or "approximate": each capability table's ``classifier``
#: (the devices: the table's precisions)
CLASSIFIER_PRECISIONS: dict[str, dict[str, str]] = {name: dict(caps.classifier) for name, caps in RUNTIMES.items()}
_LOADED = KeyedCache(4)  # loaded classifiers (LoadedModel: runner, tokenizer), shared by detectors


def softmax_or_sigmoid(logits: np.ndarray, problem_type: str | None) -> np.ndarray:
    """Probabilities (float64) as the transformers pipeline makes them: a sigmoid per logit for a
    single-logit or multi-label head, else the softmax over the logits."""
    logits = np.asarray(logits, dtype=np.float64)
    if logits.shape[-1] == 1 or problem_type == "multi_label_classification":
        return 1.0 / (1.0 + np.exp(-logits))
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


class ClassifierLogits:
    """The classifier's output head (``runtime.OutputHead``) for a backend that runs the model
    itself (torch): ``AutoModelForSequenceClassification`` with its trained head, read as its
    logits (batch, labels)."""

    purpose = "a classifier with backend='torch' or its ONNX export"
    layer = None
    token_outputs = False  # one row per text

    def load(self, model_dir: Path, device: str) -> Any:
        # eager attention on every device: the attention the ONNX export traces
        return load_classification_model(model_dir)

    def read(self, model: Any, input_ids: Any, attention_mask: Any) -> Any:
        return model(input_ids=input_ids, attention_mask=attention_mask).logits


def _load(model_dir: Path, backend: str, device: str, precision: str, num_threads: int | None,
          cache_dir: Path | None) -> LoadedModel:
    """The classifier's loaded model: its exported graph on a backend that runs graphs (the runner
    made on first use where the backend's table says so), else, and where the export does not
    reproduce the model (a warning), the model itself through :class:`ClassifierLogits`."""
    from rapidscore.encoder.export.onnx_export import ExportMismatchError

    if capabilities(backend).onnx_graph:
        try:
            entry, exported = cached_classifier_export(model_dir, cache_dir=cache_dir)
        except ExportMismatchError as exc:
            warnings.warn(f"{exc}; running this classifier with backend='torch' instead of {backend!r}",
                          RapidscoreWarning, stacklevel=5)
            backend = hf_backend()
        else:
            graph_backend = backend

            def new_runner() -> Runner:
                return make_runner(graph_backend, onnx_path=entry / "model.onnx", device=device, precision=precision,
                                   num_threads=num_threads, compile_cache=entry.parent.parent / "openvino")

            lazy = device in capabilities(backend).lazy_devices
            return LoadedModel(None if lazy else new_runner(), load_spec(entry / "tokenizer_spec.json"),
                               entry / "tokenizer.json", entry, exported, make_runner=new_runner if lazy else None,
                               backend=backend)
    from rapidscore.encoder.torch_model import load_tokenizer, tokenizer_spec

    tokenizer, config = load_tokenizer(model_dir, None)
    runner = make_runner(backend, model_dir=model_dir, head=ClassifierLogits(), device=device, precision=precision,
                         num_threads=num_threads)
    return LoadedModel(runner, tokenizer_spec(tokenizer, config), tokenizer.backend_tokenizer.to_str(), None, False,
                       backend=backend)


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

    Thread-safe: the runtime is (a runner that is not thread-safe is called under a lock), and the
    loaded model is made once (``KeyedCache``).
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
        head = classifier_head(model_dir)  # no torch: a model without a head fails before any work
        self.labels: tuple[str, ...] = tuple(head["labels"])
        self.problem_type: str | None = head["problem_type"]
        key = (str(self.model_dir), backend, device, precision, num_threads, None if cache is None else str(cache))
        self.loaded = loaded = _LOADED.get(key, lambda: _load(model_dir, backend, device, precision, num_threads,
                                                              cache))
        assert loaded.backend is not None  # (_load names the backend that runs it)
        self.backend, self.device, self.precision = loaded.backend, device, precision
        self.runtime = ModelRuntime(loaded, device, hidden_size=len(self.labels), pad_id=loaded.spec.pad_id)
        self.batch_tokens = check_positive_int(default_batch_tokens(device, precision) if batch_tokens is None
                                               else batch_tokens, "batch_tokens")
        self.max_batch_size = check_positive_int(max_batch_size, "max_batch_size")
        if max_length is not None:
            check_positive_int(max_length, "max_length")
            if max_length > loaded.spec.max_length:
                raise ValueError(f"max_length={max_length} exceeds the model's {loaded.spec.max_length} tokens")
        self.tokenizer = BatchTokenizer(loaded.tokenizer_source, loaded.spec, max_length,
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
        """Logits (len(ids), num_labels) float32 of token id sequences (``ModelRuntime.output_rows``)."""
        return self.runtime.output_rows(ids, batch_tokens=self.batch_tokens, max_batch_size=self.max_batch_size)

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
