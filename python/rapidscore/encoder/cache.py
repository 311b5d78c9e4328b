"""The in-memory cache of loaded models: one per process, with a concurrency contract. (The graphs
exported to disk, and their int8 copies, are the disk cache: ``encoder/export/disk_cache.py``.)

Two levels:

- ``load_model(...)``: the expensive part (ONNX export or lookup, runtime session, torch weights),
  keyed by model directory, layer, backend, device, precision, thread count, cache directory and
  tokenizer option. Every :class:`~rapidscore.encoder.Encoder` gets its runner here, so
  BERTScore, NRR, NER label similarity and the refusal detector share one loaded model even
  when they ask for different maximum lengths or batch sizes.
- ``get_encoder(...)`` (``encoder/shared.py``): a cached :class:`Encoder` for the full set of
  options, built on this cache; what the metrics call.

Both are thread-safe: a lock per key makes concurrent first requests load once while other keys
load in parallel. Least recently used entries beyond ``MAX_MODELS`` are dropped from the cache
(objects still referenced elsewhere live on). What a backend loads (the exported graph or the
model) and when its runner is made come from its capability table (``rapidscore.encoder.runtime``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import threading
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Hashable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from rapidscore.encoder.precision import FAST
from rapidscore.encoder.runtime import Runner, capabilities, check_unpadded, hf_backend, make_runner
from rapidscore.encoder.tokens.tokenization import TokenizerSpec, load_spec
from rapidscore.errors import RapidscoreWarning

if TYPE_CHECKING:
    from rapidscore.encoder.settings import EncoderSettings

__all__ = ["LoadedModel", "LoadArgs", "load_model", "load_settings", "KeyedCache", "MODELS", "MAX_MODELS"]

#: ``load_model``'s arguments: model directory, layer, backend, device, precision, threads, cache
#: directory, add_prefix_space
LoadArgs = tuple[Path, "int | str", str, str, str, "int | None", "Path | None", "bool | None"]

logger = logging.getLogger("rapidscore")

MAX_MODELS = 8


class LoadedModel:
    """A runner and what tokenising for it needs. Shared between encoders; thread-safe.

    ``runner``: the runner; or None and ``make_runner``, which makes it on first use
    (``runner_created`` says whether it has). A CPU ONNX Runtime session is made on first use: it
    holds a copy of the model's weights (90 MB for all-MiniLM-L6-v2, 1.4 GB for roberta-large),
    and an encoder that only runs the unpadded graph (the serving workers) never needs its padded one.
    """

    def __init__(self, runner: Runner | None, spec: TokenizerSpec, tokenizer_source: Any,
                 cache_entry: Path | None, exported: bool, *, make_runner: Callable[[], Runner] | None = None,
                 backend: str | None = None, padding_sensitive: bool = False):
        if (runner is None) == (make_runner is None):
            raise ValueError("LoadedModel takes a runner or make_runner, exactly one")
        self._runner = runner
        self._make_runner = make_runner
        self._lock = threading.Lock()
        self.spec = spec
        self.tokenizer_source = tokenizer_source  # tokenizer.json path, or its JSON text (torch backend)
        self.cache_entry = cache_entry
        self.exported = exported
        self.backend = backend  # the backend that runs it: "torch" where no ONNX graph matches the model
        self.padding_sensitive = padding_sensitive  # its outputs depend on padding (torch_model.padding_sensitive)

    @property
    def runner(self) -> Runner:
        runner = self._runner
        if runner is None:
            with self._lock:  # concurrent first calls make one session
                if self._runner is None:
                    assert self._make_runner is not None
                    self._runner = self._make_runner()
                    self._make_runner = None  # made: the closure has done its work
                runner = self._runner
        return runner

    @property
    def runner_created(self) -> bool:
        return self._runner is not None


class KeyedCache:
    """An LRU dict whose values are built at most once per key, under a per-key lock. A value
    dropped from the LRU but still referenced elsewhere (an encoder cached elsewhere holds its
    loaded model) is found again rather than built twice: two copies of a model's weights."""

    def __init__(self, max_size: int):
        self.max_size = max_size
        self._values: OrderedDict[Hashable, Any] = OrderedDict()
        self._alive: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self._key_locks: dict[Hashable, threading.Lock] = {}
        self._lock = threading.Lock()
        self.builds = 0

    def get(self, key: Hashable, build: Callable[[], Any]) -> Any:
        return self.get_or_build(key, build)[0]

    def get_or_build(self, key: Hashable, build: Callable[[], Any]) -> tuple[Any, bool]:
        """The value of ``key`` and whether this call built it."""
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key], False
            alive = self._alive.get(key)
            if alive is not None:
                self._keep(key, alive)
                return alive, False
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                if key in self._values:  # built by another thread while we waited
                    self._values.move_to_end(key)
                    return self._values[key], False
            value = build()
            with self._lock:
                self.builds += 1
                self._key_locks.pop(key, None)
                self._keep(key, value)
            return value, True

    def _keep(self, key: Hashable, value: Any) -> None:
        """``value`` as the most recently used, the least recently used beyond ``max_size``
        dropped (held by the lock)."""
        self._values[key] = value
        self._values.move_to_end(key)
        with contextlib.suppress(TypeError):  # a value that cannot be weakly referenced
            self._alive[key] = value
        while len(self._values) > self.max_size:
            self._values.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
            self._alive.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._values)

    def values(self) -> list[Any]:
        """The cached values, least recently used first (a copy)."""
        with self._lock:
            return list(self._values.values())


