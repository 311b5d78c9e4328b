"""BERTScore's three finishing paths give the same numbers over every option combination:
``BERTScore.finish`` (one call), ``BERTScore.finish_plans`` (the service's micro-batch: one
matching pass over every request, through ``BERTScoreTask.run``) and ``score_on_device`` (the
device engine: torch matching, chunked pipeline). CI has no GPU: the device paths run on CPU
tensors (``backend="torch", device="cpu"``), the code a GPU runs.

Every path sees the same token embeddings: the encoder runs one sentence per model call
(``max_batch_size=1``), so a sentence's vectors never depend on which other sentences a path
batched it with (they would move by ~1e-7 with other padding and batch shapes). What differs
is only the finishing. The model's output for one sentence is computed once per encoder and
replayed (``ReplayRunner``): the 96 cases would otherwise run ~13,000 forwards of one sentence.

Bit for bit (``np.array_equal``), with the signature and the details:
- on host arrays (the C++ kernel, each pair on its own): ``finish`` and the service's merged batch;
- on tensors (torch matching), the same pairs matched together: the device engine in one chunk,
  ``finish`` of a tensor store, and the service's batch of that one request.
Within ``KERNEL_ATOL`` (signature and details still exact):
- torch matching against the C++ kernel: float32 dot products summed in another order;
- torch matching of the same pair in another company (the device engine in many chunks, the
  service's batch of several requests on tensors): pairs are matched in blocks padded to the
  longest pair of the block, and torch's matrix product rounds a pair's similarities differently
  at other block shapes (one float32 ulp, ~1e-7).
"""

from __future__ import annotations

import functools
import itertools
import warnings

import numpy as np
import pytest

from rapidscore.bertscore import BERTScore
from rapidscore.bertscore.idf import DocumentFrequencies
from rapidscore.bertscore.serving import BERTScoreTask
from rapidscore.device.engine import score_on_device
from rapidscore.encoder import Encoder
from rapidscore.encoder.runtime.capabilities import RunnerBase

torch = pytest.importorskip("torch", reason="the device paths run the torch backend")

KERNEL_ATOL = 1e-6
LAYER = 2
MAX_LENGTH = 12  # tokens: the long sentences below are truncated, or cut into windows

LONG = "the committee reviewed every single proposal that arrived before the deadline in great detail"
# Requests of one micro-batch: empty candidates and references, sentences repeated within and
# across requests, texts over MAX_LENGTH, one request with no pair at all.
REQUESTS = [
    (["the cat sat on the mat", "", "a quick brown fox", LONG],
     [["the cat is on the mat", "a cat sat"], ["something"], ["", "a fast brown fox"], [LONG + " again"]]),
    (["a quick brown fox", "same words here", "the cat sat on the mat"],
     [["a quick brown fox"], ["same words here", ""], ["the cat sat on the mat"]]),
    ([], []),
    (["one more"], [["one more"]]),
]

# (idf, rescale_with_baseline, references per candidate, all_layers, long_texts, reference_batch_size)
ALL_CASES = list(itertools.product(("off", "references", "file"), (False, True), ("one", "several"),
                                   (False, True), ("truncate", "window"), (None, 2)))
# The fast tier runs the plainest case; the slow one the whole product (seconds per case).
FAST_CASES = [("off", False, "one", False, "truncate", None)]
CASES = [case if case in FAST_CASES else pytest.param(case, marks=pytest.mark.slow) for case in ALL_CASES]


def _case_id(case) -> str:
    idf, rescale, refs, all_layers, long_texts, batch_size = case
    return (f"idf-{idf}-{'rescaled' if rescale else 'raw'}-{refs}-{'all' if all_layers else 'layer'}-{long_texts}"
            f"-rbs{batch_size}")


class ReplayRunner(RunnerBase):
    """The torch runner's padded forward for each distinct input, computed once and replayed (a
    copy each time): the values a fresh forward gives, at a fraction of the cost (the packed
    forward, where a path runs it, is passed through)."""

    def __init__(self, inner: RunnerBase):
        self.inner = inner
        self.provider, self.returns, self.thread_safe = inner.provider, inner.returns, inner.thread_safe
        self.device, self.model, self.graphs = inner.device, inner.model, inner.graphs
        self.outputs: dict[tuple, object] = {}

    def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray):
        key = (input_ids.shape, input_ids.tobytes(), attention_mask.tobytes())
        if key not in self.outputs:
            self.outputs[key] = self.inner(input_ids, attention_mask)
        return self.outputs[key].clone()

    @property
    def packed(self) -> bool:
        return self.inner.packed

    def to_device(self, array: np.ndarray):
        return self.inner.to_device(array)

    def run_packed(self, ids: list[np.ndarray]):
        return self.inner.run_packed(ids)


@functools.cache
def _encoder(model: str, all_layers: bool, long_texts: str) -> Encoder:
    encoder = Encoder(model, "all" if all_layers else LAYER, backend="torch", device="cpu", max_length=MAX_LENGTH,
                      max_batch_size=1, long_texts=long_texts)
    encoder.runner = ReplayRunner(encoder.runner)
    return encoder


def _requests(refs: str):
    if refs == "several":
        return REQUESTS
    return [(cands, [group[:1] for group in groups]) for cands, groups in REQUESTS]


def _scorers(model: str, case, files) -> tuple[BERTScore, BERTScore]:
    idf, rescale, _, all_layers, long_texts, _ = case
    encoder = _encoder(model, all_layers, long_texts)
    options = dict(idf={"off": False, "references": True, "file": files["idf"]}[idf], all_layers=all_layers,
                   rescale_with_baseline=rescale, baseline_path=files["baseline"] if rescale else None,
                   long_texts=long_texts)
    host = BERTScore(layer=LAYER, encoder=encoder, device_engine=False, **options)
    device = BERTScore(layer=LAYER, encoder=encoder, device_engine=True, **options)
    return host, device


