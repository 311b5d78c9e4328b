"""The encoder's design as tests (issue 47): settings resolved once into one frozen object."""

from __future__ import annotations

import dataclasses
import importlib

import pytest

from rapidscore.encoder import Encoder, EncoderSettings, get_encoder, resolve_encoder_settings
from rapidscore.encoder.shared import clear_cache


def test_equal_spellings_give_equal_settings(tiny_bert) -> None:
    plain = resolve_encoder_settings(tiny_bert)
    assert plain.layer == plain.num_layers and plain.backend == "onnx" and plain.precision == "fp32"
    spelled = resolve_encoder_settings(tiny_bert + "/", layer=plain.num_layers, backend="onnx",
                                       max_batch_size=256, long_texts="truncate", unpadded=False)
    assert spelled == plain and hash(spelled) == hash(plain) and spelled.options == ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        plain.layer = 0  # type: ignore[misc]
    sized = resolve_encoder_settings(tiny_bert, max_length=16, cache_dir=tiny_bert)
    assert sized != plain and sized.options == (("cache_dir", tiny_bert), ("max_length", 16))
    assert sized.option("max_length") == 16 and sized.option("batch_tokens", 7) == 7


def test_fast_resolved_to_int8_keys_apart_from_explicit_int8(tiny_bert, monkeypatch) -> None:
    import rapidscore.encoder.settings as settings_module

    monkeypatch.setattr(settings_module, "resolve_precision", lambda precision, device, backend: (
        ("int8", "onnx") if precision == "fast" else (precision, backend)))
    fast = resolve_encoder_settings(tiny_bert, precision="fast")
    named = resolve_encoder_settings(tiny_bert, precision="int8")
    assert fast.precision == named.precision == "int8" and fast.requested_precision == "fast"
    assert fast != named  # the model may refuse int8: "fast" then runs fp32 where "int8" raises


@pytest.mark.parametrize(("options", "error", "message"), [
    ({"layer": 99}, ValueError, r"layer must be in \[0, "),
    ({"layer": True}, TypeError, "layer must be an int"),
    ({"precision": "fp64"}, ValueError, "precision must be one of"),
    ({"backend": "tensorrt"}, ValueError, "backend must be one of"),
    ({"max_length": 1}, ValueError, "max_length must be an int >= 2"),
    ({"max_length": 10**6}, ValueError, "exceeds the .* positions"),
    ({"unpadded": 1}, TypeError, "unpadded must be a bool"),
    ({"add_prefix_space": "yes"}, TypeError, "add_prefix_space must be a bool or None"),
    ({"batch_tokens": 0}, ValueError, "batch_tokens must be a positive int"),
    ({"long_texts": "cut"}, ValueError, "long_texts must be one of"),
    ({"num_thread": 2}, TypeError, "unexpected keyword argument 'num_thread'"),
    ({"progress": True}, TypeError, "progress"),
])
def test_every_check_happens_when_settings_are_resolved(tiny_bert, options, error, message) -> None:
    with pytest.raises(error, match=message):
        resolve_encoder_settings(tiny_bert, **options)


def test_settings_are_resolved_once_per_encoder(tiny_bert, monkeypatch) -> None:
    # every module that may call it is patched: a second resolution anywhere would be counted
    calls: list[EncoderSettings] = []

    def counting(*args, **kwargs):
        calls.append(resolve_encoder_settings(*args, **kwargs))
        return calls[-1]

    for name in ("rapidscore.encoder.settings", "rapidscore.encoder.shared", "rapidscore.encoder.encoder"):
        module = importlib.import_module(name)
        if hasattr(module, "resolve_encoder_settings"):
            monkeypatch.setattr(module, "resolve_encoder_settings", counting)
    clear_cache()
    encoder = get_encoder(tiny_bert, layer=1, precision="fp32")
    assert len(calls) == 1 and encoder.settings is calls[0]
    assert get_encoder(calls[0]) is encoder and len(calls) == 1  # the settings are the cache key
    calls.clear()
    direct = Encoder(tiny_bert, 1)
    assert len(calls) == 1 and direct.settings == encoder.settings
    assert Encoder.from_settings(encoder.settings).settings is encoder.settings and len(calls) == 1
    with pytest.raises(TypeError, match="takes no other argument"):
        get_encoder(encoder.settings, layer=2)
