"""The device engine's overlapped pipeline (``rapidscore.device.chunk_pipeline``, issue 39):
the same scores as the serial stages and the host path, errors of any stage in the caller,
bounded memory. (The overlap itself, measured against a simulated device, is tested with its
benchmark: tests/bench/test_bench_pipeline.py.)

References: the serial run of the same stages (same batches: bit-equal), and the host path
(the torch model's embeddings matched by the C++ kernel: within 1e-6, float32 sums in another
order). CI has no GPU; everything runs on CPU tensors, the same code.
"""

from __future__ import annotations

import threading
import weakref

import numpy as np
import pytest

from rapidscore.bertscore import BERTScore
from rapidscore.device import chunk_pipeline
from rapidscore.device import engine as device_engine

torch = pytest.importorskip("torch", reason="the device engine runs the torch backend")
from rapidscore.testing.simulated_device import SimulatedDevice  # noqa: E402  (needs torch)

KERNEL_ATOL = 1e-6

WORDS = ("river stone lamp quiet market violin winter harbor silver garden engine orbit pencil "
         "canyon velvet thunder meadow crystal lantern ember").split()


def _corpus(n: int, seed: int) -> tuple[list[str], list[str]]:
    rng = np.random.default_rng(seed)

    def sentence() -> str:
        return " ".join(rng.choice(WORDS, size=int(rng.integers(1, 24))))
    return [sentence() for _ in range(n)], [sentence() for _ in range(n)]


def _scores(result) -> np.ndarray:
    return np.stack([np.asarray(result.precision), np.asarray(result.recall), np.asarray(result.f1)])


def _small_engine(monkeypatch) -> None:
    """Several tokeniser slices and chunks, and several batches per chunk, on a few hundred pairs."""
    monkeypatch.setattr(device_engine, "TOKENIZE_SLICE", 64)


@pytest.mark.parametrize("options", [{}, {"idf": True}, {"all_layers": True}, {"reference_batch_size": 8}],
                         ids=["plain", "idf", "all-layers", "reference-padding"])
def test_overlapped_equals_serial_and_the_host_path(tiny_model_path, monkeypatch, options):
    _small_engine(monkeypatch)
    model = str(tiny_model_path("bert"))
    idf, all_layers = options.get("idf", False), options.get("all_layers", False)
    settings = dict(backend="torch", idf=idf, all_layers=all_layers, batch_tokens=256)
    scorer = BERTScore(model, 3, device_engine=True, **settings)
    cands, refs = _corpus(300, seed=4)
    plan = scorer.plan(cands, refs)
    batch_size = options.get("reference_batch_size")
    overlapped = device_engine.score_on_device(scorer, plan, overlap=True, reference_batch_size=batch_size)
    serial = device_engine.score_on_device(scorer, plan, overlap=False, reference_batch_size=batch_size)
    np.testing.assert_array_equal(_scores(overlapped), _scores(serial))
    host = BERTScore(model, 3, device_engine=False, **settings)
    expected = host.score(cands, refs, reference_batch_size=batch_size)
    np.testing.assert_allclose(_scores(overlapped), _scores(expected), atol=KERNEL_ATOL, rtol=0)


def test_several_references_and_windows_through_the_pipeline(tiny_model_path, monkeypatch):
    _small_engine(monkeypatch)
    model = str(tiny_model_path("bert"))
    scorer = BERTScore(model, 2, backend="torch", device_engine=True, long_texts="window", batch_tokens=256)
    cands, refs = _corpus(150, seed=5)
    long_text = " ".join(WORDS * 12)  # past the tiny model's 128 tokens: windows
    cands[7] = long_text
    grouped = [[r, refs[(k + 1) % len(refs)]] for k, r in enumerate(refs)]
    plan = scorer.plan(cands, grouped)
    overlapped = device_engine.score_on_device(scorer, plan, overlap=True)
    serial = device_engine.score_on_device(scorer, plan, overlap=False)
    np.testing.assert_array_equal(_scores(overlapped), _scores(serial))
    host = BERTScore(model, 2, backend="torch", device_engine=False, long_texts="window", batch_tokens=256)
    np.testing.assert_allclose(_scores(overlapped), _scores(host.score(cands, grouped)), atol=KERNEL_ATOL, rtol=0)


