"""The names this module held before the sentence path became the package
``rapidscore.encoder.sentence`` (one module per sentence-transformers module): kept so that
existing imports still work. New code imports from ``rapidscore.encoder.sentence``, and the
tokenizer helpers from ``rapidscore.encoder.tokens.tokenization``."""

from __future__ import annotations

from rapidscore.encoder.sentence import (
    ACTIVATIONS,
    DEFAULT_PROMPTS,
    POOLING_MODES,
    Dense,
    Normalize,
    Pooling,
    SentencePipeline,
    Step,
    check_mode,
    default_pipeline,
    load_pipeline,
    read_safetensors,
)
from rapidscore.encoder.tokens.tokenization import lowercase_tokenizer_json, prompt_token_count

__all__ = ["POOLING_MODES", "ACTIVATIONS", "Pooling", "Dense", "Normalize", "SentencePipeline", "load_pipeline",
           "default_pipeline", "read_safetensors", "DEFAULT_PROMPTS", "Step", "check_mode",
           "lowercase_tokenizer_json", "prompt_token_count"]
