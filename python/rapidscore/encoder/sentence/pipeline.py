"""A model's sentence-transformers pipeline after the Transformer: Pooling, then Dense and
Normalize steps, with the text settings around them (max_seq_length, do_lower_case, prompts).

:class:`SentencePipeline` applies it to the encoder's token vectors: in numpy on a flat store
(ONNX Runtime, OpenVINO), or in torch on the model's device, batch by batch. Each module does its
own step (``pooling``, ``dense``, ``normalize``); ``modules.load_pipeline`` reads one from a model
directory.

No torch at import: the numpy path runs without it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from rapidscore.encoder.sentence.dense import Dense
from rapidscore.encoder.sentence.normalize import Normalize
from rapidscore.encoder.sentence.pooling import Pooling, check_mode

__all__ = ["DEFAULT_PROMPTS", "Step", "SentencePipeline", "default_pipeline"]

# sentence-transformers 6.2 gives every SentenceTransformer these prompt names (empty unless the
# model sets them), so prompt_name="query" is valid for any model.
DEFAULT_PROMPTS = {"query": "", "document": ""}

class Step(Protocol):
    """A module after the Pooling (Dense, Normalize, or one registered with
    ``modules.register_module``): its short ``name`` (in the pipeline's name) and its ``forward``
    over (n, d) vectors, a float32 numpy array on the host or a torch tensor on its device."""

    name: str

    def forward(self, x: Any) -> Any: ...


@dataclass(frozen=True, eq=False)
class SentencePipeline:
    """What makes a sentence vector out of the model's token vectors, and the text settings around it.

    ``pooling`` then ``steps`` (Dense and Normalize, in the model's order). ``max_seq_length`` and
    ``do_lower_case`` shape tokenisation; ``prompts`` / ``default_prompt_name`` the text;
    ``source``: the modules.json read, None for the default (no modules.json).
    """

    pooling: Pooling = field(default_factory=Pooling)
    steps: tuple[Step, ...] = (Normalize(),)
    max_seq_length: int | None = None
    do_lower_case: bool = False
    prompts: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_PROMPTS))
    default_prompt_name: str | None = None
    similarity_fn_name: str | None = None
    source: Path | None = None

    # -- description ----------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """``cls+dense+norm``, ``mean+norm``, ``cls,max``, ``mean-noprompt+norm``..."""
        return "+".join([self.pooling.name, *(step.name for step in self.steps)])

    @property
    def cosine_name(self) -> str:
        """``name`` without a trailing ``+norm``: what decides cosine similarities (a final
        normalisation does not change them)."""
        return "+".join([self.pooling.name, *(step.name for step in _before_normalize(self.steps))])

    @property
    def normalizes(self) -> bool:
        """The vectors come out with unit length (the last step is a Normalize)."""
        return bool(self.steps) and isinstance(self.steps[-1], Normalize)

    def output_dim(self, hidden_size: int) -> int:
        """Size of the sentence vectors from token vectors of ``hidden_size``; a ValueError when a
        module expects another size."""
        where = self.source or "the default pipeline"
        if self.pooling.dimension is not None and self.pooling.dimension != hidden_size:
            raise ValueError(f"{where}: the Pooling module expects token vectors of {self.pooling.dimension}, "
                             f"the model gives {hidden_size}")
        size = hidden_size * len(self.pooling.modes)
        for step in self.steps:
            if isinstance(step, Dense):
                if step.in_features != size:
                    raise ValueError(f"{step.source}: the Dense module takes vectors of {step.in_features}, "
                                     f"it gets {size}")
                size = step.out_features
        return size

    def override(self, pooling: str | None = None, normalize: bool | None = None) -> SentencePipeline:
        """This pipeline with a caller's choices: ``pooling`` (a mode name) replaces the model's
        pooling and Dense layers (that mode of the token vectors, as rapidscore always did);
        ``normalize`` True/False ends with / without unit length (the model's trailing Normalize
        dropped or added). None keeps the model's."""
        if pooling is None and normalize is None:
            return self
        if pooling is not None:
            check_mode(pooling, "pooling")
            base = dataclasses.replace(self.pooling, modes=(pooling,), dimension=None)
            steps: list[Step] = []
            normalize = True if normalize is None else normalize
        else:
            base, steps = self.pooling, _before_normalize(self.steps)
        if normalize:
            steps.append(Normalize())
        return dataclasses.replace(self, pooling=base, steps=tuple(steps))

    # -- text -----------------------------------------------------------------------------------

    def resolve_prompt(self, prompt: str | None = None, prompt_name: str | None = None) -> str:
        """The prompt sentence-transformers' ``encode`` prepends: ``prompt``, else the prompt named
        ``prompt_name``, else the model's default prompt; "" for none."""
        if prompt is not None and prompt_name is not None:
            raise ValueError(f"give prompt or prompt_name, not both (got prompt={prompt!r}, "
                             f"prompt_name={prompt_name!r})")
        if prompt is not None:
            if not isinstance(prompt, str):
                raise TypeError(f"prompt must be a str, got {type(prompt).__name__}: {prompt!r}")
            return prompt
        if prompt_name is not None:
            if not isinstance(prompt_name, str) or prompt_name not in self.prompts:
                raise ValueError(f"prompt_name {prompt_name!r} is not one of the model's prompts "
                                 f"{sorted(self.prompts)} ({self.source or 'no modules.json'})")
            return self.prompts[prompt_name]
        if self.default_prompt_name is not None:
            return self.prompts.get(self.default_prompt_name, "")
        return ""

    # -- vectors ----------------------------------------------------------------------------------

    def project(self, vectors: Any) -> Any:
        """The steps after pooling (Dense, Normalize), in order: on host vectors (n, d), made
        float32, or on a torch tensor, on its device."""
        x = vectors if _is_tensor(vectors) else np.asarray(vectors, dtype=np.float32)
        for step in self.steps:
            x = step.forward(x)
        return x

    def apply_flat(self, embeddings: np.ndarray, offsets: np.ndarray, prompt_length: int = 0) -> np.ndarray:
        """The sentence vectors of a flat array (numpy; ``Pooling.forward_flat`` then ``project``).
        A sentence with no token at all is a zero vector (a Dense bias does not make it one)."""
        vectors = self.project(self.pooling.forward_flat(embeddings, offsets, prompt_length))
        vectors[np.diff(offsets) == 0] = 0.0
        return vectors

    def apply_padded(self, hidden: Any, attention_mask: np.ndarray, prompt_length: int,
                     to_device: Callable[[np.ndarray], Any]) -> Any:
        """Sentence vectors (B, out) of a padded batch on the device (torch;
        ``Pooling.forward_padded`` then ``project``): ``hidden`` (B, L, dim) a torch tensor,
        ``attention_mask`` (B, L) the host mask (right padding), ``to_device``: numpy -> a tensor on
        hidden's device. Rows with no token are zero."""
        import torch

        x = self.project(self.pooling.forward_padded(hidden, attention_mask, prompt_length, to_device))
        return torch.where(to_device(attention_mask.sum(axis=1) > 0)[:, None], x, 0.0)


def default_pipeline() -> SentencePipeline:
    """A model directory without modules.json: mean pooling, unit length."""
    return SentencePipeline()


def _before_normalize(steps: tuple[Step, ...]) -> list[Step]:
    """``steps`` without their trailing Normalize steps."""
    kept = list(steps)
    while kept and isinstance(kept[-1], Normalize):
        kept.pop()
    return kept


def _is_tensor(value: Any) -> bool:
    return type(value).__module__.partition(".")[0] == "torch"
