"""The JSON files of a sentence-transformers model directory, read with errors that name the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["read_json", "read_object", "module_config", "check_feature_names"]


def read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON: {error}") from None


def read_object(file: Path) -> dict:
    """A JSON file that must hold an object (a module's or the model's configuration)."""
    config = read_json(file)
    if not isinstance(config, dict):
        raise ValueError(f"{file} must hold a JSON object, got {config!r:.200}")
    return config


def module_config(folder: Path, module: str) -> dict:
    """The ``config.json`` a module (Pooling, Dense) must have, as an object."""
    file = folder / "config.json"
    if not file.is_file():
        raise ValueError(f"the {module} module has no config file {file}")
    return read_object(file)


def check_feature_names(config: dict, file: Path, module: str) -> None:
    """A module after pooling (Dense, Normalize) must read and write the sentence embedding."""
    for key in ("module_input_name", "module_output_name"):
        value = config.get(key)
        if value not in (None, "sentence_embedding"):
            raise ValueError(f"{file}: the {module} module's {key} is {value!r}; rapidscore implements "
                             f"{module} on the sentence embedding only")
