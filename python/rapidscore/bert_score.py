"""Drop-in replacement for the ``bert-score`` package (0.3.13): same functions, arguments,
defaults and return types (torch tensors), computed by rapidscore's engine.

    from rapidscore import bert_score
    P, R, F = bert_score.score(cands, refs, lang="en")

Scores equal the reference's, including the effect of its ``batch_size`` on the token maxima
(bert-score pads each batch of pairs with zero vectors; see docs/bertscore.md). Differences, all
deliberate and documented there: degenerate idf weights fall back to uniform weights with a
warning instead of NaN, truncation is warned about, and models stay loaded between ``score`` calls.
Extra keyword arguments select the engine: ``backend``, ``precision``, ``batch_tokens``,
``num_threads``, ``cache_dir``, and ``reference_padding=False`` to take every maximum over real
tokens only (scores that do not depend on ``batch_size``).

The embedded all-MiniLM-L6-v2 (``model_type="all-MiniLM-L6-v2"``, any spelling) needs no download
and no ``num_layers`` (its last layer, as ``BERTScore()`` and the CLI use) and has an English
baseline: ``rescale_with_baseline=True`` needs no ``lang`` on it (``lang="en"`` names the same).
``lang`` with no ``model_type`` picks bert-score's model for the language, as bert-score does; with
``model_type`` it only picks the baseline. A model that cannot be loaded (``lang="en"``
picks roberta-large, which offline is only there once downloaded) is one ModelNotFoundError line
that names the embedded model, without the hub's chained traceback (RAPIDSCORE_DEBUG=1 keeps it).
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import TYPE_CHECKING, NoReturn

from rapidscore.bertscore import baselines as _baselines
from rapidscore.bertscore import settings as _settings
from rapidscore.bertscore.model_table import MODEL_FOR_LANGUAGE as lang2model  # bert-score's public name
from rapidscore.bertscore.model_table import TUNED_LAYER as model2layers  # bert-score's public name
from rapidscore.bertscore.model_table import model_for_language, tuned_layer
from rapidscore.bertscore.scorer import BERTScore, ScoringPlan, reference_hash
from rapidscore.bertscore.settings import EMBEDDED_BASELINE_LANG
from rapidscore.common.inputs import normalize_inputs
from rapidscore.errors import ModelNotFoundError, check_positive_int

if TYPE_CHECKING:
    import torch

__all__ = ["score", "BERTScorer", "plot_example", "lang2model", "model2layers"]

def _torch():
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("rapidscore.bert_score returns torch tensors and needs torch; the native "
                          "API rapidscore.bertscore returns numpy arrays without it") from exc
    return torch


def _device(device) -> str:
    """"cpu" or "cuda" from a torch device name (``"cuda:1"``, ``torch.device("cuda")``). Any
    other name is refused: it used to run on the CPU without a word (``"gpu"`` included)."""
    if device is None:
        return "cpu"
    if not isinstance(device, str) and type(device).__name__ != "device":  # torch.device, without importing torch
        raise TypeError(f"device must be a torch device name such as 'cpu' or 'cuda', got {type(device).__name__}: "
                        f"{device!r}")
    name = str(device)
    kind, _, index = name.partition(":")
    if kind in ("cpu", "cuda") and (not index or index.isdigit()):
        return kind
    hint = "; the GPU is 'cuda' (or 'cuda:0')" if kind.lower() in ("gpu", "cuda") else ""
    raise ValueError(f"device must be 'cpu' or 'cuda' (a torch device name; 'cuda:N' too), got {name!r}{hint}")


def _resolve(model_type, num_layers, lang, all_layers):
    if lang is None and model_type is None:
        raise ValueError("Either lang or model_type should be specified")
    if model_type is None:
        model_type = model_for_language(lang)
    if num_layers is None and not all_layers:
        num_layers = tuned_layer(model_type)
        # The embedded all-MiniLM-L6-v2 (any spelling) is not in the reference's table: its layer
        # is the one BERTScore() and the CLI use, the last (None: the encoder's last layer).
        if num_layers is None and not _is_embedded(model_type):
            raise ValueError(f"model {model_type!r} has no default layer in the reference's table; "
                             "pass num_layers")
    return model_type, num_layers


def _is_embedded(model_type) -> bool:
    from rapidscore.encoder.model_source import is_embedded_model

    return isinstance(model_type, (str, os.PathLike)) and is_embedded_model(model_type)


EMBEDDED_SHORT_NAME = "all-MiniLM-L6-v2"


def _one_line(text: str, limit: int = 240) -> str:
    """``text`` on one line; the hub's error (after " Hub error: ") cut to ``limit`` characters."""
    text = " ".join(text.split())
    head, sep, hub = text.partition(" Hub error: ")
    if sep and len(hub) > limit:
        hub = hub[:limit].rstrip() + "..."
    return head + sep + hub