def test_chunks_need_their_texts_first_so_the_model_starts_early(tiny_model_path, monkeypatch):
    """Texts are tokenised in the order the pairs first use them: the first chunk waits for its
    own texts, not for every candidate before the first reference (the plan's text order)."""
    _small_engine(monkeypatch)
    scorer = BERTScore(str(tiny_model_path("bert")), 2, backend="torch", device_engine=True, batch_tokens=256)
    cands, refs = _corpus(600, seed=6)
    plan = scorer.plan(cands, refs)
    done_at_first_chunk = []
    chunks = device_engine._chunks  # the module's own generator, observed

    def observed(plan_, tokens, *args):
        for a, b in chunks(plan_, tokens, *args):
            if not done_at_first_chunk:
                done_at_first_chunk.append(tokens.done)
            yield a, b

    monkeypatch.setattr(device_engine, "_chunks", observed)
    device_engine.score_on_device(scorer, plan, overlap=True)
    assert done_at_first_chunk[0] < len(plan.texts) // 2, (done_at_first_chunk, len(plan.texts))
    rank = device_engine.first_use_rank(plan.pairs, len(plan.texts))
    assert sorted(rank.tolist()) == list(range(len(plan.texts)))
    assert rank[plan.pairs[0, 0]] == 0 and rank[plan.pairs[0, 1]] == 1


class _Failing(SimulatedDevice):
    def __init__(self, hidden_size: int, fail_at: int):
        super().__init__(hidden_size, 0.0)
        self.fail_at = fail_at

    def __call__(self, input_ids, attention_mask):
        if self.calls == self.fail_at:
            raise RuntimeError("device lost")
        return super().__call__(input_ids, attention_mask)


def _pipeline_threads() -> list[str]:
    return [t.name for t in threading.enumerate()
            if t.name in ("rapidscore-prepare", "rapidscore-put-away", "rapidscore-finish")]


def _raised_in_the_caller(scorer, seed: int, error: type, message: str) -> None:
    """A scoring call fails with the stage's own error, and no pipeline thread is left behind."""
    cands, refs = _corpus(300, seed=seed)
    with pytest.raises(error, match=message):
        device_engine.score_on_device(scorer, scorer.plan(cands, refs), overlap=True)
    assert _pipeline_threads() == []


def test_an_error_of_the_model_stops_every_stage_and_reaches_the_caller(tiny_model_path, monkeypatch):
    _small_engine(monkeypatch)
    scorer = BERTScore(str(tiny_model_path("bert")), 2, backend="torch", device_engine=True, batch_tokens=256)
    scorer.encoder.runner = _Failing(scorer.encoder.hidden_size, fail_at=5)
    _raised_in_the_caller(scorer, 7, RuntimeError, "device lost")


def test_an_error_of_the_finishing_stage_reaches_the_caller(tiny_model_path, monkeypatch):
    _small_engine(monkeypatch)
    scorer = BERTScore(str(tiny_model_path("bert")), 2, backend="torch", device_engine=True, batch_tokens=256)
    scorer.encoder.runner = SimulatedDevice(scorer.encoder.hidden_size, 0.0)

    def broken_match(*args, **kwargs):
        raise ValueError("matching broke")

    monkeypatch.setattr("rapidscore.device.matching_torch.match_rows", broken_match)
    _raised_in_the_caller(scorer, 8, ValueError, "matching broke")


def test_an_error_of_the_prepare_stage_reaches_the_caller(tiny_model_path, monkeypatch):
    _small_engine(monkeypatch)
    scorer = BERTScore(str(tiny_model_path("bert")), 2, backend="torch", device_engine=True, batch_tokens=256)
    plan_batches = scorer.encoder.runtime.batch_plan
    calls = []

    def failing(*args):
        calls.append(1)
        if len(calls) == 3:
            raise MemoryError("planning broke")
        return plan_batches(*args)

    monkeypatch.setattr(scorer.encoder.runtime, "batch_plan", failing)
    _raised_in_the_caller(scorer, 9, MemoryError, "planning broke")


