"""Greedy cosine max-matching kernel (rapidscore.kernels.matching) against the numpy reference
(rapidscore.kernels.matching_ref) and against bert-score 0.3.13's own matching code.

Every test runs twice (the ``kernel_implementation`` fixture of conftest.py): with the native
kernels, where ``implementation="auto"`` runs the C++ kernel, and with the Python twins, where it
runs the numpy reference."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rapidscore.kernels import matching_ref
from rapidscore.kernels.matching import flatten_sentences, greedy_match, pairwise_match

pytestmark = pytest.mark.usefixtures("kernel_implementation")

# Kernel dot products are float32 (length-D sums), the reference's are float64.
ORACLE_ATOL = 2e-6


def random_store(rng, lengths, dim, zero_weight_fraction=0.2):
    embs = [rng.standard_normal((n, dim)).astype(np.float32) for n in lengths]
    weights = [
        np.where(rng.random(n) < zero_weight_fraction, 0.0, rng.random(n) + 0.1).astype(np.float32)
        for n in lengths
    ]
    return flatten_sentences(embs, weights)


@st.composite
def stores_and_pairs(draw):
    n = draw(st.integers(1, 8))
    lengths = draw(st.lists(st.integers(0, 40), min_size=n, max_size=n))
    dim = draw(st.integers(1, 40))
    seed = draw(st.integers(0, 2**32 - 1))
    idx = st.integers(0, n - 1)
    pairs = draw(st.lists(st.tuples(idx, idx), min_size=0, max_size=20))
    return lengths, dim, seed, np.array(pairs, dtype=np.int64).reshape(-1, 2)


@settings(max_examples=60, deadline=None)
@given(stores_and_pairs())
def test_matches_numpy_oracle(case):
    lengths, dim, seed, pairs = case
    rng = np.random.default_rng(seed)
    E, offsets, weights = random_store(rng, lengths, dim)
    P, R, F = greedy_match(E, offsets, weights, pairs)
    assert P.dtype == np.float64 and P.shape == (len(pairs),)
    expected = np.stack(matching_ref.greedy_match(E, offsets, weights, pairs))
    np.testing.assert_allclose(np.stack([P, R]), expected[:2], rtol=0, atol=ORACLE_ATOL)
    # F = 2PR/(P+R) amplifies float32 dot-product error when P ~ -R (random vectors allow
    # negative similarities), so F is checked against the kernel's own P, R, and against the
    # reference where the formula is well conditioned.
    assert np.isfinite(F).all()
    denom = P + R
    own_f = np.divide(2 * P * R, denom, out=np.zeros_like(P), where=denom != 0)
    np.testing.assert_allclose(F, own_f, rtol=1e-12, atol=1e-12)
    stable = np.abs(expected[0] + expected[1]) > 0.1
    np.testing.assert_allclose(F[stable], expected[2][stable], rtol=0, atol=20 * ORACLE_ATOL)
    # Pairwise mode is the same computation on the same packed data: bit-identical.
    n = len(lengths)
    PP, RR, FF = pairwise_match(E, offsets, weights, np.arange(n), np.arange(n))
    assert PP.shape == (n, n)
    if len(pairs):
        np.testing.assert_array_equal(PP[pairs[:, 0], pairs[:, 1]], P)
        np.testing.assert_array_equal(RR[pairs[:, 0], pairs[:, 1]], R)
        np.testing.assert_array_equal(FF[pairs[:, 0], pairs[:, 1]], F)


def test_hand_computed_cases():
    # Unit vectors e0, e1 (dim 3); every expected value below follows by hand from the spec.
    e = np.eye(3, dtype=np.float32)
    E = np.stack([e[0], e[1], e[0], -e[0], e[2]])
    offsets = np.array([0, 2, 3, 4, 5, 5])  # s0=[e0,e1], s1=[e0], s2=[-e0], s3=[e2], s4=[]
    w = np.ones(5, dtype=np.float32)
    pairs = np.array([[0, 1], [2, 1], [1, 3], [0, 4], [4, 0], [0, 0]])
    P, R, F = greedy_match(E, offsets, w, pairs)
    # s0 vs s1: sim=[[1],[0]] -> P=(1+0)/2, R=1, F=2*.5*1/1.5
    assert (P[0], R[0], F[0]) == pytest.approx((0.5, 1.0, 2 / 3), abs=1e-12)
    # s2 vs s1: sim=-1 -> the max over real tokens stays negative (bert-score's padding
    # would not change it either: there is no padding in a single pair).
    assert (P[1], R[1], F[1]) == pytest.approx((-1.0, -1.0, -1.0), abs=1e-12)
    # s1 vs s3: orthogonal -> P=R=0 and F=0 rather than 0/0.
    assert (P[2], R[2], F[2]) == (0.0, 0.0, 0.0)
    # empty sentence on either side -> zeros
    assert P[3] == R[3] == F[3] == P[4] == R[4] == F[4] == 0.0
    assert (P[5], R[5], F[5]) == pytest.approx((1.0, 1.0, 1.0), abs=1e-12)
    # weights: ignoring s0's second token (weight 0) leaves only its perfect match
    w0 = w.copy()
    w0[1] = 0.0
    P, R, F = greedy_match(E, offsets, w0, [[0, 1]])
    assert (P[0], R[0], F[0]) == pytest.approx((1.0, 1.0, 1.0), abs=1e-12)
    # all weights of a side zero -> zeros (bert-score gives NaN here)
    w1 = w.copy()
    w1[2] = 0.0
    assert [x[0] for x in greedy_match(E, offsets, w1, [[0, 1]])] == [0.0, 0.0, 0.0]


def test_threads_and_order_do_not_change_results():
    rng = np.random.default_rng(7)
    lengths = rng.integers(0, 30, size=60)
    E, offsets, weights = random_store(rng, lengths, 24)
    pairs = rng.integers(0, 60, size=(3000, 2))
    one = greedy_match(E, offsets, weights, pairs, num_threads=1)
    many = greedy_match(E, offsets, weights, pairs, num_threads=4)
    default = greedy_match(E, offsets, weights, pairs)
    for a, b, c in zip(one, many, default):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
    perm = rng.permutation(len(pairs))
    shuffled = greedy_match(E, offsets, weights, pairs[perm], num_threads=3)
    for a, b in zip(one, shuffled):
        np.testing.assert_array_equal(a[perm], b)
    np.testing.assert_allclose(np.stack(one)[:2], np.stack(matching_ref.greedy_match(E, offsets, weights, pairs))[:2], atol=ORACLE_ATOL, rtol=0)
    cands, refs = np.arange(0, 60, 2), np.arange(1, 60, 3)
    pw1 = pairwise_match(E, offsets, weights, cands, refs, num_threads=1)
    pw4 = pairwise_match(E, offsets, weights, cands, refs, num_threads=4)
    grid = np.stack(np.meshgrid(cands, refs, indexing="ij"), axis=-1).reshape(-1, 2)
    flat = greedy_match(E, offsets, weights, grid)
    for a, b, c in zip(pw1, pw4, flat):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a.ravel(), c)


def test_dtypes_and_layers():
    rng = np.random.default_rng(3)
    E, offsets, weights = random_store(rng, [5, 17, 1, 33], 16)
    pairs = np.array([[0, 1], [1, 2], [3, 0], [2, 2]], dtype=np.int32)
    base = greedy_match(E, offsets, weights, pairs)
    # float64 / int32 inputs are converted, lists accepted
    again = greedy_match(E.astype(np.float64), offsets.astype(np.int32), weights.astype(np.float64), pairs.tolist())
    for a, b in zip(base, again):
        np.testing.assert_array_equal(a, b)
    # (L, T, D): one result row per layer, each equal to scoring that layer alone
    E2 = np.stack([E, E[:, ::-1].copy(), -E])
    P, R, F = greedy_match(E2, offsets, weights, pairs)
    assert P.shape == (3, 4)
    for layer in range(3):
        single = greedy_match(E2[layer], offsets, weights, pairs)
        np.testing.assert_array_equal(P[layer], single[0])
        np.testing.assert_array_equal(F[layer], single[2])
    PP, _, _ = pairwise_match(E2, offsets, weights, [0, 1], [2, 3, 0])
    assert PP.shape == (3, 2, 3)
    # no pairs / no candidates
    assert greedy_match(E, offsets, weights, np.zeros((0, 2), np.int64))[0].shape == (0,)
    assert greedy_match(E, offsets, weights, [])[0].shape == (0,)
    assert pairwise_match(E, offsets, weights, [], [0, 1])[0].shape == (0, 2)


@pytest.mark.parametrize(
    "change, error, message",
    [
        (dict(offsets=np.array([0, 5, 3, 56])), ValueError, "non-decreasing"),
        (dict(offsets=np.array([0, 5, 22, 23, 99])), ValueError, "exceeds"),
        (dict(offsets=np.array([-1, 5, 22, 23, 56])), ValueError, "negative"),
        (dict(offsets=np.array([], dtype=np.int64)), ValueError, "n_sentences"),
        (dict(offsets=np.array([0.0, 5.0, 22.0, 23.0, 56.0])), TypeError, "integer"),
        (dict(pairs=np.array([[0, 4]])), IndexError, "pairs entry 0, column 1 = 4"),
        (dict(pairs=np.array([[-1, 0]])), IndexError, "= -1"),
        (dict(pairs=np.array([[0, 1, 2]])), ValueError, "shape"),
        (dict(pairs=np.array([0, 1])), ValueError, "dimension"),
        (dict(pairs=np.array([[0.0, 1.0]])), TypeError, "integer"),
        (dict(pairs=np.array([[0, 2**64 - 1]], dtype=np.uint64)), IndexError, "out of range"),
        (dict(embeddings="E_nan"), ValueError, "non-finite"),
        (dict(embeddings="E_int"), TypeError, "floating"),
        (dict(embeddings="E_1d"), ValueError, "shape"),
        (dict(embeddings="E_dim0"), ValueError, "at least one column"),
        (dict(weights=np.ones(55, np.float32)), ValueError, "weights has 55"),
        (dict(weights=np.full(56, np.inf, np.float32)), ValueError, "non-finite"),
        (dict(num_threads=0), ValueError, "num_threads"),
        (dict(num_threads=1.5), TypeError, "num_threads"),
    ],
)
def test_bad_inputs_raise(change, error, message):
    rng = np.random.default_rng(0)
    E, offsets, weights = random_store(rng, [5, 17, 1, 33], 8)
    variants = {
        "E_nan": np.where(np.arange(E.size).reshape(E.shape) == 17, np.nan, E).astype(np.float32),
        "E_int": E.astype(np.int64),
        "E_1d": E.ravel(),
        "E_dim0": np.zeros((56, 0), np.float32),
    }
    args = dict(embeddings=E, offsets=offsets, weights=weights, pairs=np.array([[0, 1]]), num_threads=None)
    args.update(change)
    if isinstance(args["embeddings"], str):
        args["embeddings"] = variants[args["embeddings"]]
    with pytest.raises(error, match=message):
        greedy_match(**args)


@pytest.mark.parametrize("position", [0, 4095, 4096, 4097, 3 * 4096 + 11, -1])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_embedding_reported_at_its_flat_index(position, bad):
    """The vectorised scan works in blocks of 4096 values; the index must be exact anywhere,
    block edges and the ragged last block included, against numpy's own search."""
    rng = np.random.default_rng(1)
    E, offsets, weights = random_store(rng, [40, 57, 33], 128)  # 130 x 128 = 16,640 values
    flat = E.ravel().copy()
    flat[position] = bad
    expected = int(np.flatnonzero(~np.isfinite(flat))[0])
    with pytest.raises(ValueError, match=f"non-finite value \\(NaN or inf\\) at flat index {expected}$"):
        greedy_match(flat.reshape(E.shape), offsets, weights, [[0, 1]])
    # Largest finite magnitudes are finite (not reported as NaN/inf), but their dot products
    # overflow: refused by their row's norm (issue 29 item 5). Subnormals are fine.
    edge = E.copy()
    edge[0, :2] = [np.finfo(np.float32).max, -np.finfo(np.float32).max]
    with pytest.raises(ValueError, match=r"embeddings row 0 has L2 norm 4.81e\+38: its dot products overflow"):
        greedy_match(edge, offsets, weights, [[0, 1]])
    edge = E.copy()
    edge[0, :2] = [np.float32(1e-45), -np.float32(1e-45)]
    greedy_match(edge, offsets, weights, [[0, 1]])


