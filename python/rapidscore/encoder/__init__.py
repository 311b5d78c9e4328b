"""The shared encoder: contextual token embeddings and sentence embeddings of BERT-family models.

Models run as ONNX graphs in ONNX Runtime or OpenVINO (exported once, cached) or, with
``backend="torch"``, as the Hugging Face torch model. Tokenisation uses the Rust ``tokenizers``
library. Every metric gets its encoder from ``get_encoder`` (one loaded model per process and
setting); results land in a :class:`TokenStore` on the host or on the model's device.
"""

from __future__ import annotations

from rapidscore.common.choices import BACKENDS, DEVICES, POOLINGS, PRECISIONS
from rapidscore.encoder.encoder import DEFAULT_MODEL, Encoder, check_texts
from rapidscore.encoder.model_source import resolve_model
from rapidscore.encoder.settings import EncoderSettings, default_backend, resolve_encoder_settings
from rapidscore.encoder.shared import cache_info, clear_cache, get_encoder
from rapidscore.encoder.store import TokenStore

__all__ = ["Encoder", "EncoderSettings", "resolve_encoder_settings", "TokenStore", "get_encoder", "clear_cache",
           "cache_info", "DEFAULT_MODEL", "check_texts", "default_backend", "resolve_model", "BACKENDS", "DEVICES",
           "PRECISIONS", "POOLINGS"]
