"""``get_encoder``: one shared :class:`Encoder` per setting, for every metric of the process.

Built on the model cache of ``encoder/cache.py`` (one loaded runner per model, layer, backend,
device and precision). Thread-safe: concurrent first requests build one encoder.
"""

from __future__ import annotations

import os

from rapidscore.common.file_run import note_model
from rapidscore.encoder.cache import MAX_MODELS, MODELS, KeyedCache
from rapidscore.encoder.encoder import Encoder, default_backend
from rapidscore.encoder.model_source import DEFAULT_MODEL, fingerprint, num_layers, read_config, resolve_model
from rapidscore.encoder.precision import FAST, resolve_precision

__all__ = ["get_encoder", "clear_cache", "cache_info"]

_ENCODERS = KeyedCache(4 * MAX_MODELS)


def get_encoder(model: str | os.PathLike | None = None, layer: int | str | None = None,
                backend: str | None = None, device: str = "cpu", precision: str = "fp32", **options) -> Encoder:
    """A shared :class:`~rapidscore.encoder.Encoder` for these settings (thread-safe).

    Same arguments as ``Encoder``. Equal settings return the same object, whatever spelling of
    the model (hub id or its directory) or of the defaults (``layer=None`` and the last layer,
    ``backend=None`` and the precision's default) was used. Encoders are thread-safe, so the
    object may be shared by every thread of the process.
    """
    model = DEFAULT_MODEL if model is None else model
    model_dir = resolve_model(model)
    # a command's run: the model's directory is an input (no output inside it), its resume state records it
    note_model(model_dir, lambda: fingerprint(model_dir))
    if layer is None:
        layer = num_layers(read_config(model_dir))
    resolved, backend = resolve_precision(precision, device, backend)  # "fast" keys as the mode it is,
    backend = default_backend(backend, resolved)
    # except int8, which a model may refuse: "fast" then runs fp32, explicit "int8" raises
    key_precision = f"{FAST}:{resolved}" if precision == FAST and resolved == "int8" else resolved
    if "progress" in options:
        raise TypeError("get_encoder() does not take progress: pass progress= to encode() instead")
    if "cache_dir" in options and options["cache_dir"] is not None:
        options["cache_dir"] = os.fspath(options["cache_dir"])
    key = (str(model_dir), layer if isinstance(layer, str) else int(layer), backend, device, key_precision,
           tuple(sorted(options.items())))
    return _ENCODERS.get(key, lambda: Encoder(model, layer=layer, backend=backend, device=device,
                                              precision=precision, **options))


def clear_cache() -> None:
    """Forget every cached model and encoder (objects still referenced elsewhere stay usable)."""
    _ENCODERS.clear()
    MODELS.clear()


def cache_info() -> dict:
    """Counts for tests and monitoring: models loaded so far, and how many are cached now."""
    return {"models_loaded": MODELS.builds, "models_cached": len(MODELS),
            "encoders_built": _ENCODERS.builds, "encoders_cached": len(_ENCODERS)}
