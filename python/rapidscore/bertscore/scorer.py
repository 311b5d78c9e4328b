"""The BERTScore engine, in three phases that callers may run one by one.

1. ``plan``: validate the inputs once, strip, deduplicate once, and list the (candidate,
   reference) pairs as indices into the unique sentences (:class:`ScoringPlan`).
2. ``encode``: run the encoder over the plan's sentences into a :class:`TokenStore` (on the host,
   or on the model's device).
3. ``finish``: token weights (idf), greedy matching (dispatched on where the store lives), the best
   reference per candidate, baseline rescaling; a :class:`BERTScoreResult` on the host
   (the functions of ``rapidscore.bertscore.finishing``, shared with the device engine).

``score`` runs the three. A micro-batching service merges plans before encoding, a streaming
scorer runs the phases per chunk, a Ray worker per block.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from rapidscore._version import __version__
from rapidscore.bertscore import baselines as _baselines
from rapidscore.bertscore import settings as _settings
from rapidscore.bertscore.finishing import (
    FinishingOptions,
    call_idf,
    empty_pairs,
    finish_result,
    match_store,
    store_weights,
    warn_uniform,
)
from rapidscore.bertscore.idf import DocumentFrequencies
from rapidscore.bertscore.idf_source import IdfSource
from rapidscore.bertscore.plan import ScoringPlan, make_plan
from rapidscore.bertscore.result import BERTScoreResult
from rapidscore.bertscore.settings import BERTScoreSettings, build_bertscore_signature
from rapidscore.bertscore.streaming import PairScore
from rapidscore.common.inputs import normalize_inputs
from rapidscore.common.signature import package_version
from rapidscore.encoder.store import TokenStore
from rapidscore.errors import check_positive_int

if TYPE_CHECKING:
    from rapidscore.encoder import Encoder

__all__ = ["BERTScore", "BERTScoreResult", "ScoringPlan", "score", "normalize_inputs"]

# Whether device_engine=None picks the device engine for backend="torch" on the CPU: no, the
# C++ kernel on host arrays measured faster there (docs/architecture.md, "The device engine").
DEVICE_ENGINE_ON_CPU = False


class BERTScore:
    """A reusable BERTScore scorer: loads the model once, scores many batches.

    Parameters mirror bert-score's BERTScorer: ``model`` (hub id or directory; default from
    ``lang`` via the reference's table, else the embedded all-MiniLM-L6-v2), ``layer`` (the
    reference's ``num_layers``; default its tuned layer, or the model's last layer for models the
    table does not list), ``idf`` (False; True: from each call's references; a dict token id ->
    weight; an idf file path, str or ``os.PathLike``, or a ``DocumentFrequencies``: those document
    counts, as ``score_iter(idf=)`` and the CLI's ``--idf-file`` weigh; the signature records
    which, ``rapidscore.bertscore.idf_source``), ``idf_sents``,
    ``rescale_with_baseline`` + ``lang`` or ``baseline_path``, ``all_layers``. Engine options:
    ``backend``, ``device``, ``precision``, ``batch_tokens``, ``num_threads``, ``progress``, and
    ``device_engine``: with ``backend="torch"``, True keeps the token embeddings on the model's
    device from the model's output to P/R/F and scores the call in chunks under a token budget
    (``rapidscore.device.engine``); False copies them to the host for the C++ kernel.
    None (default): the device engine on a GPU, the C++ kernel on the CPU (faster there,
    measured in docs/architecture.md). ONNX Runtime on CUDA with torch installed hands over torch
    tensors too (IOBinding) and takes the same engine; True where the runner returns host arrays
    is a ValueError.

    ``reference_empty_rule``: False (default) scores a sentence with no token besides the ones
    that frame it ([CLS], [SEP], <s>, </s>, padding) as empty (P = R = F = 0). True takes
    bert-score's test instead, exactly two tokens: the same for tokenizers that frame a text with
    two tokens, but with one (T5, Pegasus, Blenderbot: only </s>) bert-score zeroes one-token
    texts and not empty ones. The drop-in ``rapidscore.bert_score`` passes True.
    ``long_texts``: "truncate" (the default, as bert-score: texts beyond the model's maximum
    length are cut there, counted in ``details["truncated"]`` with a TruncationWarning) or
    "window": such texts are embedded whole, in overlapping windows of the maximum length, each
    token from the window where it sits furthest from a cut (``rapidscore.encoder.tokens.windows``;
    docs/bertscore.md, "Long texts"), then matched over all their tokens. Texts within the
    maximum length score exactly as with "truncate". ``details["windowed"]`` and
    ``details["windows"]`` count the windowed texts and their windows; the signature records
    ``long_texts:window``. None: the given ``encoder``'s setting, else "truncate". Memory:
    truncation keeps a text's tokenisation in proportion to the maximum length, whatever its
    size (``rapidscore.encoder.tokens.bounded``); a windowed text keeps every token, so "window" refuses
    texts over ``windows.MAX_WINDOW_TEXT_CHARS`` (1,048,576) characters with a ValueError naming
    them (``cands[i]``, ``refs[i][j]``).

    The encoder comes from ``rapidscore.get_encoder``: scorers of the same model and settings
    share one loaded model. Thread-safe: many threads may call ``score`` (or the phases) on one
    scorer at once and get exactly the results of sequential calls; ``compute_idf`` replaces the
    idf weights for calls that start after it.
    """

    def __init__(self, model: str | os.PathLike | None = None, layer: int | None = None, *, lang: str | None = None,
                 idf: bool | dict | str | os.PathLike | DocumentFrequencies | IdfSource = False,
                 idf_sents: Sequence[str] | None = None,
                 rescale_with_baseline: bool = False, baseline_path: str | os.PathLike | None = None,
                 all_layers: bool = False, use_fast_tokenizer: bool = False, backend: str | None = None,
                 device: str = "cpu", precision: str = "fp32", batch_tokens: int | None = None,
                 num_threads: int | None = None, progress: bool = False, cache_dir=None, encoder=None,
                 device_engine: bool | None = None, long_texts: str | None = None,
                 reference_empty_rule: bool = False):
        settings = _settings.resolve_settings(  # looked up at the call: tests count the calls
            model, layer, lang=lang, idf=idf, idf_sents=idf_sents, rescale_with_baseline=rescale_with_baseline,
            baseline_path=baseline_path, all_layers=all_layers, use_fast_tokenizer=use_fast_tokenizer,
            backend=backend, device=device, precision=precision, long_texts=long_texts,
            reference_empty_rule=reference_empty_rule, device_engine=device_engine, progress=progress,
            encoder=encoder, batch_tokens=batch_tokens, num_threads=num_threads, cache_dir=cache_dir)
        self._setup(settings, encoder)

    @classmethod
    def from_settings(cls, settings: BERTScoreSettings, *, encoder: Encoder | None = None) -> BERTScore:
        """The scorer of resolved ``settings`` (``rapidscore.bertscore.settings.resolve_settings``),
        resolving nothing again. ``encoder``: the one to score with (default: the process's shared
        encoder of ``settings.encoder``); one that runs other settings is a ValueError naming the
        first that differs (resolve the settings with ``encoder=``)."""
        scorer = cls.__new__(cls)
        cls._setup(scorer, settings, encoder)
        return scorer

    def _setup(self, settings: BERTScoreSettings, encoder: Encoder | None) -> None:
        from rapidscore.encoder import get_encoder
        from rapidscore.encoder.settings import check_encoder_runs

        if encoder is not None:  # the signature describes what runs: settings made without it are refused
            check_encoder_runs(encoder, settings.encoder)
        self.settings = settings
        # the process-wide cache: one loaded model per setting, keyed by the encoder's settings
        self.encoder = get_encoder(settings.encoder) if encoder is None else encoder
        self.model_name = settings.model
        self.long_texts = settings.long_texts
        self.reference_empty_rule = settings.reference_empty_rule
        self.device_engine = self._choose_engine(settings.device_engine)
        self.progress = settings.progress
        self.layer = settings.layer
        self.all_layers = settings.all_layers
        self.lang = settings.lang
        idf_source = settings.idf
        # the reference's attribute: the dict, else whether tokens are weighted (an idf file: True)
        self.idf: bool | dict = idf_source.table if idf_source.table is not None else idf_source.enabled
        self.use_fast_tokenizer = settings.use_fast_tokenizer
        self.rescale_with_baseline = settings.rescale_with_baseline
        self.use_custom_baseline = settings.custom_baseline
        self.num_threads = settings.encoder.option("num_threads")
        spec = self.encoder.spec
        self._cls_sep = tuple(i for i in (spec.cls_id, spec.sep_id) if i is not None)
        # The tokens a tokenizer frames every text with ([CLS] [SEP]; </s> for T5; </s> en_XX for
        # mBART): what an empty text tokenizes to. A sentence with no more tokens is empty.
        self._framing_length = len(self.encoder.tokenize([""])[0])
        # (source, its weights), replaced together by compute_idf: a call reads one consistent pair
        self._idf: tuple[IdfSource, dict | None] = (idf_source, idf_source.weights())
        sentences = idf_source.sentences if idf_source.kind == "sentences" else settings.idf_sents
        if sentences is not None:
            self.compute_idf(sentences)
        self.baseline_path = settings.baseline_path
        self._baseline = None
        if settings.rescale_with_baseline:
            assert settings.baseline_path is not None  # resolve_settings gives rescaling its file
            table = _baselines.read_baseline(settings.baseline_path)
            self._baseline = (
                _baselines.baseline_for_all_layers(table, self.encoder.num_layers + 1, settings.baseline_path)
                if settings.all_layers else _baselines.baseline_for_layer(table, self.layer, settings.baseline_path))

    def _choose_engine(self, requested: bool | None) -> bool:
        runs_torch = getattr(self.encoder, "runs_torch", False)
        if requested is None:
            return runs_torch and (self.encoder.device != "cpu" or DEVICE_ENGINE_ON_CPU)
        if not isinstance(requested, bool):
            raise TypeError(f"device_engine must be True, False or None, got {requested!r}")
        if requested and not runs_torch:
            raise ValueError("device_engine=True needs a runner that returns torch tensors (backend='torch', "
                             f"or 'onnx' on CUDA with torch installed), got backend={self.encoder.backend!r} "
                             f"on {self.encoder.device!r}")
        return requested

    def warm_up(self) -> None:
        """Run one short pair through every stage (model, kernels, allocator; on a GPU the CUDA
        context and its kernels), so that the first real call is not the slow one. On CUDA the
        torch runner's small-batch CUDA graphs are captured first, every bucket up to the
        encoder's ``max_length`` (``rapidscore.device.cuda_graphs``; seconds, once)."""
        from rapidscore.device.cuda_graphs import warm_up_graphs

        warm_up_graphs(self.encoder)
        self.score(["warm up"], ["warming up"])

    # -- idf ----------------------------------------------------------------------------------

    def compute_idf(self, sents: Sequence[str]) -> dict:
        """Compute (and keep) idf weights from ``sents``, as the reference's compute_idf."""
        from rapidscore.encoder import check_texts

        sents = check_texts(sents, "idf_sents")
        counts = DocumentFrequencies(tokenizer=self.model_name).add(self.encoder.tokenize([s.strip() for s in sents]))
        weights = counts.idf()
        source = self._idf[0]
        # without idf (idf=False) the weights are kept, as the reference keeps them, and not used
        self._idf = (IdfSource("sentences", counts=counts) if source.enabled else source, weights)
        return weights

    @property
    def idf_dict(self) -> dict | None:
        return self._idf[1]

    @property
    def idf_source(self) -> IdfSource:
        """Which idf weights this scorer's calls use (``rapidscore.bertscore.idf_source``)."""
        return self._idf[0]

    # -- signature ----------------------------------------------------------------------------

    @property
    def signature(self) -> str:
        """Reproducibility signature in the spirit of sacrebleu's."""
        return self.signature_with(self._idf[0])

    def signature_with(self, idf_source: IdfSource, *, uniform: bool = False) -> str:
        """The signature of a call that weighs by ``idf_source`` (a stream's, an idf file given
        to ``score_iter``) instead of the scorer's own; ``uniform``: some of its sentences fell
        back to uniform weights (the idf field then ends in ``+uniform``)."""
        idf_field = idf_source.signature_value + ("+uniform" if uniform else "")
        return build_bertscore_signature(self.settings, idf_field, max_length=self.encoder.max_length,
                                         precision=self.encoder.precision, backend=self.encoder.backend,
                                         device=self.encoder.device)

    @property
    def hash(self) -> str:
        """The reference's hash format, naming rapidscore's version."""
        return reference_hash(self.model_name, self.layer, bool(self.idf), self.rescale_with_baseline,
                              self.use_custom_baseline, self.use_fast_tokenizer, self.encoder.precision)

    # -- scoring ------------------------------------------------------------------------------

    def score(self, cands: Sequence[str], refs, *, rescale: bool | None = None,
              reference_batch_size: int | None = None) -> BERTScoreResult:
        """Score candidates against one reference each, or several (best P, R, F independently).

        ``cands`` and ``refs`` may be lists, tuples, numpy string arrays, pandas Series or pyarrow
        arrays; a reference may be a string or a list of strings.

        Sentences are stripped. A candidate or reference that is empty (no token besides the
        special ones) scores P = R = F = 0 (before rescaling). Never NaN.

        ``reference_batch_size``: None (default) takes each token's best match over the other
        sentence's real tokens. An int B reproduces bert-score's result digit for digit, padding
        artefact included: bert-score matches pairs in batches of B (its ``batch_size``) padded
        with zero vectors, so a token whose similarities are all negative gets 0 instead when
        the other side is shorter than its batch's longest. The drop-in
        ``rapidscore.bert_score`` passes its ``batch_size`` here.
        """
        if reference_batch_size is not None:
            reference_batch_size = check_positive_int(reference_batch_size, "reference_batch_size")
        return self.score_plan(self.plan(cands, refs), rescale=rescale, reference_batch_size=reference_batch_size)

    def score_plan(self, plan: ScoringPlan, *, rescale: bool | None = None,
                   reference_batch_size: int | None = None) -> BERTScoreResult:
        """Encode and finish a plan: ``finish(plan, encode(plan))``, or, with the device engine,
        the same scores computed on the model's device chunk by chunk."""
        if not self.device_engine:
            return self.finish(plan, self.encode(plan), rescale=rescale, reference_batch_size=reference_batch_size)
        from rapidscore.device.engine import score_on_device

        if reference_batch_size is not None:
            reference_batch_size = check_positive_int(reference_batch_size, "reference_batch_size")
        return score_on_device(self, plan, rescale=rescale, reference_batch_size=reference_batch_size)

    # -- streaming ----------------------------------------------------------------------------

    def score_iter(self, pairs: Iterable, *, chunk_size: int = 16384, max_tokens: int | None = None,
                   memory_budget: int | None = None, cache_tokens: int = 0, idf=None,
                   rescale: bool | None = None, reference_batch_size: int | None = None,
                   progress: bool = False) -> Iterator[PairScore]:
        """Score a stream of ``(candidate, reference)`` pairs (a reference may be a list of
        references) in bounded memory; yields one ``PairScore(precision, recall, f1)`` per pair,
        in input order, equal to what ``score`` gives for the same pairs and options.

        The stream is read lazily in chunks of at most ``chunk_size`` pairs whose token
        embeddings fit ``max_tokens`` tokens (default: what ``memory_budget`` bytes hold, 256 MiB
        by default). Texts repeated within a chunk are encoded once; ``cache_tokens`` > 0 keeps
        the embeddings of recently seen texts across chunks (an LRU cache of that many tokens).

        idf (a scorer with idf): ``idf`` = a ``DocumentFrequencies``, an idf file path or a dict
        (the signature says which, as ``BERTScore(idf=...)`` with it); else the scorer's own
        weights (an idf file, ``idf_sents``, a dict); else a first pass over the stream's
        references, which needs a re-iterable ``pairs`` (a list; a generator raises ValueError).
        A bad item raises TypeError/ValueError naming its index.

        ``reference_batch_size`` B: the numbers of ``score(..., reference_batch_size=B)`` whatever
        the chunks; a chunk's padding comes from the reference's batches it overlaps, so up to
        B - 1 pairs after it are read ahead and tokenised (B at most max(chunk_size, 16384),
        else ValueError). ``progress``: a bar in pairs on stderr that moves as each chunk's
        encoder batches finish (docs/scale.md).
        Thread-safe as ``score``: each call keeps its own state.
        """
        from rapidscore.bertscore.streaming import pair_scores

        # checked at the call, not when the first chunk is read (memory_budget=0 used to pass)
        check_positive_int(chunk_size, "chunk_size")
        for name, value in (("max_tokens", max_tokens), ("memory_budget", memory_budget)):
            if value is not None:
                check_positive_int(value, name)
        return pair_scores(self, pairs, progress=progress, chunk_size=chunk_size, max_tokens=max_tokens,
                           memory_budget=memory_budget, cache_tokens=cache_tokens, idf=idf, rescale=rescale,
                           reference_batch_size=reference_batch_size)

    def document_frequencies(self, pairs: Iterable, *, digest=None) -> DocumentFrequencies:
        """Document counts of the references of a stream of ``(candidate, reference)`` pairs:
        the idf first pass, streamed. ``.save(path)`` writes an idf file for ``BERTScore(idf=)``,
        ``score_iter(idf=)`` and the CLI's ``--idf-file``. ``digest``: a ``hashlib`` object
        updated with every reference read (what the counts were computed from)."""
        from rapidscore.bertscore.idf_pass import document_frequencies

        return document_frequencies(self, pairs, digest=digest)

    # -- phases -------------------------------------------------------------------------------

    def plan(self, cands: Sequence[str], refs) -> ScoringPlan:
        """Phase 1: validate (once), strip, deduplicate (once); no model runs
        (``rapidscore.bertscore.plan``)."""
        return make_plan(cands, refs, self.long_texts)

    def encode(self, plan: ScoringPlan, *, progress: bool | None = None) -> TokenStore:
        """Phase 2: token ids and embeddings of the plan's sentences."""
        return self.encoder.encode_unique(plan.texts, progress=self.progress if progress is None else progress)

    def finish(self, plan: ScoringPlan, store: TokenStore, *, rescale: bool | None = None,
               reference_batch_size: int | None = None, idf_weights: dict | None = None,
               padding_floors: np.ndarray | None = None, idf_source: IdfSource | None = None) -> BERTScoreResult:
        """Phase 3: weights, matching, best reference per candidate, rescaling.

        ``idf_weights``: idf weights to use instead of the scorer's (a stream's, computed over all
        its references; ignored when the scorer has idf=False) and ``idf_source`` their source (the
        result's signature; default the scorer's). ``padding_floors``: bert-score's
        padding of each of the plan's pairs, (pairs, 2) bool as ``kernels.padding.padding_floors``
        gives it, instead of ``reference_batch_size`` (a stream's chunk, whose batches of the
        reference reach into the chunks around it)."""
        if reference_batch_size is not None:
            reference_batch_size = check_positive_int(reference_batch_size, "reference_batch_size")
        if padding_floors is not None:
            if reference_batch_size is not None:
                raise ValueError("give reference_batch_size or padding_floors, not both")
            padding_floors = np.asarray(padding_floors)
            if padding_floors.shape != plan.pairs.shape or padding_floors.dtype != np.bool_:
                raise ValueError(f"padding_floors must be a bool array of shape {plan.pairs.shape} (one row per "
                                 f"pair), got {padding_floors.dtype} {padding_floors.shape}")
        if len(store) != len(plan.texts):
            raise ValueError(f"the store holds {len(store)} texts, the plan {len(plan.texts)}")
        options = self.finishing_options(idf_source)
        idf_dict = call_idf(options, idf_weights, lambda: [store.token_ids(k) for k in plan.pairs[:, 1]])
        weights, real_tokens, uniform = store_weights(store, idf_dict, options)
        if uniform:
            warn_uniform(uniform, stacklevel=3)
        pairs = store.order[plan.pairs]  # stored sentence of each side
        scores = match_store(store, weights, pairs, options, reference_batch_size=reference_batch_size,
                             padding_floors=padding_floors)  # (layers?, pairs, 3)
        return finish_result(plan, scores, empty_pairs(real_tokens, pairs), options, rescale=rescale,
                             truncated=store.truncated, lengths=store.lengths()[store.order], uniform=uniform)

    @property
    def weights_fixed(self) -> bool:
        """Whether token weights are the same in every call (no idf, or idf weights given or
        computed once): then several plans can share one weighting and matching pass."""
        source, weights = self._idf
        return not source.enabled or weights is not None

    def finish_plans(self, plans: Sequence[ScoringPlan], store: TokenStore, rows: Sequence[np.ndarray],
                     truncated: Sequence[int], *, rescale: bool | None = None) -> list[BERTScoreResult]:
        """Phase 3 for several plans over one shared store (a micro-batch): one weighting pass and
        one matching call, then each plan's result, exactly what ``finish(plan, its own store)``
        gives. ``rows[k]``: the store row of each of plan k's texts; ``truncated[k]``: how many
        of them were truncated. Needs ``weights_fixed`` (ValueError otherwise: idf from each
        call's references depends on the call)."""
        if not self.weights_fixed:
            raise ValueError("finish_plans needs weights that do not depend on the call (idf=False, or idf "
                             "weights from idf_sents or a dict); use finish per plan")
        options = self.finishing_options()
        # fixed weights: the call's references are never read
        fallback_rows: list = []
        weights, real_tokens, uniform = store_weights(store, call_idf(options, None, list), options, fallback_rows)
        if uniform:
            warn_uniform(uniform, stacklevel=3)
        pairs = np.concatenate([np.asarray(row)[plan.pairs] for plan, row in zip(plans, rows)]) \
            if plans else np.zeros((0, 2), dtype=np.int64)
        pairs = store.order[pairs]  # stored sentence of each side
        scores = match_store(store, weights, pairs, options)  # (layers?, pairs, 3)
        empty = empty_pairs(real_tokens, pairs)
        results, start = [], 0
        lengths = store.lengths()[store.order]
        for plan, count, row in zip(plans, truncated, rows):
            end = start + len(plan.pairs)
            # the plan's own sentences that fell back (its signature), not the batch's
            own_uniform = int(np.isin(store.order[np.asarray(row)], fallback_rows).sum()) if uniform else 0
            results.append(finish_result(plan, scores[..., start:end, :], empty[start:end], options,
                                         rescale=rescale, truncated=count, lengths=lengths[np.asarray(row)],
                                         uniform=own_uniform))
            start = end
        return results

    def finishing_options(self, idf_source: IdfSource | None = None) -> FinishingOptions:
        """The scorer's settings as the finishing step reads them, taken when a call starts
        (``rapidscore.bertscore.finishing``); ``idf_source``: a call's own (its signature)."""
        source, weights = self._idf
        call_source = source if idf_source is None else idf_source
        window = self.long_texts == "window"
        if window:
            prefix, suffix = self.encoder.tokenizer.framing
        return FinishingOptions(
            idf=source.enabled, idf_weights=weights, special_ids=self._cls_sep,
            framing_length=self._framing_length, reference_empty_rule=self.reference_empty_rule,
            all_layers=self.all_layers, num_threads=self.num_threads,
            hidden_states=self.encoder.num_layers + 1 if self.all_layers else 1,
            rescale_with_baseline=self.rescale_with_baseline, baseline=self._baseline,
            signature=self.signature_with(call_source),
            uniform_signature=self.signature_with(call_source, uniform=True) if source.enabled else "",
            window_length=self.encoder.max_length if window else None,
            window_framing=len(prefix) + len(suffix) if window else 0)

    @property
    def baseline(self) -> np.ndarray | None:
        """The loaded baseline (P, R, F; one row per layer with ``all_layers``), or None without
        ``rescale_with_baseline``. Read-only."""
        return self._baseline


def reference_hash(model: str, layer: int, idf: bool, rescaled: bool, custom_baseline: bool,
                   fast_tokenizer: bool, precision: str = "fp32") -> str:
    """bert-score's hash string, with rapidscore's version in place of bert-score's; a mode that
    is not exact fp32 adds ``_precision=MODE`` (the exact mode's string is bert-score's)."""
    text = "{}_L{}{}_version=rapidscore-{}(hug_trans={})".format(
        model, layer, "_idf" if idf else "_no-idf", __version__, package_version("transformers"))
    if rescaled:
        text += "-custom-rescaled" if custom_baseline else "-rescaled"
    if fast_tokenizer:
        text += "_fast-tokenizer"
    if precision != "fp32":
        text += f"_precision={precision}"
    return text


def score(cands: Sequence[str], refs, **options) -> BERTScoreResult:
    """One-shot BERTScore: ``BERTScore(**options).score(cands, refs)``."""
    return BERTScore(**options).score(cands, refs)
