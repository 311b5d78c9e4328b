"""A reader of safetensors files (a Dense module's weights) in numpy: no torch, no safetensors package."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

__all__ = ["read_safetensors"]

_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2"}


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
        dtype = _DTYPES.get(info.get("dtype"))
        if dtype is None:
            raise ValueError(f"{path}: tensor {name!r} has dtype {info.get('dtype')!r}; rapidscore reads "
                             f"{sorted(_DTYPES)}")
        begin, end = info["data_offsets"]
        array = np.frombuffer(data[begin:end], dtype=dtype)
        if info["dtype"] == "BF16":  # the top half of a float32
            array = (array.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = array.astype(np.float32).reshape(info["shape"])
    return tensors
