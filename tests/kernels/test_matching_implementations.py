"""The three implementations of BERTScore greedy matching agree: the C++ kernel ("native"), the
torch implementation ("torch", cpu and, where present, cuda) and the numpy specification
("reference", rapidscore.kernels.matching_ref).

Tolerances. The reference computes in float64; native and torch take float32 dot products
(different summation orders), so a similarity of unit vectors carries a rounding error of about
D * 2**-24 in the worst case and far less in practice. P and R are weighted means of maxima of
similarities, which do not amplify that error: abs 1e-6 between any two implementations.
F = 2PR / (P + R) amplifies it by up to 2 / (P + R)**2, so F is compared at abs 1e-6 only where
P + R >= 1 (realistic data: positive similarities), at abs 1e-5 where |P + R| >= 0.5, and
everywhere else each implementation's F is checked against its own P and R.
"""

from __future__ import annotations

import pkgutil
import subprocess
import sys
import threading

import numpy as np
import pytest

from rapidscore import threads
from rapidscore.kernels import matching
from rapidscore.common.arrays import is_torch_tensor
from rapidscore.kernels.matching import flatten_sentences, greedy_match, pairwise_match

torch = pytest.importorskip("torch", reason="the torch implementation is part of the comparison")

PR_ATOL = 1e-6
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA"))]


def make_store(rng, lengths, dim, *, negative: bool, n_layers: int | None = None, zero_weight=()):
    """Unit-norm token embeddings. ``negative=False``: a shared direction keeps cosines positive
    (contextual embeddings); ``negative=True``: isotropic noise, about half the cosines negative.
    Sentences listed in ``zero_weight`` get all-zero weights; elsewhere CLS/SEP-like zeros."""
    common = rng.standard_normal(dim)
    layer_count = n_layers or 1
    embeddings, weights = [], []
    for s, n in enumerate(lengths):
        x = rng.standard_normal((layer_count, n, dim))
        if not negative:
            x += 3.0 * common
        embeddings.append(x / np.linalg.norm(x, axis=-1, keepdims=True))
        w = rng.uniform(0.1, 4.0, size=n)
        if n > 2:
            w[0] = 0.0
        if s in zero_weight:
            w[:] = 0.0
        weights.append(w.astype(np.float32))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    E = np.concatenate(embeddings, axis=1).astype(np.float32)
    return (E if n_layers else E[0]), offsets, np.concatenate(weights)


def make_pairs(rng, n_sentences, count):
    """Random pairs plus duplicated pairs, a sentence against itself, and both orders of a pair."""
    pairs = rng.integers(0, n_sentences, size=(count, 2))
    extra = [pairs[0], pairs[0], [0, 0], [pairs[1, 1], pairs[1, 0]]]
    return np.concatenate([pairs, np.array(extra)]).astype(np.int64)


# (lengths: empty and length-1 sentences included, dim, number of random pairs)
SHAPES = {
    "tiny": ([1, 0, 2, 1], 1, 12),
    "small": ([5, 0, 1, 7, 3, 1, 12, 0], 8, 40),
    "medium": ([int(n) for n in np.random.default_rng(5).integers(0, 30, size=25)] + [0, 1], 48, 150),
    "wide": ([3, 17, 1, 40, 9, 25], 384, 30),
}


def run(implementation, device, function, E, *args, **kwargs):
    if implementation == "torch":
        E = torch.from_numpy(E).to(device)
    return function(E, *args, implementation=implementation, **kwargs)


