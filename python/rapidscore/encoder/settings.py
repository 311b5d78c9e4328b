"""What an encoder runs, decided once: :class:`EncoderSettings`, made by :func:`resolve_encoder_settings`.

Every value the user may spell several ways is resolved here and nowhere else: the model to its
directory, ``layer=None`` to the last layer's number, ``precision="fast"`` to the mode it is on
this machine (``encoder/precision.py``), ``backend=None`` to the backend of that mode. Every check
of these values (their types, the capability tables, the layer range, the model's positions) is
made here, once. The object is frozen and hashable: it is the key of ``get_encoder``'s cache, and
``Encoder.from_settings`` builds from it without resolving again.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rapidscore.encoder.model_source import (
    DEFAULT_MODEL,
    ROBERTA_LIKE,
    embedded_model_dir,
    is_embedded_model,
    num_layers,
    read_config,
    resolve_model,
)
from rapidscore.encoder.precision import FAST, resolve_precision
from rapidscore.encoder.runtime import backend_for, check_options
from rapidscore.encoder.tokens.windows import check_long_texts
from rapidscore.errors import check_positive_int
from rapidscore.threads import check_num_threads

__all__ = ["EncoderSettings", "resolve_encoder_settings", "given_encoder_settings", "check_encoder_runs",
           "OPTION_DEFAULTS", "default_backend", "usable_positions"]

#: the Encoder keywords besides model, layer, backend, device and precision, with their defaults
#: (an option given at its default is not stored: equal meanings give equal settings)
OPTION_DEFAULTS: Mapping[str, Any] = {
    "max_length": None, "batch_tokens": None, "max_batch_size": 256, "num_threads": None,
    "cache_dir": None, "add_prefix_space": None, "unpadded": False, "long_texts": "truncate"}


@dataclass(frozen=True)
class EncoderSettings:
    """One encoder's resolved settings (see the module). Two settings are equal when they run the
    same thing: the model's spelling and the precision asked for are not compared, except that
    ``"fast"`` resolved to int8 differs from an explicit ``"int8"`` (a model may refuse int8:
    "fast" then runs fp32 where "int8" raises)."""

    model: str = field(compare=False)  # the model as the user named it (messages, signatures)
    model_dir: Path
    layer: int | str
    num_layers: int
    backend: str
    device: str
    precision: str
    requested_precision: str = field(compare=False)
    #: the other Encoder keywords given away from their defaults (``OPTION_DEFAULTS``), sorted by name
    options: tuple[tuple[str, Any], ...] = ()
    # "fast" that became int8 keys apart from an explicit "int8" (see the class)
    precision_key: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        key = f"{FAST}:{self.precision}" if self.requested_precision == FAST and self.precision == "int8" \
            else self.precision
        object.__setattr__(self, "precision_key", key)

    def option(self, name: str, default: Any = None) -> Any:
        """The option ``name`` as given; ``default`` where it was not given or given at the
        Encoder's default (``OPTION_DEFAULTS``)."""
        return dict(self.options).get(name, default)

    def encoder_options(self) -> dict[str, Any]:
        """The options as ``Encoder`` keywords (every one, defaults included)."""
        return {**OPTION_DEFAULTS, **dict(self.options)}

    def running_on(self, backend: str | None) -> EncoderSettings:
        """These settings with the backend that runs the loaded model (``LoadedModel.backend``:
        torch where the model has no matching ONNX graph); the same object where it is theirs."""
        if backend is None or backend == self.backend:
            return self
        return dataclasses.replace(self, backend=backend)


#: the Encoder arguments an encoder given to a metric is checked against, at their defaults
_GIVEN_DEFAULTS: Mapping[str, Any] = {"model": None, "layer": None, "backend": None, "device": "cpu",
                                      "precision": "fp32", **OPTION_DEFAULTS}


