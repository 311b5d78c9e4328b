"""The engine keywords: one set of typed keyword parameters, with one meaning each, on every metric
entry point that runs a model (``BERTScore``, ``SentenceSimilarity``, ``similarity``,
``negative_rejection``, ``ner.evaluate``/``compare`` for the label encoder, the embedding refusal
detector):

- ``backend``: ``"onnx"``, ``"openvino"`` or ``"torch"`` (None: the precision's default);
- ``device``: ``"cpu"`` or ``"cuda"``;
- ``precision``: ``"fp32"`` (exact), ``"bf16"``, ``"fp16"``, ``"int8"`` or ``"fast"`` (the machine's
  fastest mode within the fast-mode bound);
- ``num_threads``: threads of the runtime and the native kernels (None: the thread budget,
  ``rapidscore.threads``);
- ``batch_tokens``, ``cache_dir``: the encoder's token budget per batch and export cache.

They replace the older ``encoder_options={...}`` dict (a deprecated alias where it existed) and
``**encoder_options``. Imports nothing heavy.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from typing import Any

from rapidscore.common.metric import Option

__all__ = ["ENGINE_KEYWORDS", "ENGINE_OPTIONS", "encoder_keywords", "deprecated_encoder_options"]

ENGINE_KEYWORDS = ("backend", "device", "precision", "num_threads", "batch_tokens", "cache_dir")

#: the engine keywords a server fixes for every metric that runs a model (a metric declares them
#: among its options): each takes the server's setting of the same name
ENGINE_OPTIONS = (
    Option("backend", str, None, "the runtime (None: the precision's default)", server="backend"),
    Option("device", str, "cpu", "cpu or cuda", server="device"),
    Option("precision", str, "fp32", "the encoder's precision", server="precision"),
    Option("num_threads", int, None, "threads of the runtime and the kernels (None: the thread budget)",
           minimum=1, server="num_threads", run_only=True),
)


def encoder_keywords(*, backend: str | None = None, device: str = "cpu", precision: str = "fp32",
                     num_threads: int | None = None, batch_tokens: int | None = None,
                     cache_dir: str | os.PathLike | None = None, unpadded: bool = False) -> dict[str, Any]:
    """``rapidscore.get_encoder``'s keyword arguments for these engine keywords. The optional ones
    go in only where given (not None/False): an encoder asked for with the defaults is the one the
    other metrics share (``get_encoder`` keys its cache on the options passed)."""
    keywords: dict[str, Any] = {"backend": backend, "device": device, "precision": precision}
    optional = {"num_threads": num_threads, "batch_tokens": batch_tokens, "cache_dir": cache_dir,
                "unpadded": unpadded}
    keywords.update((name, value) for name, value in optional.items() if value is not None and value is not False)
    return keywords


def deprecated_encoder_options(encoder_options: Any, keywords: Mapping[str, Any], *, where: str,
                               stacklevel: int = 3) -> dict[str, Any]:
    """The encoder's keyword arguments: ``keywords`` (from :func:`encoder_keywords`), or the
    deprecated ``encoder_options`` dict of ``where`` when given (a DeprecationWarning at the
    caller; a TypeError when engine keywords are given beside it)."""
    if encoder_options is None:
        return dict(keywords)
    if not isinstance(encoder_options, Mapping):
        raise TypeError(f"{where}(): encoder_options must be a mapping, got {type(encoder_options).__name__}")
    warnings.warn(f"{where}(encoder_options=...) is deprecated: pass the engine options as keywords "
                  f"({', '.join(ENGINE_KEYWORDS)})", DeprecationWarning, stacklevel=stacklevel)
    given = sorted(name for name, value in keywords.items() if encoder_keywords().get(name) != value)
    if given:
        raise TypeError(f"{where}() got encoder_options and the engine keyword(s) {', '.join(given)}: "
                        "give the keywords only")
    return dict(encoder_options)
