"""Sentence vectors as a model's own sentence-transformers pipeline makes them.

A sentence-transformers model directory lists its modules in ``modules.json``: a ``Transformer``
(token vectors), a ``Pooling`` (one vector per sentence), then optional ``Dense`` layers and a
``Normalize``. :func:`load_pipeline` reads them, with ``sentence_bert_config.json``
(max_seq_length, do_lower_case) and ``config_sentence_transformers.json`` (prompts, the default
prompt, the similarity function), and :class:`SentencePipeline` applies them to the encoder's
token vectors: in numpy on a flat store (ONNX Runtime, OpenVINO), or in torch on the model's
device, batch by batch. Each step follows sentence-transformers 6.2 (``Pooling._forward_padded``,
``Dense``, ``Normalize``, ``Transformer._get_prompt_length``); tests/encoder/test_sentence_pipeline.py
compares both paths with ``SentenceTransformer.encode`` configuration by configuration.

A directory without modules.json gets mean pooling and unit length (what rapidscore always did).
Anything not implemented here is a ValueError naming it and its file, never a silent mean pooling.

No torch at import: the numpy path runs without it.
"""

from __future__ import annotations

import dataclasses
import json
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import numpy as np

__all__ = ["POOLING_MODES", "ACTIVATIONS", "Pooling", "Dense", "Normalize", "SentencePipeline", "load_pipeline",
           "default_pipeline", "read_safetensors"]

# sentence-transformers 6.2's Pooling.POOLING_MODES, in its order.
POOLING_MODES = ("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken")
# The boolean keys of configs saved before 6.x, in the order their vectors are concatenated.
_LEGACY_MODE_KEYS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
# Dense activations implemented here: torch.nn class name -> ours. Saved as the class's full path
# (torch.nn.modules.activation.Tanh); built with its default arguments, as sentence-transformers does.
ACTIVATIONS = {"Identity": "identity", "Tanh": "tanh", "ReLU": "relu", "Sigmoid": "sigmoid", "GELU": "gelu"}
# The config file of the Transformer module, by the names sentence-transformers has used.
_TRANSFORMER_CONFIGS = ("sentence_bert_config.json", "sentence_roberta_config.json", "sentence_distilbert_config.json",
                        "sentence_camembert_config.json", "sentence_albert_config.json",
                        "sentence_xlm-roberta_config.json", "sentence_xlnet_config.json")
# Loading flags of the Transformer's model/processor/config kwargs: they do not change the vectors.
_LOADING_KWARGS = frozenset({"trust_remote_code", "revision", "token", "cache_dir", "local_files_only", "subfolder",
                             "use_fast", "torch_dtype", "dtype", "attn_implementation", "low_cpu_mem_usage",
                             "device_map"})
_TEXT_MODALITY = {"method": "forward", "method_output_name": "last_hidden_state"}
# sentence-transformers 6.2 gives every SentenceTransformer these prompt names (empty unless the
# model sets them), so prompt_name="query" is valid for any model.
DEFAULT_PROMPTS = {"query": "", "document": ""}
_KNOWN_MODULES = ("Transformer", "Pooling", "Dense", "Normalize")
_EPS = 1e-12  # torch.nn.functional.normalize's


@dataclass(frozen=True)
class Pooling:
    """Token vectors -> one vector per sentence: each mode's vector, concatenated in ``modes`` order.

    ``include_prompt=False``: the prompt's tokens (its length as sentence-transformers counts it)
    take no part in pooling."""

    modes: tuple[str, ...] = ("mean",)
    include_prompt: bool = True
    dimension: int | None = None  # the token vectors' size the config declares

    @property
    def name(self) -> str:
        name = ",".join(self.modes)
        return name if self.include_prompt else f"{name}-noprompt"


@dataclass(frozen=True, eq=False)
class Dense:
    """``activation(x @ weight.T + bias)`` (+ the input, or its projection ``residual``, when
    ``use_residual``): sentence-transformers' Dense."""

    weight: np.ndarray  # (out_features, in_features) float32
    bias: np.ndarray | None  # (out_features,) float32
    activation: str = "tanh"
    use_residual: bool = False
    residual: np.ndarray | None = None  # (out, in): projects the input when in != out
    source: Path | None = None

    name = "dense"

    @property
    def in_features(self) -> int:
        return int(self.weight.shape[1])

    @property
    def out_features(self) -> int:
        return int(self.weight.shape[0])