def unavailable_model_message(exc: BaseException, model, *, offline_choice: str | None,
                              picked_by: str | None = None) -> str:
    """One line for a model that cannot be loaded (``exc``: the loader's ModelNotFoundError), naming
    the embedded model as the offline choice (``offline_choice``: how the caller asks for it, e.g.
    ``model_type="all-MiniLM-L6-v2"``; None, or ``model`` the embedded model itself, whose message
    already says how to install it: no hint). ``picked_by``: what chose the model (``lang='en'``).
    The drop-in and ``rapidscore bertscore`` say the same."""
    text = _one_line(str(exc)).rstrip(".")
    if picked_by is not None:
        text = f"{picked_by} picks bert-score's model {model}, which cannot be loaded here: {text}"
    if offline_choice is None or _is_embedded(model):
        return text
    return (f"{text}. Offline, use the embedded {EMBEDDED_SHORT_NAME} instead (no download; its English "
            f"baseline ships with rapidscore): {offline_choice}")


def _raise_unavailable(exc: ModelNotFoundError, model, lang, model_given: bool) -> NoReturn:
    """Re-raise a model that cannot be loaded as one line, without the loader's chained traceback
    (the hub's errors; RAPIDSCORE_DEBUG=1 keeps them, for a bug report). Same class, so callers
    catching ModelNotFoundError still do."""
    error = ModelNotFoundError(unavailable_model_message(
        exc, model, offline_choice=f'model_type="{EMBEDDED_SHORT_NAME}"',
        picked_by=None if model_given else f"lang={lang!r}"))
    raise error from (exc if os.environ.get("RAPIDSCORE_DEBUG") else None)


_ENCODER_OPTIONS = ("backend", "precision", "batch_tokens", "num_threads", "cache_dir")


def _padding_batch_size(batch_size, engine_options) -> int | None:
    """The batch size whose padding the scores reproduce, or None (``reference_padding=False``)."""
    if not engine_options.pop("reference_padding", True):
        return None
    return check_positive_int(batch_size, "batch_size")


def _engine_options(engine_options) -> dict:
    """The engine keywords of score(), checked: a name that is none of them is a TypeError."""
    unknown = sorted(set(engine_options) - set(_ENCODER_OPTIONS))
    if unknown:
        raise TypeError(f"score() got unexpected keyword arguments {unknown}; rapidscore adds {_ENCODER_OPTIONS}")
    return {k: engine_options[k] for k in _ENCODER_OPTIONS if k in engine_options}


def _check_rescale_lang(rescale_with_baseline, lang, model_type) -> None:
    """bert-score's rule, but for the embedded model, whose baseline is English: it rescales with
    no ``lang``, as everywhere in rapidscore (``rapidscore.bertscore.settings``)."""
    if rescale_with_baseline and lang is None and not (model_type is not None and _is_embedded(model_type)):
        raise ValueError("Need to specify Language when rescaling with baseline")


def _as_tensors(result):
    torch = _torch()
    return (torch.from_numpy(result.precision.copy()), torch.from_numpy(result.recall.copy()),
            torch.from_numpy(result.f1.copy()))


def score(cands, refs, model_type=None, num_layers=None, verbose=False, idf=False, device=None,
          batch_size=64, nthreads=4, all_layers=False, lang=None, return_hash=False,
          rescale_with_baseline=False, baseline_path=None, use_fast_tokenizer=False, **engine_options) -> tuple:
    """BERTScore of candidates against references; returns (P, R, F) torch tensors of shape (N,)
    ((L+1, N) with all_layers), and the hash with ``return_hash=True``. See bert_score.score.
    ``nthreads`` is bert-score's own parameter (its idf worker count; checked, unused here) and keeps
    its spelling in this drop-in; rapidscore's threads go in ``engine_options`` as ``num_threads``
    (with ``backend``, ``device``, ``precision``, ``batch_tokens``, ``cache_dir``)."""
    plan = ScoringPlan.from_normalized(*normalize_inputs(cands, refs))  # validated once, here
    padding_batch = _padding_batch_size(batch_size, engine_options)
    check_positive_int(nthreads, "nthreads")  # the reference's idf worker count; "4" used to pass
    device = _device(device)
    _check_rescale_lang(rescale_with_baseline, lang, model_type)
    model_given = model_type is not None
    model_type, num_layers = _resolve(model_type, num_layers, lang, all_layers)
    rescale = rescale_with_baseline
    if rescale_with_baseline:
        path = baseline_path if baseline_path is not None else _baselines.default_baseline_path(
            lang if lang is not None else EMBEDDED_BASELINE_LANG, model_type)
        if path is None or not _baselines.Path(path).is_file():
            # The reference's score() warns and returns unscaled scores here (BERTScorer raises).
            message = f"Baseline not Found for {model_type} on {lang} at {path}"
            print(f"Warning: {message}", file=sys.stderr)
            warnings.warn(message + "; scores are not rescaled", stacklevel=2)
            rescale = False
    options = _engine_options(engine_options)
    try:  # the process-wide encoder of these settings: models stay loaded across score() calls
        settings = _settings.resolve_settings(model_type, num_layers, lang=lang, idf=idf, all_layers=all_layers,
                                    rescale_with_baseline=rescale, baseline_path=baseline_path if rescale else None,
                                    use_fast_tokenizer=use_fast_tokenizer, progress=verbose,
                                    reference_empty_rule=True, device=device, **options)
    except ModelNotFoundError as exc:
        _raise_unavailable(exc, model_type, lang, model_given)
    engine = BERTScore.from_settings(settings)
    out = _as_tensors(engine.score_plan(plan, reference_batch_size=padding_batch))
    if return_hash:
        return out, reference_hash(model_type, engine.layer, bool(idf), rescale_with_baseline,
                                   baseline_path is not None, use_fast_tokenizer, engine.encoder.precision)
    return out


