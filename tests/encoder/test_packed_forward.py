"""The packed forward of the torch backend (``rapidscore.device.packed``, ``TorchRunner.run_packed``):
a batch's real tokens only, attention per sentence through SDPA. Every token vector must be the
padded forward's within 1e-5 in fp32 on the CPU, and a sentence's vectors must not depend on the
sentences packed beside it. Measured, both attention layouts: at most 9.5e-7 on the tiny
families, 4.0e-6 on all-MiniLM-L6-v2 at layer 2 and 3.1e-6 at layer 6; the padded forward's own
vectors of a sentence alone are up to 3.6e-6 from those of the same sentence in a batch."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from rapidscore.device.tf32 import exact_fp32
from rapidscore.encoder.tokens.batching import unpadded_inputs
from rapidscore.encoder.model_source import UNPADDED_FAMILIES
from rapidscore.device.packed import ATTENTIONS, check_packed, default_attention, packed_feed, packed_hidden
from rapidscore.encoder.runtime.torch import TorchRunner, bf16_supported
from rapidscore.encoder.torch_model import load_tokenizer
from rapidscore.testing import tiny_models

# The jagged layout on the CPU goes through SDPA's math fallback, which builds strided nested tensors.
pytestmark = pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors is in prototype stage:UserWarning")

FP32_TOLERANCE = 1e-5
# bf16 keeps 8 significant bits: the packed and the padded bf16 forwards round their different
# operation orders differently. Measured on an AVX512-BF16 EPYC (the same as the padded bf16
# forward's distance to fp32): the largest |diff| is 0.4 % of the largest |value| on the tiny
# families, 0.8 % on MiniLM, and every token vector keeps a cosine of at least 0.9997.
BF16_RELATIVE = 0.03
BF16_COSINE = 0.999

WORDS = ["the", "cat", "sat", "on", "a", "mat", "while", "dogs", "ran", "quickly", "over", "lazy", "foxes", "in",
         "rainy", "paris", "tomorrow"]
PACKED_FAMILIES = [family for family in tiny_models.FAMILIES if family in UNPADDED_FAMILIES]


def mixed_ids(model_dir, n: int, seed: int, long_words: int = 300) -> list[np.ndarray]:
    """Token ids of ``n`` random texts, "" ([CLS][SEP] or its family's framing), one token alone
    (length 1) and one long text (cut at the model's length unless ``long_words`` is small)."""
    tokenizer, config = load_tokenizer(model_dir, None)
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 30)))) for _ in range(n)]
    texts += ["", "a long text " * long_words]
    limit = min(int(tokenizer.model_max_length), config.max_position_embeddings - 2)
    encoded = tokenizer(texts, truncation=True, max_length=limit)["input_ids"]
    ids = [np.asarray(seq, dtype=np.int64) for seq in encoded]
    ids.append(ids[0][:1].copy())
    assert len(ids[-3]) == 2 and len(ids[-1]) == 1
    assert len(ids[-2]) == limit or long_words < 100  # cut at the model's length
    return ids


def padded_rows(runner: TorchRunner, ids: list[np.ndarray]) -> list[np.ndarray]:
    """Each sentence's real-token vectors from one right-padded batch through the runner."""
    pad = runner.model.config.pad_token_id or 0
    longest = max(len(seq) for seq in ids)
    input_ids = np.full((len(ids), longest), pad, dtype=np.int64)
    mask = np.zeros_like(input_ids)
    for row, seq in enumerate(ids):
        input_ids[row, :len(seq)], mask[row, :len(seq)] = seq, 1
    hidden = runner(input_ids, mask).cpu().numpy()
    return [hidden[row, :len(seq)] for row, seq in enumerate(ids)]


def split(hidden, ids: list[np.ndarray]) -> list[np.ndarray]:
    hidden = hidden.float().cpu().numpy() if hasattr(hidden, "numpy") else hidden
    ends = np.cumsum([len(seq) for seq in ids])
    return np.split(hidden, ends[:-1])


def max_diff(got: list[np.ndarray], want: list[np.ndarray]) -> float:
    assert [g.shape for g in got] == [w.shape for w in want]
    return max(float(np.abs(g - w).max()) for g, w in zip(got, want))


