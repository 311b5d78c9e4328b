"""The scoring service behind the HTTP server, without the web framework: the served metrics'
engines loaded once, one table of scorers, one micro-batching queue for every metric, warm-up,
metrics and shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any

from rapidscore.common.metric import (
    Metric,
    Option,
    Settings,
    field_error,
    frozen_value,
    request_options,
    server_settings,
)
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
    one table of scorers, keyed by the metric and the :class:`~rapidscore.common.metric.Settings`
    its engine was built with (so the key cannot disagree with the engine).

    A request's options become the metric's settings generically: a request option left out
    takes the server setting it names (``Option.server``), an option naming one of a server
    setting's values (``Option.among``: a served model by any spelling, a file by its name) is
    checked against what the server loaded, and the metric's own server settings go in as they
    are; ``metric.settings(**values)`` resolves them once.

    ``start()`` loads the models (each served combination of the values requests choose among,
    e.g. each served model and layer) and warms them up with each metric's example row (``front_ends.example``)
    (``ready`` is set after); ``close()`` stops taking requests and answers every queued one.
    Thread-safe: the HTTP handlers of any number of threads or event loops call it at once.
    """

    def __init__(self, config: ServeConfig | None = None):
        from rapidscore.metrics import all_metrics, get_metric

        self.config = config or ServeConfig()
        self.metrics = ServerMetrics()
        self.ready = threading.Event()
        # run once the engines are loaded and warm, before ``ready`` (the process's own settings
        # add to it: serve/process_tuning.py)
        self.before_ready: list[Callable[[], None]] = []
        self.load_error: BaseException | None = None
        self.batcher = MicroBatcher(batch_tokens=self.config.batch_tokens,
                                    max_batch_requests=self.config.max_batch_requests,
                                    max_queue=self.config.max_queue, workers=self.config.workers,
                                    on_batch=self.metrics.observe_batch)
        served = [get_metric(name) for name in self.config.metrics] if self.config.metrics else all_metrics()
        #: the served metrics by name
        self.served: dict[str, Metric] = {metric.name: metric for metric in served}
        #: every name a request path may use (names and aliases) -> its metric
        self.paths: dict[str, Metric] = {alias: metric for metric in served
                                         for alias in (metric.name, *metric.front_ends.aliases)}
        # the one table of scorers: (metric name, settings) -> scorer; preloaded ones stay, the
        # others are an LRU of MAX_ENGINE_VARIANTS
        self._scorers: OrderedDict[tuple, BatchingScorer] = OrderedDict()
        self._preloaded: set[tuple] = set()
        self._scorers_lock = threading.Lock()
        self._building: dict[tuple, threading.Lock] = {}
        # a request's options -> its settings (resolving may read a file): the latest few
        self._settings: OrderedDict[tuple, Settings] = OrderedDict()
        self._limits: dict[str, Any] = dict(batcher=self.batcher, max_request_texts=self.config.max_texts,
                                            max_request_tokens=self.config.max_tokens)

    def setting(self, name: str) -> Any:
        """The value of a server setting (the server's own, or a metric's)."""
        return self.config.setting(name)

    # -- a request's options -> the metric's settings -------------------------------------------

    def settings(self, metric: str | Metric, options: Mapping[str, Any], *, solo: bool = False) -> Settings:
        """The settings of the engine that scores a request with ``options`` (its request
        options; per-request ones are left to the task). A value the server cannot apply (a
        model it does not serve, a file it did not load) is a ValueError whose ``field`` names
        the option. ``solo``: the settings of the engine of lone batches."""
        metric = self.served[metric] if isinstance(metric, str) else metric
        asked = tuple((option.name, frozen_value(options.get(option.name, option.default)))
                      for option in request_options(metric) if not option.per_request)
        memo = (metric.name, asked, solo)
        with self._scorers_lock:
            known = self._settings.get(memo)
        if known is not None:
            return known
        settings = self._resolve(metric, options, solo)
        with self._scorers_lock:
            self._settings[memo] = settings
            while len(self._settings) > 4 * MAX_ENGINE_VARIANTS:
                self._settings.popitem(last=False)
        return settings

    def _resolve(self, metric: Metric, options: Mapping[str, Any], solo: bool) -> Settings:
        values: dict[str, Any] = {}
        given = [option.name for option in request_options(metric) if not option.per_request
                 and options.get(option.name) is not None and options.get(option.name) != option.default]
        for option in metric.options:
            if option.per_request or option.start or not (option.request or option.server):
                continue
            value = options.get(option.name, option.default) if option.request else None
            if option.among is not None:
                value = self._among(option, value)
            elif value is None and option.server is not None:
                value = self.config.server_value(option.server, solo)
            values[option.name] = value
        named = {option.server for option in metric.options} | {option.among for option in metric.options}
        values.update((setting.name, self.config.setting(setting.name)) for setting in server_settings(metric)
                      if setting.name not in named)
        try:
            return metric.settings(**values)
        except (ValueError, TypeError, OSError) as exc:
            raise _naming(exc, given) from None

    def _among(self, option: Option, value: Any) -> Any:
        """The server's value that ``value`` names; where None, the first of the server's values
        (the default model, layer), or none of a table of files."""
        served = self.config.values(option.among or "")
        if value is None:
            return None if not served or self.config.is_file_table(option.among or "") else served[0]
        found = self.config.named(option.among or "", value)
        if found is None:
            raise field_error(option.name, self.config.not_served(option.among or "", value))
        return found

    # -- the table of scorers -----------------------------------------------------------------

    def scorer(self, metric: str | Metric, **options: Any) -> BatchingScorer:
        """The scorer of ``metric`` under a request's options (its
        :attr:`~rapidscore.common.metric.Metric.options` a request may set; per-request ones are
        ignored here): a preloaded one, or one built on first use and kept (at most
        MAX_ENGINE_VARIANTS). A value the server cannot apply is a ValueError whose ``field``
        names the option."""
        metric = self.served[metric] if isinstance(metric, str) else metric
        settings = self.settings(metric, options)
        return self._scorer_for(metric, (metric.name, settings), options)

    def built_scorer(self, metric: Metric, **options: Any) -> BatchingScorer | None:
        """:meth:`scorer` when it is built already (None otherwise: building may take a while);
        a value the server cannot apply raises as there."""
        key = (metric.name, self.settings(metric, options))
        with self._scorers_lock:
            scorer = self._scorers.get(key)
            if scorer is not None:
                self._scorers.move_to_end(key)
            return scorer

    def _scorer_for(self, metric: Metric, key: tuple, options: Mapping[str, Any]) -> BatchingScorer:
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
                scorer = self._build(metric, key[1], options)
                with self._scorers_lock:
                    self._scorers[key] = scorer
                    self._building.pop(key, None)
                    variants = [k for k in self._scorers if k not in self._preloaded]
                    for old in variants[:max(0, len(variants) - MAX_ENGINE_VARIANTS)]:
                        del self._scorers[old]
        return scorer

    def _build(self, metric: Metric, settings: Settings, options: Mapping[str, Any]) -> BatchingScorer:
        given = [option.name for option in request_options(metric) if not option.per_request
                 and options.get(option.name) is not None and options.get(option.name) != option.default]
        try:
            engine = metric.build(**settings)
            solo = None
            if metric.front_ends.takes_solo and self.config.solo_encoder_options is not None:
                solo = metric.build(**self.settings(metric, options, solo=True))
        except (ValueError, TypeError, OSError) as exc:
            raise _naming(exc, given) from None
        return BatchingScorer(engine, solo=solo, metric=metric.name, **self._limits)

    # -- a request through its scorer ------------------------------------------------------------

    def task_arguments(self, metric: Metric, columns: Mapping[str, Any],
                       options: Mapping[str, Any]) -> tuple[tuple, dict]:
        """The arguments of the metric's task for one request: each required input column in
        declared order, an optional one by its request field, and each per-request option (a
        value left out takes the server setting it names)."""
        args = tuple(columns[column.name] for column in metric.inputs if not column.optional)
        kwargs = {column.field: columns[column.name] for column in metric.inputs
                  if column.optional and columns.get(column.name) is not None}
        for option in request_options(metric):
            if option.per_request:
                value = options.get(option.name, option.default)
                if value is None and option.server is not None:
                    value = self.config.server_value(option.server)
                kwargs[option.name] = value
        return args, kwargs

    def response(self, metric: Metric, result: Any, scorer: BatchingScorer, settings: Settings) -> dict:
        """The JSON document of a request's result: each declared response field (default: each
        output column and ``signature``), read from the result (a key, an attribute; a bare
        column is a one-output metric's), else the engine's settings, else the signature."""
        fields = metric.front_ends.response_fields or {**dict.fromkeys(metric.outputs), "signature": str}
        document: dict[str, Any] = {}
        for name in fields:
            if isinstance(result, Mapping):
                value = result.get(name, _MISSING)
            else:
                value = getattr(result, name, _MISSING)
                if value is _MISSING and metric.outputs == (name,):
                    value = result
            if value is _MISSING and name in settings:
                value = settings[name]
            if value is _MISSING and name == "signature":
                value = metric.signature(scorer.scorer)
            if value is not _MISSING:
                document[name] = value.tolist() if hasattr(value, "tolist") else value
        return document

    # -- start, stop ----------------------------------------------------------------------------

    def start(self) -> None:
        """Load every served metric's engines (each served combination of the values its
        requests choose among) and warm them up (blocking); sets ``ready``."""
        try:
            for metric in self.served.values():
                for options in self._preloads(metric):
                    settings = self.settings(metric, options)
                    key = (metric.name, settings)
                    self._preloaded.add(key)
                    scorer = self._scorer_for(metric, key, options)
                    example = metric.front_ends.example
                    if self.config.warmup and example is not None:  # sessions made, buffers allocated
                        columns = {column.name: [value] for column, value in zip(metric.inputs, example)}
                        args, kwargs = self.task_arguments(metric, columns, {})
                        scorer.warm_up(*args, **kwargs)
            for step in self.before_ready:
                step()
        except BaseException as exc:
            self.load_error = exc
            raise
        self.ready.set()

    def _preloads(self, metric: Metric) -> list[dict]:
        """The request options loaded at start: each combination of the served values of the
        options a request chooses among (a table of files is loaded on first use)."""
        choices = [option for option in request_options(metric)
                   if option.among is not None and not self.config.is_file_table(option.among)]
        return [dict(zip([option.name for option in choices], values))
                for values in itertools.product(*(self.config.values(option.among or "") for option in choices))]

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


_MISSING = object()


def _naming(exc: BaseException, given: list[str]) -> BaseException:
    """``exc`` as it is where it names a field, else as a field error naming the first option
    the request set (None of them: ``exc`` as it is)."""
    if getattr(exc, "field", None) is not None or not given:
        return exc
    return field_error(given[0], str(exc))


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