def test_pairwise_bad_indices():
    E, offsets, weights = flatten_sentences([np.ones((2, 4)), np.ones((3, 4))])
    with pytest.raises(IndexError, match="references entry 1 = 2"):
        pairwise_match(E, offsets, weights, [0, 1], [1, 2])
    with pytest.raises(IndexError, match="candidates entry 0 = -3"):
        pairwise_match(E, offsets, weights, [-3], [1])
    with pytest.raises(ValueError, match="dimension"):
        pairwise_match(E, offsets, weights, [[0]], [1])


# ---------------------------------------------------------------------------------------------
# Parity with bert-score 0.3.13: its bert_cos_score_idf (dedup, sort, batching, padding with
# 2.0, masks, greedy_cos_idf) is run on our embeddings by replacing only the encoder call.


def realistic_store(rng, n_sentences, dim, min_len=3, max_len=40):
    """Contextual-embedding-like data: a shared direction plus noise (cosines mostly 0.2-0.9),
    idf-like weights, weight 0 on the first and last token (CLS/SEP)."""
    common = rng.standard_normal(dim)
    embs, weights = [], []
    for _ in range(n_sentences):
        n = int(rng.integers(min_len, max_len + 1))
        topic = rng.standard_normal(dim)
        x = 2.0 * common + 0.8 * topic + rng.standard_normal((n, dim))
        embs.append((x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32))
        w = rng.uniform(0.05, 4.0, size=n).astype(np.float32)
        w[0] = w[-1] = 0.0
        weights.append(w)
    return flatten_sentences(embs, weights, normalize=False)


