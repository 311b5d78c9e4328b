"""What a BERTScore number depends on, decided once: :class:`BERTScoreSettings`, made by
:func:`resolve_settings`.

Every front end hands what its user gave to :func:`resolve_settings` and nothing else decides:
``BERTScore(...)`` keywords, the CLI's flags (``--idf-file`` implies ``--idf``; both mean the
file), the service's request fields (it passes the path of a named idf file), Ray's and the
adapters' arguments. The model spelling becomes its directory, ``layer=None`` a number,
``precision="fast"`` the mode it is here (``rapidscore.encoder.settings``), idf its
:class:`~rapidscore.bertscore.idf_source.IdfSource`, the baseline its file. Everything below
takes the object and never resolves again: ``BERTScore.from_settings``, the signature and hash,
a streamed run's resume record, the encoder cache key (``settings.encoder``) and the service's
engine key. The object is frozen and hashable: equal settings run the same computation.

The model and ``lang`` (bert-score 0.3.13's rule, kept by the drop-in):

- a model the user names is the model; ``lang`` then only picks its baseline;
- no model and ``lang``: ``lang`` picks bert-score's model for that language (en: roberta-large);
- neither: the embedded all-MiniLM-L6-v2, whose baseline is English: ``rescale_with_baseline``
  needs no ``lang`` on it (under any spelling of it), nor on any front end. Another model
  rescales with ``lang`` or ``baseline_path`` (ValueError otherwise).
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rapidscore.bertscore.idf_source import IdfSource, resolve_idf_source
from rapidscore.encoder import settings as _encoder_settings
from rapidscore.encoder.settings import EncoderSettings

__all__ = ["BERTScoreSettings", "resolve_settings", "EMBEDDED_BASELINE_LANG"]

#: the language of the embedded model's shipped baseline (``rescale_baseline/en/``)
EMBEDDED_BASELINE_LANG = "en"


@dataclass(frozen=True)
class BERTScoreSettings:
    """Everything that makes a BERTScore number, resolved (see the module).

    ``encoder``: the encoder's settings (model directory, layer number or "all", backend, device,
    the precision mode, batch settings, ``long_texts``). ``model``: the model as named (the
    signature, the hash and the baseline lookup use that name). ``layer``: the hidden state
    scored (with ``all_layers``, the model's layer count, as bert-score's ``num_layers``).
    ``idf``: where the weights come from. ``baseline_path``: the baseline file rescaling reads
    (None without rescaling, unless one was given); ``custom_baseline``: whether the user gave it.
    ``idf_sents``: sentences to compute weights from that are not used (``idf=False``, as
    bert-score keeps them); ``progress`` and ``idf_sents`` change no number and are not compared.
    """

    encoder: EncoderSettings
    model: str
    layer: int
    all_layers: bool = False
    idf: IdfSource = field(default_factory=IdfSource.none)
    lang: str | None = None
    rescale_with_baseline: bool = False
    baseline_path: Path | None = None
    custom_baseline: bool = False
    use_fast_tokenizer: bool = False
    long_texts: str = "truncate"
    reference_empty_rule: bool = False
    device_engine: bool | None = None
    idf_sents: tuple[str, ...] | None = field(default=None, compare=False, repr=False)
    progress: bool = field(default=False, compare=False)

    @property
    def rescaled_field(self) -> str:
        """The signature's ``rescaled`` field: no, yes (the published baseline) or custom."""
        if not self.rescale_with_baseline:
            return "no"
        return "custom" if self.custom_baseline else "yes"


def _check_model(model: Any) -> None:
    # named here: os.fspath(5) fails with a message that names no argument
    if model is not None and not isinstance(model, (str, os.PathLike)):
        raise TypeError(f"model must be a hub id or a directory path (str or os.PathLike), got "
                        f"{type(model).__name__}: {model!r:.80}")


