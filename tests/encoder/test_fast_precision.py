"""``precision="fast"``: the machine's fastest mode within the fast-mode bound, recorded as the mode used."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from rapidscore.bertscore import BERTScore
from rapidscore.encoder import precision as fast_precision
from rapidscore.encoder.precision import cpu_has_bf16, resolve_precision
from rapidscore.encoder.shared import get_encoder
from rapidscore.nrr import SentenceSimilarity

WORDS = ("the a of to and in band metal singer voice jazz trumpet outlaw forest river city music "
         "history science famous known world heavy legend career player album song").split()


def sentences(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=rng.integers(6, 30))).capitalize() + "." for _ in range(n)]


def kendall_tau(a: np.ndarray, b: np.ndarray) -> float:
    """Kendall's tau-a by brute force (no ties in continuous scores)."""
    i, j = np.triu_indices(len(a), k=1)
    return float(np.mean(np.sign(a[i] - a[j]) * np.sign(b[i] - b[j])))


@pytest.fixture
def without_bf16(monkeypatch):
    """This CPU as one without bf16 instructions (the bf16 paths disabled)."""
    monkeypatch.setattr(fast_precision, "cpu_has_bf16", lambda backend="openvino": False)


@pytest.fixture
def with_bf16(monkeypatch):
    monkeypatch.setattr(fast_precision, "cpu_has_bf16", lambda backend="openvino": True)


def test_what_fast_becomes_on_each_machine(with_bf16):
    assert resolve_precision("fast") == ("bf16", "openvino")
    assert resolve_precision("fast", "cpu", "openvino") == ("bf16", "openvino")
    assert resolve_precision("fast", "cpu", "torch") == ("bf16", "torch")
    # ONNX Runtime's int8 is within the bound on W1 only (docs/performance.md, "int8"): not a fast mode
    assert resolve_precision("fast", "cpu", "onnx") == ("fp32", "onnx")
    assert resolve_precision("fast", "cuda") == ("fp16", "torch")
    assert resolve_precision("fast", "cuda", "torch") == ("fp16", "torch")
    assert resolve_precision("fast", "cuda", "onnx") == ("fp32", "onnx")
    for exact_or_named in ("fp32", "bf16", "fp16", "int8"):
        assert resolve_precision(exact_or_named, "cpu", None) == (exact_or_named, None)


def test_fast_without_bf16_is_exact_fp32(without_bf16):
    assert resolve_precision("fast") == ("fp32", None)
    assert resolve_precision("fast", "cpu", "torch") == ("fp32", "torch")
    assert resolve_precision("fast", "cuda") == ("fp16", "torch")  # the GPU's mode does not depend on the CPU


@pytest.mark.slow
def test_fast_without_bf16_scores_exactly_and_says_fp32(minilm_path, without_bf16):
    cands, refs = sentences(30, 1), sentences(30, 2)
    fast = BERTScore(str(minilm_path), 6, precision="fast")
    exact = BERTScore(str(minilm_path), 6)
    assert fast.encoder is exact.encoder  # one cached encoder: "fast" keys as the mode it became
    assert "precision:fp32" in fast.signature and "_precision=" not in fast.hash
    np.testing.assert_array_equal(fast.score(cands, refs).f1, exact.score(cands, refs).f1)


@pytest.mark.slow
@pytest.mark.skipif(not cpu_has_bf16("openvino"), reason="this CPU has no bf16 instructions: fast is exact fp32 "
                    "here (test_fast_without_bf16_scores_exactly_and_says_fp32)")
def test_fast_with_bf16_is_bf16_within_the_bound(minilm_path):
    cands, refs = sentences(150, 3), sentences(150, 4)
    fast = BERTScore(str(minilm_path), 6, precision="fast")
    assert fast.encoder is BERTScore(str(minilm_path), 6, precision="bf16").encoder
    assert "precision:bf16" in fast.signature and fast.hash.endswith("_precision=bf16")
    f_fast = fast.score(cands, refs).f1.astype(np.float64)
    f_exact = BERTScore(str(minilm_path), 6).score(cands, refs).f1.astype(np.float64)
    assert np.abs(f_fast - f_exact).mean() <= 5e-4  # the bound
    assert kendall_tau(f_fast, f_exact) >= 0.995
    # Sentence similarity (NRR) in the fast mode: mean |d cos| <= 1e-3
    generated, references = sentences(100, 5), sentences(100, 6)
    fast_sim = SentenceSimilarity(str(minilm_path), precision="fast")
    assert "precision:bf16" in fast_sim.signature
    cos_fast = fast_sim.pairs(generated, [[r] for r in references])[0]
    cos_exact = SentenceSimilarity(str(minilm_path)).pairs(generated, [[r] for r in references])[0]
    assert np.abs(np.asarray(cos_fast, np.float64) - np.asarray(cos_exact, np.float64)).mean() <= 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fast", "int8"])
def test_a_fast_scorer_shared_by_many_threads(minilm_path, precision):
    # int8 included: its activation scales are per batch, and each call's batches are its own
    scorer = BERTScore(str(minilm_path), 6, precision=precision)
    jobs = [(sentences(8, 10 + k), sentences(8, 40 + k)) for k in range(16)]
    alone = [scorer.score(c, r).f1 for c, r in jobs]
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(lambda job: scorer.score(*job).f1, jobs))
    for a, b in zip(alone, together):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_get_encoder_keys_fast_as_the_mode_it_became(minilm_path):
    mode, backend = resolve_precision("fast")
    assert get_encoder(str(minilm_path), 3, precision="fast") is get_encoder(str(minilm_path), 3, backend=backend,
                                                                             precision=mode)


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fast", "int8"])
def test_cli_header_line_says_the_mode(minilm_path, tmp_path, precision):
    (tmp_path / "c.txt").write_text("the cat sat\na dog ran\n")
    (tmp_path / "r.txt").write_text("a cat sat\nthe dog ran\n")
    out = subprocess.run([sys.executable, "-m", "rapidscore", "bertscore", "-c", str(tmp_path / "c.txt"),
                          "-r", str(tmp_path / "r.txt"), "--model", str(minilm_path), "--precision", precision],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    mode, _ = resolve_precision(precision)
    header = out.stdout.strip().splitlines()[-1]
    assert ("_precision=" + mode in header) if mode != "fp32" else ("_precision=" not in header)