def reference_scores(monkeypatch, E, offsets, weights, pairs, batch_size=64):
    torch = pytest.importorskip("torch", reason="the reference matching of bert-score runs on torch")
    pytest.importorskip("bert_score", reason="bert-score is the parity reference (test extra)")
    import bert_score.utils as bsu

    layered = E.ndim == 3
    def sentence_rows(s):  # stats_dict slices emb[i, :len], emb being (len, D) or (len, L, D)
        block = E[:, offsets[s] : offsets[s + 1]] if layered else E[offsets[s] : offsets[s + 1]]
        return block.transpose(1, 0, 2) if layered else block

    def fake_get_bert_embedding(sentences, model, tokenizer, idf_dict, device="cpu", all_layers=False):
        ids = [int(s[1:]) for s in sentences]
        lens = [offsets[s + 1] - offsets[s] for s in ids]
        K = max(lens)
        shape = (len(ids), K, E.shape[0], E.shape[2]) if layered else (len(ids), K, E.shape[1])
        emb = torch.zeros(shape, dtype=torch.float32)
        idf = torch.zeros((len(ids), K), dtype=torch.float32)
        mask = torch.zeros((len(ids), K), dtype=torch.long)
        for b, s in enumerate(ids):
            n = lens[b]
            emb[b, :n] = torch.from_numpy(np.ascontiguousarray(sentence_rows(s)))
            idf[b, :n] = torch.from_numpy(weights[offsets[s] : offsets[s + 1]])
            mask[b, :n] = 1
        return emb, mask, idf

    monkeypatch.setattr(bsu, "get_bert_embedding", fake_get_bert_embedding)
    refs = [f"s{r}" for r in pairs[:, 1]]
    hyps = [f"s{c}" for c in pairs[:, 0]]
    model = torch.nn.Linear(1, 1)  # only asked for its device
    preds = bsu.bert_cos_score_idf(model, refs, hyps, None, None, batch_size=batch_size, device="cpu",
                                   all_layers=layered)
    preds = preds.numpy()
    return preds[..., 0], preds[..., 1], preds[..., 2]


