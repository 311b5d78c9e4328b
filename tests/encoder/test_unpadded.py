"""The unpadded ONNX graph (``Encoder.embed_ids(unpadded=True)``): linear layers over a batch's
real tokens only, attention padded. It must give exactly the padded graph's vectors (the
serving workers rely on it to answer what a direct call answers), for every family it covers,
and fall back to the padded graph everywhere else."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from rapidscore.encoder import Encoder
from rapidscore.encoder.tokens.batching import unpadded_inputs
from rapidscore.encoder.model_source import UNPADDED_FAMILIES
from rapidscore.encoder.runtime import RunnerBase
from rapidscore.testing import tiny_models

WORDS = "the cat sat on a mat while dogs ran quickly over lazy foxes in rainy paris tomorrow".split()


class _FunctionRunner(RunnerBase):
    """A function behind the runner contract: host arrays out, thread-safe."""

    returns, thread_safe = "numpy", True

    def __init__(self, function, provider: str) -> None:
        self.function, self.provider = function, provider

    def __call__(self, input_ids, attention_mask):
        return self.function(input_ids, attention_mask)


def random_texts(n: int, seed: int, max_words: int = 30) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(1, max_words)))) for _ in range(n)]


def assert_unpadded_equals_padded(encoder: Encoder, ids: list[np.ndarray]) -> None:
    padded = encoder.embed_ids(ids)
    unpadded = encoder.embed_ids(ids, unpadded=True)
    assert unpadded.embeddings.tobytes() == padded.embeddings.tobytes()
    assert np.array_equal(unpadded.offsets, padded.offsets) and np.array_equal(unpadded.ids, padded.ids)


def test_unpadded_inputs_match_a_plain_construction():
    rng = np.random.default_rng(0)
    pad = 1
    ids = [rng.integers(0, 6, size=int(rng.integers(1, 9))) for _ in range(7)]
    for roberta in (False, True):
        feed = unpadded_inputs(ids, pad, roberta)
        longest = max(len(seq) for seq in ids)
        rows = []  # (sentence, position in sentence) of each packed token, sentence after sentence
        for s, seq in enumerate(ids):
            rows += [(s, p) for p in range(len(seq))]
        assert feed["input_ids"].tolist() == [int(ids[s][p]) for s, p in rows]
        for t, (s, p) in enumerate(rows):
            assert feed["gather"][s, p] == t and feed["scatter"][t] == s * longest + p
            if roberta:  # HF: pad_id + the count of non-pad tokens up to here; pad tokens get pad_id
                real = [int(x != pad) for x in ids[s][:p + 1]]
                assert feed["position_ids"][t] == (pad + sum(real) if real[-1] else pad)
            else:
                assert feed["position_ids"][t] == p
        assert (feed["gather"] == len(rows)).sum() == len(ids) * longest - len(rows)  # padding slots
        assert feed["attention_mask"].tolist() == [[int(p < len(seq)) for p in range(longest)] for seq in ids]
    with pytest.raises(ValueError, match="non-empty"):
        unpadded_inputs([np.array([1, 2]), np.array([], dtype=np.int64)], 0, False)


@pytest.mark.slow
def test_minilm_unpadded_is_bit_identical_to_padded(minilm_path):
    encoder = Encoder(str(minilm_path), num_threads=1)
    assert encoder.unpadded_available
    texts = random_texts(60, seed=1) + ["", "x", "a very long text " * 200]  # "" has no token; truncation
    ids, truncated = encoder.tokenizer.encode(texts)
    assert truncated == 1
    assert_unpadded_equals_padded(encoder, ids)
    rng = np.random.default_rng(2)
    for _ in range(5):  # other batch compositions, and several unpadded calls (small token budget)
        chosen = [ids[k] for k in rng.choice(len(ids), int(rng.integers(1, 30)), replace=False)]
        assert_unpadded_equals_padded(encoder, chosen)
    small = Encoder(str(minilm_path), num_threads=1, batch_tokens=64)
    assert_unpadded_equals_padded(small, ids[:40])


@pytest.mark.slow
@pytest.mark.parametrize("tiny_model", tiny_models.FAMILIES, indirect=True)
def test_tiny_families_unpadded_is_bit_identical_or_falls_back(tiny_model):
    family = tiny_model.name
    encoder = Encoder(str(tiny_model), layer=2, num_threads=1)
    assert encoder.unpadded_available == (family in UNPADDED_FAMILIES)
    ids, _ = encoder.tokenizer.encode(random_texts(25, seed=3, max_words=20) + [""])
    if family in ("roberta", "xlm-roberta"):
        # A pad id inside a text: the model numbers positions over non-pad tokens only.
        ids.append(np.array([ids[0][0], encoder.spec.pad_id, *ids[0][1:]], dtype=np.int64))
    assert_unpadded_equals_padded(encoder, ids)
    if family in UNPADDED_FAMILIES:
        assert Encoder(str(tiny_model), layer=0).unpadded_available is False  # the embedding layer: padded
        assert Encoder(str(tiny_model), layer="all").unpadded_available is False


@pytest.mark.slow
def test_a_replaced_runner_is_never_bypassed(minilm_path):
    encoder = Encoder(str(minilm_path), num_threads=1, max_length=32)
    calls = []
    real = encoder.runner

    def counting(input_ids, attention_mask):
        calls.append(input_ids.shape)
        return real(input_ids, attention_mask)

    encoder.runner = _FunctionRunner(counting, real.provider)
    assert not encoder.unpadded_available
    encoder.embed_ids(encoder.tokenize(["one text", "and another"]), unpadded=True)
    assert calls  # the assigned runner ran


@pytest.mark.slow
def test_unpadded_from_many_threads_equals_sequential(minilm_path):
    encoder = Encoder(str(minilm_path), num_threads=1)
    texts = random_texts(80, seed=4)
    ids, _ = encoder.tokenizer.encode(texts)
    groups = [ids[k::8] for k in range(8)]
    expected = [encoder.embed_ids(group).embeddings for group in groups]
    results: list = [None] * 8

    def run(k: int) -> None:
        for _ in range(3):
            results[k] = encoder.embed_ids(groups[k], unpadded=True).embeddings

    threads = [threading.Thread(target=run, args=(k,)) for k in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    for got, want in zip(results, expected):
        assert got is not None and got.tobytes() == want.tobytes()


def test_an_encoder_that_only_runs_unpadded_never_makes_its_padded_session(tiny_model_path, tmp_path, monkeypatch):
    """A CPU ONNX Runtime session holds a copy of the weights: the padded one is made on the first
    padded call, once however many threads make it, and never for unpadded calls only."""
    from rapidscore.encoder import cache

    made = []
    real_make_runner = cache.make_runner

    def counting_make_runner(*args, **kwargs):
        made.append(kwargs["onnx_path"])
        return real_make_runner(*args, **kwargs)

    monkeypatch.setattr(cache, "make_runner", counting_make_runner)
    # A cache directory of its own: a model loaded by no other test.
    encoder = Encoder(str(tiny_model_path("bert")), layer=2, num_threads=1, cache_dir=tmp_path)
    assert encoder.unpadded_available and made == [] and not encoder.loaded.runner_created
    ids, _ = encoder.tokenizer.encode(random_texts(12, seed=5))
    unpadded = encoder.embed_ids(ids, unpadded=True).embeddings
    assert len(made) == 1 and not encoder.loaded.runner_created  # the unpadded graph's session only

    results: list = [None] * 8
    barrier = threading.Barrier(8)

    def padded(k: int) -> None:
        barrier.wait()
        results[k] = encoder.embed_ids(ids).embeddings

    threads = [threading.Thread(target=padded, args=(k,)) for k in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert len(made) == 2 and encoder.loaded.runner_created  # one padded session for 8 first calls
    assert made[0] != made[1]
    for got in results:
        assert got is not None and got.tobytes() == unpadded.tobytes()
    assert encoder.provider == "CPUExecutionProvider"


def test_assigning_a_substitute_runner_makes_no_padded_session(tiny_model_path, tmp_path):
    encoder = Encoder(str(tiny_model_path("bert")), layer=2, num_threads=1, cache_dir=tmp_path)
    ids, _ = encoder.tokenizer.encode(random_texts(5, seed=6))
    expected = encoder.embed_ids(ids, unpadded=True).embeddings
    unpadded_runner = encoder.runtime._unpadded_runner
    calls = []

    def substitute(input_ids, attention_mask):  # the unpadded graph's session behind the padded contract
        calls.append(input_ids.shape)
        flat = [row[mask.astype(bool)] for row, mask in zip(input_ids, attention_mask)]
        from rapidscore.encoder.tokens.batching import unpadded_inputs

        packed = unpadded_runner.run_feed(unpadded_inputs(flat, encoder.spec.pad_id, False))
        out = np.zeros((*input_ids.shape, packed.shape[-1]), dtype=np.float32)
        out[attention_mask.astype(bool)] = packed
        return out

    encoder.runner = _FunctionRunner(substitute, "substitute")
    assert not encoder.unpadded_available and not encoder.loaded.runner_created
    got = encoder.embed_ids(ids, unpadded=True).embeddings
    assert calls and not encoder.loaded.runner_created and encoder.provider == "substitute"
    assert got.tobytes() == expected.tobytes()


def test_an_unpadded_encoder_runs_every_call_unpadded(tiny_model_path, tmp_path):
    """``Encoder(unpadded=True)``: encode and sentence_embeddings go through the unpadded graph
    (the padded session is never made) and give the padded encoder's vectors bit for bit;
    ``embed_ids(unpadded=False)`` still picks the padded graph for one call."""
    model = str(tiny_model_path("bert"))
    texts = random_texts(20, seed=7)
    padded = Encoder(model, layer=2, num_threads=1)
    encoder = Encoder(model, layer=2, num_threads=1, cache_dir=tmp_path, unpadded=True)  # loaded by no other test
    got_tokens = encoder.encode(texts).embeddings
    got_vectors = encoder.sentence_embeddings(texts)
    assert not encoder.loaded.runner_created
    assert got_tokens.tobytes() == padded.encode(texts).embeddings.tobytes()
    assert got_vectors.tobytes() == padded.sentence_embeddings(texts).tobytes()
    forced = encoder.embed_ids(encoder.tokenize(texts), unpadded=False).embeddings
    assert encoder.loaded.runner_created and forced.tobytes() == got_tokens.tobytes()
    with pytest.raises(TypeError, match="unpadded must be a bool"):
        Encoder(model, layer=2, unpadded="yes")


def test_an_unpadded_session_the_cache_dropped_is_shared_not_made_again(tiny_model_path, tmp_path, monkeypatch) -> None:
    """The model cache (an LRU of ``MAX_MODELS``) may drop the unpadded graph's loaded model while an
    encoder still runs its session; another encoder of the same settings (a served window request's:
    another ``long_texts``) finds it again rather than making a second session, a second copy of the
    weights. The runtime held only the session, so it was made again: +85 MiB per MiniLM session in
    a process that had loaded 8 other models (tests/serve/test_serve_memory.py in the full run)."""
    import gc

    from rapidscore.encoder.cache import MODELS

    model = str(tiny_model_path("bert"))
    monkeypatch.setattr(MODELS, "max_size", 1)
    first = Encoder(model, layer=2, num_threads=1, cache_dir=tmp_path, unpadded=True)
    ids = first.tokenize(random_texts(6, seed=8))
    expected = first.embed_ids(ids).embeddings
    Encoder(model, layer=2, num_threads=2, cache_dir=tmp_path)  # another key: the LRU of one drops the others
    gc.collect()
    builds = MODELS.builds
    second = Encoder(model, layer=2, num_threads=1, cache_dir=tmp_path, unpadded=True, long_texts="window")
    got = second.embed_ids(ids).embeddings
    assert MODELS.builds == builds, "a model was loaded again"
    assert second.runtime._unpadded_runner is first.runtime._unpadded_runner
    assert got.tobytes() == expected.tobytes()
