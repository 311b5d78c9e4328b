"""The shared encoder: contextual token embeddings (and, through ``Encoder.sentence``, sentence
embeddings) of BERT-family models.

Models run as ONNX graphs in ONNX Runtime or OpenVINO (exported once, cached), or, with
``backend="torch"``, as the Hugging Face torch model: each runtime declares what it supports in
its capability table (``rapidscore.encoder.runtime``). Tokenisation uses the Rust ``tokenizers``
library (``rapidscore.encoder.tokenization``); the model runs batch by batch in
``rapidscore.encoder.forward``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rapidscore.common.inputs import as_texts
from rapidscore.encoder.batching import default_batch_tokens, equal_length_batches, pad_batch, plan_batches
from rapidscore.encoder.cache import load_model
from rapidscore.encoder.forward import lock_of, run_batches, run_unpadded
from rapidscore.encoder.int8 import Int8Error
from rapidscore.encoder.loaded import record_model
from rapidscore.encoder.model_source import DEFAULT_MODEL, ROBERTA_LIKE, hidden_size, read_config, unpadded_supported
from rapidscore.encoder.precision import FAST
from rapidscore.encoder.runtime import RUNNER_MEMBERS, Runner
from rapidscore.encoder.sentence import SentenceEncoder, SentencePipeline
from rapidscore.encoder.settings import EncoderSettings, default_backend, resolve_encoder_settings, usable_positions
from rapidscore.encoder.store import TokenStore
from rapidscore.encoder.tokenization import BatchTokenizer, TokenizerSpec
from rapidscore.encoder.windows import check_window_texts, split_windows
from rapidscore.errors import TruncationWarning

__all__ = ["Encoder", "TokenStore", "DEFAULT_MODEL", "check_texts", "default_backend"]

logger = logging.getLogger("rapidscore")


def check_texts(texts, name: str = "texts") -> list[str]:
    """``texts`` as a list of str, by the container rules every metric follows
    (``rapidscore.common.inputs.as_texts``: a TypeError naming the first offending item, a
    ValueError for a string the tokenizer cannot take); the name callers of the encoder use."""
    return as_texts(texts, name)


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
    device: "cpu" or "cuda". With backend="torch" on "cuda", token embeddings stay on the GPU
        (the TokenStore holds a torch tensor) and matching runs there.
    precision: "fp32" (exact), "bf16" (fast mode: OpenVINO on CPUs with bf16 instructions,
        BERTScore within about 1e-4 of fp32, see docs/performance.md; or torch on a GPU or a CPU
        with native bf16), "fp16" (the GPU fast mode: backend="torch", device="cuda"; the model
        in half precision, similarities and sums in float32), "int8" (ONNX Runtime on the CPU:
        int8 weights, two int8 passes over the activations, ``rapidscore.encoder.int8``; BERTScore
        within about 3e-4 of fp32 on related pairs, 7e-4 on others) or "fast" (the fastest mode
        this machine has within the fast-mode bound, ``rapidscore.encoder.precision``: bf16, else
        int8 on CPUs with VNNI, else fp32; the encoder's ``precision`` is then the mode used). A
        mode the device cannot run is a ValueError naming it.
    max_length: truncation length in tokens, special tokens included (default: the model's maximum).
    batch_tokens: padded tokens per batch (batch size x longest sequence). The default depends on
        where the model runs: on CPUs small batches keep activations in cache and run faster per
        token (1024 in fp32 and int8, 2048 in bf16, measured in docs/performance.md); on GPUs 16384.
    max_batch_size: sequences per batch at most.
    num_threads: runtime threads (default: the process's thread budget, ``rapidscore.threads``).
    cache_dir: where ONNX exports live (default $RAPIDSCORE_CACHE or ~/.cache/rapidscore).
    add_prefix_space: for byte-level BPE tokenizers (RoBERTa); None keeps the tokenizer as saved,
        which is what bert-score 0.3.13 gives under transformers 5.
    progress: default of ``encode(progress=...)``: a progress bar over batches.
    unpadded: the default of ``embed_ids(unpadded=...)`` for every call of this encoder: True runs
        them all through the unpadded graph where it exists (``unpadded_available``; same vectors,
        bit for bit), so the padded graph's session is never made. For processes whose calls are
        small batches of mixed lengths (a server's workers); bulk calls measure the same either way.
        With ``backend="torch"``, True makes the device engines (BERTScore's, sentence vectors
        excepted) run the packed forward where the runner has one (``packed_available``:
        variable-length attention, linear layers over real tokens only; within 1e-5 of the padded
        forward in fp32, tests/encoder/test_packed_forward.py).
    long_texts: "truncate" (default): texts longer than ``max_length`` are cut there, as
        bert-score does (counted, with a TruncationWarning). "window": they are tokenised whole
        and embedded in overlapping windows of ``max_length`` tokens, each token from the window
        where it sits furthest from a cut (``rapidscore.encoder.windows``); a text's row then
        holds all its tokens. Texts within ``max_length`` get the same vectors either way.
        Truncated texts cost memory in proportion to ``max_length`` whatever their length
        (``rapidscore.encoder.bounded``); windowed ones in proportion to their length, so
        "window" refuses texts over ``windows.MAX_WINDOW_TEXT_CHARS`` (1,048,576) characters.

    The loaded model comes from the process-wide cache (``rapidscore.encoder.cache``): encoders of
    the same model, layer, backend, device and precision share it, whatever their max_length or
    batch settings. Thread-safe: many threads may call one encoder (and encoders sharing a model)
    at once; a runner that is not thread-safe is called under a lock.
    """

    def __init__(self, model: str | os.PathLike = DEFAULT_MODEL, layer: int | str | None = None,
                 backend: str | None = None,
                 device: str = "cpu", precision: str = "fp32", *, max_length: int | None = None,
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
        encoder._setup(settings, progress)
        return encoder

    def _setup(self, settings: EncoderSettings, progress: bool) -> None:
        options = settings.encoder_options()
        self.settings = settings
        self.long_texts = options["long_texts"]
        max_length, num_threads, cache_dir = options["max_length"], options["num_threads"], options["cache_dir"]
        self.model_dir = settings.model_dir
        record_model(self.model_dir)
        self.model_name = settings.model
        config = read_config(self.model_dir)
        self.num_layers = settings.num_layers
        self.hidden_size = hidden_size(config)
        self.model_type = config.get("model_type")
        self.layer = settings.layer
        backend, device, precision = settings.backend, settings.device, settings.precision
        self.backend, self.device, self.precision = backend, device, precision
        default_batch = options["batch_tokens"] is None
        self.batch_tokens = default_batch_tokens(device, precision) if default_batch else options["batch_tokens"]
        self.max_batch_size = options["max_batch_size"]
        self.num_threads = num_threads
        self.progress = progress
        self.unpadded = options["unpadded"]

        load_args: tuple[Path, int | str, str, str, str, int | None, Path | None, bool | None] = (
            self.model_dir, self.layer, backend, device, precision, num_threads,
            Path(cache_dir) if cache_dir else None, options["add_prefix_space"])
        try:
            loaded, loaded_here = load_model(*load_args)
        except Int8Error as refusal:
            if settings.requested_precision != FAST:
                raise
            # "fast" is the fastest mode within the bound that this model runs: exact fp32 here.
            logger.warning("precision='fast': %s; running in exact fp32", refusal)
            precision = self.precision = "fp32"
            self.settings = dataclasses.replace(settings, precision=precision)  # what runs
            if default_batch:
                self.batch_tokens = default_batch_tokens(device, precision)
            load_args = (*load_args[:4], precision, *load_args[5:])
            loaded, loaded_here = load_model(*load_args)
        # The unpadded graph (embed_ids(unpadded=True)), loaded on first use; None where there is none.
        # (fp32 only: int8 scales its activations per batch, so the padded graph serves it.)
        self._unpadded_load_args = (load_args if backend == "onnx" and device == "cpu" and precision == "fp32"
                                    and unpadded_supported(config, self.layer) else None)
        self._unpadded_runner: Any = None
        self.roberta_positions = self.model_type in ROBERTA_LIKE
        self.loaded = loaded
        self.backend = loaded.backend or backend  # "torch" where the model has no matching ONNX graph
        # ConvBERT-like models read the padding: their batches hold sentences of one length only.
        self.padding_sensitive = loaded.padding_sensitive
        self.cache_entry = loaded.cache_entry
        self.exported = loaded.exported and loaded_here  # whether creating this encoder ran the export
        self.tokenizer = BatchTokenizer(loaded.tokenizer_source, loaded.spec, max_length,
                                        truncate=self.long_texts == "truncate")
        if self.long_texts == "window":  # a tokenizer whose framing cannot be read fails here, not mid-call
            prefix, suffix = self.tokenizer.framing
            if self.max_length - len(prefix) - len(suffix) < 1:
                raise ValueError(f"long_texts='window' needs room for text in a window: max_length="
                                 f"{self.max_length} holds only the {len(prefix) + len(suffix)} special tokens")
        # Sentence vectors follow the model's sentence-transformers modules, read on first use
        # (``sentence``); max_seq_length applies where no max_length was given.
        self._max_length_given = max_length is not None
        self._sentence: SentenceEncoder | None = None
        # The loaded model's runner; a CPU ONNX Runtime session is made on first use (``runner``).
        self._runner: Any = None
        self._runner_lock: threading.Lock | None = None
        if loaded.runner_created:
            self._use(loaded.runner)


    @property
    def runner(self) -> Runner:
        """What runs the model (see ``rapidscore.encoder.runtime``). Assigning another runner
        with the same contract (a quantised graph, a wrapper that counts or times calls) is
        supported: every call of this encoder goes through it."""
        runner = self._runner
        if runner is None:
            runner = self.loaded.runner
            self._use(runner)
        return runner

    @runner.setter
    def runner(self, runner: Runner) -> None:
        missing = [name for name in RUNNER_MEMBERS if not hasattr(runner, name)]
        if missing:  # (a runner derives from runtime.RunnerBase, which has every member)
            raise TypeError(f"a runner needs the members {', '.join(missing)} of the Runner contract "
                            f"(derive it from rapidscore.encoder.runtime.RunnerBase), got {type(runner).__name__}")
        # (Compared without making the loaded model's session: a substitute needs none.)
        if not (self.loaded.runner_created and runner is self.loaded.runner):
            self._unpadded_load_args = None  # another graph: every call goes through it, padded
        self._use(runner)

    def _use(self, runner) -> None:
        # Serialises calls of a runner that says it is not thread-safe (shared by its encoders).
        self._runner_lock = None if runner.thread_safe else lock_of(runner)
        self._runner = runner

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

    @property
    def returns_tensors(self) -> bool:
        """Token embeddings stay on the model's device as torch tensors (torch on a GPU)."""
        return self.runs_torch and self.device != "cpu"

    def __repr__(self) -> str:
        return (f"Encoder(model={self.model_name!r}, layer={self.layer!r}, backend={self.backend!r}, "
                f"device={self.device!r}, precision={self.precision!r}, max_length={self.max_length})")

    # -- core ---------------------------------------------------------------------------------

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

    @property
    def unpadded_available(self) -> bool:
        """Whether ``embed_ids(unpadded=True)`` runs the unpadded graph here (ONNX Runtime on the
        CPU, a BERT-style family at a single layer >= 1, the encoder's own runner)."""
        return self._unpadded_load_args is not None

    def embed_ids(self, ids: list[np.ndarray], *, truncated: int = 0, progress: bool | None = None,
                  on_device: bool | None = None, unpadded: bool | None = None) -> TokenStore:
        """Run the model over token id sequences (already tokenised) into a TokenStore.

        Sentences are stored in the order of ``ids``; each batch's real tokens are gathered and
        scattered to their sentences' rows in one vectorised copy (no per-row Python loop).
        ``on_device``: keep the embeddings a torch tensor on the model's device (the torch
        backend's device engine, also on the CPU); None: only off the CPU (``returns_tensors``).
        ``unpadded``: where ``unpadded_available``, run the unpadded graph (exported on first use):
        linear layers over the real tokens only, so sentences of any lengths share one call
        without padding; bit-identical to the padded graph (tests/encoder). Elsewhere ignored.
        None: the encoder's ``unpadded`` setting.

        With ``long_texts="window"``, sequences longer than ``max_length`` (tokenised whole) run
        as windows (``rapidscore.encoder.windows``), batched with the other inputs under the
        token budget; each batch's kept rows are scattered into the texts' rows as it comes out.
        """
        if unpadded is None:
            unpadded = self.unpadded
        lengths = np.fromiter((len(i) for i in ids), dtype=np.int64, count=len(ids))
        offsets = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        flat_ids = np.concatenate(ids) if len(ids) else np.zeros(0, dtype=np.int64)
        keep = self.returns_tensors if on_device is None else bool(on_device)
        if keep and not self.runs_torch:
            raise ValueError(f"on_device=True needs a runner that returns torch tensors (backend='torch'), "
                             f"got backend={self.backend!r} on {self.device!r}")
        inputs, input_lengths, destinations = self.model_inputs(ids, lengths, offsets)
        if unpadded and self.unpadded_available and not keep:
            embeddings = self._run_unpadded(inputs, input_lengths, offsets, destinations)
        else:
            batches = self.batch_plan(input_lengths)
            embeddings = self._run_batches(inputs, input_lengths, offsets, batches,
                                           self.progress if progress is None else progress, keep, destinations)
        return TokenStore(ids=flat_ids, offsets=offsets, embeddings=embeddings,
                          order=np.arange(len(ids), dtype=np.int64), truncated=truncated)

    def model_inputs(self, ids: list[np.ndarray], lengths: np.ndarray,
                     offsets: np.ndarray) -> tuple[list[np.ndarray], np.ndarray, list[np.ndarray] | None]:
        """What the model runs for sentences ``ids`` (``lengths``, store ``offsets``): the
        sentences themselves, or with ``long_texts="window"`` and a sentence over ``max_length``,
        their windows, with each window's destination rows in the store (-1: dropped)."""
        if self.long_texts == "window" and len(ids) and int(lengths.max()) > self.max_length:
            # Only calls with a long text take this path: others run exactly as with truncation.
            windows = split_windows(ids, offsets, self.max_length, *self.tokenizer.framing)
            inputs = windows.inputs
            return inputs, np.fromiter((len(i) for i in inputs), dtype=np.int64, count=len(inputs)), \
                windows.destinations
        return ids, lengths, None

    @property
    def runs_torch(self) -> bool:
        """The runner returns torch tensors (the torch backend; ONNX Runtime's IOBinding on CUDA)."""
        # A runner not made yet is a CPU ONNX Runtime session (the only kind made on first use):
        # numpy out.
        return self._runner is not None and self._runner.returns == "torch"

    def batch_plan(self, lengths: np.ndarray) -> list[np.ndarray]:
        """Batches (index arrays) of sequences of ``lengths`` under the token budget: length-sorted,
        or of one length each where the model reads the padding (``padding_sensitive``)."""
        plan = equal_length_batches if self.padding_sensitive else plan_batches
        return plan(lengths, self.batch_tokens, self.max_batch_size)

    def hidden_batches(self, ids, batches, progress: bool) -> Iterator[tuple[Any, np.ndarray, Any]]:
        """(batch, attention mask, hidden states) per batch of ``batches`` (``batch_plan``): the
        model run over the token ids ``ids[k]`` of the batch, right padded (for torch, moved to
        the device: pinned memory and non-blocking copies on CUDA, the runner's ``to_device``)."""
        if progress:  # the one policy (rapidscore.common.progress): a bar after a second of work
            from rapidscore.common.progress import progress_bar

            batches = progress_bar(batches, desc="encoding", unit="batch", leave=False)
        for batch in batches:
            input_ids, attention_mask = pad_batch([ids[k] for k in batch], self.spec.pad_id)
            yield batch, attention_mask, self.run_model(input_ids, attention_mask)

    def _run_batches(self, ids, lengths, offsets, batches, progress: bool, keep_on_device: bool,
                     destinations: list[np.ndarray] | None = None):
        return run_batches(self, ids, lengths, offsets, batches, progress, keep_on_device, destinations)

    def _run_unpadded(self, ids, lengths: np.ndarray, offsets: np.ndarray,
                      destinations: list[np.ndarray] | None = None) -> np.ndarray:
        runner = self._unpadded_runner
        if runner is None:
            assert self._unpadded_load_args is not None  # unpadded_available
            model_dir, layer, backend, device, precision, num_threads, cache_dir, prefix = self._unpadded_load_args
            runner = self._unpadded_runner = load_model(model_dir, layer, backend, device, precision, num_threads,
                                                        cache_dir, prefix, unpadded=True)[0].runner
        return run_unpadded(self, runner, ids, lengths, offsets, destinations)

    def to_device(self, array: np.ndarray) -> Any:
        """A host array as a torch tensor on the model's device (the runner's own copy, where it
        has one)."""
        return self.runner.to_device(array)

    @property
    def packed_available(self) -> bool:
        """Whether the runner has a packed (unpadded) forward for this model and layer
        (``TorchRunner.packed``, ``rapidscore.device.packed``): the device engines use it when
        the encoder was made with ``unpadded=True``."""
        return self.runs_torch and self.runner.packed

    def run_packed(self, ids: list[np.ndarray]) -> Any:
        """The runner's packed forward over non-empty token id sequences: (tokens, dim), sentence
        after sentence (``TorchRunner.run_packed``)."""
        run_packed = self.runner.run_packed
        if self._runner_lock is None:
            return run_packed(ids)
        with self._runner_lock:
            return run_packed(ids)

    def run_model(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> Any:
        """The runner over one padded batch (under the runner's lock where it is not thread-safe)."""
        runner = self.runner
        if self._runner_lock is None:
            return runner(input_ids, attention_mask)
        with self._runner_lock:
            return runner(input_ids, attention_mask)

    # -- public conveniences ----------------------------------------------------------------------

    def token_embeddings(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Per text an array (n_tokens, dim) float32, special tokens included, in input order.

        With ``layer="all"`` each array is (layers + 1, n_tokens, dim).
        """
        store = self.encode(texts).to_host()
        return [store.token_embeddings(k) for k in range(len(store))]

    # -- sentence vectors: ``sentence`` (a SentenceEncoder); the methods below delegate to it -----

    @property
    def sentence(self) -> SentenceEncoder:
        """Sentence vectors of this encoder's model (``rapidscore.encoder.sentence``): its
        sentence-transformers modules, or mean pooling and unit length without a modules.json,
        texts truncated at ``sentence_max_length``. Made on first use; a module, mode or setting
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
        makes it (``SentenceTransformer.encode``; ``sentence.embed``): its Pooling (cls, max, mean,
        mean_sqrt_len_tokens, weightedmean, lasttoken, concatenated), Dense and Normalize modules,
        its max_seq_length and do_lower_case. A model directory without modules.json: mean pooling,
        unit length. A module rapidscore does not implement is a ValueError naming it.

        ``prompt_name`` / ``prompt``: as ``encode`` takes them: the prompt is put before each text
        (the model's default prompt when neither is given; ``prompt=""`` for none), and a Pooling
        with ``include_prompt=False`` leaves its tokens out.
        ``pooling`` (a mode name) replaces the model's pooling and Dense layers by that pooling of
        the token vectors; ``normalize`` True/False forces unit length on or off at the end. None
        (default): the model's own. With the torch backend the vectors are made on the model's
        device, batch by batch: only the (n, dim) vectors cross to the host.
        """
        return self.sentence.embed(texts, pooling, normalize, prompt_name=prompt_name, prompt=prompt,
                                   progress=progress, stacklevel=3)

    def sentence_vectors_unique(self, texts: list[str], pooling: str | None = None, normalize: bool | None = None,
                                *, prompt_name: str | None = None, prompt: str | None = None,
                                progress: bool | None = None, unpadded: bool | None = None) -> np.ndarray:
        """``sentence.embed_unique``: ``sentence_embeddings`` of validated, distinct texts."""
        return self.sentence.embed_unique(texts, pooling, normalize, prompt_name=prompt_name, prompt=prompt,
                                          progress=progress, unpadded=unpadded, stacklevel=4)

    @property
    def sentence_pipeline(self) -> SentencePipeline:
        """``sentence.pipeline``: how this model makes sentence vectors."""
        return self.sentence.pipeline

    @property
    def sentence_max_length(self) -> int:
        """Truncation length of sentence vectors (``sentence.max_length``): ``max_length`` when the
        encoder was given one, else the model's sentence-transformers max_seq_length
        (all-MiniLM-L6-v2: 256, where its tokenizer says 512), else ``max_length``."""
        return self.sentence.max_length

    def sentence_inputs(self, texts: list[str], *, prompt_name: str | None = None,
                        prompt: str | None = None) -> tuple[list[str], int]:
        """``sentence.prompt_inputs``: the texts with the prompt put before each, and its length."""
        return self.sentence.prompt_inputs(texts, prompt_name=prompt_name, prompt=prompt)

    def pool(self, store: TokenStore, pooling: str | None = None, normalize: bool | None = None, *,
             prompt_length: int = 0) -> np.ndarray:
        """``sentence.pool``: sentence vectors (n, dim) of an encoded store, text k in row k."""
        return self.sentence.pool(store, pooling, normalize, prompt_length=prompt_length)


# id(runner) -> its lock, while the runner lives (the entry goes with it: an id is reused only
# after its object is gone). Keyed by identity, not equality: a runner need not be hashable.