@pytest.mark.slow
def test_parity_with_bert_score_greedy_cos_idf(monkeypatch):
    rng = np.random.default_rng(2024)
    E, offsets, weights = realistic_store(rng, 150, 384)
    pairs = rng.integers(0, 150, size=(400, 2))
    P, R, F = greedy_match(E, offsets, weights, pairs)
    rP, rR, rF = reference_scores(monkeypatch, E, offsets, weights, pairs)
    assert min(rP.min(), rR.min()) > 0.2  # realistic regime: the padding artefact cannot act
    for ours, theirs in ((P, rP), (R, rR), (F, rF)):
        assert np.abs(ours - theirs).max() <= 1e-5


@pytest.mark.slow
def test_parity_with_bert_score_all_layers(monkeypatch):
    rng = np.random.default_rng(11)
    E0, offsets, weights = realistic_store(rng, 40, 64)
    # three layers with different similarities (a shared perturbation per layer keeps them realistic)
    E = np.stack([E0] + [E0 + 0.05 * rng.standard_normal(E0.shape).astype(np.float32) for _ in range(2)])
    E /= np.linalg.norm(E, axis=-1, keepdims=True)
    pairs = rng.integers(0, 40, size=(70, 2))
    P, R, F = greedy_match(E, offsets, weights, pairs)
    rP, rR, rF = reference_scores(monkeypatch, E, offsets, weights, pairs, batch_size=16)
    assert P.shape == rP.shape == (3, 70)
    assert min(rP.min(), rR.min()) > 0.2 and np.abs(P[0] - P[1]).max() > 1e-3  # layers differ
    for ours, theirs in ((P, rP), (R, rR), (F, rF)):
        assert np.abs(ours - theirs).max() <= 1e-5


