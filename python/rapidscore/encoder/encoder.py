"""The shared encoder: contextual token embeddings (and, through ``Encoder.sentence``, sentence
embeddings) of BERT-family models. ``Encoder`` is a facade over collaborators, one job each:
``settings`` (``encoder/settings.py``: every setting resolved and checked once), ``tokenizer``
(``encoder/tokens/tokenization.py``: token ids, windows of long texts), ``runtime``
(``encoder/model_runtime.py``: the runner, batch planning, the model run over batches in
``encoder/forward.py``) and ``sentence`` (``encoder/sentence``: sentence vectors).

Models run as ONNX graphs in ONNX Runtime or OpenVINO (exported once, cached), or, with
``backend="torch"``, as the Hugging Face torch model: each runtime declares what it supports in
its capability table (``rapidscore.encoder.runtime``).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from rapidscore.common.inputs import as_texts
from rapidscore.encoder.aliases import moved_attribute
from rapidscore.encoder.cache import load_settings
from rapidscore.encoder.loaded import record_model
from rapidscore.encoder.model_runtime import ModelRuntime
from rapidscore.encoder.model_source import DEFAULT_MODEL, ROBERTA_LIKE, hidden_size, read_config
from rapidscore.encoder.runtime import Runner
from rapidscore.encoder.sentence import SentenceEncoder
from rapidscore.encoder.settings import EncoderSettings, default_backend, resolve_encoder_settings, usable_positions
from rapidscore.encoder.store import TokenStore
from rapidscore.encoder.tokens.batching import default_batch_tokens
from rapidscore.encoder.tokens.tokenization import BatchTokenizer, TokenizerSpec
from rapidscore.encoder.tokens.windows import check_window_texts
from rapidscore.errors import TruncationWarning

__all__ = ["Encoder", "TokenStore", "DEFAULT_MODEL", "check_texts", "default_backend"]


def check_texts(texts, name: str = "texts") -> list[str]:
    """``texts`` as a list of str, by the container rules every metric follows
    (``rapidscore.common.inputs.as_texts``: a TypeError naming the first offending item, a
    ValueError for a string the tokenizer cannot take); the name callers of the encoder use."""
    return as_texts(texts, name)


class Encoder:
    """A BERT-family encoder giving contextual token embeddings at a chosen layer.

    Parameters: as ``resolve_encoder_settings`` (``encoder/settings.py``) describes them, which
    resolves and checks them once; plus ``progress``, the default of ``encode(progress=...)``: a
    progress bar over batches. ``Encoder.from_settings`` builds from settings resolved already.

    The loaded model comes from the process-wide cache (``rapidscore.encoder.cache``): encoders of
    the same model, layer, backend, device and precision share it, whatever their max_length or
    batch settings. Thread-safe: many threads may call one encoder (and encoders sharing a model)
    at once; a runner that is not thread-safe is called under a lock. The names this class had
    before its jobs moved to ``runtime``, ``tokenizer`` and ``sentence`` still work (``encoder/aliases.py``).
    """

    def __init__(self, model: str | os.PathLike = DEFAULT_MODEL, layer: int | str | None = None,
                 backend: str | None = None, device: str = "cpu", precision: str = "fp32", *,
                 max_length: int | None = None,
                 batch_tokens: int | None = None, max_batch_size: int = 256, num_threads: int | None = None,
                 cache_dir: str | os.PathLike | None = None, add_prefix_space: bool | None = None,
                 progress: bool = False, unpadded: bool = False, long_texts: str = "truncate"):
        if model is None:  # (get_encoder's None is the default model; Encoder's default is named)
            raise TypeError("model must be a hub id or a directory path, got NoneType: None")
        settings = resolve_encoder_settings(
            model, layer, backend, device, precision, max_length=max_length, batch_tokens=batch_tokens,
            max_batch_size=max_batch_size, num_threads=num_threads, cache_dir=cache_dir,
            add_prefix_space=add_prefix_space, unpadded=unpadded, long_texts=long_texts)
        self._setup(settings, progress)

    @classmethod
    def from_settings(cls, settings: EncoderSettings, *, progress: bool = False) -> Encoder:
        """The encoder of resolved ``settings`` (``resolve_encoder_settings``), resolving nothing again."""
        encoder = cls.__new__(cls)
        cls._setup(encoder, settings, progress)
        return encoder

    def _setup(self, settings: EncoderSettings, progress: bool) -> None:
        options = settings.encoder_options()
        self.settings, self.long_texts, self.progress, self.unpadded = (
            settings, options["long_texts"], progress, options["unpadded"])
        max_length, num_threads = options["max_length"], options["num_threads"]
        self.model_dir, self.model_name, self.num_layers, self.layer = (
            settings.model_dir, settings.model, settings.num_layers, settings.layer)
        record_model(self.model_dir)
        config = read_config(self.model_dir)
        self.hidden_size, self.model_type = hidden_size(config), config.get("model_type")
        loaded, loaded_here, ran, load_args = load_settings(settings)
        # what runs: torch where no ONNX graph matches the model, fp32 where "fast" chose int8 and the model refused it
        self.settings = ran.running_on(loaded.backend)
        self.precision, self.backend, self.device = ran.precision, self.settings.backend, ran.device
        self.batch_tokens = options["batch_tokens"] or default_batch_tokens(self.device, self.precision)
        self.max_batch_size, self.num_threads = options["max_batch_size"], num_threads
        self.roberta_positions = self.model_type in ROBERTA_LIKE
        self.loaded = loaded
        self.padding_sensitive = loaded.padding_sensitive  # (ConvBERT-like: batches of one length)
        self.cache_entry = loaded.cache_entry
        self.exported = loaded.exported and loaded_here  # whether creating this encoder ran the export
        self.tokenizer = BatchTokenizer(loaded.tokenizer_source, loaded.spec, max_length,
                                        truncate=self.long_texts == "truncate")
        if self.long_texts == "window":  # a tokenizer whose framing cannot be read fails here, not mid-call
            prefix, suffix = self.tokenizer.framing
            if self.max_length - len(prefix) - len(suffix) < 1:
                raise ValueError(f"long_texts='window' needs room for text in a window: max_length="
                                 f"{self.max_length} holds only the {len(prefix) + len(suffix)} special tokens")
        self.runtime = ModelRuntime.for_encoder(loaded, load_args, config=config, hidden_size=self.hidden_size,
                                                pad_id=self.spec.pad_id, roberta_positions=self.roberta_positions)
        # ``sentence`` is made on first use; its max_seq_length applies where no max_length was given.
        self._max_length_given = max_length is not None
        self._sentence: SentenceEncoder | None = None

    @property
    def runner(self) -> Runner:
        """What runs the model (``runtime.runner``; ``rapidscore.encoder.runtime``). Assigning another
        runner with the same contract (deriving from ``RunnerBase``: a quantised graph, a wrapper
        that counts or times calls) is supported: every call of this encoder goes through it."""
        return self.runtime.runner

    @runner.setter
    def runner(self, runner: Runner) -> None:
        self.runtime.runner = runner

    @property
    def provider(self) -> str:
        """The runtime's name for where the model runs (``CPUExecutionProvider``, ``torch-cuda``...)."""
        return self.runner.provider

    @property
    def spec(self) -> TokenizerSpec:
        return self.tokenizer.spec

    @property
    def max_length(self) -> int:
        return self.tokenizer.max_length

    def __repr__(self) -> str:
        return (f"Encoder(model={self.model_name!r}, layer={self.layer!r}, backend={self.backend!r}, "
                f"device={self.device!r}, precision={self.precision!r}, max_length={self.max_length})")

    def tokenize(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Token ids per text (special tokens included, truncated to ``max_length``; whole with
        ``long_texts="window"``)."""
        texts = check_texts(texts)
        if self.long_texts == "window":  # named by the caller's index, before anything is tokenised
            check_window_texts(texts, "texts")
        ids, _ = self.tokenizer.encode(texts)
        return ids

    def encode(self, texts: Sequence[str], *, warn_truncation: bool = True,
               progress: bool | None = None) -> TokenStore:
        """Token ids and embeddings of ``texts`` (see TokenStore: text k is stored sentence
        ``order[k]``; ``token_ids(k)`` and ``token_embeddings(k)`` follow the input order).

        Duplicate texts are encoded once; texts are sorted by length and batched under the token
        budget. Truncated texts are counted and reported with a TruncationWarning.
        """
        texts = check_texts(texts)
        if self.long_texts == "window":  # named by the caller's index, before anything is tokenised
            check_window_texts(texts, "texts")
        index: dict[str, int] = {}
        inverse = np.fromiter((index.setdefault(text, len(index)) for text in texts), dtype=np.int64,
                              count=len(texts))
        store = self.encode_unique(list(index), warn_truncation=warn_truncation, progress=progress,
                                   stacklevel=3)
        store.order = store.order[inverse]
        return store

    def encode_unique(self, texts: list[str], *, warn_truncation: bool = True, progress: bool | None = None,
                      stacklevel: int = 2, unpadded: bool | None = None) -> TokenStore:
        """``encode`` for callers that validated and deduplicated ``texts`` already (the scorers'
        plan phase): no check, no second dedupe. ``unpadded``: as in ``embed_ids``."""
        ids, truncated = self.tokenizer.encode(texts)
        if truncated and warn_truncation:
            warnings.warn(
                f"{truncated} of {len(texts)} distinct texts were longer than {self.max_length} "
                f"tokens and were truncated", TruncationWarning, stacklevel=stacklevel + 1)
        return self.embed_ids(ids, truncated=truncated, progress=progress, unpadded=unpadded)

    def embed_ids(self, ids: list[np.ndarray], *, truncated: int = 0, progress: bool | None = None,
                  on_device: bool | None = None, unpadded: bool | None = None) -> TokenStore:
        """Run the model over token id sequences (already tokenised) into a TokenStore.

        Sentences are stored in the order of ``ids``; each batch's real tokens are gathered and
        scattered to their sentences' rows in one vectorised copy (no per-row Python loop).
        ``on_device``: keep the embeddings a torch tensor on the model's device (the torch
        backend's device engine, also on the CPU); None: only off the CPU (``runtime.returns_tensors``).
        ``unpadded``: where ``runtime.unpadded_available``, run the unpadded graph (exported on first use):
        linear layers over the real tokens only, so sentences of any lengths share one call
        without padding; bit-identical to the padded graph (tests/encoder). Elsewhere ignored.
        None: the encoder's ``unpadded`` setting.

        With ``long_texts="window"``, sequences longer than ``max_length`` (tokenised whole) run
        as windows (``rapidscore.encoder.tokens.windows``), batched with the other inputs under the
        token budget; each batch's kept rows are scattered into the texts' rows as it comes out.
        """
        if unpadded is None:
            unpadded = self.unpadded
        lengths = np.fromiter((len(i) for i in ids), dtype=np.int64, count=len(ids))
        offsets = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        flat_ids = np.concatenate(ids) if len(ids) else np.zeros(0, dtype=np.int64)
        runtime = self.runtime
        keep = runtime.returns_tensors if on_device is None else bool(on_device)
        if keep and not runtime.runs_torch:
            raise ValueError(f"on_device=True needs a runner that returns torch tensors (backend='torch'), "
                             f"got backend={self.backend!r} on {self.device!r}")
        inputs, input_lengths, destinations = self.tokenizer.model_inputs(ids, lengths, offsets)
        embeddings = runtime.embed(inputs, input_lengths, offsets, destinations, batch_tokens=self.batch_tokens,
                                   max_batch_size=self.max_batch_size, keep_on_device=keep, unpadded=unpadded,
                                   progress=self.progress if progress is None else progress)
        return TokenStore(ids=flat_ids, offsets=offsets, embeddings=embeddings,
                          order=np.arange(len(ids), dtype=np.int64), truncated=truncated)

    def token_embeddings(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Per text an array (n_tokens, dim) float32, special tokens included, in input order.

        With ``layer="all"`` each array is (layers + 1, n_tokens, dim).
        """
        store = self.encode(texts).to_host()
        return [store.token_embeddings(k) for k in range(len(store))]

    @property
    def sentence(self) -> SentenceEncoder:
        """Sentence vectors of this encoder's model (``rapidscore.encoder.sentence``): its
        sentence-transformers modules, or mean pooling and unit length without a modules.json,
        texts truncated at ``sentence.max_length``. Made on first use; a module, mode or setting
        rapidscore does not implement is a ValueError naming it and its file."""
        sentence = self._sentence
        if sentence is None:  # two threads may both read the directory: same result, harmless
            sentence = self._sentence = SentenceEncoder.load(
                self, max_length=self.max_length if self._max_length_given else None,
                positions=usable_positions(read_config(self.model_dir)))
        return sentence

    def sentence_embeddings(self, texts: Sequence[str], pooling: str | None = None, normalize: bool | None = None,
                            *, prompt_name: str | None = None, prompt: str | None = None,
                            progress: bool | None = None) -> np.ndarray:
        """One vector per text, (n, dim) float32, as the model's sentence-transformers pipeline
        makes it (``SentenceTransformer.encode``): ``sentence.embed``, which says the options."""
        return self.sentence.embed(texts, pooling, normalize, prompt_name=prompt_name, prompt=prompt,
                                   progress=progress, stacklevel=3)

    def __getattr__(self, name: str) -> Any:
        # The names this class had before its jobs moved to its collaborators (documented aliases).
        return moved_attribute(self, name)

