"""sentence-transformers' Dense module: ``activation(x @ weight.T + bias)`` on sentence vectors.

Loaded from its folder (config.json, then model.safetensors or pytorch_model.bin); ``forward``
runs on host vectors in numpy or on a torch tensor on its device (the weights copied there once
per device). The activations implemented are the entries of ``_FUNCTIONS``: each one's numpy
function and the torch function sentence-transformers' default-argument ``torch.nn`` class calls.

No torch at import: the numpy path runs without it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rapidscore.encoder.sentence.config import check_feature_names, module_config
from rapidscore.encoder.sentence.safetensors import read_safetensors

__all__ = ["ACTIVATIONS", "Dense"]

# Dense activations implemented here: torch.nn class name -> ours. Saved as the class's full path
# (torch.nn.modules.activation.Tanh); built with its default arguments, as sentence-transformers does.
ACTIVATIONS = {"Identity": "identity", "Tanh": "tanh", "ReLU": "relu", "Sigmoid": "sigmoid", "GELU": "gelu"}


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
    # device -> (weight, bias, residual) as torch tensors there (made on first use)
    _on_device: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    name = "dense"

    @property
    def in_features(self) -> int:
        return int(self.weight.shape[1])

    @property
    def out_features(self) -> int:
        return int(self.weight.shape[0])

    @classmethod
    def load(cls, folder: Path) -> Dense:
        """The Dense saved in ``folder``: its config.json (sizes, bias, activation, residual) and
        weights, checked against each other."""
        file = folder / "config.json"
        config = module_config(folder, "Dense")
        check_feature_names(config, file, "Dense")
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
        return cls(weight=weight, bias=bias, activation=ACTIVATIONS[name], use_residual=use_residual,
                   residual=residual, source=file)

    def forward(self, x: Any) -> Any:
        """The layer on (n, in_features) vectors: a float32 numpy array on the host, or a torch
        tensor, on its device."""
        if isinstance(x, np.ndarray):
            out = x @ self.weight.T
            if self.bias is not None:
                out += self.bias
            out = _FUNCTIONS[self.activation][0](out)
            if self.use_residual:
                out += x if self.residual is None else x @ self.residual.T
            return out.astype(np.float32, copy=False)
        import torch

        weight, bias, residual = self._tensors_on(x.device)
        out = _torch_function(self.activation)(torch.nn.functional.linear(x, weight, bias))
        if self.use_residual:
            out = out + (x if residual is None else torch.nn.functional.linear(x, residual))
        return out

    def _tensors_on(self, device: Any) -> tuple:
        key = str(device)
        tensors = self._on_device.get(key)
        if tensors is None:
            import torch

            tensors = tuple(None if array is None else torch.from_numpy(array).to(device)
                            for array in (self.weight, self.bias, self.residual))
            self._on_device[key] = tensors  # a race makes the same tensors twice: harmless
        return tensors


# ------------------------------------------------------------------------------------------------
# activations
# ------------------------------------------------------------------------------------------------

def _identity(x: Any) -> Any:
    return x


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, np.float32(0))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return (0.5 * (1.0 + np.tanh(0.5 * x))).astype(np.float32)  # no overflow for large |x|


def _gelu(x: np.ndarray) -> np.ndarray:
    """torch.nn.GELU(): the exact (erf) form."""
    x64 = x.astype(np.float64)
    return (0.5 * x64 * (1.0 + _erf(x64 / np.sqrt(2.0)))).astype(np.float32)


def _erf(x: np.ndarray) -> np.ndarray:
    """erf to within 1.5e-7 (Abramowitz and Stegun 7.1.26): numpy has none, float32 needs no more."""
    t = 1.0 / (1.0 + 0.3275911 * np.abs(x))
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return np.sign(x) * (1.0 - poly * np.exp(-x * x))


# ours -> (the numpy function, the torch function's path below ``torch``; None: the identity)
_FUNCTIONS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], str | None]] = {
    "identity": (_identity, None),
    "tanh": (np.tanh, "tanh"),
    "relu": (_relu, "relu"),
    "sigmoid": (_sigmoid, "sigmoid"),
    "gelu": (_gelu, "nn.functional.gelu"),
}


def _torch_function(activation: str) -> Callable[[Any], Any]:
    path = _FUNCTIONS[activation][1]
    if path is None:
        return _identity
    import torch

    function: Any = torch
    for part in path.split("."):
        function = getattr(function, part)
    return function


# ------------------------------------------------------------------------------------------------
# weights
# ------------------------------------------------------------------------------------------------

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
    from rapidscore.encoder.model_source import load_pickled_weights

    state = load_pickled_weights(pickled)  # a pickle that carries code: named, never run
    return {key: value.float().numpy() for key, value in state.items()}