MODELS = KeyedCache(MAX_MODELS)


def load_settings(settings: EncoderSettings) -> tuple[LoadedModel, bool, EncoderSettings, LoadArgs]:
    """``(loaded model, whether this call loaded it, the settings that run, load_model's arguments)``
    of an encoder's resolved ``settings``: "fast" that became int8 runs in exact fp32 where the
    model refuses int8 (a warning; explicit "int8" raises)."""
    from rapidscore.encoder.export.int8 import Int8Error

    cache_dir = settings.option("cache_dir")
    load_args: LoadArgs = (settings.model_dir, settings.layer, settings.backend, settings.device, settings.precision,
                 settings.option("num_threads"), Path(cache_dir) if cache_dir else None,
                 settings.option("add_prefix_space"))
    try:
        return (*load_model(*load_args), settings, load_args)
    except Int8Error as refusal:
        if settings.requested_precision != FAST:
            raise
        # "fast" is the fastest mode within the bound that this model runs: exact fp32 here.
        logger.warning("precision='fast': %s; running in exact fp32", refusal)
        load_args = (*load_args[:4], "fp32", *load_args[5:])
        return (*load_model(*load_args), dataclasses.replace(settings, precision="fp32"), load_args)


def load_model(model_dir: Path, layer: int | str, backend: str, device: str, precision: str,
               num_threads: int | None = None, cache_dir: Path | None = None,
               add_prefix_space: bool | None = None, unpadded: bool = False) -> tuple[LoadedModel, bool]:
    """The loaded model for these settings, loading it on first request (thread-safe), and
    whether this call loaded it. ``unpadded``: the ONNX graph over real tokens only (onnx backend)."""
    if unpadded:
        check_unpadded(backend)
    if unpadded and precision == "int8":
        raise ValueError("the unpadded graph runs in fp32; precision='int8' runs the padded graph")
    key = (str(model_dir), layer, backend, device, precision, num_threads,
           None if cache_dir is None else str(cache_dir), add_prefix_space, unpadded)
    return MODELS.get_or_build(key, lambda: _load(model_dir, layer, backend, device, precision, num_threads,
                                          cache_dir, add_prefix_space, unpadded))


