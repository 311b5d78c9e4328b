"""Small batches through shape buckets (``rapidscore.device.cuda_graphs``, issue 39).

CI has no GPU: on the CPU the same bucketing, padding, shared static buffers, lock and copy out
run, with "capture" a plain call of the forward on the static buffers
(``TorchRunner.enable_graphs()``); only the ``torch.cuda.CUDAGraph`` calls differ, checked by
the CUDA-only test at the end.

Tolerances, stated once: the bucket pads a batch further (more rows with mask 0, longer rows
with mask 0), which leaves the real tokens' vectors the eager pass's up to float rounding: other
matrix shapes sum in another order. Hidden states: max |difference| <= 1e-6 for the tiny models
(values up to ~4); MiniLM's hidden states reach ~10 in magnitude (float32 spacing ~1e-6 there),
so they are compared as unit rows (what BERTScore matches) within 1e-6, and raw within 2e-6
relative to the largest value. P, R and F: within 1e-6 (not bit-identical, for the same reason).
A batch that falls through runs the plain forward: bit-identical.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Iterator

import numpy as np
import pytest

from rapidscore.encoder import Encoder
from rapidscore.device import cuda_graphs
from rapidscore.device.cuda_graphs import GraphedForward, graphs_enabled, model_limits, warm_up_graphs
from rapidscore.errors import RapidscoreWarning
from rapidscore.testing.tiny_models import FAMILIES, PADDING_SENSITIVE

torch = pytest.importorskip("torch", reason="the bucket path runs the torch backend")

TINY_ATOL = 1e-6
UNIT_ATOL = 1e-6
RELATIVE = 2e-6
PRF_ATOL = 1e-6


@contextlib.contextmanager
def graphs_on(encoder: Encoder, max_length: int | None = None, **options) -> Iterator[GraphedForward]:
    """The encoder's (shared, cached) runner with the bucket path on and captured up to
    ``max_length``; off again afterwards, so other tests see the plain runner."""
    runner = encoder.runner
    assert runner.graphs is None  # the CPU default
    graphs = runner.enable_graphs(**options)
    try:
        graphs.warm_up(max_length)
        yield graphs
    finally:
        runner.disable_graphs()


def random_batch(rng: np.random.Generator, batch: int, length: int, vocab: tuple[int, int],
                 pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Right-padded ids and mask as ``pad_batch`` makes them: the first row is ``length`` long."""
    lengths = rng.integers(1, length + 1, size=batch)
    lengths[0] = length
    mask = (np.arange(length) < lengths[:, None]).astype(np.int64)
    ids = np.where(mask == 1, rng.integers(*vocab, size=(batch, length)), pad_id).astype(np.int64)
    return ids, mask


def eager(runner, ids: np.ndarray, mask: np.ndarray):
    return runner.forward(runner.to_device(ids), runner.to_device(mask))


def real_difference(got, expected, mask: np.ndarray) -> float:
    real = torch.from_numpy(mask.astype(bool))
    return float((got[..., real, :] - expected[..., real, :]).abs().max())


def unit_difference(got, expected, mask: np.ndarray) -> float:
    real = torch.from_numpy(mask.astype(bool))
    a, b = got[real], expected[real]
    return float((a / a.norm(dim=-1, keepdim=True) - b / b.norm(dim=-1, keepdim=True)).abs().max())


def shapes(longest: int, edge_rows: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8)) -> list[tuple[int, int]]:
    """(rows, length): every length 1..longest (rows cycling through 1-8), and each of
    ``edge_rows`` at each bucket edge (15, 16, 17, 31, 32, 33, ...)."""
    cycle = [(length % 8 + 1, length) for length in range(1, longest + 1)]
    edges = sorted({e + d for e in range(16, longest + 1, 16) for d in (-1, 0, 1) if 1 <= e + d <= longest})
    return cycle + [(rows, length) for length in edges for rows in edge_rows]


# -- the buckets, with a fake forward ----------------------------------------------------------


class Recorder:
    """A forward that records the padded inputs it sees: hidden = (ids, mask, position) per token."""

    def __init__(self):
        self.seen: list[tuple[np.ndarray, np.ndarray]] = []

    def __call__(self, ids, mask):
        self.seen.append((ids.numpy().copy(), mask.numpy().copy()))
        position = torch.arange(ids.shape[1]).expand_as(ids)
        return torch.stack([ids, mask, position], dim=-1).float()


