"""The scoring service behind the HTTP server, without the web framework: the served metrics'
engines loaded once, one table of scorers, one micro-batching queue for every metric, warm-up,
metrics and shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import OrderedDict
from concurrent.futures import Future
from typing import Any

from rapidscore.common.metric import Metric
from rapidscore.serve.batching import BatchingScorer
from rapidscore.serve.config import ServeConfig
from rapidscore.serve.micro_batcher import MicroBatcher
from rapidscore.serve.prometheus import ServerMetrics

__all__ = ["ScoringService", "submit_request"]

# Requests whose texts hold more characters are validated and tokenised in a thread, not in the
# event loop: 5,400 references (64,522 tokens, the most max_tokens allows) took 0.19 s to
# tokenise, during which no other connection was served. Smaller ones stay inline (no thread hop).
OFFLOAD_CHARACTERS = 16_384

# Engines built on first use for request options the server did not preload (a setting of
# idf, rescaling, lang, a refusal method): at most this many are kept, the least recently used
# dropped first, so that clients naming ever new values cannot grow the server without bound.
MAX_ENGINE_VARIANTS = 16


class ScoringService:
    """Every served metric (``config.metrics``; default: every registered one) behind one
    :class:`MicroBatcher`, built from the metrics' declarations (``rapidscore.common.metric``):
    one table of scorers, keyed by the metric and a request's engine options.

    ``start()`` loads the models (each served model and layer) and warms them up (``ready`` is
    set after); ``close()`` stops taking requests and answers every queued one. Thread-safe: the
    HTTP handlers of any number of threads or event loops call it at once. It is the
    :class:`~rapidscore.common.metric.ServerContext` the metrics' serving hooks read.
    """

    def __init__(self, config: ServeConfig | None = None):
        from rapidscore.metrics import all_metrics, get_metric

        self.config = config or ServeConfig()
        self.metrics = ServerMetrics()
        self.ready = threading.Event()
        self.load_error: BaseException | None = None
        self.batcher = MicroBatcher(batch_tokens=self.config.batch_tokens,
                                    max_batch_requests=self.config.max_batch_requests,
                                    max_queue=self.config.max_queue, workers=self.config.workers,
                                    on_batch=self.metrics.observe_batch)
        served = [get_metric(name) for name in self.config.metrics] if self.config.metrics else all_metrics()
        #: the served metrics by name
        self.served: dict[str, Metric] = {metric.name: metric for metric in served}
        #: every name a request path may use (names and aliases) -> its metric
        self.paths: dict[str, Metric] = {alias: metric for metric in served for alias in (metric.name, *metric.aliases)}
        # the one table of scorers: (metric name, engine options) -> scorer; preloaded ones stay,
        # the others are an LRU of MAX_ENGINE_VARIANTS
        self._scorers: OrderedDict[tuple, BatchingScorer] = OrderedDict()
        self._preloaded: set[tuple] = set()
        self._scorers_lock = threading.Lock()
        self._building: dict[tuple, threading.Lock] = {}
        # the layers each served model was loaded at, resolved (engine.layer), for "layers" options
        self._layers: dict[str, list] = {}
        self._limits: dict[str, Any] = dict(batcher=self.batcher, max_request_texts=self.config.max_texts,
                                            max_request_tokens=self.config.max_tokens)

    # -- the server context (rapidscore.common.metric.ServerContext) ----------------------------

    def setting(self, name: str) -> Any:
        return self.config.setting(name)

    @property
    def default_model(self) -> str:
        return self.config.models[0]

    def layer_of(self, model: str, num_layers: int | None) -> int | None:
        served = self.config.layers
        return served[0] if num_layers is None else num_layers

    def idf_file(self, name: str) -> str:
        return self.config.idf_files()[name]

    def encoder_options(self, solo: bool = False) -> dict | None:
        return self.config.solo_encoder_options if solo else self.config.encoder_options

    # -- the table of scorers -----------------------------------------------------------------

    def scorer(self, metric: str | Metric, **options: Any) -> BatchingScorer:
        """The scorer of ``metric`` under a request's engine options (its
        :attr:`~rapidscore.common.metric.Metric.request_options` that are not per-request;
        others are ignored here): the preloaded one where each is at its default or names what
        the server loaded, else one built on first use and kept (at most MAX_ENGINE_VARIANTS).
        A value the server cannot apply (a model it does not serve, a model without a baseline)
        is a ValueError whose ``field`` names the option."""
        metric = self.served[metric] if isinstance(metric, str) else metric
        return self._scorer_for(metric, (metric.name, self._engine_key(metric, options)))

    def built_scorer(self, metric: Metric, **options: Any) -> BatchingScorer | None:
        """:meth:`scorer` when it is built already (None otherwise: building may take a while);
        a value the server cannot apply raises as there."""
        key = (metric.name, self._engine_key(metric, options))
        with self._scorers_lock:
            scorer = self._scorers.get(key)
            if scorer is not None:
                self._scorers.move_to_end(key)
            return scorer

    def _scorer_for(self, metric: Metric, key: tuple) -> BatchingScorer:
        with self._scorers_lock:
            scorer = self._scorers.get(key)
            if scorer is not None:
                self._scorers.move_to_end(key)
                return scorer
            building = self._building.setdefault(key, threading.Lock())
        with building:  # one build per key; other keys build meanwhile
            with self._scorers_lock:
                scorer = self._scorers.get(key)
            if scorer is None:
                scorer = self._build(metric, dict(key[1]))
                with self._scorers_lock:
                    self._scorers[key] = scorer
                    self._building.pop(key, None)
                    variants = [k for k in self._scorers if k not in self._preloaded]
                    for old in variants[:max(0, len(variants) - MAX_ENGINE_VARIANTS)]:
                        del self._scorers[old]
        return scorer

    def _served_model(self, name: Any) -> str | None:
        """The served model ``name`` names (the embedded model by any of its spellings), or None."""
        from rapidscore.encoder.model_source import is_embedded_model

        if name in self.config.models:
            return name
        embedded = isinstance(name, str) and is_embedded_model(name)
        return next((model for model in self.config.models if embedded and is_embedded_model(model)), None)

    def _engine_key(self, metric: Metric, options: dict, check: bool = True) -> tuple:
        """The request's engine options that differ from the defaults, sorted; values checked
        against what the server loaded (``RequestOption.among``; ``check=False``: while loading
        it)."""
        model = self._served_model(options.get("model")) or self.default_model
        key = []
        for option in metric.request_options:
            value = options.get(option.name, option.default)
            if option.per_request or value is None or value == option.default:
                continue
            if option.among == "models":
                value = self._served_model(value)
                if value is None:
                    raise _field_error(option.name, f"{options[option.name]!r} is not served here; the served "
                                                    f"models: {list(self.config.models)}")
                if value == self.default_model:
                    continue
            elif option.among == "layers" and check:
                layers = self._layers.get(model) or []
                if value not in layers:
                    raise _field_error(option.name, f"{value!r} is not a layer served for {model!r}; served: "
                                                    f"{layers} (rapidscore serve --layer)")
                if value == layers[0]:
                    continue
            elif option.among == "idf_files" and value not in self.config.idf_files():
                raise _field_error(option.name, f"{value!r} is not an idf file this server loaded; loaded: "
                                                f"{sorted(self.config.idf_files())} (rapidscore serve --idf-file)")
            key.append((option.name, value))
        return tuple(sorted(key))

    def _build(self, metric: Metric, options: dict) -> BatchingScorer:
        try:
            engine = metric.serve_engine(self, options, self.config.encoder_options)
            solo_options = self.encoder_options(solo=True) if metric.takes_solo else None
            solo = None if solo_options is None else metric.serve_engine(self, options, solo_options)
        except (ValueError, TypeError, OSError) as exc:
            if getattr(exc, "field", None) is not None or not options:
                raise
            name = next(iter(options))
            raise _field_error(name, str(exc)) from None
        return BatchingScorer(engine, solo=solo, metric=metric.name, **self._limits)

    # -- start, stop ----------------------------------------------------------------------------

    def start(self) -> None:
        """Load every served metric's engines (each served model and layer) and warm them up
        (blocking); sets ``ready``."""
        try:
            for metric in self.served.values():
                for options in self._preloads(metric):
                    key = (metric.name, self._engine_key(metric, options, check=False))
                    self._preloaded.add(key)
                    scorer = self._scorer_for(metric, key)
                    layer = getattr(scorer.scorer, "layer", None)
                    model = options.get("model") or self.default_model
                    if any(o.among == "layers" for o in metric.request_options) and isinstance(layer, int) \
                            and layer not in self._layers.setdefault(model, []):
                        self._layers[model].append(layer)
                    if self.config.warmup:  # first calls make sessions and allocate buffers
                        metric.serve_warm_up(self, scorer)
        except BaseException as exc:
            self.load_error = exc
            raise
        self.ready.set()

    def _preloads(self, metric: Metric) -> list[dict]:
        """The engine options loaded at start: each served model (and each served layer of it)
        for a metric whose requests choose among them; else the defaults."""
        among = {option.among: option.name for option in metric.request_options if option.among}
        models = self.config.models if "models" in among else (None,)
        layers = self.config.layers if "layers" in among else (None,)
        preloads = []
        for model in models:
            for layer in layers:
                options: dict[str, Any] = {}
                if model is not None and model != self.default_model:
                    options[among["models"]] = model
                if layer is not None and layer != layers[0]:  # the first served layer is the default
                    options[among["layers"]] = layer
                preloads.append(options)
        return preloads

    def start_in_background(self) -> threading.Thread:
        """``start`` in a daemon thread (the server answers /health with 503 meanwhile)."""
        thread = threading.Thread(target=self._start_quietly, name="rapidscore-warmup", daemon=True)
        thread.start()
        return thread

    def _start_quietly(self) -> None:
        with contextlib.suppress(BaseException):  # kept in load_error, reported by /health
            self.start()

    def render_metrics(self) -> str:
        stats = self.batcher.stats()
        return self.metrics.render(queue_depth=stats.queue_depth, max_queue=self.batcher.max_queue,
                                   rejected=stats.rejected, dropped=stats.dropped, ready=self.ready.is_set())

    def close(self, *, drain: bool = True, timeout: float | None = None) -> None:
        """Stop taking requests; answer the queued ones (unless ``drain=False``)."""
        self.batcher.close(drain=drain, timeout=timeout)


def _field_error(field: str, message: str) -> ValueError:
    """A ValueError ``"FIELD: message"`` whose ``field`` names the request field (the HTTP layer
    answers 400 naming it)."""
    error = ValueError(f"{field}: {message}")
    setattr(error, "field", field)  # noqa: B010 - read by the HTTP layer with getattr
    return error


def characters_over(value: Any, limit: int) -> bool:
    """Whether the strings in ``value`` (nested lists, tuples and dicts) hold more than ``limit``
    characters; stops counting once they do."""
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item)
            if total > limit:
                return True
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return False


async def submit_request(submit: Any, *args: Any, **kwargs: Any) -> Future:
    """``submit(*args, **kwargs)`` from a coroutine: inline for a small request, in a thread for
    one whose texts hold more than OFFLOAD_CHARACTERS characters (validating and tokenising it
    would hold the event loop). A caller cancelled meanwhile (its client left) has the request
    cancelled once it is queued."""
    if not characters_over(args, OFFLOAD_CHARACTERS):
        return submit(*args, **kwargs)
    preparing = asyncio.ensure_future(asyncio.to_thread(submit, *args, **kwargs))
    try:
        return await asyncio.shield(preparing)
    except asyncio.CancelledError:
        preparing.add_done_callback(
            lambda done: None if done.cancelled() or done.exception() is not None else done.result().cancel())
        raise