@pytest.mark.slow
def test_parity_with_bert_score_on_real_encoder_embeddings(monkeypatch):
    from rapidscore.encoder import Encoder
    from rapidscore.encoder.model_source import DEFAULT_MODEL

    sentences = [
        "The cat sat on the mat.",
        "A cat was sitting on the mat.",
        "Stock markets fell sharply on Monday after the announcement.",
        "Shares dropped on Monday.",
        "I cannot help with that request.",
        "",  # [CLS] [SEP] only: both implementations give 0
        "Photosynthesis converts light energy into chemical energy in plants.",
    ]
    tokens = Encoder(model=DEFAULT_MODEL).token_embeddings(sentences)
    token_weights = []
    for t in tokens:  # idf=False weighting: 1 per token, 0 on CLS and SEP
        w = np.ones(len(t), np.float32)
        w[0] = w[-1] = 0.0
        token_weights.append(w)
    E, offsets, weights = flatten_sentences(tokens, token_weights)
    n = len(sentences)
    pairs = np.array([(c, r) for c in range(n) for r in range(n)])
    P, R, F = greedy_match(E, offsets, weights, pairs)
    rP, rR, rF = reference_scores(monkeypatch, E, offsets, weights, pairs)
    # This model's last layer gives unrelated sentences negative token similarities, where
    # bert-score's padding artefact (padded positions score 0 in the max) can act. Where every
    # token's best similarity is positive the artefact cannot act: exact parity is required.
    # Elsewhere the reference can only be higher (its max runs over extra zeros).
    def smallest_token_max(c, r):
        sim = E[offsets[c] : offsets[c + 1]].astype(np.float64) @ E[offsets[r] : offsets[r + 1]].T
        return min(sim.max(axis=1).min(), sim.max(axis=0).min())

    clean = np.array([smallest_token_max(c, r) > 1e-3 for c, r in pairs])
    assert clean.sum() >= 10 and (~clean).sum() >= 10
    for ours, theirs in ((P, rP), (R, rR), (F, rF)):
        assert np.abs(ours - theirs)[clean].max() <= 1e-5
    assert (rP >= P - 1e-6).all() and (rR >= R - 1e-6).all()
    assert F[pairs[:, 0] == 5].max() == 0.0 and rF[pairs[:, 0] == 5].max() == 0.0
    # With the padding emulation every pair matches, the artefact-affected ones included.
    eP, eR, eF = greedy_match(E, offsets, weights, pairs, bert_score_batch_size=64)
    for ours, theirs in ((eP, rP), (eR, rR), (eF, rF)):
        assert np.abs(ours - theirs).max() <= 1e-5
    assert np.abs(F - rF).max() > 1e-3  # the emulation was needed here


