"""Streamed BERTScore with bert-score's batch padding (``reference_batch_size``, the CLI's ``-b``)
against the in-memory scores: equal float for float however the stream is cut into chunks, with
one reference or several, through ``score_iter`` and the command line (issue 29 item 3); and the
streaming progress, which moves within a chunk (issue 29 item 17).

The padding artefact only shows where token similarities are negative: the tiny DeBERTa-v2 on
digit candidates against letter references has many such pairs, and one long pair every few
pairs makes the reference's batches pad the others.
"""

from __future__ import annotations

import json
from typing import ClassVar

import numpy as np
import pytest

from rapidscore.bertscore import BERTScore
from rapidscore.bertscore.streaming import PairsBefore, ReadCounter, chunk_results
from rapidscore.cli import main

N = 96
_RNG = np.random.default_rng(29)


def _text(alphabet: str, long: bool) -> str:
    return " ".join(_RNG.choice(list(alphabet), size=14 if long else int(_RNG.integers(2, 5))))


CANDS = [_text("0123456789", i % 11 == 4) for i in range(N)]
REFS = [_text("abcdefghijklmnopqrstuvwxyz", i % 13 == 7) for i in range(N)]
MULTI = [[_text("abcdefghijklmnopqrstuvwxyz", (i + k) % 9 == 2) for k in range(1 + i % 3)] for i in range(N)]
REFERENCES = {"one-reference": REFS, "multi-reference": MULTI}


@pytest.fixture(scope="module")
def model(tiny_model_path) -> str:
    path = str(tiny_model_path("deberta-v2"))
    BERTScore(path)  # export once, before the tests time anything
    return path


@pytest.fixture(scope="module")
def scorer(model) -> BERTScore:
    return BERTScore(model)


def scores(result) -> np.ndarray:
    return np.stack([result.precision, result.recall, result.f1], axis=1)


def streamed(scorer, pairs, **options) -> np.ndarray:
    return np.array([tuple(s) for s in scorer.score_iter(pairs, **options)], dtype=np.float32).reshape(-1, 3)


@pytest.mark.parametrize("refs", REFERENCES.values(), ids=REFERENCES.keys())
def test_the_data_exercises_the_padding(scorer, refs) -> None:
    # issue 29 item 3: without pairs whose scores the padding changes, the tests below could not fail
    padded, unpadded = scorer.score(CANDS, refs, reference_batch_size=8), scorer.score(CANDS, refs)
    assert (padded.f1 != unpadded.f1).sum() >= 5


@pytest.mark.parametrize("refs", REFERENCES.values(), ids=REFERENCES.keys())
@pytest.mark.parametrize("batch_size", [8, 64])
@pytest.mark.parametrize("chunking", [dict(chunk_size=3), dict(chunk_size=5), dict(chunk_size=13),
                                      dict(chunk_size=50), dict(max_tokens=90)],
                         ids=["3", "5", "13", "50", "token-budget"])
def test_every_chunking_gives_the_in_memory_scores(scorer, refs, batch_size, chunking) -> None:
    # issue 29 item 3: chunk sizes that do not divide the batch size, and chunks cut by the token
    # budget, give the in-memory scores float for float
    expected = scores(scorer.score(CANDS, refs, reference_batch_size=batch_size))
    got = streamed(scorer, list(zip(CANDS, refs)), reference_batch_size=batch_size, **chunking)
    assert np.array_equal(got, expected)


def test_halved_chunks_and_the_cache_keep_the_in_memory_scores(scorer) -> None:
    # issue 29 item 3: a chunk over the token budget is halved (texts far longer than their
    # character estimate), and cached texts skip the model: neither moves a batch's padding
    long_cands = [c + " " + " ".join("7" * 40) if i % 10 == 3 else c for i, c in enumerate(CANDS)]
    expected = scores(scorer.score(long_cands, MULTI, reference_batch_size=8))
    chunks = list(chunk_results(scorer, list(zip(long_cands, MULTI)), max_tokens=260, reference_batch_size=8))
    assert len(chunks) > 4
    assert np.array_equal(np.concatenate([scores(r) for _, r in chunks]), expected)
    got = streamed(scorer, list(zip(long_cands, MULTI)), chunk_size=7, cache_tokens=300, reference_batch_size=8)
    assert np.array_equal(got, expected)


