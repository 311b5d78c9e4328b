"""``precision="fast"``: the machine's fastest mode within the fast-mode bound, recorded as the mode used."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from rapidscore.bertscore import BERTScore
from rapidscore.encoder import precision as fast_precision
from rapidscore.encoder.precision import cpu_has_bf16, cpu_has_vnni, resolve_precision
from rapidscore.encoder.shared import get_encoder
from rapidscore.nrr import SentenceSimilarity
from rapidscore.testing.approximation import kendall_tau, word_salad


@pytest.fixture
def without_bf16(monkeypatch) -> None:
    """This CPU as one without bf16 instructions (the bf16 paths disabled)."""
    monkeypatch.setattr(fast_precision, "cpu_has_bf16", lambda backend="openvino": False)


@pytest.fixture
def with_bf16(monkeypatch) -> None:
    monkeypatch.setattr(fast_precision, "cpu_has_bf16", lambda backend="openvino": True)


@pytest.fixture
def without_vnni(monkeypatch) -> None:
    """This CPU as an x86 one without VNNI: int8 is no faster than fp32 there."""
    monkeypatch.setattr(fast_precision, "cpu_has_vnni", lambda: False)


@pytest.fixture
def with_vnni(monkeypatch) -> None:
    monkeypatch.setattr(fast_precision, "cpu_has_vnni", lambda: True)


def test_what_fast_becomes_on_each_machine(with_bf16, with_vnni) -> None:
    assert resolve_precision("fast") == ("bf16", "openvino")
    assert resolve_precision("fast", "cpu", "openvino") == ("bf16", "openvino")
    assert resolve_precision("fast", "cpu", "torch") == ("bf16", "torch")
    # ONNX Runtime has no bf16 mode: its fast mode is int8 where the CPU has VNNI
    assert resolve_precision("fast", "cpu", "onnx") == ("int8", "onnx")
    assert resolve_precision("fast", "cuda") == ("fp16", "torch")
    assert resolve_precision("fast", "cuda", "torch") == ("fp16", "torch")
    assert resolve_precision("fast", "cuda", "onnx") == ("fp32", "onnx")
    for exact_or_named in ("fp32", "bf16", "fp16", "int8"):
        assert resolve_precision(exact_or_named, "cpu", None) == (exact_or_named, None)


def test_fast_without_bf16_is_int8_where_the_cpu_has_vnni(without_bf16, with_vnni) -> None:
    assert resolve_precision("fast") == ("int8", "onnx")
    assert resolve_precision("fast", "cpu", "onnx") == ("int8", "onnx")
    assert resolve_precision("fast", "cpu", "openvino") == ("fp32", "openvino")  # int8 is ONNX Runtime's
    assert resolve_precision("fast", "cpu", "torch") == ("fp32", "torch")
    assert resolve_precision("fast", "cuda") == ("fp16", "torch")


def test_fast_without_bf16_or_vnni_is_exact_fp32(without_bf16, without_vnni) -> None:
    assert resolve_precision("fast") == ("fp32", None)
    assert resolve_precision("fast", "cpu", "torch") == ("fp32", "torch")
    assert resolve_precision("fast", "cuda") == ("fp16", "torch")  # the GPU's mode does not depend on the CPU


def test_vnni_is_read_from_the_cpu_flags(monkeypatch) -> None:
    monkeypatch.setattr(fast_precision, "is_x86", lambda: True)
    for flags, expected in [({"avx2", "fma"}, False), ({"avx2", "avx512f", "avx512_vnni"}, True),
                            ({"avx2", "avx_vnni"}, True), (set(), False)]:
        monkeypatch.setattr(fast_precision, "_linux_cpu_flags", lambda flags=flags: frozenset(flags))
        assert fast_precision.cpu_has_vnni() is expected, flags
    monkeypatch.setattr(fast_precision, "is_x86", lambda: False)  # ARM: no x86 VNNI, int8 not chosen
    monkeypatch.setattr(fast_precision, "_linux_cpu_flags", lambda: frozenset({"avx512_vnni"}))
    assert fast_precision.cpu_has_vnni() is False


@pytest.mark.slow
def test_fast_without_bf16_or_vnni_scores_exactly_and_says_fp32(minilm_path, without_bf16, without_vnni) -> None:
    cands, refs = word_salad(30, 1), word_salad(30, 2)
    fast = BERTScore(str(minilm_path), 6, precision="fast")
    exact = BERTScore(str(minilm_path), 6)
    assert fast.encoder is exact.encoder  # one cached encoder: "fast" keys as the mode it became
    assert "precision:fp32" in fast.signature and "_precision=" not in fast.hash
    np.testing.assert_array_equal(fast.score(cands, refs).f1, exact.score(cands, refs).f1)


@pytest.mark.slow
@pytest.mark.skipif(not cpu_has_bf16("openvino"), reason="this CPU has no bf16 instructions: fast is exact fp32 "
                    "here (test_fast_without_bf16_scores_exactly_and_says_fp32)")
def test_fast_with_bf16_is_bf16_within_the_bound(minilm_path) -> None:
    cands, refs = word_salad(150, 3), word_salad(150, 4)
    fast = BERTScore(str(minilm_path), 6, precision="fast")
    assert fast.encoder is BERTScore(str(minilm_path), 6, precision="bf16").encoder
    assert "precision:bf16" in fast.signature and fast.hash.endswith("_precision=bf16")
    f_fast = fast.score(cands, refs).f1.astype(np.float64)
    f_exact = BERTScore(str(minilm_path), 6).score(cands, refs).f1.astype(np.float64)
    assert np.abs(f_fast - f_exact).mean() <= 5e-4  # the bound
    assert kendall_tau(f_fast, f_exact) >= 0.995
    # Sentence similarity (NRR) in the fast mode: mean |d cos| <= 1e-3
    generated, references = word_salad(100, 5), word_salad(100, 6)
    fast_sim = SentenceSimilarity(str(minilm_path), precision="fast")
    assert "precision:bf16" in fast_sim.signature
    cos_fast = fast_sim.pairs(generated, [[r] for r in references])[0]
    cos_exact = SentenceSimilarity(str(minilm_path)).pairs(generated, [[r] for r in references])[0]
    assert np.abs(np.asarray(cos_fast, np.float64) - np.asarray(cos_exact, np.float64)).mean() <= 1e-3


@pytest.mark.slow
@pytest.mark.skipif(not cpu_has_vnni(), reason="fast is int8 only on x86 CPUs with VNNI, and this CPU has none "
                    "(its fast mode is tested by test_fast_without_bf16_or_vnni_scores_exactly_and_says_fp32)")
def test_fast_without_bf16_is_int8_within_the_bound(w1_pairs, minilm_path, without_bf16) -> None:
    cands, refs = w1_pairs(300, 11)
    fast = BERTScore(str(minilm_path), 6, precision="fast")
    assert fast.encoder.precision == "int8" and "precision:int8" in fast.signature
    assert fast.hash.endswith("_precision=int8")
    f_fast = fast.score(cands, refs).f1.astype(np.float64)
    f_exact = BERTScore(str(minilm_path), 6).score(cands, refs).f1.astype(np.float64)
    assert np.abs(f_fast - f_exact).mean() <= 5e-4  # the bound (measured 3.5e-4 here)
    assert kendall_tau(f_fast, f_exact) >= 0.995
    # Sentence similarity (NRR): mean |d cos| <= 1e-3 (measured 7.9e-4 here; the bench's unrelated
    # sentences: 9.3e-4 to 1.0e-3)
    fast_sim = SentenceSimilarity(str(minilm_path), precision="fast")
    assert "precision:int8" in fast_sim.signature
    cos_fast = fast_sim.pairs(cands[:150], [[r] for r in refs[:150]])[0]
    cos_exact = SentenceSimilarity(str(minilm_path)).pairs(cands[:150], [[r] for r in refs[:150]])[0]
    assert np.abs(np.asarray(cos_fast, np.float64) - np.asarray(cos_exact, np.float64)).mean() <= 1e-3


@pytest.mark.slow
def test_fast_falls_back_to_fp32_for_a_model_int8_refuses(minilm_path, without_bf16, with_vnni, tmp_path,
                                                           caplog) -> None:
    # Layer 0 is the embeddings only: nothing for int8 to quantise, so int8 refuses it (Int8Error);
    # "fast" runs the exact mode instead and says so, explicit "int8" raises.
    fast = BERTScore(str(minilm_path), 0, precision="fast", cache_dir=tmp_path)
    assert fast.encoder.precision == "fp32" and "precision:fp32" in fast.signature
    assert "running in exact fp32" in caplog.text
    cands, refs = word_salad(5, 1), word_salad(5, 2)
    exact = BERTScore(str(minilm_path), 0, cache_dir=tmp_path)
    np.testing.assert_array_equal(fast.score(cands, refs).f1, exact.score(cands, refs).f1)
    with pytest.raises(ValueError, match="precision='int8'"):
        BERTScore(str(minilm_path), 0, precision="int8", cache_dir=tmp_path)
    # get_encoder keeps the two apart: the fp32 stand-in is never handed to an explicit int8 request
    assert get_encoder(str(minilm_path), 0, precision="fast", cache_dir=tmp_path).precision == "fp32"
    with pytest.raises(ValueError, match="precision='int8'"):
        get_encoder(str(minilm_path), 0, precision="int8", cache_dir=tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fast", "int8"])
def test_a_fast_scorer_shared_by_many_threads(minilm_path, precision) -> None:
    # int8 included: its activation scales are per batch, and each call's batches are its own
    scorer = BERTScore(str(minilm_path), 6, precision=precision)
    jobs = [(word_salad(8, 10 + k), word_salad(8, 40 + k)) for k in range(16)]
    alone = [scorer.score(c, r).f1 for c, r in jobs]
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(lambda job: scorer.score(*job).f1, jobs))
    for a, b in zip(alone, together):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_get_encoder_keys_fast_as_the_mode_it_became(minilm_path) -> None:
    mode, backend = resolve_precision("fast")
    fast = get_encoder(str(minilm_path), 3, precision="fast")
    named = get_encoder(str(minilm_path), 3, backend=backend, precision=mode)
    assert fast.precision == named.precision == mode
    # int8 apart: a model may refuse it, and "fast" then runs fp32 (test above)
    assert (fast is named) == (mode != "int8")


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fast", "int8"])
def test_cli_header_line_says_the_mode(minilm_path, tmp_path, precision) -> None:
    (tmp_path / "c.txt").write_text("the cat sat\na dog ran\n")
    (tmp_path / "r.txt").write_text("a cat sat\nthe dog ran\n")
    out = subprocess.run([sys.executable, "-m", "rapidscore", "bertscore", "-c", str(tmp_path / "c.txt"),
                          "-r", str(tmp_path / "r.txt"), "--model", str(minilm_path), "--precision", precision],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    mode, _ = resolve_precision(precision)
    header = out.stdout.strip().splitlines()[-1]
    assert ("_precision=" + mode in header) if mode != "fp32" else ("_precision=" not in header)
