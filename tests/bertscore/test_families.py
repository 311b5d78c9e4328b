"""Every model family of bert-score 0.3.13's table (and modern encoders beyond it) against
bert-score itself, through both backends: tiny random models (rapidscore.testing.tiny_models).

Bound from the issue: max |difference| <= 1e-5 for P, R and F. Layers 1 and the model's depth
(and 0, which bert-score accepts too), all_layers, idf, several references, a text longer than
Longformer's and LED's attention window, a text of unknown tokens only, and one-token texts
(bert-score's "empty" test counts tokens: with T5-style tokenizers one token plus </s> is "empty").
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import rapidscore
from rapidscore.encoder import Encoder
from rapidscore.encoder.model_source import num_layers as config_depth
from rapidscore.errors import RapidscoreWarning
from rapidscore.testing import tiny_models
from rapidscore.testing.corpora import family_parity_pairs

pytestmark = pytest.mark.slow  # runs the bert-score reference on every family

bert_score = pytest.importorskip("bert_score", reason="the reference package is needed for parity")
TOLERANCE = 1e-5
DEPTH = tiny_models.NUM_LAYERS
# Families whose ONNX graph cannot match the model (the forward pass pads to the attention window
# in Python): they run in torch with a warning.
TORCH_ONLY = {"longformer", "led"}
# SqueezeBERT (bert-score cuts it only with all_layers) and ConvBERT (bert-score's scores move with
# its batch composition): the two special cases, documented in rapidscore.testing.tiny_configs.
CUT_ONLY_BY_RAPIDSCORE = tiny_models.CUT_ONLY_BY_RAPIDSCORE
PADDING_SENSITIVE = tiny_models.PADDING_SENSITIVE
# The inputs, shared with bench/family_parity.py.
CANDS, REFS = family_parity_pairs()
SINGLE_REFS = [group[0] for group in REFS]


def reference(cands, refs, model, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        P, R, F = bert_score.score(cands, refs, model_type=model, idf=True, **kwargs)
    return P.numpy(), R.numpy(), F.numpy()


def ours(cands, refs, model, backend, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RapidscoreWarning)  # the torch fallback's warning: tested below
        P, R, F = rapidscore.bert_score.score(cands, refs, model_type=model, idf=True, backend=backend, **kwargs)
    return P.numpy(), R.numpy(), F.numpy()


def max_difference(got, expected) -> float:
    assert all(g.shape == e.shape for g, e in zip(got, expected))
    return max(float(np.abs(g.astype(np.float64) - e).max()) for g, e in zip(got, expected))


@pytest.mark.parametrize("backend", ["onnx", "torch"])
@pytest.mark.parametrize("family", tiny_models.ALL_FAMILIES)
def test_family_matches_reference(family, backend, tiny_model_path):
    model = str(tiny_model_path(family))
    layers = [1, DEPTH] if backend == "onnx" else [0, 1, 2, DEPTH]
    if family == "deberta-v2":
        layers = [n for n in layers if n]  # bert-score cannot run DeBERTa-v2 without layers
    batch = dict(batch_size=1) if family in PADDING_SENSITIVE else {}
    # bert-score's all_layers takes a single reference per candidate
    every_layer = reference(CANDS, SINGLE_REFS, model, num_layers=DEPTH, all_layers=True, **batch)
    got = ours(CANDS, SINGLE_REFS, model, backend, num_layers=DEPTH, all_layers=True, **batch)
    assert got[0].shape == (DEPTH + 1, len(CANDS))
    assert max_difference(got, every_layer) <= TOLERANCE
    for layer in layers:
        if family in CUT_ONLY_BY_RAPIDSCORE:
            refs, expected = SINGLE_REFS, tuple(scores[layer] for scores in every_layer)
        else:
            refs, expected = REFS, reference(CANDS, REFS, model, num_layers=layer, **batch)
        difference = max_difference(ours(CANDS, refs, model, backend, num_layers=layer, **batch), expected)
        assert difference <= TOLERANCE, (family, backend, layer, difference)


def test_a_padding_sensitive_model_scores_each_sentence_as_if_alone(tiny_model_path):
    """bert-score's ConvBERT scores depend on which sentences share its batches; rapidscore's do
    not: the same sentence scores the same with any company."""
    model = str(tiny_model_path("convbert"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        moved = bert_score.score(CANDS, SINGLE_REFS, model_type=model, num_layers=DEPTH)[2].numpy()
        alone = bert_score.score(CANDS, SINGLE_REFS, model_type=model, num_layers=DEPTH, batch_size=1)[2].numpy()
    assert np.abs(moved - alone).max() > 0  # the reference's own batch dependence
    scorer = rapidscore.bertscore.BERTScore(model, DEPTH)
    assert scorer.encoder.padding_sensitive
    few = scorer.score(CANDS[:4], SINGLE_REFS[:4]).f1
    many = scorer.score(CANDS, SINGLE_REFS).f1[:4]
    np.testing.assert_array_equal(few, many)


def test_depth_is_read_from_every_familys_config(tiny_model_path):
    for family in tiny_models.ALL_FAMILIES:
        with open(tiny_model_path(family) / "config.json", encoding="utf-8") as handle:
            assert config_depth(json.load(handle)) == DEPTH, family


@pytest.mark.parametrize("family", sorted(TORCH_ONLY))
def test_a_model_without_a_matching_graph_runs_in_torch_with_a_warning(family, tiny_model_path, tmp_path):
    model = tiny_model_path(family)
    with pytest.warns(RapidscoreWarning, match=r"differs from the model .*backend='torch' instead"):
        encoder = Encoder(model, layer=3, cache_dir=tmp_path)
    assert encoder.backend == "torch"
    refusals = list((tmp_path).glob("*.no-onnx.json"))
    assert len(refusals) == 1
    # The refusal is remembered: a new process (cleared model cache) does not export again.
    from rapidscore.encoder import clear_cache

    clear_cache()
    from rapidscore.encoder.cache import MODELS

    MODELS.clear()
    with pytest.warns(RapidscoreWarning, match="backend='torch' instead"):
        again = Encoder(model, layer=3, cache_dir=tmp_path)
    assert again.backend == "torch" and not again.exported
    assert "backend:torch-cpu" in rapidscore.bertscore.BERTScore(encoder=again).signature


def test_unknown_text_is_content_not_special(tiny_model_path):
    """A text of [UNK] pieces only is not empty: bert-score scores it, and so does the native API
    (it used to count [UNK] as a special token and score such texts 0)."""
    model = str(tiny_model_path("bert"))
    cands, refs = ["Ω ∑ Ω", "Ω", "👍"], ["Ω ∑ Ω", "a cat", "👍"]
    result = rapidscore.bertscore.BERTScore(model, 2).score(cands, refs, reference_batch_size=64)
    assert result.f1[0] == pytest.approx(1.0, abs=1e-6) and result.details["empty_pairs"] == 0
    expected = reference(cands, refs, model, num_layers=2)
    idf_result = rapidscore.bertscore.BERTScore(model, 2, idf=True).score(cands, refs, reference_batch_size=64)
    assert max_difference((idf_result.precision, idf_result.recall, idf_result.f1), expected) <= TOLERANCE


def test_one_token_texts_of_a_one_token_framing(tiny_model_path):
    """T5 frames a text with </s> only. bert-score calls a two-token text empty (P = R = 0, F kept);
    the drop-in reproduces that, the native API scores it as the text it is."""
    model = str(tiny_model_path("t5"))
    cands, refs = ["a", "cat"], ["a", "a cat sat"]
    expected = reference(cands, refs, model, num_layers=2)
    got = ours(cands, refs, model, "onnx", num_layers=2)
    assert max_difference(got, expected) <= TOLERANCE
    assert got[0][0] == 0.0 and got[1][0] == 0.0
    native = rapidscore.bertscore.BERTScore(model, 2).score(cands, refs)
    assert native.f1[0] == pytest.approx(1.0, abs=1e-6) and native.details["empty_pairs"] == 0


@pytest.mark.parametrize("config, message", [
    ({"model_type": "nosuchmodel"}, r"number of layers of model type 'nosuchmodel'.*please report"),
    ({"model_type": "nosuchmodel", "num_hidden_layers": 2, "hidden_size": 8},
     r"cannot build model type 'nosuchmodel'"),
])
def test_an_unknown_model_type_is_named(tmp_path, config, message):
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        Encoder(tmp_path, cache_dir=tmp_path / "cache")