def test_buckets_round_rows_up_and_lengths_to_multiples_of_16():
    graphs = GraphedForward(Recorder(), "cpu", max_length=514)  # RoBERTa's positions: buckets to 512
    assert graphs.max_length == 512
    assert graphs.bucket(1, 1) == (1, 16) and graphs.bucket(2, 16) == (2, 16) and graphs.bucket(2, 17) == (2, 32)
    assert graphs.bucket(3, 15) == (4, 16) and graphs.bucket(5, 33) == (8, 48)
    assert graphs.bucket(2, 512) == (2, 512) and graphs.bucket(2, 513) is None  # over the longest bucket
    assert graphs.bucket(9, 10) is None  # more rows than the largest bucket
    assert graphs.bucket(8, 256) == (8, 256) and graphs.bucket(8, 257) is None  # over MAX_BUCKET_TOKENS
    buckets = list(graphs.buckets())
    assert len(buckets) == 112 and all(r * n <= cuda_graphs.MAX_BUCKET_TOKENS for r, n in buckets)
    assert list(graphs.buckets(17)) == [(r, n) for n in (16, 32) for r in (1, 2, 4, 8)]
    with pytest.raises(ValueError, match="step"):
        GraphedForward(Recorder(), "cpu", step=0)


def test_the_bucket_pads_with_the_pad_id_and_never_masks_a_whole_row():
    forward = Recorder()
    graphs = GraphedForward(forward, "cpu", pad_id=7, max_length=64)
    assert graphs.warm_up(32) == 8 and graphs.stats()["captured"] == 8
    forward.seen.clear()
    ids = np.array([[101, 5, 6, 102], [101, 9, 102, 7]])
    mask = np.array([[1, 1, 1, 1], [1, 1, 1, 0]])
    out = graphs(ids, mask)
    (seen_ids, seen_mask), = forward.seen
    assert seen_ids.shape == (2, 16) and (seen_ids[:, :4] == ids).all() and (seen_ids[:, 4:] == 7).all()
    assert (seen_mask[:, :4] == mask).all() and (seen_mask[:, 4:] == 0).all()
    assert out.shape == (2, 4, 3) and out.is_contiguous()
    assert torch.equal(out[..., 0], torch.from_numpy(ids).float())
    assert torch.equal(out[..., 2], torch.arange(4.0).expand(2, 4))
    forward.seen.clear()
    graphs(ids[:1, :3], mask[:1, :3] * 0 + 1)
    graphs(np.ones((3, 20), np.int64), np.ones((3, 20), np.int64))  # bucket (4, 32): one extra row
    seen_ids, seen_mask = forward.seen[-1]
    assert seen_ids.shape == (4, 32) and (seen_ids[3] == 7).all() and seen_mask[3].tolist() == [1] + [0] * 31
    assert graphs.replays == 3


def test_a_returned_tensor_is_the_callers_own():
    graphs = GraphedForward(Recorder(), "cpu", max_length=32)
    graphs.warm_up()
    first = graphs(np.full((1, 5), 3), np.ones((1, 5), np.int64))
    graphs(np.full((1, 5), 4), np.ones((1, 5), np.int64))  # same bucket: the buffer is overwritten
    assert (first[..., 0] == 3).all()


def test_batches_without_a_captured_bucket_fall_through():
    forward = Recorder()
    graphs = GraphedForward(forward, "cpu", max_length=64, max_tokens=128)
    ids = np.ones((2, 20), np.int64)
    graphs(ids, ids)  # not captured yet: the plain forward, unpadded
    assert forward.seen[-1][0].shape == (2, 20) and graphs.replays == 0
    graphs.warm_up()
    assert not graphs.captured(9, 4) and not graphs.captured(4, 33) and graphs.captured(4, 32)
    for shape in ((9, 4), (4, 33), (1, 65)):
        graphs(np.ones(shape, np.int64), np.ones(shape, np.int64))
        assert forward.seen[-1][0].shape == shape
    assert graphs.replays == 0


def test_a_forward_that_cannot_be_captured_turns_the_graphs_off():
    def forward(ids, mask):
        if ids.shape[1] == 32:
            raise RuntimeError("operation not permitted when stream is capturing")
        return Recorder()(ids, mask)

    graphs = GraphedForward(forward, "cpu", max_length=64)
    with pytest.warns(RapidscoreWarning, match="CUDA graphs off for this model.*bucket \\(1, 32\\)"):
        graphs.warm_up()
    assert graphs.failure is not None and not graphs.captures and graphs.warm_up() == 0
    out = graphs(np.ones((1, 3), np.int64), np.ones((1, 3), np.int64))
    assert out.shape == (1, 3, 3) and graphs.replays == 0


def test_the_environment_variable_and_the_model_limits():
    assert graphs_enabled({}) and graphs_enabled({"RAPIDSCORE_CUDA_GRAPHS": "1"})
    for off in ("0", "false", "No", " off "):
        assert not graphs_enabled({"RAPIDSCORE_CUDA_GRAPHS": off})

    class Config:
        pad_token_id = None
        max_position_embeddings = 514

    class Model:
        config = Config()

    assert model_limits(Model()) == {"pad_id": 0, "max_length": 514}
    Config.pad_token_id, Config.max_position_embeddings = 1, None
    assert model_limits(Model()) == {"pad_id": 1, "max_length": cuda_graphs.DEFAULT_MAX_LENGTH}