def _check_layer(layer: Any) -> None:
    # int(nan) failed with a message that named no argument
    if layer is not None and (isinstance(layer, (bool, np.bool_)) or not isinstance(layer, numbers.Integral)):
        raise TypeError(f"layer must be an int (a hidden-state index) or None, got {type(layer).__name__}: "
                        f"{layer!r}")


def choose_model(model: str | os.PathLike | None, lang: str | None) -> str:
    """The model of a call: the one named, else ``lang``'s in bert-score's table, else the
    embedded model (see the module)."""
    from rapidscore.bertscore.model_table import model_for_language
    from rapidscore.encoder.model_source import DEFAULT_MODEL

    if model is not None:
        return os.fspath(model)
    return model_for_language(lang) if lang is not None else DEFAULT_MODEL


def resolve_settings(model: str | os.PathLike | None = None, layer: int | None = None, *,
                     lang: str | None = None, idf: Any = False, idf_file: str | os.PathLike | None = None,
                     idf_sents: Sequence[str] | None = None, rescale_with_baseline: bool = False,
                     baseline_path: str | os.PathLike | None = None, all_layers: bool = False,
                     use_fast_tokenizer: bool = False, backend: str | None = None, device: str = "cpu",
                     precision: str = "fp32", long_texts: str | None = None, reference_empty_rule: bool = False,
                     device_engine: bool | None = None, progress: bool = False, encoder: Any = None,
                     **encoder_options: Any) -> BERTScoreSettings:
    """The :class:`BERTScoreSettings` of any spelling (``BERTScore``'s keywords; ``idf_file``
    beside a boolean ``idf`` as the CLI and the service give it). ``encoder``: an encoder to
    score with instead of the shared one: the settings take what it runs (its settings as loaded:
    model, layer, backend, device, precision, max_length and batch options), and ``model`` defaults
    to its model; a ``model``, ``layer``, ``backend``, ``device``, ``precision`` or encoder option
    given beside it that differs from it is a ValueError naming both values (one at its default
    counts as not given; ``layer`` is not compared with ``all_layers``, which needs an encoder of
    ``layer="all"``). ``encoder_options``: the other ``Encoder`` keywords
    (``batch_tokens``, ``num_threads``, ``cache_dir``, ...). A TypeError or ValueError names the
    first value that is not valid; an idf file is read and checked now, before any model loads."""
    from rapidscore.bertscore.baselines import default_baseline_path
    from rapidscore.encoder.model_source import is_embedded_model
    from rapidscore.encoder.tokens.windows import check_long_texts

    _check_model(model)
    _check_layer(layer)
    given = None if encoder is None else _given_encoder(encoder, model, layer, all_layers, backend=backend,
                                                           device=device, precision=precision, **encoder_options)
    if model is None and given is not None:
        model = given.model
    model_name = choose_model(model, lang)
    if layer is None and not all_layers:
        from rapidscore.bertscore.model_table import tuned_layer

        layer = tuned_layer(model_name)
    baseline_lang = lang
    if rescale_with_baseline and baseline_path is None and lang is None:
        if not is_embedded_model(model_name):
            raise ValueError("rescale_with_baseline=True needs lang (or a baseline_path)")
        baseline_lang = EMBEDDED_BASELINE_LANG  # the embedded model's baseline, under any spelling
    idf_source = resolve_idf_source(idf, idf_file)  # the one decision: every later step reads it
    idf_source.check_model(model_name)
    unused_sents = None
    if idf_sents is not None:
        from rapidscore.encoder import check_texts

        sents = tuple(s.strip() for s in check_texts(idf_sents, "idf_sents"))
        if idf_source.enabled:
            idf_source = IdfSource.from_sentences(sents)
        else:  # kept and not used, as bert-score keeps them
            unused_sents = sents
    if long_texts is not None:
        check_long_texts(long_texts)
    if not isinstance(reference_empty_rule, bool):
        raise TypeError(f"reference_empty_rule must be a bool, got {reference_empty_rule!r}")
    if device_engine is not None and not isinstance(device_engine, bool):
        raise TypeError(f"device_engine must be True, False or None, got {device_engine!r}")
    if rescale_with_baseline:
        path: str | os.PathLike = baseline_path if baseline_path is not None else \
            default_baseline_path(baseline_lang, model_name)  # type: ignore[arg-type]
        resolved_baseline: Path | None = Path(path)
    else:
        resolved_baseline = Path(baseline_path) if baseline_path is not None else None
    if given is None:
        # long_texts only when it is not the default: default encoders stay shared with other metrics
        window = {"long_texts": "window"} if long_texts == "window" else {}
        encoder_settings = _encoder_settings.resolve_encoder_settings(model_name, layer="all" if all_layers else layer,
                                                                     backend=backend, device=device,
                                                                     precision=precision, **encoder_options, **window)
    else:
        encoder_settings = given
    encoder_mode = encoder_settings.option("long_texts", "truncate")
    if long_texts is not None and long_texts != encoder_mode:
        raise ValueError(f"long_texts={long_texts!r} but the given encoder has long_texts={encoder_mode!r}; "
                         f"build it with Encoder(..., long_texts={long_texts!r})")
    scored_layer = encoder_settings.num_layers if all_layers else encoder_settings.layer
    assert isinstance(scored_layer, int)
    return BERTScoreSettings(
        encoder=encoder_settings, model=model_name, layer=scored_layer, all_layers=bool(all_layers),
        idf=idf_source, lang=lang, rescale_with_baseline=bool(rescale_with_baseline),
        baseline_path=resolved_baseline, custom_baseline=baseline_path is not None,
        use_fast_tokenizer=use_fast_tokenizer, long_texts=encoder_mode, reference_empty_rule=reference_empty_rule,
        device_engine=device_engine, idf_sents=unused_sents, progress=progress)