@pytest.fixture(scope="module")
def files(tmp_path_factory, tiny_model_path) -> dict[str, str]:
    model = str(tiny_model_path("bert"))
    root = tmp_path_factory.mktemp("finishing_paths")
    encoder = _encoder(model, False, "truncate")
    references = [ref for _, groups in REQUESTS for group in groups for ref in group]
    idf_path = root / "references.idf"
    DocumentFrequencies(tokenizer=model).add(encoder.tokenize(references)).save(idf_path)
    baseline_path = root / "baseline.csv"
    rows = encoder.num_layers + 1  # a row per hidden state, for all_layers
    baseline_path.write_text("LAYER,P,R,F\n" + "".join(f"{i},0.{3 + i},0.{2 + i},0.{4 + i}\n" for i in range(rows)))
    return {"model": model, "idf": str(idf_path), "baseline": str(baseline_path)}


def _keep_tensors(patch, encoder: Encoder) -> None:
    """The encoder's stores stay torch tensors, as a GPU's do (``returns_tensors``)."""
    patch.setattr(encoder, "embed_ids", functools.partial(encoder.embed_ids, on_device=True))


def _service(scorer: BERTScore, requests, batch_size, monkeypatch, *, tensors: bool) -> tuple[list, int]:
    """The service's run of one micro-batch of ``requests``, and how many times it called
    ``finish_plans``. ``tensors``: the encoder keeps the batch's store a tensor, as on a GPU."""
    task = BERTScoreTask(scorer)
    payloads = [task.prepare(cands, refs, reference_batch_size=batch_size)[0] for cands, refs in requests]
    calls = []
    finish_plans = scorer.finish_plans
    with monkeypatch.context() as patch:
        patch.setattr(scorer, "finish_plans", lambda *a, **k: calls.append(1) or finish_plans(*a, **k))
        if tensors:
            _keep_tensors(patch, scorer.encoder)
        results = task.run(payloads, alone=False)
    return results, len(calls)


def _assert_identical(got, want, where: str) -> None:
    for name in ("precision", "recall", "f1"):
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype and a.shape == b.shape, (where, name, a.dtype, b.dtype, a.shape, b.shape)
        assert np.array_equal(a, b), (where, name, np.abs(a.astype(np.float64) - b).max())
    assert got.signature == want.signature, where
    assert got.details == want.details, where


def _assert_close(got, want, where: str) -> None:
    for name in ("precision", "recall", "f1"):
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype and a.shape == b.shape, (where, name, a.dtype, b.dtype, a.shape, b.shape)
        np.testing.assert_allclose(a, b, rtol=0, atol=KERNEL_ATOL, err_msg=where)
    assert got.signature == want.signature, where
    assert got.details == want.details, where


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_the_finishing_paths_agree(case, files, monkeypatch) -> None:
    idf, _, refs, _, _, batch_size = case
    host, device = _scorers(files["model"], case, files)
    requests = _requests(refs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # truncation, uniform idf fallbacks: the signatures say so
        on_host = [host.score(cands, refs_, reference_batch_size=batch_size) for cands, refs_ in requests]
        served, merged = _service(host, requests, batch_size, monkeypatch, tensors=False)

        plans = [device.plan(cands, refs_) for cands, refs_ in requests]
        engine = [device.score_plan(plan, reference_batch_size=batch_size) for plan in plans]
        chunked = [score_on_device(device, plan, reference_batch_size=batch_size, chunk_tokens=8) for plan in plans]
        with monkeypatch.context() as patch:
            _keep_tensors(patch, device.encoder)
            finished = [device.finish(plan, device.encode(plan), reference_batch_size=batch_size) for plan in plans]
        served_tensors, merged_tensors = _service(device, requests, batch_size, monkeypatch, tensors=True)
        served_alone = [_service(device, [request], batch_size, monkeypatch, tensors=True)[0][0]
                        for request in requests]

    # the service merges the batch's matching exactly when the weights do not depend on the call
    expect_merged = int(idf != "references" and batch_size is None)
    assert (merged, merged_tensors) == (expect_merged, expect_merged)
    for k, want in enumerate(on_host):
        _assert_identical(served[k], want, f"service on host arrays, request {k}")
    for k, want in enumerate(engine):
        _assert_identical(finished[k], want, f"finish of a tensor store, request {k}")
        _assert_identical(served_alone[k], want, f"service on tensors, request {k} alone")
        _assert_close(chunked[k], want, f"device engine in chunks, request {k}")
        _assert_close(served_tensors[k], want, f"service on tensors, request {k} among the others")
        _assert_close(want, on_host[k], f"torch matching against the C++ kernel, request {k}")


def test_a_call_without_sentences_gives_every_hidden_state_on_every_path(tiny_bert) -> None:
    """``score([], [])`` with all_layers: an empty row per hidden state, on host arrays as on
    tensors (the host path used to stack the layers of an empty store that had no layer axis)."""
    results = [BERTScore(tiny_bert, all_layers=True, backend=backend, device_engine=engine).score([], [])
               for backend, engine in (("onnx", None), ("torch", False), ("torch", True))]
    hidden_states = results[0].precision.shape[0]
    assert hidden_states == _encoder(tiny_bert, True, "truncate").num_layers + 1
    for result in results:
        for name in ("precision", "recall", "f1"):
            assert getattr(result, name).shape == (hidden_states, 0)
