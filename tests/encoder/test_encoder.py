"""The shared encoder: ONNX vs torch parity, batching, order, duplicates, truncation, cache, errors."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rapidscore import TruncationWarning
from rapidscore.encoder import Encoder
from rapidscore.encoder.tokens.batching import (
    EXACT_PLAN_MAX_SEQUENCES,
    MIN_FILL,
    cheapest_cuts,
    default_batch_tokens,
    pad_batch,
    plan_batches,
)
from rapidscore.errors import ModelNotFoundError
from rapidscore.testing.tiny_models import FAMILIES

TEXTS = [
    "The cat sat on the mat.",
    "A considerably longer sentence, with commas, numbers like 3.14 and words such as naïve café.",
    "東京 is a city; 😀 emoji too.",
    "x",
    "",
]
# Parity bounds from the issue: ONNX Runtime vs the torch model, fp32.
MAX_ABS = 1e-4
MIN_COSINE = 0.99999


def reference_hidden_states(model_dir, ids: list[np.ndarray], pad_id: int) -> list[np.ndarray]:
    """hidden_states of the full, untruncated Hugging Face model, per text (layers+1, n, dim)."""
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(model_dir), attn_implementation="eager").eval()
    input_ids, mask = pad_batch(ids, pad_id)
    with torch.inference_mode():
        out = model(input_ids=torch.from_numpy(input_ids), attention_mask=torch.from_numpy(mask),
                    output_hidden_states=True)
    stacked = torch.stack(out.hidden_states).numpy()
    return [stacked[:, row, : len(seq), :] for row, seq in enumerate(ids)]


def assert_close(got: np.ndarray, expected: np.ndarray):
    assert got.shape == expected.shape
    assert np.abs(got - expected).max() <= MAX_ABS
    g = got.reshape(-1, got.shape[-1]).astype(np.float64)
    e = expected.reshape(-1, expected.shape[-1]).astype(np.float64)
    cosine = (g * e).sum(1) / (np.linalg.norm(g, axis=1) * np.linalg.norm(e, axis=1))
    assert cosine.min() >= MIN_COSINE


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_onnx_matches_torch_for_every_family_and_layer(family, tiny_model_path):
    model_dir = tiny_model_path(family)
    everything = Encoder(str(model_dir), layer="all")
    ids = everything.tokenize(TEXTS)
    expected = reference_hidden_states(model_dir, ids, everything.spec.pad_id)
    for got, want in zip(everything.token_embeddings(TEXTS), expected):
        assert_close(got, want)
    for layer in (0, 1, everything.num_layers):
        single = Encoder(str(model_dir), layer=layer)
        for got, want in zip(single.token_embeddings(TEXTS), expected):
            assert_close(got, want[layer])


@pytest.mark.slow
@pytest.mark.parametrize("layer", [1, 4, 6])
def test_real_minilm_onnx_matches_torch(minilm_path, layer):
    onnx = Encoder(str(minilm_path), layer=layer)
    torch_backend = Encoder(str(minilm_path), layer=layer, backend="torch")
    ids = onnx.tokenize(TEXTS)
    expected = reference_hidden_states(minilm_path, ids, onnx.spec.pad_id)
    for got_onnx, got_torch, want in zip(onnx.token_embeddings(TEXTS), torch_backend.token_embeddings(TEXTS),
                                         expected):
        assert_close(got_onnx, want[layer])
        assert_close(got_torch, want[layer])


@pytest.mark.slow
def test_embedded_default_resolves_offline(minilm_path):
    encoder = Encoder()  # default model: the embedded all-MiniLM-L6-v2
    assert encoder.model_dir == minilm_path
    assert encoder.layer == 6 and encoder.num_layers == 6
    assert Encoder("all-MiniLM-L6-v2").model_dir == minilm_path


@pytest.mark.slow
def test_results_follow_input_order_and_duplicates_are_encoded_once(minilm_path):
    encoder = Encoder(str(minilm_path), layer=3, batch_tokens=64, max_batch_size=2)
    singles = [encoder.token_embeddings([text])[0] for text in TEXTS]
    rng = np.random.default_rng(0)
    order = list(rng.permutation(len(TEXTS))) + [0, 2, 0]
    batched = encoder.token_embeddings([TEXTS[i] for i in order])
    for index, got in zip(order, batched):
        np.testing.assert_allclose(got, singles[index], atol=1e-5, rtol=0)
    encoded = encoder.encode(["same", "same", "other"])
    assert encoded.offsets.tolist()[1] * 2 == encoded.offsets.tolist()[2]


def test_truncation_is_warned_with_a_count(tiny_model_path):
    encoder = Encoder(str(tiny_model_path("bert")), layer=1)
    long_text = " ".join(["word"] * (encoder.max_length * 2))
    with pytest.warns(TruncationWarning, match=r"2 of 3 distinct texts .* truncated"):
        out = encoder.token_embeddings([long_text, "short", long_text + " more"])
    assert out[0].shape[0] == encoder.max_length
    short = Encoder(str(tiny_model_path("bert")), layer=1, max_length=8)
    with pytest.warns(TruncationWarning, match="1 of 1"):
        assert short.token_embeddings([long_text])[0].shape[0] == 8


@pytest.mark.slow
def test_sentence_embeddings_match_sentence_transformers(minilm_path):
    pytest.importorskip("sentence_transformers", reason="sentence-transformers is the parity reference (test extra)")
    from sentence_transformers import SentenceTransformer

    texts = TEXTS[:-1] + ["A man is playing a guitar.", "Someone plays an instrument."]
    expected = SentenceTransformer(str(minilm_path), device="cpu").encode(texts, normalize_embeddings=True)
    got = Encoder(str(minilm_path), max_length=256).sentence_embeddings(texts)
    assert np.abs(got - expected).max() <= 1e-5
    cls = Encoder(str(minilm_path)).sentence_embeddings(texts, pooling="cls", normalize=False)
    first = Encoder(str(minilm_path)).token_embeddings(texts)
    np.testing.assert_allclose(cls, np.stack([f[0] for f in first]), atol=1e-6)


@pytest.mark.slow
def test_cache_is_reused_and_entries_are_complete(minilm_path, tmp_path):
    first = Encoder(str(minilm_path), layer=2, cache_dir=tmp_path)
    second = Encoder(str(minilm_path), layer=2, cache_dir=tmp_path)
    assert first.exported and not second.exported
    assert first.cache_entry == second.cache_entry
    entries = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert entries == [first.cache_entry]  # no staging directory left behind
    assert {p.name for p in first.cache_entry.iterdir()} >= {"model.onnx", "tokenizer.json", "meta.json"}


@pytest.mark.slow
def test_two_processes_exporting_at_once_produce_one_entry(tiny_model_path, tmp_path):
    model_dir = tiny_model_path("electra")
    code = (
        "import sys, json\n"
        "from rapidscore.encoder import Encoder\n"
        f"e = Encoder({str(model_dir)!r}, layer=2, cache_dir={str(tmp_path)!r})\n"
        "print(json.dumps([e.exported, e.token_embeddings(['concurrent export'])[0].sum().item()]))\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=dict(os.environ)) for _ in range(2)]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
        results.append(out.strip().splitlines()[-1])
    import json

    flags = sorted(json.loads(r)[0] for r in results)
    sums = {round(json.loads(r)[1], 4) for r in results}
    assert flags == [False, True]  # exactly one process exported, the other reused its entry
    assert len(sums) == 1
    assert len([p for p in tmp_path.iterdir() if p.is_dir()]) == 1


def test_failed_export_leaves_no_entry(tmp_path, monkeypatch, minilm_path):
    from rapidscore.encoder.export import onnx_export

    def broken(*args, **kwargs):
        (args[0] / "model.onnx").write_bytes(b"partial")
        raise RuntimeError("simulated crash during export")

    monkeypatch.setattr(onnx_export, "_export_into", broken)
    with pytest.raises(RuntimeError, match="simulated crash"):
        Encoder(str(minilm_path), layer=1, cache_dir=tmp_path)
    assert [p for p in tmp_path.iterdir() if p.is_dir()] == []


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"model": "no-such-org/no-such-model-xyz"}, ModelNotFoundError, "no-such-org/no-such-model-xyz"),
        ({"model": "not a valid id !"}, ModelNotFoundError, "not a valid id"),
        ({"model": None}, TypeError, "None"),
        ({"layer": 7}, ValueError, r"\[0, 6\].*got 7"),
        ({"layer": -1}, ValueError, "got -1"),
        ({"layer": "3"}, TypeError, "'3'"),
        ({"backend": "tensorflow"}, ValueError, "tensorflow"),
        ({"device": "tpu"}, ValueError, "tpu"),
        ({"precision": "fp8"}, ValueError, "fp8"),
    ],
)
def test_bad_arguments_raise_clear_errors(kwargs, error, message, minilm_path):
    kwargs = {"model": str(minilm_path), **kwargs}
    with pytest.raises(error, match=message):
        Encoder(**kwargs)


@pytest.mark.slow
def test_bad_texts_raise_type_errors(minilm_path):
    encoder = Encoder(str(minilm_path), layer=1)
    with pytest.raises(TypeError, match=r"texts\[1\] must be a str, got NoneType"):
        encoder.token_embeddings(["fine", None])
    with pytest.raises(TypeError, match=r"texts\[0\] must be a str, got int"):
        encoder.sentence_embeddings([3])
    with pytest.raises(TypeError, match="list of strings, got str"):
        encoder.token_embeddings("a bare string")
    assert encoder.token_embeddings([]) == []
    assert encoder.sentence_embeddings([]).shape == (0, 384)


@pytest.mark.slow
def test_cuda_without_provider_is_a_clear_error(minilm_path):
    import onnxruntime

    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        pytest.skip("this machine has the CUDA provider; the error path cannot be exercised")
    with pytest.raises(RuntimeError, match="onnxruntime-gpu"):
        Encoder(str(minilm_path), layer=1, device="cuda")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 300), max_size=60), st.integers(1, 2000), st.integers(1, 16))
def test_batch_plan_covers_every_sequence_once_within_budget(lengths, budget, max_batch):
    batches = plan_batches(lengths, budget, max_batch)
    seen = np.concatenate(batches) if batches else np.array([], dtype=np.int64)
    assert sorted(seen.tolist()) == list(range(len(lengths)))
    for batch in batches:
        assert len(batch) <= max_batch
        padded = len(batch) * max(max(lengths[i] for i in batch), 1)
        assert len(batch) == 1 or padded <= budget
        if len(lengths) > EXACT_PLAN_MAX_SEQUENCES:
            assert len(batch) == 1 or sum(max(lengths[i], 1) for i in batch) >= MIN_FILL * padded


def _plan_cost(sorted_lengths, cuts, call_cost):
    return sum((end - start) * sorted_lengths[start] + call_cost for start, end in zip(cuts[:-1], cuts[1:]))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=11), st.integers(1, 200), st.integers(1, 6),
       st.integers(0, 50))
def test_small_batch_plans_are_the_cheapest_contiguous_split(lengths, budget, max_batch, call_cost):
    """Brute force over every split of the sorted lengths into runs (2^(n-1) of them)."""
    import itertools

    sorted_lengths = np.sort(np.asarray(lengths))[::-1]
    n = len(sorted_lengths)
    best = None
    for mask in itertools.product((False, True), repeat=n - 1):
        cuts = [0] + [k + 1 for k, cut in enumerate(mask) if cut] + [n]
        runs = list(zip(cuts[:-1], cuts[1:]))
        if all(end - start == 1 or (end - start <= max_batch and (end - start) * sorted_lengths[start] <= budget)
               for start, end in runs):
            cost = _plan_cost(sorted_lengths, cuts, call_cost)
            best = cost if best is None else min(best, cost)
    cuts = cheapest_cuts(sorted_lengths, budget, max_batch, call_cost)
    assert cuts[0] == 0 and cuts[-1] == n and all(a < b for a, b in zip(cuts[:-1], cuts[1:]))
    assert _plan_cost(sorted_lengths, cuts, call_cost) == best


def test_a_few_mixed_lengths_share_one_call():
    """A served request's two sentences of 9 and 14 tokens: one padded call, not two."""
    assert len(plan_batches([9, 14], 1024, 64)) == 1
    assert len(plan_batches([9, 14], 1024, 64, call_cost=0)) == 2


@pytest.mark.slow
def test_default_batch_budget_follows_device_and_precision(minilm_path):
    assert Encoder(str(minilm_path), layer=1).batch_tokens == default_batch_tokens("cpu", "fp32") == 1024
    assert default_batch_tokens("cpu", "bf16") == 2048
    assert default_batch_tokens("cuda", "fp32") == 16384
    assert Encoder(str(minilm_path), layer=1, batch_tokens=64).batch_tokens == 64
    for bad in (0, -5, 2.5, "1024", True):
        with pytest.raises(ValueError, match="batch_tokens"):
            Encoder(str(minilm_path), layer=1, batch_tokens=bad)