def _given_encoder(encoder: Any, model: Any, layer: int | None, all_layers: bool, **given: Any) -> EncoderSettings:
    """What the encoder given to a scorer runs (its settings, as loaded), checked against the
    model, layer and encoder options given beside it (``rapidscore.encoder.settings.given_encoder_settings``:
    a ValueError naming both values) and against ``all_layers``."""
    settings = _encoder_settings.given_encoder_settings(encoder, model=model, layer=None if all_layers else layer,
                                                        **given)
    if all_layers and settings.layer != "all":
        raise ValueError(f"all_layers=True scores every hidden state, but the given encoder has layer="
                         f"{settings.layer!r}: pass an encoder made with layer='all'")
    if not all_layers and settings.layer == "all":
        raise ValueError("the given encoder has layer='all': pass all_layers=True, or an encoder of one layer")
    return settings


def build_bertscore_signature(settings: BERTScoreSettings, idf_field: str, *, max_length: int,
                              precision: str, backend: str, device: str) -> str:
    """The signature of a call under ``settings``: its every field from them, but for those the
    loaded model fixes: ``max_length`` (the tokenizer's), ``precision``, the mode that ran (the
    settings' mode, or fp32 where ``"fast"`` chose int8 and the model refused it), and
    ``backend`` / ``device``, where it ran (torch for a model without a matching ONNX graph):
    known once loaded. ``idf_field``: the source's field (``IdfSource.signature_value``; a stream's own),
    with ``+uniform`` where sentences fell back to uniform weights."""
    from rapidscore.common.signature import build_signature, version_fields

    return build_signature([
        ("model", settings.model), ("layer", "all" if settings.all_layers else settings.layer),
        ("idf", idf_field), ("rescaled", settings.rescaled_field),
        ("tok", f"fast-maxlen{max_length}"),
        *([("long_texts", "window")] if settings.long_texts == "window" else []),
        ("precision", precision), ("backend", f"{backend}-{device}"),
        *version_fields("onnxruntime"),
    ])