def test_hidden_states_in_flight_stay_bounded_whatever_the_input(tiny_model_path, monkeypatch):
    """A slow finishing stage never lets the model run ahead by more than the queues hold."""
    _small_engine(monkeypatch)
    scorer = BERTScore(str(tiny_model_path("bert")), 2, backend="torch", device_engine=True, batch_tokens=128)
    alive = [0]
    most = [0]
    lock = threading.Lock()

    class Counting(SimulatedDevice):
        def __call__(self, input_ids, attention_mask):
            hidden = super().__call__(input_ids, attention_mask)
            with lock:
                alive[0] += 1
                most[0] = max(most[0], alive[0])
            weakref.finalize(hidden, _decrement)
            return hidden

    def _decrement() -> None:
        with lock:
            alive[0] -= 1

    scorer.encoder.runner = Counting(scorer.encoder.hidden_size, 0.0)
    put_rows = chunk_pipeline.put_rows

    def slow_put_rows(*args):
        threading.Event().wait(0.002)
        put_rows(*args)

    monkeypatch.setattr(chunk_pipeline, "put_rows", slow_put_rows)
    cands, refs = _corpus(400, seed=10)
    device_engine.score_on_device(scorer, scorer.plan(cands, refs), overlap=True)
    calls = scorer.encoder.runner.calls
    # queued for the finisher + the one it holds + the one the model thread is handing over
    assert calls > 3 * chunk_pipeline.FINISH_BEHIND and most[0] <= chunk_pipeline.FINISH_BEHIND + 2, (calls, most)


def test_small_calls_run_in_the_callers_thread(tiny_model_path, monkeypatch):
    scorer = BERTScore(str(tiny_model_path("bert")), 2, backend="torch", device_engine=True)
    names = []
    run_model = scorer.encoder.runtime.run_model

    def recording(*args):
        names.append(threading.current_thread().name)
        return run_model(*args)

    monkeypatch.setattr(scorer.encoder.runtime, "run_model", recording)
    started = threading.active_count()
    scorer.score(["a cat sat"], ["a dog sat"])
    assert names == [threading.current_thread().name] and threading.active_count() == started


@pytest.mark.parametrize("long_texts", ["truncate", "window"])
def test_an_unpadded_torch_encoder_runs_the_packed_forward_in_the_engine(tiny_model_path, monkeypatch, long_texts):
    """``Encoder(backend="torch", unpadded=True)``: the device engine's batches go through the
    runner's packed forward (within 1e-5 of the padded forward's vectors: P/R/F within 1e-5)."""
    from rapidscore.encoder import Encoder

    _small_engine(monkeypatch)
    model = str(tiny_model_path("bert"))
    encoder = Encoder(model, 3, backend="torch", unpadded=True, batch_tokens=256, long_texts=long_texts)
    assert encoder.runtime.packed_available
    calls = []
    run_packed = encoder.runtime.run_packed

    def counting(ids):
        calls.append(len(ids))
        return run_packed(ids)

    monkeypatch.setattr(encoder.runtime, "run_packed", counting)
    scorer = BERTScore(encoder=encoder, device_engine=True, idf=True)
    cands, refs = _corpus(200, seed=11)
    cands[3] = " ".join(WORDS * 12)  # past the tiny model's 128 tokens: cut, or windows with kept rows
    packed = scorer.score(cands, refs)
    padded = BERTScore(model, 3, backend="torch", device_engine=True, idf=True, batch_tokens=256,
                       long_texts=long_texts).score(cands, refs)
    assert len(calls) > 1 and sum(calls) >= len(set(cands) | set(refs))  # every text, in several batches
    np.testing.assert_allclose(_scores(packed), _scores(padded), atol=1e-5, rtol=0)


def test_many_threads_through_the_overlapped_pipeline_get_the_sequential_results(tiny_model_path, monkeypatch):
    """Each call runs its own stages; calls from many threads share the scorer and its runner."""
    from concurrent.futures import ThreadPoolExecutor

    _small_engine(monkeypatch)
    scorer = BERTScore(str(tiny_model_path("bert")), 3, backend="torch", device_engine=True, idf=True,
                       batch_tokens=256)
    jobs = [_corpus(300, seed=20 + k) for k in range(4)]  # 600 texts each: over one batch's rows, overlapped
    sequential = [_scores(scorer.score(c, r)) for c, r in jobs]
    with ThreadPoolExecutor(4) as pool:
        threaded = list(pool.map(lambda job: _scores(scorer.score(*job)), jobs))
    for expected, got in zip(sequential, threaded):
        np.testing.assert_array_equal(got, expected)
    assert _pipeline_threads() == []