def given_encoder_settings(encoder: Any, **given: Any) -> EncoderSettings:
    """The settings of an encoder the user gave a metric (``encoder.settings``: what it runs, as
    loaded), checked against the ``Encoder`` arguments the user gave beside it (``model``,
    ``layer``, ``backend``, ``device``, ``precision``, ``OPTION_DEFAULTS``' names): a ValueError
    naming both values for the first that differs. An argument at its ``Encoder`` default counts
    as not given; ``model`` is compared by directory, ``precision`` with the mode asked for too
    ("fast"), an option with the encoder's value in use too (``batch_tokens``' default)."""
    settings = getattr(encoder, "settings", None)
    if not isinstance(settings, EncoderSettings):
        raise TypeError(f"encoder must be a rapidscore Encoder (with its settings), got {type(encoder).__name__}")
    for name, value in given.items():
        if name not in _GIVEN_DEFAULTS:
            raise TypeError(f"given_encoder_settings() got an unexpected keyword argument {name!r}")
        if value is None or value == _GIVEN_DEFAULTS[name]:
            continue
        if name == "model":
            same = os.fspath(value) == settings.model or _local_model_dir(value) == settings.model_dir.resolve()
            runs: Any = settings.model
        elif name in ("layer", "backend", "device"):
            runs = getattr(settings, name)
            same = value == runs
        elif name == "precision":
            runs = settings.precision
            same = value in (runs, settings.requested_precision)
        else:
            stored = settings.option(name, OPTION_DEFAULTS[name])
            runs = getattr(encoder, name, stored) if name in ("batch_tokens", "max_length") else stored  # in use
            same = _same_option(value, stored) or _same_option(value, runs)
        if not same:
            raise ValueError(f"{name}={value!r} but the given encoder has {name}={runs!r}: leave {name} out, or "
                             f"pass an encoder made with {name}={value!r}")
    return settings


def check_encoder_runs(encoder: Any, settings: EncoderSettings) -> None:
    """A ValueError naming the first field (both values) where ``encoder`` runs other settings
    than ``settings`` (an encoder handed over with settings resolved without it)."""
    runs = getattr(encoder, "settings", None)
    if runs == settings:
        return
    if not isinstance(runs, EncoderSettings):
        raise TypeError(f"encoder must be a rapidscore Encoder (with its settings), got {type(encoder).__name__}")
    name = next(f.name for f in dataclasses.fields(settings)
                if f.compare and getattr(runs, f.name) != getattr(settings, f.name))
    raise ValueError(f"the given encoder runs {name}={getattr(runs, name)!r} where the settings say "
                     f"{getattr(settings, name)!r}: resolve the settings with this encoder (encoder=)")


def _local_model_dir(model: Any) -> Path | None:
    """The directory a model spelling names without asking the hub: a directory, or the embedded
    model's name; None for a hub id (compared by its spelling: no download to compare)."""
    name = os.fspath(model)
    if os.path.isdir(name):
        return Path(name).resolve()
    return embedded_model_dir() if is_embedded_model(name) else None


def _same_option(value: Any, runs: Any) -> bool:
    if isinstance(value, os.PathLike) or isinstance(runs, os.PathLike):
        return runs is not None and os.fspath(value) == os.fspath(runs)
    return bool(value == runs)


def default_backend(backend: str | None, precision: str) -> str:
    """The backend for ``precision`` when none is named: OpenVINO for bf16, torch for fp16 (a
    GPU mode), ONNX Runtime else (int8 included); the first capability table that runs it."""
    if backend is None:
        return backend_for(precision)
    return backend


def usable_positions(config: dict) -> int | None:
    """Token positions the model has (RoBERTa-style ids start after the padding index)."""
    positions = config.get("max_position_embeddings")
    if not isinstance(positions, int) or positions <= 0:
        return None
    if config.get("model_type") in ROBERTA_LIKE:
        positions -= int(config.get("pad_token_id") or 0) + 1
    return positions