@pytest.mark.slow
@pytest.mark.parametrize("batch_size", [1, 7, 64])
def test_padding_emulation_matches_bert_score_on_negative_similarities(monkeypatch, batch_size):
    rng = np.random.default_rng(batch_size)
    E, offsets, weights = realistic_store(rng, 60, 32, min_len=3, max_len=25)
    E = E + 0.6 * rng.standard_normal(E.shape).astype(np.float32)  # many negative cosines
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    pairs = rng.integers(0, 60, size=(150, 2))
    rP, rR, rF = reference_scores(monkeypatch, E, offsets, weights, pairs, batch_size=batch_size)
    P, R, F = greedy_match(E, offsets, weights, pairs, bert_score_batch_size=batch_size)
    for ours, theirs in ((P, rP), (R, rR), (F, rF)):
        assert np.abs(ours - theirs).max() <= 1e-5
    plain = greedy_match(E, offsets, weights, pairs)
    if batch_size == 1:  # nothing is padded in batches of one pair
        np.testing.assert_array_equal(plain[2], F)
    else:
        assert np.abs(plain[2] - rF).max() > 1e-3


def test_padding_emulation_bad_batch_size():
    E, offsets, weights = flatten_sentences([np.ones((2, 4)), np.ones((3, 4))])
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="bert_score_batch_size"):
            greedy_match(E, offsets, weights, [[0, 1]], bert_score_batch_size=bad)
    with pytest.raises(IndexError, match="pairs entry 0"):  # still the native message
        greedy_match(E, offsets, weights, [[0, 5]], bert_score_batch_size=4)


# issue 29 item 5: finite embeddings whose float32 dot products overflow gave P = R = inf and
# F = NaN (1e30 everywhere); every implementation now refuses the first such row by its norm.
IMPLEMENTATIONS = ["native", "reference",
                   pytest.param("torch", marks=pytest.mark.skipif(
                       __import__("importlib").util.find_spec("torch") is None, reason="torch is not installed"))]


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_rows_whose_dot_products_overflow_are_refused(implementation) -> None:
    offsets, weights = np.array([0, 1, 2]), np.ones(2, np.float32)
    huge = np.full((2, 4), 1e30, np.float32)
    message = "embeddings row 0 has L2 norm 2e\\+30: its dot products overflow float32"
    with pytest.raises(ValueError, match=message):
        greedy_match(huge, offsets, weights, [[0, 1]], implementation=implementation)
    with pytest.raises(ValueError, match=message):
        pairwise_match(huge, offsets, weights, [0], [1], implementation=implementation)
    # the first oversized row is named, in any layer
    rows = np.eye(4, dtype=np.float32)
    rows[2, 1] = 1e20
    with pytest.raises(ValueError, match="embeddings row 2 has L2 norm 1e\\+20"):
        greedy_match(np.stack([np.eye(4, dtype=np.float32), rows]), np.arange(5), np.ones(4, np.float32),
                     [[0, 2]], implementation=implementation)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_large_rows_below_the_bound_score_finite(implementation) -> None:
    """One big value passes the quick bound check (dim x max^2) only row by row: accepted, and
    every score is finite (the bound leaves room for float32 rounding)."""
    E = np.zeros((3, 4), np.float32)
    E[0, 0], E[1, 0], E[2, 1] = 5e18, 9e18, -9e18
    P, R, F = greedy_match(E, np.arange(4), np.ones(3, np.float32), [[0, 1], [1, 2], [2, 0]],
                           implementation=implementation)
    assert np.isfinite(np.stack([P, R, F])).all()
    assert P[0] == pytest.approx(4.5e37, rel=1e-6)
