"""Sentence vectors as a model's own sentence-transformers pipeline makes them.

One module per sentence-transformers module, each with its load and its forward (numpy on a flat
store, torch on the device): ``pooling`` (Pooling, every mode), ``dense`` (Dense and its
activations), ``normalize`` (Normalize). ``pipeline`` composes them (:class:`SentencePipeline`),
``modules`` reads one from a model directory's modules.json (:func:`load_pipeline`),
``safetensors`` reads a Dense module's weights without torch, and ``encoder`` runs a pipeline over
an ``Encoder``'s token vectors (:class:`SentenceEncoder`, ``Encoder.sentence``).

No torch at import: the numpy path runs without it.
"""

from __future__ import annotations

from rapidscore.encoder.sentence.dense import ACTIVATIONS, Dense
from rapidscore.encoder.sentence.encoder import SentenceEncoder
from rapidscore.encoder.sentence.modules import load_pipeline
from rapidscore.encoder.sentence.normalize import Normalize
from rapidscore.encoder.sentence.pipeline import DEFAULT_PROMPTS, SentencePipeline, Step, default_pipeline
from rapidscore.encoder.sentence.pooling import POOLING_MODES, Pooling, check_mode
from rapidscore.encoder.sentence.safetensors import read_safetensors

__all__ = ["SentenceEncoder", "SentencePipeline", "load_pipeline", "default_pipeline", "Pooling", "Dense",
           "Normalize", "Step", "POOLING_MODES", "ACTIVATIONS", "DEFAULT_PROMPTS", "check_mode", "read_safetensors"]
