"""``get_encoder``: one shared :class:`Encoder` per setting, for every metric of the process.

Built on the model cache of ``encoder/cache.py`` (one loaded runner per model, layer, backend,
device and precision). Thread-safe: concurrent first requests build one encoder.
"""

from __future__ import annotations

import os
import threading

import numpy as np

from rapidscore.encoder.cache import MAX_MODELS, MODELS, KeyedCache
from rapidscore.encoder.encoder import Encoder
from rapidscore.encoder.loaded import record_model
from rapidscore.encoder.settings import EncoderSettings, resolve_encoder_settings

__all__ = ["get_encoder", "clear_cache", "cache_info", "fill_working_memory"]

_ENCODERS = KeyedCache(4 * MAX_MODELS)


def get_encoder(model: EncoderSettings | str | os.PathLike | None = None, layer: int | str | None = None,
                backend: str | None = None, device: str = "cpu", precision: str = "fp32", **options) -> Encoder:
    """A shared :class:`~rapidscore.encoder.Encoder` for these settings (thread-safe).

    Same arguments as ``Encoder``, or one :class:`~rapidscore.encoder.EncoderSettings` (made by
    ``resolve_encoder_settings``) alone. The settings are the cache key: equal settings return the
    same object, whatever spelling of the model (hub id or its directory) or of the defaults
    (``layer=None`` and the last layer, ``backend=None`` and the precision's default) was used.
    Encoders are thread-safe, so the object may be shared by every thread of the process.
    """
    if isinstance(model, EncoderSettings):
        if (layer, backend, device, precision) != (None, None, "cpu", "fp32") or options:
            raise TypeError("get_encoder(settings) takes no other argument: the settings hold them all")
        settings = model
    else:
        settings = resolve_encoder_settings(model, layer, backend, device, precision, **options)
    record_model(settings.model_dir)  # each use: a command run asks which models it used (encoder/loaded.py)
    return _ENCODERS.get(settings, lambda: Encoder.from_settings(settings))


def clear_cache() -> None:
    """Forget every cached model and encoder (objects still referenced elsewhere stay usable)."""
    _ENCODERS.clear()
    MODELS.clear()


def cache_info() -> dict:
    """Counts for tests and monitoring: models loaded so far, and how many are cached now."""
    return {"models_loaded": MODELS.builds, "models_cached": len(MODELS),
            "encoders_built": _ENCODERS.builds, "encoders_cached": len(_ENCODERS)}


def fill_working_memory(concurrency: int) -> None:
    """Run every shared encoder's largest batch (the rows of ``max_length`` tokens its token budget
    allows) ``concurrency`` times at once, results dropped.

    For a serving process whose runtime keeps freed memory for reuse (one shared ONNX Runtime
    arena): its memory then reaches the high-water mark of ``concurrency`` workers' batches at
    start, instead of in steps whenever traffic first forms a larger batch (bench/soak_serve.py)."""
    for encoder in _ENCODERS.values():
        rows = max(1, min(encoder.max_batch_size, encoder.batch_tokens // encoder.max_length))
        filler = np.resize(encoder.tokenize(["a"])[0], encoder.max_length)
        batch = [filler] * rows
        threads = [threading.Thread(target=encoder.embed_ids, args=(batch,), kwargs={"progress": False},
                                    name="rapidscore-fill-memory") for _ in range(max(1, concurrency))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
