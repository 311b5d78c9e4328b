"""``BERTScore(encoder=...)`` (issue 47, item 1): the settings describe the encoder given, taken
from it once (model, layer, backend, device, precision, max_length, batch options), so that the
signature, the encoder cache key and the resume fingerprint are true; an option given beside it
that disagrees is refused, naming both values."""

from __future__ import annotations

import numpy as np
import pytest

from rapidscore.bertscore import BERTScore
from rapidscore.bertscore.settings import resolve_settings
from rapidscore.common.signature import Signature
from rapidscore.encoder import Encoder
from rapidscore.errors import RapidscoreWarning

CANDS = ["The cat sat on the mat.", "Stocks fell sharply on Monday.", ""]
REFS = ["A cat was sitting on the mat.", "Shares dropped on Monday.", "The day was wet."]


@pytest.fixture(scope="module")
def given(tiny_bert) -> Encoder:
    return Encoder(tiny_bert, 2, max_length=32, batch_tokens=512)


def test_the_settings_are_the_given_encoders_and_rebuild_what_ran(given) -> None:
    scorer = BERTScore(encoder=given)
    assert scorer.settings.encoder is given.settings and scorer.encoder is given
    fields = Signature.parse(scorer.signature).as_dict()
    assert (fields["model"], fields["layer"], fields["tok"], fields["backend"]) == \
        (given.model_name, "2", "fast-maxlen32", "onnx-cpu")
    result = scorer.score(CANDS, REFS)
    again = BERTScore.from_settings(scorer.settings)  # the settings alone: the same encoder settings, numbers
    assert again.encoder.settings == given.settings and again.signature == scorer.signature
    assert again.score(CANDS, REFS).f1.tobytes() == result.f1.tobytes()


def test_equal_values_beside_the_encoder_are_accepted(given, tiny_bert) -> None:
    scorer = BERTScore(tiny_bert + "/", 2, encoder=given, backend="onnx", device="cpu", precision="fp32",
                       batch_tokens=512)
    assert scorer.settings.encoder is given.settings and scorer.settings.layer == 2


@pytest.mark.parametrize(("option", "value", "runs"), [
    ("layer", 3, "2"),
    ("backend", "torch", "'onnx'"),
    ("device", "cuda", "'cpu'"),
    ("precision", "bf16", "'fp32'"),
    ("batch_tokens", 77, "512"),
    ("num_threads", 1, "None"),
])
def test_a_conflicting_option_beside_the_encoder_is_refused_naming_both_values(given, option, value, runs) -> None:
    with pytest.raises(ValueError, match=rf"^{option}={value!r} but the given encoder has {option}={runs}"):
        BERTScore(encoder=given, **{option: value})


def test_another_model_beside_the_encoder_is_refused(given, tiny_model_path) -> None:
    other = str(tiny_model_path("roberta"))
    with pytest.raises(ValueError, match=r"model='.*roberta' but the given encoder has model='.*bert'"):
        BERTScore(other, encoder=given)


@pytest.mark.slow  # exports the all-layers graph (about 5 s)
def test_all_layers_needs_an_encoder_of_every_layer(given, tiny_bert) -> None:
    with pytest.raises(ValueError, match=r"all_layers=True .* the given encoder has layer=2"):
        BERTScore(encoder=given, all_layers=True)
    every = Encoder(tiny_bert, "all")
    with pytest.raises(ValueError, match="the given encoder has layer='all': pass all_layers=True"):
        BERTScore(encoder=every)
    scorer = BERTScore(encoder=every, all_layers=True, layer=1)  # layer is not compared with all_layers
    assert scorer.settings.encoder is every.settings and scorer.settings.layer == every.num_layers


def test_from_settings_refuses_an_encoder_the_settings_do_not_describe(given, tiny_bert) -> None:
    with pytest.raises(ValueError, match="the given encoder runs layer=2 where the settings say 3"):
        BERTScore.from_settings(resolve_settings(tiny_bert, 3), encoder=given)
    settings = resolve_settings(encoder=given)
    assert BERTScore.from_settings(settings, encoder=given).encoder is given


@pytest.mark.slow  # tries the Longformer export, then runs it in torch (about 25 s)
def test_a_model_without_a_matching_graph_is_described_as_running_in_torch(tiny_model_path, tmp_path) -> None:
    model = str(tiny_model_path("longformer"))
    with pytest.warns(RapidscoreWarning, match="backend='torch' instead"):
        encoder = Encoder(model, layer=3, cache_dir=tmp_path)
    assert encoder.backend == encoder.settings.backend == "torch"
    scorer = BERTScore(encoder=encoder)
    assert scorer.settings.encoder.backend == "torch" and "|backend:torch-cpu|" in scorer.signature
    again = BERTScore.from_settings(scorer.settings)  # straight to torch, the numbers that ran
    assert again.encoder.backend == "torch"
    assert np.array_equal(again.score(CANDS, REFS).f1, scorer.score(CANDS, REFS).f1)
    with pytest.raises(ValueError, match="backend='onnx' but the given encoder has backend='torch'"):
        BERTScore(encoder=encoder, backend="onnx")