def run_layout(runner: TorchRunner, ids: list[np.ndarray], attention: str) -> list[np.ndarray]:
    tensors = {name: torch.from_numpy(array) for name, array in packed_feed(runner.model, ids).items()}
    with torch.inference_mode():
        return split(packed_hidden(runner.model, tensors, attention=attention), ids)


@pytest.mark.parametrize("family", PACKED_FAMILIES)
def test_packed_equals_padded_for_each_family(family, tiny_model_path) -> None:
    model_dir = tiny_model_path(family)
    runner = TorchRunner(model_dir, 2, "cpu", None)
    assert runner.packed
    ids = mixed_ids(model_dir, 12, seed=1)
    if family in ("roberta", "xlm-roberta"):
        # A pad id inside a text: RoBERTa numbers positions over the non-pad tokens only.
        pad = runner.model.config.pad_token_id
        ids.append(np.array([ids[0][0], pad, *ids[0][1:]], dtype=np.int64))
    want = padded_rows(runner, ids)
    got = runner.run_packed(ids)
    assert got.dtype == torch.float32 and got.device.type == "cpu"
    assert got.shape == (sum(len(seq) for seq in ids), runner.model.config.hidden_size)
    assert max_diff(split(got, ids), want) <= FP32_TOLERANCE
    for attention in ATTENTIONS:
        assert max_diff(run_layout(runner, ids, attention), want) <= FP32_TOLERANCE, attention


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_a_sentence_does_not_depend_on_its_neighbours(attention, tiny_model_path) -> None:
    """Each sentence alone (no padding, no neighbour) against the same sentence packed among
    others in two orders: a token attending across a sentence boundary, a position counted
    from the wrong start or rows scattered to the wrong sentence would show here."""
    model_dir = tiny_model_path("roberta")
    runner = TorchRunner(model_dir, 4, "cpu", None)
    ids = mixed_ids(model_dir, 9, seed=2, long_words=20)
    alone = [split(runner.run_packed([seq]), [seq])[0] for seq in ids]
    assert max_diff(alone, [padded_rows(runner, [seq])[0] for seq in ids]) <= FP32_TOLERANCE
    order = np.random.default_rng(3).permutation(len(ids))
    shuffled = run_layout(runner, [ids[k] for k in order], attention)
    assert max_diff([shuffled[int(np.flatnonzero(order == k)[0])] for k in range(len(ids))], alone) <= FP32_TOLERANCE
    assert max_diff(run_layout(runner, ids, attention), alone) <= FP32_TOLERANCE
    # the vectors do differ between sentences: equal rows would pass the comparisons above
    assert float(np.abs(alone[0][0] - alone[1][0]).max()) > 1e-3


@pytest.mark.slow
def test_minilm_packed_equals_padded(minilm_path) -> None:
    runner = TorchRunner(minilm_path, 6, "cpu", None)
    ids = mixed_ids(minilm_path, 24, seed=4)
    want = padded_rows(runner, ids)
    assert max_diff(split(runner.run_packed(ids), ids), want) <= FP32_TOLERANCE  # measured 3.1e-6
    assert max_diff(run_layout(runner, ids, "jagged"), want) <= FP32_TOLERANCE
    assert TorchRunner(minilm_path, 1, "cpu", None).packed


@pytest.mark.parametrize("family", ["distilbert", "deberta-v2"])
def test_families_outside_the_packed_set_are_refused(family, tiny_model_path) -> None:
    runner = TorchRunner(tiny_model_path(family), 2, "cpu", None)
    assert runner.packed is False
    with pytest.raises(ValueError, match=f"model type '{family}'"):
        runner.run_packed([np.array([1, 2, 3], dtype=np.int64)])