@pytest.mark.parametrize("start", [1, 21, 40])
def test_a_stream_that_continues_another_keeps_its_batches(scorer, start) -> None:
    # issue 29 item 3: a resumed run scores rows start.. as the whole run does: the rows before
    # shift the reference's batches (PairsBefore: their pair count and the last batch's items)
    expected = scores(scorer.score(CANDS, MULTI, reference_batch_size=8))
    counter = ReadCounter(iter(list(zip(CANDS, MULTI))), 8)
    for _ in range(start):
        next(counter)
    before = counter.before()
    assert before.pairs == sum(len(g) for g in MULTI[:start]) and len(before.recent) <= 7
    results = chunk_results(scorer, counter, chunk_size=6, reference_batch_size=8, before=before)
    assert np.array_equal(np.concatenate([scores(r) for _, r in results]), expected[start:])


def test_batches_too_large_to_read_ahead_are_refused(scorer) -> None:
    # issue 29 item 3: a stream reads up to B - 1 pairs ahead of each chunk; a batch larger than
    # that bound is refused with the rule, never scored with other padding
    pairs = list(zip(CANDS, REFS))
    with pytest.raises(ValueError, match="reference_batch_size"):
        next(scorer.score_iter(pairs, chunk_size=10, reference_batch_size=10**6))
    with pytest.raises(ValueError, match="reference_batch_size"):
        next(scorer.score_iter(pairs, reference_batch_size=10**20))
    # one batch as large as the stream's chunk limit is fine
    got = streamed(scorer, pairs, chunk_size=200, reference_batch_size=200)
    assert np.array_equal(got, scores(scorer.score(CANDS, REFS, reference_batch_size=200)))
    with pytest.raises(TypeError, match=r"before\.pairs"):
        next(chunk_results(scorer, pairs, reference_batch_size=8, before=PairsBefore(1.5, [])))  # type: ignore[arg-type]


def test_a_chunk_reads_ahead_only_to_the_end_of_its_batch(scorer) -> None:
    # issue 29 item 3: the read-ahead is the rest of the chunk's last batch, no more (a chunk that
    # ends a batch reads nothing: over a pipe it would wait for input it does not need)
    pulled = []

    def stream():
        for pair in zip(CANDS, REFS):
            pulled.append(pair)
            yield pair

    for chunk_size, read in ((8, 8), (5, 8), (11, 16)):
        pulled.clear()
        next(chunk_results(scorer, stream(), chunk_size=chunk_size, reference_batch_size=8))
        assert len(pulled) == read


def test_padding_floors_on_a_device_store_match_the_host_kernel(scorer) -> None:
    # issue 29 item 3: finish(padding_floors=) on torch embeddings (a GPU store; here the CPU)
    # gives what the native kernel gives the same floors
    torch = pytest.importorskip("torch", reason="a torch-tensor store")
    from rapidscore.kernels.padding import padding_floors

    plan = scorer.plan(CANDS, MULTI)
    expected = scorer.finish(plan, scorer.encode(plan), reference_batch_size=8)
    store = scorer.encode(plan)
    floors = padding_floors(store.offsets, store.order[plan.pairs], 8)
    on_host = scorer.finish(plan, store, padding_floors=floors)
    store = scorer.encode(plan)
    store.embeddings = torch.from_numpy(store.embeddings)
    on_device = scorer.finish(plan, store, padding_floors=floors)
    assert np.array_equal(scores(on_host), scores(expected))
    assert np.allclose(scores(on_device), scores(expected), atol=1e-6)
    with pytest.raises(ValueError, match="padding_floors must be a bool array"):
        scorer.finish(plan, scorer.encode(plan), padding_floors=floors[:3])


# -- the command line -------------------------------------------------------------------------

def _pairs_file(tmp_path, refs):
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps({"candidate": c, "reference": r}) + "\n" for c, r in zip(CANDS, refs)))
    return path


def _read_scores(path) -> np.ndarray:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [row["index"] for row in rows] == list(range(N))
    return np.array([[row["precision"], row["recall"], row["f1"]] for row in rows], dtype=np.float32)


@pytest.mark.parametrize("refs", REFERENCES.values(), ids=REFERENCES.keys())
@pytest.mark.parametrize("chunk_size", ["30", "50"])
def test_cli_chunk_size_does_not_change_the_scores(model, tmp_path, refs, chunk_size) -> None:
    # issue 29 item 3: --chunk-size with the default -b 64 gives the in-memory (-c/-r) scores
    expected = scores(BERTScore(model).score(CANDS, refs, reference_batch_size=64))
    out = tmp_path / "out.jsonl"
    assert main(["bertscore", "-m", model, "--input", str(_pairs_file(tmp_path, refs)), "--output", str(out),
                 "--chunk-size", chunk_size, "-q"]) == 0
    assert np.array_equal(_read_scores(out), expected)


