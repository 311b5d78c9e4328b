"""The scoring service behind the HTTP server, without the web framework: the models loaded once,
one micro-batching queue for every metric, warm-up, metrics and shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from concurrent.futures import Future
from typing import Any

from rapidscore.serve.batching import BatchingScorer, MicroBatcher
from rapidscore.serve.config import ServeConfig
from rapidscore.serve.metrics import ServerMetrics

__all__ = ["ScoringService", "submit_request"]

# Requests whose texts hold more characters are validated and tokenised in a thread, not in the
# event loop: 5,400 references (64,522 tokens, the most max_tokens allows) took 0.19 s to
# tokenise, during which no other connection was served. Smaller ones stay inline (no thread hop).
OFFLOAD_CHARACTERS = 16_384

_WARMUP_PAIR = (["The cat sat on the mat."], ["A cat was sitting on the mat."])


class ScoringService:
    """BERTScore, similarity/NRR, NER and refusal detection behind one :class:`MicroBatcher`.

    ``start()`` loads the models and warms them up (``ready`` is set after); ``close()`` stops
    taking requests and answers every queued one. Thread-safe: the HTTP handlers of any number of
    threads or event loops call it at once.
    """

    def __init__(self, config: ServeConfig | None = None):
        self.config = config or ServeConfig()
        self.metrics = ServerMetrics()
        self.ready = threading.Event()
        self.load_error: BaseException | None = None
        # Encoder options of the metrics the workers run whole (NER labels, the embedding refusal
        # detector): every call through the unpadded graph, which the batched scorers run too, so
        # the workers never make the padded graph's session (a second copy of the weights: 90 MB
        # for MiniLM, 1.4 GB for roberta-large).
        self._unpadded_options = dict(self.config.encoder_options, unpadded=True)
        self.batcher = MicroBatcher(batch_tokens=self.config.batch_tokens,
                                    max_batch_requests=self.config.max_batch_requests,
                                    max_queue=self.config.max_queue, workers=self.config.workers,
                                    on_batch=self.metrics.observe_batch)
        self.bertscore: BatchingScorer | None = None
        # BERTScore under a request's options (idf, rescaling): one scorer per setting, made on
        # first use over the loaded model; the settings are few (boolean options)
        self._bertscore_variants: dict[tuple, BatchingScorer] = {}
        self._variants_lock = threading.Lock()
        self._bertscore_factory: Any = None
        self.similarity: BatchingScorer | None = None
        self.refusal: BatchingScorer | None = None
        # the other registered metrics of config.metrics, by name, at POST /v1/{name}
        self.others: dict[str, BatchingScorer] = {}

    def start(self) -> None:
        """Load the models and warm them up (blocking); sets ``ready``."""
        from rapidscore.abstention.detectors import get_detector
        from rapidscore.bertscore import BERTScore
        from rapidscore.encoder.model_source import DEFAULT_MODEL
        from rapidscore.metrics import get_metric
        from rapidscore.nrr.scoring import SentenceSimilarity

        config = self.config
        try:
            model = config.model or DEFAULT_MODEL
            solo_options = config.solo_encoder_options

            def bertscore(options: dict | None) -> BERTScore | None:
                return None if options is None else BERTScore(model, config.layer, long_texts=config.long_texts,
                                                              **options)

            def similarity(options: dict | None) -> SentenceSimilarity | None:
                return None if options is None else SentenceSimilarity(model, config.similarity_method, **options)

            # Every request within the texts and tokens limits (413 beyond); larger than a batch,
            # it is encoded in pieces between other requests' batches.
            limits: dict[str, Any] = dict(batcher=self.batcher, max_request_texts=config.max_texts,
                          max_request_tokens=config.max_tokens)
            self.bertscore = BatchingScorer(bertscore(config.encoder_options), solo=bertscore(solo_options), **limits)

            def bertscore_variant(request_options: dict) -> BatchingScorer:
                def make(options: dict | None) -> BERTScore | None:
                    if options is None:
                        return None
                    extra = dict(request_options)
                    if extra.get("rescale_with_baseline"):
                        extra["lang"] = "en"  # the baseline's language; the model stays the server's
                    return BERTScore(model, config.layer, long_texts=config.long_texts, **extra, **options)

                return BatchingScorer(make(config.encoder_options), solo=make(solo_options), **limits)

            self._bertscore_factory = bertscore_variant
            self.similarity = BatchingScorer(similarity(config.encoder_options), solo=similarity(solo_options),
                                             **limits)
            detector_options = {}
            if config.refusal_method == "embedding":
                detector_options = dict(model=config.model, **self._unpadded_options)  # the engine keywords
            self.refusal = BatchingScorer(get_detector(config.refusal_method, **detector_options), **limits)
            for name in config.metrics:
                self.others[name] = BatchingScorer(get_metric(name).build(), metric=name, **limits)
            if config.warmup:  # first calls make sessions and allocate buffers: not on the first requests
                self.bertscore.warm_up(*_WARMUP_PAIR)
                self.similarity.warm_up(*_WARMUP_PAIR, threshold=config.similarity_threshold)
                self.refusal.warm_up(["I'm sorry, I can't help with that."], repeats=1)
                if config.ner_label_similarity == "embedding":
                    self.ner([{"id": 0, "text": "Ada Lovelace", "labels": [[0, 3, "PER"]]}],
                             [{"id": 0, "text": "Ada Lovelace", "labels": [[0, 12, "person"]]}]).result()
        except BaseException as exc:
            self.load_error = exc
            raise
        self.ready.set()

    def start_in_background(self) -> threading.Thread:
        """``start`` in a daemon thread (the server answers /health with 503 meanwhile)."""
        thread = threading.Thread(target=self._start_quietly, name="rapidscore-warmup", daemon=True)
        thread.start()
        return thread

    def _start_quietly(self) -> None:
        with contextlib.suppress(BaseException):  # kept in load_error, reported by /health
            self.start()

    def bertscore_with(self, **options: Any) -> BatchingScorer:
        """The BERTScore scorer of a request's options (``BERTScoreMetric.request_options``): the
        server's own where each is at its default, else one per setting, made on first use (over
        the loaded model: get_encoder shares it) and kept. An option this server cannot apply (no
        baseline for its model) is a ValueError whose ``field`` names it."""
        from rapidscore.bertscore.metric import METRIC

        defaults = {option.name: option.default for option in METRIC.request_options}
        key = tuple(sorted((name, value) for name, value in options.items() if value != defaults[name]))
        assert self.bertscore is not None and self._bertscore_factory is not None  # set once ready
        if not key:
            return self.bertscore
        with self._variants_lock:
            scorer = self._bertscore_variants.get(key)
            if scorer is None:
                try:
                    scorer = self._bertscore_variants[key] = self._bertscore_factory(dict(key))
                except (ValueError, OSError) as exc:  # no baseline: the one option that can fail to build
                    field = "rescale_with_baseline" if dict(key).get("rescale_with_baseline") else key[0][0]
                    error = ValueError(f"{field}: {exc}")
                    setattr(error, "field", field)  # noqa: B010 - read by the HTTP layer with getattr
                    raise error from None
        return scorer

    def ner(self, gold: Any, predictions: Any, **options: Any) -> Future:
        """DMBertA and SemEval scores (``rapidscore.ner.evaluate``), run in the worker in queue
        order. Each request embeds its own labels (a per-request label cache keeps memory bounded
        by the request, not by every label ever seen)."""
        options.setdefault("label_similarity", self.config.ner_label_similarity)
        options.setdefault("label_model", self.config.model)
        for key, value in self._unpadded_options.items():  # the label encoder's engine keywords
            options.setdefault(key, value)
        n_entities = sum(len(item) if hasattr(item, "__len__") else 1 for item in (*gold, *predictions))
        return self.batcher.call(evaluate_naming_the_field, gold, predictions, tokens=max(1, 4 * n_entities),
                                 **options)

    def render_metrics(self) -> str:
        stats = self.batcher.stats()
        return self.metrics.render(queue_depth=stats.queue_depth, max_queue=self.batcher.max_queue,
                                   rejected=stats.rejected, dropped=stats.dropped, ready=self.ready.is_set())

    def close(self, *, drain: bool = True, timeout: float | None = None) -> None:
        """Stop taking requests; answer the queued ones (unless ``drain=False``)."""
        self.batcher.close(drain=drain, timeout=timeout)


def evaluate_naming_the_field(gold: Any, predictions: Any, **options: Any) -> Any:
    """``rapidscore.ner.evaluate``; bad input raises ValueError/TypeError whose message starts with
    the request's field at fault (``gold[3]``, ``predictions``) and whose ``field`` attribute
    names it, for the HTTP answer. The field is found only after a failure (each side is
    converted again, record by record), so valid requests pay nothing for it."""
    from rapidscore.ner.evaluation import evaluate

    try:
        return evaluate(gold, predictions, **options)
    except (ValueError, TypeError, OverflowError) as exc:
        field = _ner_field_at_fault(gold, predictions, options)
        if field is None:
            raise
        message = str(exc) if str(exc).startswith(field) else f"{field}: {exc}"
        error: Exception = (TypeError if isinstance(exc, TypeError) else ValueError)(message)
        setattr(error, "field", field)  # noqa: B010 - read by the HTTP layer with getattr
        raise error from exc


def _ner_field_at_fault(gold: Any, predictions: Any, options: dict) -> str | None:
    """The first side, or record of a side, that fails to convert on its own, or ``predictions``
    when they do not join the gold records (None: neither)."""
    from rapidscore.ner.evaluation import prepare
    from rapidscore.ner.records import join_by_id, to_records

    texts = options.get("texts")
    if texts is not None and (not isinstance(gold, list) or len(texts) != len(gold)):
        return "texts"
    entity_format = options.get("format", "auto")
    sides = []
    for side, data, side_format in (("gold", gold, options.get("gold_format") or entity_format),
                                    ("predictions", predictions, entity_format)):
        try:
            records = to_records(data, texts=texts, source=side)
        except (ValueError, TypeError, OverflowError):
            return side
        for record in records:
            try:
                prepare([record], texts=[record.text], format=side_format)
            except (ValueError, TypeError, OverflowError):
                return record.where
        sides.append(records)
    try:
        join_by_id(sides[0], sides[1], "model")  # ids and texts of the predictions against the gold's
    except (ValueError, TypeError):
        return "predictions"
    return None


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