def test_cpu_runners_are_plain_by_default(tiny_bert):
    encoder = Encoder(tiny_bert, backend="torch")
    assert encoder.runner.graphs is None
    assert warm_up_graphs(encoder) is None
    assert warm_up_graphs(Encoder(tiny_bert)) is None  # an ONNX Runtime runner has none


# -- real models on the CPU ------------------------------------------------------------------


def test_tiny_bert_buckets_equal_the_plain_forward(tiny_bert):
    encoder = Encoder(tiny_bert, backend="torch")
    runner = encoder.runner
    rng = np.random.default_rng(0)
    pad = encoder.spec.pad_id
    longest = encoder.max_length
    with graphs_on(encoder, longest) as graphs:
        assert graphs.max_length >= longest and graphs.stats()["captured"] == len(list(graphs.buckets(longest)))
        worst = 0.0
        for rows, length in shapes(longest):
            ids, mask = random_batch(rng, rows, length, (5, 500), pad)
            got = runner(ids, mask)
            assert got.shape == (rows, length, encoder.hidden_size)
            worst = max(worst, real_difference(got, eager(runner, ids, mask), mask))
        assert graphs.replays == len(shapes(longest))
    assert worst <= TINY_ATOL, worst


def test_batches_over_the_largest_bucket_fall_through_unchanged(tiny_bert):
    encoder = Encoder(tiny_bert, backend="torch")
    runner = encoder.runner
    rng = np.random.default_rng(1)
    with graphs_on(encoder, encoder.max_length, max_tokens=256) as graphs:
        for rows, length in ((9, 5), (8, 33), (4, 65), (16, 16)):
            ids, mask = random_batch(rng, rows, length, (5, 500), encoder.spec.pad_id)
            assert not graphs.captured(rows, length)
            assert torch.equal(runner(ids, mask), eager(runner, ids, mask))
        assert graphs.replays == 0
        ids, mask = random_batch(rng, 8, 32, (5, 500), encoder.spec.pad_id)
        assert real_difference(runner(ids, mask), eager(runner, ids, mask), mask) <= TINY_ATOL
        assert graphs.replays == 1


def test_all_layers_keep_their_leading_axis(tiny_bert):
    encoder = Encoder(tiny_bert, layer="all", backend="torch")
    runner = encoder.runner
    rng = np.random.default_rng(2)
    with graphs_on(encoder, 48) as graphs:
        for rows, length in ((1, 1), (2, 17), (3, 48), (8, 31)):
            ids, mask = random_batch(rng, rows, length, (5, 500), encoder.spec.pad_id)
            got = runner(ids, mask)
            assert got.shape == (encoder.num_layers + 1, rows, length, encoder.hidden_size)
            assert real_difference(got, eager(runner, ids, mask), mask) <= TINY_ATOL
        assert graphs.replays == 4


@pytest.mark.parametrize("family", [f for f in FAMILIES if f not in PADDING_SENSITIVE])
def test_each_tiny_family_through_the_buckets(family, tiny_model_path):
    """RoBERTa numbers positions from the pad id, DeBERTa attends by relative positions: the
    bucket's extra padding must change nothing for either."""
    encoder = Encoder(str(tiny_model_path(family)), backend="torch")
    runner = encoder.runner
    rng = np.random.default_rng(3)
    vocab = (10, min(500, runner.model.config.vocab_size))
    with graphs_on(encoder, 64) as graphs:
        for rows, length in ((1, 1), (2, 15), (2, 16), (2, 17), (5, 40), (8, 64)):
            ids, mask = random_batch(rng, rows, length, vocab, encoder.spec.pad_id)
            assert real_difference(runner(ids, mask), eager(runner, ids, mask), mask) <= TINY_ATOL
        assert graphs.replays == 6


def test_many_threads_at_once_get_their_own_results(tiny_bert):
    encoder = Encoder(tiny_bert, backend="torch")
    runner = encoder.runner
    rng = np.random.default_rng(4)
    batches = [random_batch(rng, int(rng.integers(1, 9)), int(rng.integers(1, 80)), (5, 500), encoder.spec.pad_id)
               for _ in range(8 * 50)]
    expected = [eager(runner, ids, mask) for ids, mask in batches]
    failures: list[str] = []
    start = threading.Barrier(8)
    with graphs_on(encoder, 80) as graphs:
        def work(thread: int) -> None:
            start.wait()
            for k in range(thread * 50, thread * 50 + 50):
                ids, mask = batches[k]
                got = runner(ids, mask)
                if got.shape != expected[k].shape or real_difference(got, expected[k], mask) > TINY_ATOL:
                    failures.append(f"thread {thread}, call {k}")

        threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert graphs.replays == 400
    assert not failures, failures[:5]


