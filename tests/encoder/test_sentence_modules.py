"""The sentence package's modules one by one (issue 38): each loads from its folder and runs
forward in numpy and torch; the encoder's sentence path is ``Encoder.sentence``; texts follow the
common container rules; runner locks go with their runner.

The vectors against sentence-transformers: tests/encoder/test_sentence_pipeline.py.
"""

from __future__ import annotations

import gc
import json
from dataclasses import dataclass

import numpy as np
import pytest

from rapidscore.encoder import Encoder, check_texts, sentence, sentence_pipeline
from rapidscore.encoder.tokens import tokenization
from rapidscore.encoder import forward as forward_module
from rapidscore.encoder.sentence import POOLING_MODES, Dense, Normalize, Pooling, SentenceEncoder

TEXTS = ["The cat sat on the mat.", "x", "", "The cat sat on the mat.", "A longer sentence, with commas."]


def test_the_mode_table_follows_sentence_transformers_order():
    assert POOLING_MODES == ("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken")


def test_the_old_module_names_the_same_objects():
    for name in sentence_pipeline.__all__:
        home = tokenization if name in ("lowercase_tokenizer_json", "prompt_token_count") else sentence
        assert getattr(sentence_pipeline, name) is getattr(home, name), name


def test_each_module_loads_from_its_folder(tmp_path):
    save_file = pytest.importorskip("safetensors.numpy").save_file
    rng = np.random.default_rng(0)
    (tmp_path / "pool").mkdir()
    (tmp_path / "pool" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": 4, "pooling_mode_cls_token": True, "pooling_mode_max_tokens": True,
         "include_prompt": False}))
    assert Pooling.load(tmp_path / "pool") == Pooling(modes=("cls", "max"), include_prompt=False, dimension=4)
    (tmp_path / "dense").mkdir()
    (tmp_path / "dense" / "config.json").write_text(json.dumps(
        {"in_features": 4, "out_features": 3, "activation_function": "torch.nn.modules.activation.ReLU"}))
    weight, bias = rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=3).astype(np.float32)
    save_file({"linear.weight": weight, "linear.bias": bias}, str(tmp_path / "dense" / "model.safetensors"))
    dense = Dense.load(tmp_path / "dense")
    assert (dense.in_features, dense.out_features, dense.activation) == (4, 3, "relu")
    x = rng.normal(size=(5, 4)).astype(np.float32)
    np.testing.assert_allclose(dense.forward(x), np.maximum(x @ weight.T + bias, 0), rtol=0, atol=1e-6)
    assert Normalize.load(tmp_path / "no-config") == Normalize()  # older models save no config


@pytest.mark.parametrize("activation", ["identity", "tanh", "relu", "sigmoid", "gelu"])
def test_dense_and_normalize_agree_in_numpy_and_torch(activation):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    dense = Dense(weight=rng.normal(size=(3, 6)).astype(np.float32), bias=rng.normal(size=3).astype(np.float32),
                  activation=activation, use_residual=True, residual=rng.normal(size=(3, 6)).astype(np.float32))
    x = rng.normal(size=(7, 6)).astype(np.float32) * 3
    for step, vectors in ((dense, x), (Normalize(), np.vstack([x, np.zeros((1, 6), np.float32)]))):
        host = step.forward(vectors)
        device = step.forward(torch.from_numpy(vectors)).numpy()
        assert host.dtype == np.float32 and np.isfinite(host).all()
        np.testing.assert_allclose(host, device, rtol=0, atol=1e-5)


def test_the_encoder_sentence_path_is_a_sentence_encoder(tiny_model_path):
    encoder = Encoder(str(tiny_model_path("bert")))
    assert isinstance(encoder.sentence, SentenceEncoder) and encoder.sentence is encoder.sentence
    assert encoder.sentence_pipeline is encoder.sentence.pipeline
    assert encoder.sentence_max_length == encoder.sentence.max_length == encoder.max_length
    vectors = encoder.sentence_embeddings(TEXTS)
    np.testing.assert_array_equal(vectors, encoder.sentence.embed(TEXTS))
    np.testing.assert_array_equal(vectors[0], vectors[3])
    np.testing.assert_array_equal(encoder.pool(encoder.encode(TEXTS)), vectors)
    with pytest.raises(ValueError, match="pooling must be one of"):
        encoder.sentence.embed(TEXTS, pooling="median")
    with pytest.raises(ValueError, match="single layer"):
        Encoder(str(tiny_model_path("bert")), layer="all").sentence_embeddings(TEXTS)


def test_texts_follow_the_common_container_rules(tiny_model_path):
    encoder = Encoder(str(tiny_model_path("bert")))
    want = encoder.tokenize(TEXTS)
    for container in (tuple(TEXTS), np.array(TEXTS)):
        assert [ids.tolist() for ids in encoder.tokenize(container)] == [ids.tolist() for ids in want]
    for bad, kind in (((t for t in TEXTS), "generator"), ({"a": 1}, "dict"), ({"a"}, "set"), ("a", "str")):
        with pytest.raises(TypeError, match=f"^texts must be a list of strings, got {kind}$"):
            encoder.sentence_embeddings(bad)
    with pytest.raises(TypeError, match=r"^idf_sents\[1\] must be a str, got int: 3$"):
        check_texts(["a", 3], "idf_sents")
    assert type(check_texts(np.array(["a"]))[0]) is str


def test_tokenize_ids_keeps_its_older_name():
    assert tokenization.BatchTokenizer.encode is tokenization.BatchTokenizer.tokenize_ids


@dataclass
class _Unhashable:  # a dataclass compares by value, so it has no hash
    name: str


def test_a_runner_lock_is_per_object_and_goes_with_it():
    runner = _Unhashable("a")
    lock = forward_module.lock_of(runner)
    assert forward_module.lock_of(runner) is lock
    other = _Unhashable("a")  # equal, but another runner: its own lock
    assert forward_module.lock_of(other) is not lock
    keys = (id(runner), id(other))
    del runner, other
    gc.collect()
    assert not set(keys) & set(forward_module._RUNNER_LOCKS)