def test_cli_resume_part_way_through_a_batch(model, tmp_path, monkeypatch) -> None:
    # issue 29 item 3: a run stopped after rows that end inside a reference batch resumes to the
    # scores of an uninterrupted run
    expected = scores(BERTScore(model).score(CANDS, MULTI, reference_batch_size=8))
    args = ["bertscore", "-m", model, "--input", str(_pairs_file(tmp_path, MULTI)), "--output",
            str(tmp_path / "out.jsonl"), "--chunk-size", "7", "-b", "8", "-q"]
    calls = {"n": 0}
    original = BERTScore.finish

    def stop_at_the_fourth_chunk(self, *a, **k):
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt
        return original(self, *a, **k)

    monkeypatch.setattr(BERTScore, "finish", stop_at_the_fourth_chunk)
    assert main(args) == 130  # interrupted, as by Ctrl-C: the output and its resume state stay
    monkeypatch.setattr(BERTScore, "finish", original)
    state = json.loads((tmp_path / "out.jsonl.resume.json").read_text())
    assert state["rows"] == 21 and sum(len(g) for g in MULTI[:21]) % 8 != 0
    assert main(args + ["--resume"]) == 0
    assert np.array_equal(_read_scores(tmp_path / "out.jsonl"), expected)


# -- progress within a chunk ------------------------------------------------------------------

class RecordingBar:
    """Stands in for tqdm: records every update."""

    made: ClassVar[list[RecordingBar]] = []

    def __init__(self, *args, **kwargs) -> None:
        self.total = kwargs.get("total")
        self.updates: list[int] = []
        RecordingBar.made.append(self)

    def update(self, n: int = 1) -> None:
        self.updates.append(n)

    def close(self) -> None:
        pass


@pytest.fixture()
def recording_bar(monkeypatch) -> list[RecordingBar]:
    import tqdm.auto

    RecordingBar.made = []
    monkeypatch.setattr(tqdm.auto, "tqdm", RecordingBar)
    return RecordingBar.made


def test_progress_moves_as_a_chunks_batches_finish(model) -> None:
    # issue 29 item 17: the chunk's pairs are reported as its encoder batches finish, before its
    # scores are out, and embedding in slices leaves every score as it was
    scorer = BERTScore(model, batch_tokens=64)
    pairs = list(zip(CANDS, MULTI))
    seen: list[int] = []
    [(chunk, result)] = list(chunk_results(scorer, pairs, reference_batch_size=8, progress=seen.append))
    assert len(chunk) == N and len(seen) > 5 and seen == sorted(seen) and seen[0] < N // 4 and seen[-1] == N
    assert np.array_equal(scores(result), scores(scorer.score(CANDS, MULTI, reference_batch_size=8)))


def test_score_iter_progress_counts_pairs_within_chunks(model, recording_bar) -> None:
    # issue 29 item 17: score_iter(progress=True) moves its bar within each chunk, in pairs, to the total
    scorer = BERTScore(model, batch_tokens=64)
    got = streamed(scorer, list(zip(CANDS, REFS)), chunk_size=48, progress=True)
    [bar] = recording_bar
    assert bar.total == N and sum(bar.updates) == N and len(bar.updates) > 4
    assert np.array_equal(got, scores(scorer.score(CANDS, REFS)))


def test_cli_progress_moves_before_the_chunk_is_written(model, tmp_path, recording_bar) -> None:
    # issue 29 item 17: the bar (rows, rate, ETA against the counted total) moved only when a whole
    # chunk (16,384 rows by default) was written; it now moves as the chunk's batches finish
    out = tmp_path / "out.jsonl"
    assert main(["bertscore", "-m", model, "--input", str(_pairs_file(tmp_path, MULTI)), "--output", str(out),
                 "--batch-tokens", "64", "--progress", "-q"]) == 0
    [bar] = recording_bar
    assert bar.total == N and sum(bar.updates) == N and len(bar.updates) > 5  # one chunk, many moves
    assert np.array_equal(_read_scores(out), scores(BERTScore(model).score(CANDS, MULTI, reference_batch_size=64)))
