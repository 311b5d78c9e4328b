"""Comparing a resume state's settings with the run's: what differs, named in a few characters.

A resumed stream (``common/stream_writer.py``) refuses other settings and names each difference:
the differing fields of a signature, or a window around the first differing character of a long
value. A model recorded by its content fingerprint ("models") is compared by it; its spelling
(the options declared as naming a model, recorded as "model options", and the signature's fields
that spell them) is reported, not compared.

Imports only the standard library.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["settings_meaning", "model_spelling_keys", "settings_difference", "shown_value", "signature_fields"]

# a state written before "model options" was recorded: the options every model command has
_MODEL_NAME_OPTIONS = ("-m", "--model")
SHOWN = 40  # characters of a value shown in full; a longer one is shown where it differs


def signature_fields(signature: str) -> dict[str, str]:
    """``"model:x|layer:4|..."`` -> ``{"model": "model:x", "layer": "layer:4", ...}`` (a field
    without a colon is keyed by itself)."""
    return {part.partition(":")[0]: part for part in signature.split("|")}


def _model_options(settings: dict) -> tuple[str, ...]:
    recorded = settings.get("model options")
    return tuple(recorded) if isinstance(recorded, list) else _MODEL_NAME_OPTIONS


def _spells_a_model(field: str, settings: dict) -> bool:
    """Whether a signature field names a model: its ``model`` field, or one whose value is what
    a model option was given."""
    name, _, value = field.partition(":")
    return name == "model" or any(value == settings.get(option) for option in _model_options(settings))


def settings_meaning(settings: dict) -> dict:
    """The settings a resume compares: with a model's content fingerprint ("models") recorded, its
    name (the model options' values, the signature's fields that spell them) is left out."""
    if "models" not in settings:
        return settings
    meaning = {k: v for k, v in settings.items() if k not in _model_options(settings)}
    signature = meaning.get("signature")
    if isinstance(signature, str):
        meaning["signature"] = "|".join(f for f in signature.split("|") if not _spells_a_model(f, settings))
    return meaning


def model_spelling_keys(then: dict, now: dict) -> set[str]:
    """The model-name entries that differ between two settings that both record models."""
    if "models" not in then or "models" not in now:
        return set()
    keys = {k for k in {*_model_options(then), *_model_options(now)} if then.get(k) != now.get(k)}
    if isinstance(then.get("signature"), str) and isinstance(now.get("signature"), str):
        old = [f for f in then["signature"].split("|") if _spells_a_model(f, then)]
        new = [f for f in now["signature"].split("|") if _spells_a_model(f, now)]
        if old != new:
            keys.add("signature")
    return keys


def shown_value(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= SHOWN else text[:SHOWN // 2] + "..." + text[-SHOWN // 4:]


def settings_difference(key: str, then: Any, now: Any) -> str:
    """``key: <then> then, <now> now``, showing the part of a long value that differs: the
    differing fields of a signature, or a window around the first differing character."""
    if isinstance(then, str) and isinstance(now, str) and "|" in then + now:
        old, new = signature_fields(then), signature_fields(now)
        names = [k for k in dict.fromkeys([*old, *new]) if old.get(k) != new.get(k)]
        if names:
            return (f"{key}: {shown_value('|'.join(old[k] for k in names if k in old) or None)} then, "
                    f"{shown_value('|'.join(new[k] for k in names if k in new) or None)} now")
    old_text, new_text = json.dumps(then, ensure_ascii=False), json.dumps(now, ensure_ascii=False)
    if len(old_text) <= SHOWN and len(new_text) <= SHOWN:
        return f"{key}: {old_text} then, {new_text} now"
    first = next((i for i, (a, b) in enumerate(zip(old_text, new_text)) if a != b), min(len(old_text), len(new_text)))
    start = max(0, first - SHOWN // 4)

    def window(text: str) -> str:
        part = text[start:start + SHOWN]
        return ("..." if start else "") + part + ("..." if start + SHOWN < len(text) else "")

    return f"{key}: {window(old_text)} then, {window(new_text)} now (from character {first})"