def _load(model_dir, layer, backend, device, precision, num_threads, cache_dir, add_prefix_space,
          unpadded) -> LoadedModel:
    if capabilities(backend).onnx_graph:
        from rapidscore.encoder.export.onnx_export import ExportMismatchError, cached_export

        # One fp32 graph serves every precision: the runtime decides how to execute it.
        try:
            entry, exported = cached_export(model_dir, layer, "fp32", add_prefix_space, cache_dir=cache_dir,
                                            unpadded=unpadded)
        except ExportMismatchError as exc:
            if unpadded:
                raise
            if precision == "int8":  # int8 is an ONNX Runtime graph: no torch fallback for it
                from rapidscore.encoder.export.int8 import Int8Error

                raise Int8Error(f"precision='int8' runs the ONNX export of {model_dir}, which does not reproduce "
                                f"the model ({exc}); use precision='fp32' (it runs in torch)") from exc
            # Never wrong numbers: the model itself runs instead (the backend without a graph: torch).
            fallback = hf_backend()
            warnings.warn(f"{exc}; running this model with backend={fallback!r} instead of {backend!r} "
                          "(the reference's numbers, without the ONNX speed-up)", RapidscoreWarning, stacklevel=6)
            backend = fallback
    caps = capabilities(backend)
    if caps.onnx_graph:
        from rapidscore.encoder.export.shipped import writable_root

        spec = load_spec(entry / "tokenizer_spec.json")
        graph = entry / "model.onnx"
        derived_root = writable_root(entry, cache_dir)  # a shipped entry's package is read-only
        if precision == "int8":  # the int8 graph of this export, built on first use (errors belong here)
            from rapidscore.encoder.export.int8 import cached_int8
            from rapidscore.encoder.tokens.tokenization import BatchTokenizer

            int8_entry, _ = cached_int8(entry, BatchTokenizer(_tokenizer_file(entry), spec), spec.pad_id, num_threads,
                                        root=derived_root)
            graph = int8_entry / "model.onnx"

        def new_runner() -> Runner:
            return make_runner(backend, onnx_path=graph, device=device, precision=precision,
                               num_threads=num_threads, compile_cache=derived_root.parent / "openvino")

        sensitive = bool(json.loads((entry / "meta.json").read_text(encoding="utf-8")).get("padding_sensitive"))
        if device in caps.lazy_devices:
            return LoadedModel(None, spec, _tokenizer_file(entry), entry, exported, make_runner=new_runner,
                               backend=backend, padding_sensitive=sensitive)
        # Others now: their errors (a missing CUDA provider, say) belong to construction.
        return LoadedModel(new_runner(), spec, _tokenizer_file(entry), entry, exported, backend=backend,
                           padding_sensitive=sensitive)
    from rapidscore.encoder.runtime.torch import require_torch_stack

    require_torch_stack(f"backend={backend!r}")
    from rapidscore.encoder.torch_model import load_tokenizer, tokenizer_spec

    hf_tokenizer, hf_config = load_tokenizer(model_dir, add_prefix_space)
    spec = tokenizer_spec(hf_tokenizer, hf_config)
    runner = make_runner(backend, model_dir=model_dir, layer=layer, device=device, precision=precision,
                         num_threads=num_threads)
    source = hf_tokenizer.backend_tokenizer.to_str() if hf_tokenizer.is_fast else hf_tokenizer
    from rapidscore.encoder.torch_model import padding_sensitive

    return LoadedModel(runner, spec, source, None, False, backend=backend,
                       padding_sensitive=padding_sensitive(runner.model))


def _tokenizer_file(entry: Path) -> Path:
    """tokenizer.json of a cache entry, or the folder of a Python tokenizer (XLM, ProphetNet)."""
    from rapidscore.encoder.tokens.python_tokenizer import SAVED_DIRECTORY

    file = entry / "tokenizer.json"
    return file if file.is_file() or not (entry / SAVED_DIRECTORY).is_dir() else entry / SAVED_DIRECTORY