def resolve_encoder_settings(model: str | os.PathLike | None = None, layer: int | str | None = None,
                             backend: str | None = None, device: str = "cpu", precision: str = "fp32",
                             **options: Any) -> EncoderSettings:
    """The settings of an encoder of ``model`` (the arguments of ``Encoder``, except ``progress``,
    which belongs to each call): every value resolved and checked, a TypeError or ValueError
    naming the first that is not valid. Reads the model's config.json (its layers and positions).

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
        int8 weights, two int8 passes over the activations, ``rapidscore.encoder.export.int8``; BERTScore
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
        where it sits furthest from a cut (``rapidscore.encoder.tokens.windows``); a text's row then
        holds all its tokens. Texts within ``max_length`` get the same vectors either way.
        Truncated texts cost memory in proportion to ``max_length`` whatever their length
        (``rapidscore.encoder.tokens.bounded``); windowed ones in proportion to their length, so
        "window" refuses texts over ``windows.MAX_WINDOW_TEXT_CHARS`` (1,048,576) characters.
    """
    if "progress" in options:
        raise TypeError("get_encoder() does not take progress: pass progress= to encode() instead")
    for name in options:
        if name not in OPTION_DEFAULTS:
            raise TypeError(f"resolve_encoder_settings() got an unexpected keyword argument {name!r}")
    requested = precision
    precision, backend = resolve_precision(precision, device, backend)
    backend = default_backend(backend, precision)
    given = {**OPTION_DEFAULTS, **options}
    long_texts = check_long_texts(given["long_texts"])
    check_options(backend, device, precision)  # the backends' capability tables (encoder/runtime)
    max_length = given["max_length"]
    if max_length is not None and (isinstance(max_length, bool) or not isinstance(max_length, int)
                                   or max_length < 2):
        raise ValueError(f"max_length must be an int >= 2, got {max_length!r}")
    num_threads = check_num_threads(given["num_threads"])
    model = DEFAULT_MODEL if model is None else model
    model_dir = resolve_model(model)
    model_name = os.fspath(model)
    config = read_config(model_dir)
    layers = num_layers(config)
    positions = usable_positions(config)
    if max_length is not None and positions is not None and max_length > positions:
        # Beyond the position embeddings the runtime fails deep inside the graph
        # (ONNX Runtime: "invalid expand shape"); say what the limit is instead.
        raise ValueError(f"max_length={max_length} exceeds the {positions} positions of {model_name!r} "
                         "(max_position_embeddings); use max_length <= " + str(positions))
    layer = _check_layer(layer, layers, model_name)
    batch_tokens = given["batch_tokens"]
    if batch_tokens is not None:
        batch_tokens = check_positive_int(batch_tokens, "batch_tokens")
    max_batch_size = check_positive_int(given["max_batch_size"], "max_batch_size")
    unpadded = given["unpadded"]
    if not isinstance(unpadded, bool):
        raise TypeError(f"unpadded must be a bool, got {type(unpadded).__name__}: {unpadded!r}")
    add_prefix_space = given["add_prefix_space"]
    if add_prefix_space is not None and not isinstance(add_prefix_space, bool):
        raise TypeError(f"add_prefix_space must be a bool or None, got {type(add_prefix_space).__name__}: "
                        f"{add_prefix_space!r}")
    cache_dir = given["cache_dir"]
    checked = {"max_length": max_length, "batch_tokens": batch_tokens, "max_batch_size": max_batch_size,
               "num_threads": num_threads, "cache_dir": os.fspath(cache_dir) if cache_dir else None,
               "add_prefix_space": add_prefix_space, "unpadded": unpadded, "long_texts": long_texts}
    stored = tuple(sorted((name, value) for name, value in checked.items() if value != OPTION_DEFAULTS[name]))
    return EncoderSettings(model=model_name, model_dir=model_dir, layer=layer, num_layers=layers, backend=backend,
                           device=device, precision=precision, requested_precision=requested, options=stored)


def _check_layer(layer, layers: int, model_name: str) -> int | str:
    if layer is None:
        return layers
    if layer == "all":
        return "all"
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)):
        raise TypeError(f"layer must be an int, None or 'all', got {type(layer).__name__}: {layer!r}")
    if not 0 <= layer <= layers:
        raise ValueError(f"layer must be in [0, {layers}] for {model_name!r} ({layers} layers), got {layer}")
    return int(layer)