def bertscore_pairs() -> tuple[list[str], list[str]]:
    cands = ["The cat sat on the mat.", "A quick brown fox jumps over the lazy dog near the river bank today.",
             "short", "Penguins huddle together to survive the Antarctic winter, taking turns at the edge."]
    refs = ["A cat was sitting on the mat.", "The fox jumped.", "a short text", "Emperor penguins huddle in winter."]
    return cands, refs


def assert_same_scores(scorer, graphs: GraphedForward | None = None) -> None:
    """Each pair alone (the latency path: one batch of two rows) and all at once, with the
    buckets on and off: P, R, F within PRF_ATOL."""
    from rapidscore.bertscore import BERTScore

    assert isinstance(scorer, BERTScore)
    cands, refs = bertscore_pairs()
    runner = scorer.encoder.runner
    runner.disable_graphs()
    plain = [scorer.score([c], [r]) for c, r in zip(cands, refs)] + [scorer.score(cands, refs)]
    graphs = runner.enable_graphs()
    try:
        scorer.warm_up()  # captures the buckets up to the encoder's max_length (warm_up_graphs)
        assert graphs.stats()["captured"] == len(list(graphs.buckets(scorer.encoder.max_length)))
        before = graphs.replays
        bucketed = [scorer.score([c], [r]) for c, r in zip(cands, refs)] + [scorer.score(cands, refs)]
        assert graphs.replays > before
    finally:
        runner.disable_graphs()
    for a, b in zip(plain, bucketed):
        for name in ("precision", "recall", "f1"):
            np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=0, atol=PRF_ATOL)


def test_bertscore_device_engine_scores_the_same_through_the_buckets(tiny_bert):
    from rapidscore.bertscore import BERTScore

    assert_same_scores(BERTScore(tiny_bert, backend="torch", device="cpu", device_engine=True))


@pytest.mark.slow
def test_minilm_buckets_equal_the_plain_forward(minilm_path):
    encoder = Encoder(str(minilm_path), backend="torch")
    runner = encoder.runner
    rng = np.random.default_rng(5)
    worst_unit = worst_relative = 0.0
    with graphs_on(encoder, 48) as graphs:
        assert graphs.max_length == 512 and len(list(graphs.buckets())) == 112
        for rows, length in shapes(48, (1, 2, 5, 8)):  # MiniLM on the CPU: fewer rows at the edges
            ids, mask = random_batch(rng, rows, length, (1000, 20000), encoder.spec.pad_id)
            got, expected = runner(ids, mask), eager(runner, ids, mask)
            worst_unit = max(worst_unit, unit_difference(got, expected, mask))
            scale = float(expected[torch.from_numpy(mask.astype(bool))].abs().max())
            worst_relative = max(worst_relative, real_difference(got, expected, mask) / scale)
        assert graphs.replays == len(shapes(48, (1, 2, 5, 8)))
    assert worst_unit <= UNIT_ATOL and worst_relative <= RELATIVE, (worst_unit, worst_relative)


@pytest.mark.slow
def test_minilm_bertscore_scores_the_same_through_the_buckets(minilm_path):
    from rapidscore.bertscore import BERTScore

    # max_length 64: the warm-up captures 16 buckets, not 112 (each a forward pass on the CPU)
    encoder = Encoder(str(minilm_path), backend="torch", max_length=64)
    scorer = BERTScore(encoder=encoder, device_engine=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RapidscoreWarning)
        assert_same_scores(scorer)


# -- CUDA ----------------------------------------------------------------------------------------


@pytest.mark.skipif(not torch.cuda.is_available(), reason="captures real CUDA graphs: needs a GPU and CUDA torch")
def test_captured_cuda_graphs_equal_eager_on_the_gpu(tiny_bert):
    """On CUDA the graphs are on by default; replays equal the eager forward within 1e-5 (the
    eager pass may run SDPA without a mask where a batch has no padding; the graph always has one)."""
    encoder = Encoder(tiny_bert, backend="torch", device="cuda")
    runner = encoder.runner
    graphs = runner.graphs
    if not graphs_enabled():
        pytest.skip("RAPIDSCORE_CUDA_GRAPHS turns the graphs off")
    assert isinstance(graphs, GraphedForward) and graphs.cuda
    graphs.warm_up(64)
    assert graphs.failure is None and graphs.stats()["captured"] == len(list(graphs.buckets(64)))
    rng = np.random.default_rng(6)
    for rows, length in shapes(64):
        ids, mask = random_batch(rng, rows, length, (5, 500), encoder.spec.pad_id)
        got = runner(ids, mask)
        assert real_difference(got, eager(runner, ids, mask), mask) <= 1e-5
    assert graphs.replays == len(shapes(64))