@dataclass(frozen=True)
class Normalize:
    """Unit L2 length (``torch.nn.functional.normalize``: a zero vector stays zero)."""

    name = "norm"


Step = Union[Dense, Normalize]


@dataclass(frozen=True, eq=False)
class SentencePipeline:
    """What makes a sentence vector out of the model's token vectors, and the text settings around it.

    ``pooling`` then ``steps`` (Dense and Normalize, in the model's order). ``max_seq_length`` and
    ``do_lower_case`` shape tokenisation; ``prompts`` / ``default_prompt_name`` the text;
    ``source``: the modules.json read, None for the default (no modules.json).
    """

    pooling: Pooling = Pooling()
    steps: tuple[Step, ...] = (Normalize(),)
    max_seq_length: int | None = None
    do_lower_case: bool = False
    prompts: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_PROMPTS))
    default_prompt_name: str | None = None
    similarity_fn_name: str | None = None
    source: Path | None = None
    # device -> the Dense steps' weights as torch tensors there (made on first use)
    _device_weights: dict = field(default_factory=dict, repr=False, compare=False)

    # -- description ----------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """``cls+dense+norm``, ``mean+norm``, ``cls,max``, ``mean-noprompt+norm``..."""
        return "+".join([self.pooling.name, *(step.name for step in self.steps)])

    @property
    def cosine_name(self) -> str:
        """``name`` without a trailing ``+norm``: what decides cosine similarities (a final
        normalisation does not change them)."""
        steps = list(self.steps)
        while steps and isinstance(steps[-1], Normalize):
            steps.pop()
        return "+".join([self.pooling.name, *(step.name for step in steps)])

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
            base, steps = self.pooling, list(self.steps)
            while steps and isinstance(steps[-1], Normalize):
                steps.pop()
        if normalize:
            steps.append(Normalize())
        return dataclasses.replace(self, pooling=base, steps=tuple(steps), _device_weights={})

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

    # -- numpy (a flat store: ONNX Runtime, OpenVINO) ---------------------------------------------

    def pool_flat(self, embeddings: np.ndarray, offsets: np.ndarray, prompt_length: int = 0) -> np.ndarray:
        """Pooled vectors (n, modes x dim) float32 of the sentences of a flat array: sentence k's
        token vectors are ``embeddings[offsets[k]:offsets[k + 1]]``. ``prompt_length``: the leading
        tokens of every sentence that are the prompt (excluded when ``include_prompt`` is False).

        A sentence left with no token (a prompt as long as max_seq_length) pools to zeros, cls
        to its first token, as in sentence-transformers, except max: -inf there (NaN once
        normalised), zeros here."""
        offsets = np.asarray(offsets, dtype=np.int64)
        starts, ends = offsets[:-1], offsets[1:]
        counts = ends - starts
        first, last, kept = self._token_indices(counts, prompt_length)
        n, dim = len(counts), embeddings.shape[-1]
        has = counts > 0  # a tokenizer without special tokens gives no token for "": a zero vector
        live = kept > 0
        mean_sums: np.ndarray | None = None
        parts = []
        for mode in self.pooling.modes:
            out = np.zeros((n, dim), dtype=np.float32)
            if mode == "cls":
                out[has] = embeddings[starts[has] + first[has]]
            elif mode == "lasttoken":
                out[live] = embeddings[starts[live] + last[live]]
            elif mode in ("mean", "mean_sqrt_len_tokens"):
                if mean_sums is None:
                    mean_sums = _segment_reduce(np.add, embeddings, ends - kept, ends, live)
                denominator = kept[live].astype(np.float32)
                out[live] = mean_sums / (denominator if mode == "mean" else np.sqrt(denominator))[:, None]
            elif mode == "max":
                out[live] = _segment_reduce(np.maximum, embeddings, ends - kept, ends, live)
            else:  # weightedmean
                out[live] = _weighted_means(embeddings, offsets, counts - kept)[live]
            parts.append(out)
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)

    def project(self, vectors: np.ndarray) -> np.ndarray:
        """The steps after pooling (Dense, Normalize) on host vectors (n, d) float32."""
        x = np.asarray(vectors, dtype=np.float32)
        for step in self.steps:
            if isinstance(step, Dense):
                out = x @ step.weight.T
                if step.bias is not None:
                    out += step.bias
                out = _activate_numpy(out, step.activation)
                if step.use_residual:
                    out += x if step.residual is None else x @ step.residual.T
                x = out.astype(np.float32, copy=False)
            else:
                norms = np.linalg.norm(x, axis=1, keepdims=True)
                x = x / np.maximum(norms, np.float32(_EPS))
        return x

    def apply_flat(self, embeddings: np.ndarray, offsets: np.ndarray, prompt_length: int = 0) -> np.ndarray:
        """``pool_flat`` then ``project``: the sentence vectors of a flat array. A sentence with no
        token at all is a zero vector (a Dense bias does not make it one)."""
        vectors = self.project(self.pool_flat(embeddings, offsets, prompt_length))
        vectors[np.diff(offsets) == 0] = 0.0
        return vectors

    # -- torch (a padded batch on the model's device) ----------------------------------------------

    def apply_padded(self, hidden: Any, attention_mask: np.ndarray, prompt_length: int, to_device) -> Any:
        """Sentence vectors (B, out) of a padded batch: ``hidden`` (B, L, dim) a torch tensor,
        ``attention_mask`` (B, L) the host mask (right padding), ``to_device``: numpy -> a tensor on
        hidden's device. Rows with no token are zero."""
        import torch

        counts = attention_mask.sum(axis=1).astype(np.int64)
        first, last, kept = self._token_indices(counts, prompt_length)
        mask = attention_mask.astype(np.float32, copy=True)
        excluded = counts - kept  # leading prompt tokens left out of pooling
        if excluded.any():
            mask[np.arange(mask.shape[1])[None, :] < excluded[:, None]] = 0.0
        mask_t = to_device(mask).to(hidden.dtype)
        rows = torch.arange(hidden.shape[0], device=hidden.device)
        live = to_device(kept > 0)[:, None]
        parts = []
        mean_sums = None
        for mode in self.pooling.modes:
            if mode == "cls":
                parts.append(hidden[rows, to_device(first)])
            elif mode == "lasttoken":
                parts.append(torch.where(live, hidden[rows, to_device(last)], 0.0))
            elif mode in ("mean", "mean_sqrt_len_tokens"):
                if mean_sums is None:
                    mean_sums = (hidden * mask_t[..., None]).sum(dim=1)
                denominator = mask_t.sum(dim=1, keepdim=True).clamp_min(1e-9)
                parts.append(mean_sums / (denominator if mode == "mean" else denominator.sqrt()))
            elif mode == "max":
                maxima = hidden.masked_fill(mask_t[..., None] == 0, float("-inf")).max(dim=1).values
                parts.append(torch.where(live, maxima, 0.0))
            else:  # weightedmean: position weights 1, 2, ... from the first token (right padding)
                weights = mask_t * torch.arange(1, mask_t.shape[1] + 1, device=hidden.device, dtype=hidden.dtype)
                sums = (hidden * weights[..., None]).sum(dim=1)
                parts.append(sums / weights.sum(dim=1, keepdim=True).clamp_min(1e-9))
        x = parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)
        x = self.project_torch(x)
        return torch.where(to_device(counts > 0)[:, None], x, 0.0)

    def project_torch(self, x: Any) -> Any:
        """``project`` on a torch tensor, on its device."""
        import torch

        weights = self._weights_on(x.device)
        for step, tensors in zip(self.steps, weights):
            if isinstance(step, Dense):
                weight, bias, residual = tensors
                out = _activate_torch(torch.nn.functional.linear(x, weight, bias), step.activation)
                if step.use_residual:
                    out = out + (x if residual is None else torch.nn.functional.linear(x, residual))
                x = out
            else:
                x = x / torch.linalg.vector_norm(x, dim=-1, keepdim=True).clamp_min(_EPS)
        return x

    def _weights_on(self, device) -> list:
        key = str(device)
        weights = self._device_weights.get(key)
        if weights is None:
            import torch

            def put(array):
                return None if array is None else torch.from_numpy(array).to(device)

            weights = [(put(s.weight), put(s.bias), put(s.residual)) if isinstance(s, Dense) else None
                       for s in self.steps]
            self._device_weights[key] = weights  # a race makes the same tensors twice: harmless
        return weights

    def _token_indices(self, counts: np.ndarray, prompt_length: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per sentence of ``counts`` tokens (right padded): the position of its cls token, of its
        last token, and how many tokens pooling keeps once the prompt's are left out.

        sentence-transformers zeroes the first ``prompt_length`` positions of the mask; cls is the
        first position left (position 0 when none is), the last token the last one left."""
        skip = (np.minimum(counts, prompt_length) if prompt_length and not self.pooling.include_prompt
                else np.zeros_like(counts))
        kept = counts - skip
        first = np.where(kept > 0, skip, 0)
        last = np.maximum(counts - 1, 0)
        return first, last, kept


def default_pipeline() -> SentencePipeline:
    """A model directory without modules.json: mean pooling, unit length."""
    return SentencePipeline()


# ------------------------------------------------------------------------------------------------
# numpy kernels
# ------------------------------------------------------------------------------------------------

def _segment_reduce(ufunc, values: np.ndarray, starts: np.ndarray, ends: np.ndarray, live: np.ndarray) -> np.ndarray:
    """``ufunc`` over ``values[starts[k]:ends[k]]`` for the ``live`` (non-empty) segments, in order.

    One ``reduceat`` over (start, end) pairs; the odd entries (the gaps between segments, e.g. the
    next sentence's prompt tokens) are dropped."""
    starts, ends = starts[live], ends[live]
    if len(starts) == 0:
        return np.zeros((0, values.shape[-1]), dtype=np.float32)
    bounds = np.empty(2 * len(starts), dtype=np.int64)
    bounds[0::2], bounds[1::2] = starts, ends
    if bounds[-1] == len(values):
        bounds = bounds[:-1]  # the last segment runs to the end
    return ufunc.reduceat(values, bounds, axis=0)[0::2]


_WEIGHTED_CHUNK = 1 << 16  # tokens weighted at once (bounds the weighted copy of the store)


def _weighted_means(values: np.ndarray, offsets: np.ndarray, skip: np.ndarray) -> np.ndarray:
    """Per sentence, sum((p + 1) * x_p) / sum(p + 1) over its positions p >= skip (zero where no
    position is left): sentence-transformers' weightedmean under right padding."""
    n, dim = len(offsets) - 1, values.shape[-1]
    out = np.zeros((n, dim), dtype=np.float32)
    begin = 0
    while begin < n:
        # Whole sentences, up to _WEIGHTED_CHUNK tokens (at least one sentence).
        end = max(begin + 1, int(np.searchsorted(offsets, offsets[begin] + _WEIGHTED_CHUNK, side="right")) - 1)
        end = min(end, n)
        lo, hi = int(offsets[begin]), int(offsets[end])
        counts = np.diff(offsets[begin:end + 1])
        positions = np.arange(hi - lo, dtype=np.int64) - np.repeat(offsets[begin:end] - lo, counts)
        weights = (positions + 1).astype(np.float32)
        weights[positions < np.repeat(skip[begin:end], counts)] = 0.0
        live = (counts - skip[begin:end]) > 0
        sums = _segment_reduce(np.add, values[lo:hi] * weights[:, None], offsets[begin:end] - lo,
                               offsets[begin + 1:end + 1] - lo, live)
        totals = _segment_reduce(np.add, weights[:, None], offsets[begin:end] - lo,
                                 offsets[begin + 1:end + 1] - lo, live)
        out[begin:end][live] = sums / np.maximum(totals, np.float32(1e-9))
        begin = end
    return out


def _erf(x: np.ndarray) -> np.ndarray:
    """erf to within 1.5e-7 (Abramowitz and Stegun 7.1.26): numpy has none, float32 needs no more."""
    t = 1.0 / (1.0 + 0.3275911 * np.abs(x))
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return np.sign(x) * (1.0 - poly * np.exp(-x * x))


def _activate_numpy(x: np.ndarray, activation: str) -> np.ndarray:
    if activation == "tanh":
        return np.tanh(x)
    if activation == "relu":
        return np.maximum(x, np.float32(0))
    if activation == "sigmoid":
        return (0.5 * (1.0 + np.tanh(0.5 * x))).astype(np.float32)  # no overflow for large |x|
    if activation == "gelu":  # torch.nn.GELU(): the exact (erf) form
        x64 = x.astype(np.float64)
        return (0.5 * x64 * (1.0 + _erf(x64 / np.sqrt(2.0)))).astype(np.float32)
    return x  # identity


def _activate_torch(x: Any, activation: str) -> Any:
    import torch

    if activation == "tanh":
        return torch.tanh(x)
    if activation == "relu":
        return torch.relu(x)
    if activation == "sigmoid":
        return torch.sigmoid(x)
    if activation == "gelu":
        return torch.nn.functional.gelu(x)
    return x


# ------------------------------------------------------------------------------------------------
# reading a model directory
# ------------------------------------------------------------------------------------------------

def check_mode(mode, name: str = "pooling") -> str:
    if mode not in POOLING_MODES:
        raise ValueError(f"{name} must be one of {POOLING_MODES}, got {mode!r}")
    return mode


def _read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON: {error}") from None


def load_pipeline(model_dir: str | Path) -> SentencePipeline:
    """The sentence-transformers pipeline of ``model_dir`` (:func:`default_pipeline` without a
    modules.json). A module, mode, activation or setting not implemented here is a ValueError
    naming it and its file."""
    model_dir = Path(model_dir)
    modules_file = model_dir / "modules.json"
    if not modules_file.is_file():
        return default_pipeline()
    modules = _read_json(modules_file)
    if not isinstance(modules, list) or not modules:
        raise ValueError(f"{modules_file} must hold a non-empty list of modules, got {modules!r:.200}")
    kinds = []
    for index, entry in enumerate(modules):
        if not isinstance(entry, dict) or not isinstance(entry.get("type"), str) \
                or not isinstance(entry.get("path", ""), str):
            raise ValueError(f"{modules_file}: module {index} must be an object with a 'type' and a 'path', "
                             f"got {entry!r:.200}")
        kind = _module_kind(entry["type"])
        if kind is None:
            raise ValueError(
                f"{modules_file}: module {index} has type {entry['type']!r}, which rapidscore does not implement "
                f"(it follows {', '.join(_KNOWN_MODULES)}); its sentence vectors would differ from the model's")
        kinds.append(kind)
    if kinds[0] != "Transformer" or "Transformer" in kinds[1:]:
        raise ValueError(f"{modules_file}: expected one Transformer module, first; got the modules {kinds}")
    if len(kinds) < 2 or kinds[1] != "Pooling" or "Pooling" in kinds[2:]:
        raise ValueError(f"{modules_file}: expected one Pooling module right after the Transformer (then Dense or "
                         f"Normalize modules); got the modules {kinds}")
    settings = _read_transformer(model_dir, modules[0].get("path", ""), modules_file)
    pooling = _read_pooling(_module_dir(model_dir, modules[1], modules_file))
    steps: list[Step] = []
    for entry, kind in zip(modules[2:], kinds[2:]):
        folder = _module_dir(model_dir, entry, modules_file)
        steps.append(_read_dense(folder) if kind == "Dense" else _read_normalize(folder))
    return SentencePipeline(pooling=pooling, steps=tuple(steps), source=modules_file, **settings,
                            **_read_model_config(model_dir))


def _module_kind(type_name: str) -> str | None:
    """Transformer / Pooling / Dense / Normalize for sentence-transformers' own classes (any of
    their module paths, old or new), None for anything else."""
    if not type_name.startswith("sentence_transformers."):
        return None
    kind = type_name.rsplit(".", 1)[-1]
    return kind if kind in _KNOWN_MODULES else None


def _module_dir(model_dir: Path, entry: dict, modules_file: Path) -> Path:
    path = entry.get("path", "")
    if Path(path).is_absolute() or ".." in Path(path).parts:
        raise ValueError(f"{modules_file}: module path {path!r} must stay inside the model directory")
    return model_dir / path


def _read_object(file: Path) -> dict:
    """A JSON file that must hold an object (a module's or the model's configuration)."""
    config = _read_json(file)
    if not isinstance(config, dict):
        raise ValueError(f"{file} must hold a JSON object, got {config!r:.200}")
    return config


def _module_config(folder: Path, module: str) -> dict:
    """The ``config.json`` a module (Pooling, Dense) must have, as an object."""
    file = folder / "config.json"
    if not file.is_file():
        raise ValueError(f"the {module} module has no config file {file}")
    return _read_object(file)


def _read_transformer(model_dir: Path, path: str, modules_file: Path) -> dict:
    if path not in ("", "."):
        raise ValueError(f"{modules_file}: the Transformer module lives in {path!r}; rapidscore loads the model "
                         "from the directory itself (path '')")
    config: dict = {}
    source = None
    for name in _TRANSFORMER_CONFIGS:
        if (model_dir / name).is_file():
            source = model_dir / name
            config = _read_object(source)
            break

    def refuse(what: str) -> ValueError:
        return ValueError(f"{source}: {what}, which rapidscore does not implement; its sentence vectors "
                          "would differ from the model's")

    task = config.get("transformer_task", "feature-extraction")
    if task != "feature-extraction":
        raise refuse(f"transformer_task is {task!r} (rapidscore runs feature-extraction encoders)")
    modality = config.get("modality_config")
    if modality is not None and modality != {"text": _TEXT_MODALITY}:
        raise refuse(f"modality_config is {modality!r} (rapidscore takes plain text through the forward pass)")
    output = config.get("module_output_name", "token_embeddings")
    if output != "token_embeddings":
        raise refuse(f"module_output_name is {output!r}")
    for key in ("processing_kwargs", "query_length", "document_length", "query_expansion"):
        if config.get(key):
            raise refuse(f"{key} is {config[key]!r}")
    max_length = config.get("max_seq_length")
    for key in ("model_args", "model_kwargs", "tokenizer_args", "processor_kwargs", "config_args", "config_kwargs"):
        kwargs = config.get(key) or {}
        if not isinstance(kwargs, dict):
            raise ValueError(f"{source}: {key} must be an object, got {kwargs!r:.200}")
        allowed = _LOADING_KWARGS | ({"model_max_length"} if key in ("tokenizer_args", "processor_kwargs") else set())
        unknown = sorted(set(kwargs) - allowed)
        if unknown:
            raise refuse(f"{key} sets {unknown}")
        if "model_max_length" in kwargs:
            max_length = kwargs["model_max_length"]  # the processor's setting wins over max_seq_length
    if max_length is not None and (isinstance(max_length, bool) or not isinstance(max_length, int)
                                   or max_length < 2):
        raise ValueError(f"{source}: max_seq_length must be an int >= 2, got {max_length!r}")
    lower = config.get("do_lower_case", False)
    if not isinstance(lower, bool):
        raise ValueError(f"{source}: do_lower_case must be true or false, got {lower!r}")
    return {"max_seq_length": max_length, "do_lower_case": lower}


def _read_pooling(folder: Path) -> Pooling:
    file = folder / "config.json"
    config = _module_config(folder, "Pooling")
    if "pooling_mode" in config:
        mode = config["pooling_mode"]
        modes = (mode,) if isinstance(mode, str) else tuple(mode) if isinstance(mode, list) and mode else None
        if modes is None:
            raise ValueError(f"{file}: pooling_mode must be a mode name or a non-empty list of them, got {mode!r}")
    else:  # configs saved before sentence-transformers 6: one boolean per mode; none set is mean
        modes = tuple(mode for key, mode in _LEGACY_MODE_KEYS.items() if config.get(key)) or ("mean",)
    for mode in modes:
        if mode not in POOLING_MODES:
            raise ValueError(f"{file}: pooling mode {mode!r} is not one of {POOLING_MODES}")
    include_prompt = config.get("include_prompt", True)
    if not isinstance(include_prompt, bool):
        raise ValueError(f"{file}: include_prompt must be true or false, got {include_prompt!r}")
    dimension = config.get("embedding_dimension", config.get("word_embedding_dimension"))
    if dimension is not None and (isinstance(dimension, bool) or not isinstance(dimension, int)):
        raise ValueError(f"{file}: embedding_dimension must be an int, got {dimension!r}")
    return Pooling(modes=modes, include_prompt=include_prompt, dimension=dimension)


def _check_feature_names(config: dict, file: Path, module: str) -> None:
    for key in ("module_input_name", "module_output_name"):
        value = config.get(key)
        if value not in (None, "sentence_embedding"):
            raise ValueError(f"{file}: the {module} module's {key} is {value!r}; rapidscore implements "
                             f"{module} on the sentence embedding only")


def _read_normalize(folder: Path) -> Normalize:
    file = folder / "config.json"
    if file.is_file():  # optional: older models save no config for Normalize
        config = _read_json(file)
        if isinstance(config, dict):
            _check_feature_names(config, file, "Normalize")
    return Normalize()


def _read_dense(folder: Path) -> Dense:
    file = folder / "config.json"
    config = _module_config(folder, "Dense")
    _check_feature_names(config, file, "Dense")
    sizes = (config.get("in_features"), config.get("out_features"))
    if any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in sizes):
        raise ValueError(f"{file}: in_features and out_features must be positive ints, got {sizes}")
    in_features, out_features = sizes
    path = config.get("activation_function", "torch.nn.modules.activation.Tanh")  # Dense's default
    name = path.rsplit(".", 1)[-1] if isinstance(path, str) and path.startswith("torch.") else None
    if name not in ACTIVATIONS:
        raise ValueError(f"{file}: activation_function {path!r} is not implemented by rapidscore "
                         f"(it implements torch.nn {', '.join(ACTIVATIONS)})")
    use_residual = bool(config.get("use_residual", False))
    weights = _read_weights(folder)
    weight = _weight(weights, "linear.weight", (out_features, in_features), folder)
    bias = _weight(weights, "linear.bias", (out_features,), folder) if config.get("bias", True) else None
    residual = (_weight(weights, "residual.weight", (out_features, in_features), folder)
                if use_residual and in_features != out_features else None)
    return Dense(weight=weight, bias=bias, activation=ACTIVATIONS[name], use_residual=use_residual,
                 residual=residual, source=file)


def _weight(weights: dict, key: str, shape: tuple, folder: Path) -> np.ndarray:
    if key not in weights:
        raise ValueError(f"the Dense weights in {folder} have no {key!r} (keys: {sorted(weights)})")
    array = np.ascontiguousarray(weights[key], dtype=np.float32)
    if array.shape != shape:
        raise ValueError(f"the Dense weights in {folder}: {key!r} has shape {array.shape}, the config says {shape}")
    return array


def _read_weights(folder: Path) -> dict:
    """A module's weights as float32 numpy arrays: model.safetensors (read here, no torch) or, failing
    that, pytorch_model.bin (through torch), as sentence-transformers looks for them."""
    safetensors = folder / "model.safetensors"
    if safetensors.is_file():
        return read_safetensors(safetensors)
    pickled = folder / "pytorch_model.bin"
    if not pickled.is_file():
        raise ValueError(f"the Dense module in {folder} has no model.safetensors or pytorch_model.bin")
    try:
        import torch
    except ImportError:
        raise ImportError(f"reading {pickled} needs torch: pip install 'rapidscore[export]'") from None
    from rapidscore.encoder.model_source import refusing_unsafe_pickles

    with refusing_unsafe_pickles([pickled]):  # a pickle that carries code: named, never run
        state = torch.load(pickled, map_location="cpu", weights_only=True)
    return {key: value.float().numpy() for key, value in state.items()}


_SAFETENSORS_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2"}


def read_safetensors(path: str | Path) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file as a float32 array. The format: an 8-byte little-endian
    header size, a JSON header (name -> dtype, shape, byte range), then the data."""
    path = Path(path)
    with open(path, "rb") as handle:
        size_bytes = handle.read(8)
        if len(size_bytes) != 8:
            raise ValueError(f"{path} is not a safetensors file (shorter than 8 bytes)")
        (size,) = struct.unpack("<Q", size_bytes)
        try:
            header = json.loads(handle.read(size))
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ValueError(f"{path} is not a safetensors file: {error}") from None
        data = handle.read()
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _SAFETENSORS_DTYPES.get(info.get("dtype"))
        if dtype is None:
            raise ValueError(f"{path}: tensor {name!r} has dtype {info.get('dtype')!r}; rapidscore reads "
                             f"{sorted(_SAFETENSORS_DTYPES)}")
        begin, end = info["data_offsets"]
        array = np.frombuffer(data[begin:end], dtype=dtype)
        if info["dtype"] == "BF16":  # the top half of a float32
            array = (array.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = array.astype(np.float32).reshape(info["shape"])
    return tensors


def _read_model_config(model_dir: Path) -> dict:
    """Prompts, the default prompt and the similarity function of config_sentence_transformers.json."""
    file = model_dir / "config_sentence_transformers.json"
    prompts = dict(DEFAULT_PROMPTS)
    if not file.is_file():
        return {"prompts": prompts}
    config = _read_object(file)
    model_type = config.get("model_type", "SentenceTransformer")
    if model_type != "SentenceTransformer":
        raise ValueError(f"{file}: model_type is {model_type!r}; rapidscore follows SentenceTransformer models")
    saved = config.get("prompts") or {}
    if not isinstance(saved, dict) or not all(isinstance(k, str) and isinstance(v, (str, type(None)))
                                              for k, v in saved.items()):
        raise ValueError(f"{file}: prompts must map names to strings, got {saved!r:.200}")
    prompts.update({k: v or "" for k, v in saved.items()})
    default = config.get("default_prompt_name")
    if default is not None and default not in prompts:
        raise ValueError(f"{file}: default_prompt_name {default!r} is not one of the prompts {sorted(prompts)}")
    similarity = config.get("similarity_fn_name")
    if similarity is not None and not isinstance(similarity, str):
        raise ValueError(f"{file}: similarity_fn_name must be a string, got {similarity!r}")
    return {"prompts": prompts, "default_prompt_name": default, "similarity_fn_name": similarity}


def prompt_token_count(ids: Sequence[int] | np.ndarray, special_ids: Sequence[int]) -> int:
    """sentence-transformers' prompt length from the prompt tokenised alone (special tokens
    included): its tokens, less a trailing special token (EOS, SEP)."""
    count = len(ids)
    if count and int(ids[-1]) in set(special_ids):
        count -= 1
    return count


def lowercase_tokenizer_json(tokenizer_json: str) -> str:
    """A tokenizer.json text that lowercases first, as sentence-transformers' do_lower_case does
    (a Lowercase normalizer put before the tokenizer's own, unless that one has a Lowercase)."""
    data = json.loads(tokenizer_json)
    normalizer = data.get("normalizer")
    if _has_lowercase(normalizer):
        return tokenizer_json
    sequence = [{"type": "Lowercase"}]
    if normalizer is not None:
        sequence += list(normalizer["normalizers"]) if normalizer.get("type") == "Sequence" else [normalizer]
    data["normalizer"] = {"type": "Sequence", "normalizers": sequence}
    return json.dumps(data)


def _has_lowercase(normalizer: dict | None) -> bool:
    if not normalizer:
        return False
    if normalizer.get("type") == "Lowercase":
        return True
    return normalizer.get("type") == "Sequence" and any(
        n.get("type") == "Lowercase" for n in normalizer.get("normalizers", []))
