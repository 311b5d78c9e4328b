"""Native layer hardening: thread-creation failure, arrays changed by another thread while a
kernel runs, C++ exception kinds, and a bounded random adversarial loop over ``_core`` checked
against the numpy references (kernels/matching_ref.py); the alignment is checked against brute
force in tests/kernels/test_ner_alignment.py and by fuzz/fuzz_align_spans.cpp."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from rapidscore import _core
from rapidscore.kernels import matching_ref


@pytest.mark.parametrize(("kind", "exception"), [
    ("invalid_argument", ValueError), ("length_error", ValueError), ("out_of_range", IndexError),
    ("bad_alloc", MemoryError), ("system_error", OSError), ("overflow_error", OverflowError),
    ("runtime_error", RuntimeError)])
def test_cxx_exceptions_map_to_python_by_kind(kind, exception):
    with pytest.raises(exception):
        _core.build_info._throw_for_test(kind)


@pytest.mark.skipif(os.environ.get("RAPIDSCORE_SANITIZED") == "1",
                    reason="ASan reserves terabytes of address space, so RLIMIT_AS cannot be set low")
def test_thread_creation_failure_runs_on_fewer_threads():
    """Under a 3 GB address-space limit 1,000 threads (8 MiB stacks) cannot all start: the kernel
    must finish on the threads it got, with the same result (it used to abort the process)."""
    script = textwrap.dedent("""
        import resource
        import numpy as np
        from rapidscore import _core
        from rapidscore.kernels import matching_ref
        rng = np.random.default_rng(0)
        o = np.arange(0, 40001, 4)
        emb = rng.standard_normal((40000, 4)).astype("f")
        w = np.ones(40000, "f")
        pairs = rng.integers(0, 10000, (64000, 2))  # 2,000 blocks of work: all 1,000 threads wanted
        want = _core.matching.greedy_match(emb, o, w, pairs, 1)  # results do not depend on the threads
        reference = matching_ref.greedy_match(emb, o, w, pairs)
        np.testing.assert_allclose(want[0], reference[0], rtol=1e-4, atol=1e-4)
        resource.setrlimit(resource.RLIMIT_AS, (3_000_000_000, 3_000_000_000))
        got = _core.matching.greedy_match(emb, o, w, pairs, 1000)
        for g, r in zip(got, want):
            np.testing.assert_array_equal(g, r)
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_index_arrays_changed_by_another_thread_cannot_break_the_kernel():
    """The binding copies the index arrays it validated: a thread writing garbage into ``pairs``
    and ``offsets`` during the calls changes nothing (it used to segfault)."""
    rng = np.random.default_rng(1)
    n = 2000
    offsets = np.arange(0, 4 * n + 1, 4)
    emb = rng.standard_normal((4 * n, 8)).astype("f")
    weights = np.ones(4 * n, "f")
    pairs = np.stack([rng.integers(0, n, 20000), rng.integers(0, n, 20000)], 1)
    starts = np.arange(0, 3 * 5000, 3)
    record = np.array([0, 5000])
    stop = threading.Event()

    def vandal():
        pristine_pairs, pristine_offsets = pairs.copy(), offsets.copy()
        while not stop.is_set():
            pairs[:] = 10**12
            offsets[1:] = -(10**12)
            starts[:] = 10**15
            pairs[:] = pristine_pairs
            offsets[:] = pristine_offsets
            starts[:] = np.arange(0, 3 * 5000, 3)

    thread = threading.Thread(target=vandal)
    thread.start()
    try:
        for _ in range(30):
            try:
                _core.matching.greedy_match(emb, offsets, weights, pairs, 2)
                _core.matching.pairwise_match(emb, offsets, weights, pairs[:50, 0], pairs[:50, 1], 2)
                _core.alignment.align_spans_batch(record, starts, starts + 2, record, starts + 1, starts + 3,
                                                  n_threads=2)
            except (ValueError, IndexError):
                pass  # validated while the vandal's values were in place: refused, which is fine
    finally:
        stop.set()
        thread.join()


def _random_store(rng):
    n_sentences = int(rng.integers(1, 12))
    lengths = rng.integers(0, 9, n_sentences)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    dim = int(rng.integers(1, 40))
    emb = rng.standard_normal((int(offsets[-1]), dim)).astype(rng.choice([np.float16, np.float32, np.float64]))
    weights = rng.choice([0.0, 0.5, 1.0, 2.0], int(offsets[-1])).astype("f")
    return emb, offsets, weights, n_sentences


def test_random_adversarial_calls_match_the_references():
    """A bounded version of the audit's loop: random valid calls must equal the numpy reference;
    random invalid ones (bad shapes, dtypes, indices, offsets, NaN, thread counts) must raise a
    Python exception, never crash."""
    rng = np.random.default_rng(16)
    for _ in range(1500):
        emb, offsets, weights, n = _random_store(rng)
        m = int(rng.integers(0, 10))
        pairs = rng.integers(0, n, (m, 2))
        threads = int(rng.integers(0, 4))
        P, R, F = _core.matching.greedy_match(emb, offsets, weights, pairs, threads)
        rP, rR, rF = matching_ref.greedy_match(emb.astype("f"), offsets, weights, pairs)
        for got, want in ((P, rP), (R, rR), (F, rF)):
            np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
        cands, refs = rng.integers(0, n, int(rng.integers(0, 5))), rng.integers(0, n, int(rng.integers(0, 5)))
        P, R, F = _core.matching.pairwise_match(emb, offsets, weights, cands, refs, threads)
        rP, rR, rF = matching_ref.pairwise_match(emb.astype("f"), offsets, weights, cands, refs)
        np.testing.assert_allclose(F, rF, rtol=2e-5, atol=2e-5)
        # one corruption at a time
        bad = [
            lambda: _core.matching.greedy_match(emb, offsets, weights, pairs + n, threads) if m else None,
            lambda: _core.matching.greedy_match(emb, offsets[::-1].copy(), weights, pairs, threads)
            if offsets[-1] > 0 else None,
            lambda: _core.matching.greedy_match(emb, offsets, weights[:-1], pairs, threads),
            lambda: _core.matching.greedy_match(emb.astype(np.int32), offsets, weights, pairs, threads),
            lambda: _core.matching.greedy_match(emb, offsets.astype("f"), weights, pairs, threads),
            lambda: _core.matching.greedy_match(emb, offsets, weights, pairs, -1),
            lambda: _core.matching.greedy_match(emb, offsets, weights, pairs, 2**40),
            lambda: _core.matching.greedy_match(emb, offsets, weights, pairs[:, :1], threads),
            lambda: _core.matching.greedy_match(np.full_like(emb, np.nan), offsets, weights, pairs, threads)
            if emb.size else None,
            lambda: _core.matching.pairwise_match(emb, offsets, weights, cands - n - 1, refs, threads)
            if cands.size else None,
            lambda: _core.alignment.align_spans_batch([0, 1], [5], [2], [0, 1], [0], [3]),
            lambda: _core.alignment.align_spans_batch([0, 2], [0], [3], [0, 1], [0], [3]),
            lambda: _core.alignment.align_spans_batch([0, 1], [0], [3], [0, 1], [0], [3], scheme="strict"),
        ]
        call = bad[int(rng.integers(0, len(bad)))]
        try:
            if call() is None:
                continue
        except (ValueError, TypeError, IndexError):
            continue
        raise AssertionError("a corrupted call was accepted")
