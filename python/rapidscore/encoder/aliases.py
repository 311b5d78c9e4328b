"""The names ``Encoder`` had before its jobs moved to its collaborators, kept as aliases.

``Encoder.runtime`` (``encoder/model_runtime.py``) runs the model, ``Encoder.tokenizer``
makes the model's inputs, ``Encoder.sentence`` makes sentence vectors; ``encoder.pool(...)`` and
the others below still work and mean what they meant (docs/encoder.md). New code calls the
collaborator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["MOVED", "moved_attribute"]

#: old Encoder name -> its value now, from the encoder
MOVED: dict[str, Callable[[Any], Any]] = {
    "batch_plan": lambda e: lambda lengths: e.runtime.batch_plan(lengths, e.batch_tokens, e.max_batch_size),
    "model_inputs": lambda e: e.tokenizer.model_inputs,
    "sentence_vectors_unique": lambda e: lambda *args, **kwargs: e.sentence.embed_unique(*args, stacklevel=4,
                                                                                         **kwargs),
    "sentence_pipeline": lambda e: e.sentence.pipeline,
    "sentence_max_length": lambda e: e.sentence.max_length,
    "sentence_inputs": lambda e: e.sentence.prompt_inputs,
    "pool": lambda e: e.sentence.pool,
}


def _runtime_member(name: str) -> Callable[[Any], Any]:
    return lambda encoder: getattr(encoder.runtime, name)


MOVED.update({name: _runtime_member(name) for name in (
    "hidden_batches", "packed_available", "returns_tensors", "run_model", "run_packed", "runs_torch", "to_device",
    "unpadded_available")})


def moved_attribute(encoder: Any, name: str) -> Any:
    """The value of the old name ``name`` on ``encoder``; AttributeError for any other name."""
    moved = MOVED.get(name)
    if moved is None:
        raise AttributeError(f"{type(encoder).__name__!r} object has no attribute {name!r}")
    return moved(encoder)