class BERTScorer:
    """Keeps the model loaded; same constructor and methods as bert_score.BERTScorer. ``nthreads``
    is bert-score's idf worker count (checked, unused here); rapidscore's threads are the engine
    option ``num_threads``, passed in ``engine_options`` with the other engine keywords."""

    def __init__(self, model_type=None, num_layers=None, batch_size=64, nthreads=4, all_layers=False, idf=False,
                 idf_sents=None, device=None, lang=None, rescale_with_baseline=False, baseline_path=None,
                 use_fast_tokenizer=False, **engine_options) -> None:
        _check_rescale_lang(rescale_with_baseline, lang, model_type)
        check_positive_int(nthreads, "nthreads")
        engine_device = _device(device)
        model_given = model_type is not None
        model_type, num_layers = _resolve(model_type, num_layers, lang, all_layers)
        self._reference_padding = _padding_batch_size(batch_size, engine_options) is not None
        try:
            self._engine = BERTScore(model=model_type, layer=num_layers, lang=lang, idf=bool(idf),
                                     idf_sents=idf_sents, rescale_with_baseline=rescale_with_baseline,
                                     baseline_path=baseline_path, all_layers=all_layers,
                                     use_fast_tokenizer=use_fast_tokenizer, device=engine_device,
                                     reference_empty_rule=True, **engine_options)
        except ModelNotFoundError as exc:
            _raise_unavailable(exc, model_type, lang, model_given)
        self.batch_size, self.nthreads, self.all_layers = batch_size, nthreads, all_layers
        self.device = device if device is not None else "cpu"

    lang = property(lambda self: self._engine.lang)
    idf = property(lambda self: self._engine.idf)
    model_type = property(lambda self: self._engine.model_name)
    num_layers = property(lambda self: self._engine.layer)
    rescale_with_baseline = property(lambda self: self._engine.rescale_with_baseline)
    use_fast_tokenizer = property(lambda self: self._engine.use_fast_tokenizer)
    hash = property(lambda self: self._engine.hash)

    @property
    def baseline_vals(self) -> torch.Tensor:
        if self._engine.baseline is None:
            raise ValueError(f"Baseline not Found for {self.model_type} on {self.lang}")
        torch = _torch()
        base = torch.from_numpy(self._engine.baseline.astype("float32"))
        return base.unsqueeze(1) if self.all_layers else base

    def compute_idf(self, sents) -> None:
        if self._engine.idf_dict is not None:
            warnings.warn("Overwriting the previous importance weights.", stacklevel=2)
        self._engine.compute_idf(sents)

    def score(self, cands, refs, verbose=False, batch_size=64, return_hash=False) -> tuple:
        if self._engine.idf is True and self._engine.idf_dict is None:
            raise ValueError("IDF weights are not computed: pass idf_sents or call compute_idf first")
        padding_batch = _padding_batch_size(batch_size, {"reference_padding": self._reference_padding})
        out = _as_tensors(self._engine.score(cands, refs, reference_batch_size=padding_batch))
        return (out, self.hash) if return_hash else out

    def plot_example(self, candidate, reference, fname="") -> None:
        from rapidscore.bertscore.plot import plot_similarity

        plot_similarity(self._engine, candidate, reference, fname=fname)
        if fname:
            print("Saved figure to file: ", fname)  # the reference's line

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(hash={self.hash}, batch_size={self.batch_size}, nthreads={self.nthreads})"

    __str__ = __repr__


def plot_example(candidate, reference, model_type=None, num_layers=None, lang=None, rescale_with_baseline=False,
                 baseline_path=None, use_fast_tokenizer=False, fname="", **engine_options) -> None:
    """Heatmap of the token similarity matrix of one pair (special tokens left out)."""
    scorer = BERTScorer(model_type=model_type, num_layers=num_layers, lang=lang,
                        rescale_with_baseline=rescale_with_baseline, baseline_path=baseline_path,
                        use_fast_tokenizer=use_fast_tokenizer, **engine_options)
    scorer.plot_example(candidate, reference, fname=fname)