def test_layer_all_and_bad_inputs_are_refused(tiny_bert) -> None:
    everything = TorchRunner(tiny_bert, "all", "cpu", None)
    assert everything.packed is False
    with pytest.raises(ValueError, match="model type 'bert' at layer 'all'"):
        everything.run_packed([np.array([1, 2], dtype=np.int64)])
    runner = TorchRunner(tiny_bert, 3, "cpu", None)
    with pytest.raises(ValueError, match="non-empty"):
        runner.run_packed([np.array([1, 2], dtype=np.int64), np.array([], dtype=np.int64)])
    with pytest.raises(ValueError, match="non-empty"):
        runner.run_packed([])
    tensors = {name: torch.from_numpy(array)
               for name, array in unpadded_inputs([np.array([1, 2, 3], dtype=np.int64)], 0, False).items()}
    with pytest.raises(ValueError, match="attention must be"):
        packed_hidden(runner.model, tensors, attention="flash")
    with pytest.raises(ValueError, match="layer must be between 1 and 3"):
        packed_hidden(runner.model, tensors, layer=4)
    check_packed(runner.model, 3)
    assert default_attention("cpu") == "padded" and default_attention("cuda") == "jagged"


def test_an_earlier_layer_of_a_deeper_model(tiny_bert) -> None:
    """``layer`` reads an earlier layer of a model that keeps more: the truncated model's output."""
    deep, shallow = TorchRunner(tiny_bert, 4, "cpu", None), TorchRunner(tiny_bert, 2, "cpu", None)
    ids = mixed_ids(tiny_bert, 5, seed=5, long_words=10)
    tensors = {name: torch.from_numpy(array) for name, array in unpadded_inputs(ids, 0, False).items()}
    with torch.inference_mode():
        early = split(packed_hidden(deep.model, tensors, layer=2), ids)
    assert max_diff(early, split(shallow.run_packed(ids), ids)) == 0.0


@pytest.mark.parametrize("model", ["bert", pytest.param("minilm", marks=pytest.mark.slow)])
def test_bf16_on_a_cpu_with_native_bf16(model, tiny_model_path, request) -> None:
    if not bf16_supported("cpu"):
        pytest.skip("this CPU has no native bf16 (AVX512_BF16 or AMX): backend='torch' refuses bf16 here")
    model_dir = request.getfixturevalue("minilm_path") if model == "minilm" else tiny_model_path(model)
    runner = TorchRunner(model_dir, 2, "cpu", None, precision="bf16")
    ids = mixed_ids(model_dir, 12, seed=6)
    got, want = split(runner.run_packed(ids), ids), padded_rows(runner, ids)
    assert runner.run_packed(ids).dtype == torch.float32
    scale = max(float(np.abs(w).max()) for w in want)
    assert max_diff(got, want) <= BF16_RELATIVE * scale
    for g, w in zip(got, want):
        cosine = (g * w).sum(1) / np.linalg.norm(g, axis=1) / np.linalg.norm(w, axis=1)
        assert cosine.min() >= BF16_COSINE


def test_importing_the_module_does_not_import_torch() -> None:
    code = "import sys, rapidscore, rapidscore.device.packed; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (the device check of issue 39)")
@pytest.mark.parametrize("precision", ["fp32", "fp16", "bf16"])
def test_cuda_packed_matches_padded(precision, minilm_path) -> None:
    """On a GPU: the jagged layout (flash / memory-efficient varlen kernels) and the padded one
    against the padded runner, fp32 within 1e-5 (TF32 off), half precisions as bf16 on the CPU."""
    if precision == "bf16" and not bf16_supported("cuda"):
        pytest.skip("this GPU has no native bf16")
    runner = TorchRunner(minilm_path, 6, "cuda", None, precision=precision)
    ids = mixed_ids(minilm_path, 40, seed=7)
    want = padded_rows(runner, ids)
    scale = max(float(np.abs(w).max()) for w in want)
    tensors = {name: runner.to_device(array) for name, array in packed_feed(runner.model, ids).items()}
    for attention in ("auto", *ATTENTIONS):
        with torch.inference_mode(), exact_fp32("cuda" if precision == "fp32" else "cpu"):
            got = split(packed_hidden(runner.model, tensors, attention=attention).float().cpu(), ids)
        bound = FP32_TOLERANCE if precision == "fp32" else BF16_RELATIVE * scale
        assert max_diff(got, want) <= bound, attention
    assert runner.run_packed(ids).device.type == "cuda"