def assert_scores_agree(a, b, well_conditioned_atol=1e-6):
    """P, R within PR_ATOL; F as explained in the module docstring."""
    for x, y in zip(a, b):
        assert isinstance(x, np.ndarray) and x.dtype == np.float64 and x.shape == y.shape
    np.testing.assert_allclose(a[0], b[0], rtol=0, atol=PR_ATOL)
    np.testing.assert_allclose(a[1], b[1], rtol=0, atol=PR_ATOL)
    for P, R, F in (a, b):
        assert np.isfinite(F).all()
        denominator = P + R
        own = np.divide(2 * P * R, denominator, out=np.zeros_like(P), where=denominator != 0)
        np.testing.assert_allclose(F, own, rtol=1e-12, atol=1e-12)
    sums = np.abs(a[0] + a[1])
    np.testing.assert_allclose(a[2][sums >= 1], b[2][sums >= 1], rtol=0, atol=well_conditioned_atol)
    np.testing.assert_allclose(a[2][sums >= 0.5], b[2][sums >= 0.5], rtol=0, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("negative", [False, True], ids=["positive", "negative"])
@pytest.mark.parametrize("layers", [None, 3], ids=["TD", "LTD"])
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("batch_size", [None, 1, 3, 64])
def test_greedy_match_implementations_agree(shape, layers, negative, batch_size, device):
    lengths, dim, n_pairs = SHAPES[shape]
    rng = np.random.default_rng([len(lengths), dim, n_pairs, int(negative), layers or 0])
    zero_weight = {2} if len(lengths) > 4 else set()
    E, offsets, weights = make_store(rng, lengths, dim, negative=negative, n_layers=layers, zero_weight=zero_weight)
    pairs = make_pairs(rng, len(lengths), n_pairs)
    results = {
        impl: run(impl, device, greedy_match, E, offsets, weights, pairs, bert_score_batch_size=batch_size)
        for impl in ("native", "torch", "reference")
    }
    expected_shape = (layers, len(pairs)) if layers else (len(pairs),)
    assert results["reference"][0].shape == expected_shape
    assert_scores_agree(results["native"], results["reference"])
    assert_scores_agree(results["torch"], results["reference"])
    assert_scores_agree(results["native"], results["torch"])

    sums = np.array([weights[offsets[s] : offsets[s + 1]].sum() for s in range(len(lengths))])
    zero = (sums[pairs[:, 0]] == 0) | (sums[pairs[:, 1]] == 0)  # empty or zero-weight side
    assert zero.any()
    for P, R, F in results.values():
        assert (P[..., zero] == 0).all() and (R[..., zero] == 0).all() and (F[..., zero] == 0).all()
    if negative and batch_size == 3 and shape in ("small", "medium"):
        # The padding floors act on this data (otherwise this test could not see them wrong).
        plain = greedy_match(E, offsets, weights, pairs)
        assert np.abs(plain[0] - results["native"][0]).max() > 1e-3


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layers", [None, 2], ids=["TD", "LTD"])
@pytest.mark.parametrize("shape", ["tiny", "small", "medium"])
def test_pairwise_match_implementations_agree(shape, layers, device):
    lengths, dim, _ = SHAPES[shape]
    rng = np.random.default_rng([7, len(lengths), layers or 0])
    E, offsets, weights = make_store(rng, lengths, dim, negative=True, n_layers=layers, zero_weight={1})
    n = len(lengths)
    candidates = np.concatenate([rng.integers(0, n, size=n), [0, 0]])  # duplicates included
    references = rng.permutation(n)
    results = {
        impl: run(impl, device, pairwise_match, E, offsets, weights, candidates, references)
        for impl in ("native", "torch", "reference")
    }
    grid = (layers,) if layers else ()
    assert results["native"][0].shape == (*grid, len(candidates), n)
    assert_scores_agree(results["native"], results["reference"])
    assert_scores_agree(results["torch"], results["reference"])
    # pairwise is the grid of greedy_match pairs, for every implementation
    flat_pairs = np.stack(np.meshgrid(candidates, references, indexing="ij"), axis=-1).reshape(-1, 2)
    for impl, scores in results.items():
        flat = run(impl, device, greedy_match, E, offsets, weights, flat_pairs)
        for grid_scores, pair_scores in zip(scores, flat):
            np.testing.assert_array_equal(grid_scores.reshape(pair_scores.shape), pair_scores)


@pytest.mark.parametrize("implementation", ["native", "torch", "reference"])
def test_empty_inputs(implementation):
    E, offsets, weights = flatten_sentences([np.ones((2, 4)), np.zeros((0, 4))])
    for pairs in ([], np.zeros((0, 2), np.int64)):
        scores = greedy_match(E, offsets, weights, pairs, implementation=implementation)
        assert all(s.shape == (0,) and s.dtype == np.float64 for s in scores)
    assert pairwise_match(E, offsets, weights, [], [0, 1], implementation=implementation)[0].shape == (0, 2)
    with_empty = greedy_match(E, offsets, weights, [[0, 1]], implementation=implementation)
    assert [float(s[0]) for s in with_empty] == [0.0, 0.0, 0.0]
    itself = greedy_match(E, offsets, weights, [[0, 0]], implementation=implementation)
    assert [float(s[0]) for s in itself] == [pytest.approx(1.0, abs=1e-7)] * 3


BAD_INPUTS = [
    (dict(offsets=np.array([0, 5, 3, 56])), ValueError),
    (dict(offsets=np.array([0, 5, 22, 23, 99])), ValueError),
    (dict(offsets=np.array([-1, 5, 22, 23, 56])), ValueError),
    (dict(offsets=np.array([], dtype=np.int64)), ValueError),
    (dict(offsets=np.array([0.0, 5.0, 22.0, 23.0, 56.0])), TypeError),
    (dict(pairs=np.array([[0, 4]])), IndexError),
    (dict(pairs=np.array([[-1, 0]])), IndexError),
    (dict(pairs=np.array([[0, 1, 2]])), ValueError),
    (dict(pairs=np.array([0, 1])), ValueError),
    (dict(pairs=np.array([[0.0, 1.0]])), TypeError),
    (dict(pairs=np.array([[0, 2**64 - 1]], dtype=np.uint64)), IndexError),
    (dict(embeddings="nan"), ValueError),
    (dict(embeddings="nan_layer"), ValueError),
    (dict(embeddings="int"), TypeError),
    (dict(embeddings="1d"), ValueError),
    (dict(embeddings="dim0"), ValueError),
    (dict(weights=np.ones(55, np.float32)), ValueError),
    (dict(weights=np.full(56, np.inf, np.float32)), ValueError),
    (dict(bert_score_batch_size=0), ValueError),
    (dict(num_threads=0), ValueError),
    (dict(num_threads=2000), ValueError),
    (dict(num_threads=1.5), TypeError),
    (dict(implementation="gpu"), ValueError),
]


BAD_INPUT_IDS = [f"{next(iter(change))}-{i}" for i, (change, _) in enumerate(BAD_INPUTS)]


@pytest.mark.parametrize("change, error", BAD_INPUTS, ids=BAD_INPUT_IDS)
def test_every_implementation_refuses_bad_input_in_the_same_words(change, error):
    rng = np.random.default_rng(0)
    E, offsets, weights = make_store(rng, [5, 17, 1, 33], 8, negative=True)
    variants = {
        "nan": np.where(np.arange(E.size).reshape(E.shape) == 17, np.nan, E).astype(np.float32),
        "nan_layer": np.stack([E, np.where(np.arange(E.size).reshape(E.shape) == 30, np.inf, E)]).astype(np.float32),
        "int": E.astype(np.int64),
        "1d": E.ravel(),
        "dim0": np.zeros((56, 0), np.float32),
    }
    messages = []
    for implementation in ("native", "torch", "reference"):
        args = dict(embeddings=E, offsets=offsets, weights=weights, pairs=np.array([[0, 1]]),
                    implementation=implementation)
        args.update(change)
        if isinstance(args["embeddings"], str):
            args["embeddings"] = variants[args["embeddings"]]
        with pytest.raises(error) as raised:
            greedy_match(**args)
        messages.append(str(raised.value))
    assert messages[0] == messages[1] == messages[2], messages


def test_auto_dispatches_on_where_the_embeddings_live(monkeypatch):
    from rapidscore.device import matching_torch
    from rapidscore.kernels import matching_ref

    rng = np.random.default_rng(1)
    E, offsets, weights = make_store(rng, [3, 4, 0], 6, negative=False)
    calls = []
    for module, name in ((matching_torch, "torch"), (matching_ref, "reference")):
        original = module.greedy_match
        monkeypatch.setattr(module, "greedy_match",
                            lambda *a, _orig=original, _name=name, **k: calls.append(_name) or _orig(*a, **k))
    native = greedy_match(E, offsets, weights, [[0, 1]])
    assert calls == []
    via_torch = greedy_match(torch.from_numpy(E), offsets, weights, [[0, 1]])
    assert calls == ["torch"]
    greedy_match(E, offsets, weights, [[0, 1]], implementation="reference")
    assert calls == ["torch", "reference"]
    # a cpu tensor can also be forced through the native kernel
    forced = greedy_match(torch.from_numpy(E), offsets, weights, [[0, 1]], implementation="native")
    assert calls == ["torch", "reference"]
    for a, b, c in zip(native, via_torch, forced):
        np.testing.assert_allclose(a, b, rtol=0, atol=PR_ATOL)
        np.testing.assert_array_equal(a, c)
    assert is_torch_tensor(torch.zeros(1)) and not is_torch_tensor(np.zeros(1))


def test_numpy_matching_does_not_import_torch():
    code = (
        "import sys, numpy as np\n"
        "from rapidscore.kernels.matching import flatten_sentences, greedy_match, pairwise_match\n"
        "E, o, w = flatten_sentences([np.ones((2, 3)), np.ones((1, 3))])\n"
        "greedy_match(E, o, w, [[0, 1]]); pairwise_match(E, o, w, [0], [1])\n"
        "greedy_match(E, o, w, [[0, 1]], implementation='reference')\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_concurrent_calls_lease_the_thread_budget_and_agree():
    rng = np.random.default_rng(8)
    lengths = rng.integers(0, 40, size=200)
    E, offsets, weights = make_store(rng, lengths, 64, negative=False)
    pairs = rng.integers(0, 200, size=(4000, 2))
    sequential = greedy_match(E, offsets, weights, pairs, num_threads=1)
    assert threads.threads_in_use() == 0

    n_callers = 8
    start = threading.Barrier(n_callers)
    results: list = [None] * n_callers
    errors: list = []

    def caller(i):
        try:
            start.wait()
            results[i] = greedy_match(E, offsets, weights, pairs, num_threads=None)
        except BaseException as exc:  # reported below; a thread's exception would be lost
            errors.append(exc)

    workers = [threading.Thread(target=caller, args=(i,)) for i in range(n_callers)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    for result in results:
        for a, b in zip(result, sequential):
            np.testing.assert_array_equal(a, b)
    assert threads.threads_in_use() == 0


def test_lease_is_returned_when_the_kernel_raises():
    E, offsets, weights = flatten_sentences([np.ones((2, 4)), np.ones((3, 4))])
    with pytest.raises(IndexError):
        greedy_match(E, offsets, weights, [[0, 9]])
    with pytest.raises(IndexError):
        pairwise_match(E, offsets, weights, [0], [9])
    assert threads.threads_in_use() == 0


def test_the_api_lives_in_kernels_matching_only() -> None:  # issue 27: the rapidscore.bertscore.matching shim is gone
    for function in (greedy_match, pairwise_match, flatten_sentences):
        assert function.__module__ == "rapidscore.kernels.matching"
    import rapidscore.bertscore

    # The package's folder, not an import: an editable install keeps finding a deleted module's path.
    assert "matching" not in {info.name for info in pkgutil.iter_modules(rapidscore.bertscore.__path__)}


# -- floors= (bert-score's padding given per pair), and the implementation "auto" picks ----------


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layers", [None, 2], ids=["TD", "LTD"])
@pytest.mark.parametrize("batch_size", [1, 3, 64])
def test_floors_equal_the_batch_size_they_come_from(batch_size, layers, device):
    """``floors=padding_floors(offsets, pairs, B)`` is ``bert_score_batch_size=B``: bit-identical on
    the native and torch kernels (the same floors reach the same code), to rounding on the
    reference (which pads one zero row instead of up to the batch's longest)."""
    from rapidscore.kernels.padding import padding_floors

    rng = np.random.default_rng([batch_size, layers or 0])
    lengths, dim, n_pairs = SHAPES["medium"]
    E, offsets, weights = make_store(rng, lengths, dim, negative=True, n_layers=layers, zero_weight={2})
    pairs = make_pairs(rng, len(lengths), n_pairs)
    floors = padding_floors(offsets, pairs, batch_size)
    for implementation in ("native", "torch", "reference"):
        batched = run(implementation, device, greedy_match, E, offsets, weights, pairs,
                      bert_score_batch_size=batch_size)
        given = run(implementation, device, greedy_match, E, offsets, weights, pairs, floors=floors)
        for a, b in zip(given, batched):
            if implementation == "reference":
                np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
            else:
                np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("device", DEVICES)
def test_any_floors_agree_across_implementations(device):
    rng = np.random.default_rng(41)
    lengths, dim, n_pairs = SHAPES["small"]
    E, offsets, weights = make_store(rng, lengths, dim, negative=True)
    pairs = make_pairs(rng, len(lengths), n_pairs)
    floors = rng.random(pairs.shape) < 0.5  # not from any batch size
    results = {impl: run(impl, device, greedy_match, E, offsets, weights, pairs, floors=floors)
               for impl in ("native", "torch", "reference")}
    assert_scores_agree(results["native"], results["reference"])
    assert_scores_agree(results["torch"], results["reference"])
    plain = greedy_match(E, offsets, weights, pairs)
    assert (results["native"][0] >= plain[0]).all() and (results["native"][0] > plain[0] + 1e-3).any()


@pytest.mark.parametrize("change, error", [
    (dict(floors=np.zeros((1, 2), np.int64)), TypeError),
    (dict(floors=np.zeros((2, 2), bool)), ValueError),
    (dict(floors=np.zeros((1, 3), bool)), ValueError),
    (dict(floors=np.zeros(2, bool)), ValueError),
    (dict(floors=[[1, 0]]), TypeError),
    (dict(floors=np.zeros((1, 2), bool), bert_score_batch_size=4), ValueError),
])
def test_every_implementation_refuses_bad_floors_in_the_same_words(change, error):
    rng = np.random.default_rng(0)
    E, offsets, weights = make_store(rng, [5, 17, 1, 33], 8, negative=True)
    messages = []
    for implementation in ("native", "torch", "reference"):
        with pytest.raises(error) as raised:
            greedy_match(E, offsets, weights, np.array([[0, 1]]), implementation=implementation, **change)
        messages.append(str(raised.value))
    assert messages[0] == messages[1] == messages[2], messages


@pytest.mark.parametrize("selected, expected", [("native", "native"), ("python", "reference"), ("", "native"),
                                                ("auto", "native")])
def test_auto_follows_rapidscore_implementation(monkeypatch, selected, expected):
    from rapidscore.kernels import matching_ref

    monkeypatch.setenv("RAPIDSCORE_IMPLEMENTATION", selected)
    rng = np.random.default_rng(1)
    E, offsets, weights = make_store(rng, [3, 4, 0], 6, negative=False)
    calls = []
    original = matching_ref.greedy_match
    monkeypatch.setattr(matching_ref, "greedy_match", lambda *a, **k: calls.append("reference") or original(*a, **k))
    auto = greedy_match(E, offsets, weights, [[0, 1], [1, 2]])
    assert calls == (["reference"] if expected == "reference" else [])
    for a, b in zip(auto, greedy_match(E, offsets, weights, [[0, 1], [1, 2]], implementation=expected)):
        np.testing.assert_array_equal(a, b)
    pairwise = pairwise_match(E, offsets, weights, [0, 1], [1, 2])
    assert calls[-1:] == (["reference"] if expected == "reference" else [])
    for a, b in zip(pairwise, pairwise_match(E, offsets, weights, [0, 1], [1, 2], implementation=expected)):
        np.testing.assert_array_equal(a, b)
    # a tensor still goes to torch, and an explicit choice is kept whatever the variable says
    calls.clear()
    greedy_match(torch.from_numpy(E), offsets, weights, [[0, 1]])
    greedy_match(E, offsets, weights, [[0, 1]], implementation="native")
    assert calls == []
