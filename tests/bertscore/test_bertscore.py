"""BERTScore parity with the reference package bert-score 0.3.13, run side by side.

Bound from the issue: max |difference| <= 1e-5 for P, R and F in fp32.
"""

from __future__ import annotations

import io
import json
import warnings
from collections import defaultdict
from contextlib import redirect_stdout

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rapidscore
from rapidscore import TruncationWarning
from rapidscore.bertscore import BERTScore, compute_baseline
from rapidscore.bertscore.baselines import read_baseline, reference_baseline_dir
from rapidscore.errors import RapidscoreWarning
from rapidscore.testing.tiny_models import FAMILIES

pytestmark = pytest.mark.slow  # every test here runs the bert-score reference or exports MiniLM

bert_score = pytest.importorskip("bert_score", reason="the reference package is needed for parity")
TOLERANCE = 1e-5

CANDS = [
    "Rob Halford is the lead vocalist of the heavy metal band Judas Priest.",
    "The café served crème brûlée to the naïve visitors.",
    "東京は日本の首都です。 Tokyo is big.",
    "I love this 😀 so much 🎉!",
    "  leading and trailing spaces are stripped  ",
    "A duplicate sentence.",
    "A duplicate sentence.",
    "short",
]
REFS = [
    "Rob Halford is known as the singer of the famous metal band Judas Priest.",
    "Visitors were served a creme brulee at the cafe.",
    "Tokyo is the capital of Japan. 東京",
    "This makes me happy 😀",
    "leading and trailing spaces are stripped",
    "A duplicate sentence.",
    "Another reference entirely.",
    "a short one",
]
MULTI_REFS = [[r, c] if i % 2 else [r] for i, (c, r) in enumerate(zip(CANDS, REFS))]


def reference(cands, refs, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        P, R, F = bert_score.score(cands, refs, **kwargs)
    return P.numpy(), R.numpy(), F.numpy()


def assert_parity(result, expected):
    for got, want in zip((result.precision, result.recall, result.f1), expected):
        assert got.shape == want.shape
        assert np.abs(got.astype(np.float64) - want).max() <= TOLERANCE


@pytest.mark.parametrize("layer", [1, 4, 6])
@pytest.mark.parametrize("idf", [False, True])
def test_real_minilm_matches_reference(minilm_path, layer, idf):
    scorer = BERTScore(str(minilm_path), layer, idf=idf)
    assert_parity(scorer.score(CANDS, REFS), reference(CANDS, REFS, model_type=str(minilm_path),
                                                       num_layers=layer, idf=idf))


def test_multiple_references_take_the_best_of_each_score(minilm_path):
    scorer = BERTScore(str(minilm_path), 5)
    assert_parity(scorer.score(CANDS, MULTI_REFS),
                  reference(CANDS, MULTI_REFS, model_type=str(minilm_path), num_layers=5))


def test_user_idf_dict_matches_reference(minilm_path):
    scorer = BERTScore(str(minilm_path), 3)
    ids = scorer.encoder.tokenize(CANDS + REFS)
    rng = np.random.default_rng(1)
    weights = defaultdict(lambda: 1.0)
    weights.update({int(i): float(rng.uniform(0.1, 3)) for seq in ids for i in seq})
    weights[scorer.encoder.spec.cls_id] = 0.0
    weights[scorer.encoder.spec.sep_id] = 0.0
    got = BERTScore(str(minilm_path), 3, idf=weights).score(CANDS, REFS)
    assert_parity(got, reference(CANDS, REFS, model_type=str(minilm_path), num_layers=3, idf=weights))


def test_idf_sents_match_reference_scorer(minilm_path):
    corpus = REFS + CANDS[:3]
    theirs = bert_score.BERTScorer(model_type=str(minilm_path), num_layers=4, idf=True, idf_sents=corpus)
    ours = rapidscore.bert_score.BERTScorer(model_type=str(minilm_path), num_layers=4, idf=True, idf_sents=corpus)
    expected = [t.numpy() for t in theirs.score(CANDS, REFS)]
    got = ours.score(CANDS, REFS)
    for g, e in zip(got, expected):
        assert np.abs(g.numpy() - e).max() <= TOLERANCE


@pytest.mark.parametrize("family", FAMILIES)
def test_tiny_model_of_every_family_matches_reference(family, tiny_model_path):
    model = str(tiny_model_path(family))
    modes = [False, True] if family == "roberta" else [False]
    for fast in modes:
        expected = reference(CANDS, MULTI_REFS, model_type=model, num_layers=2, idf=True, use_fast_tokenizer=fast)
        got = BERTScore(model, 2, idf=True, use_fast_tokenizer=fast).score(CANDS, MULTI_REFS)
        assert_parity(got, expected)


def test_all_layers_match_reference(tiny_model_path):
    model = str(tiny_model_path("bert"))
    expected = reference(CANDS, REFS, model_type=model, num_layers=4, all_layers=True)
    got = BERTScore(model, all_layers=True).score(CANDS, REFS)
    assert got.f1.shape == (5, len(CANDS))
    assert_parity(got, expected)


def test_long_inputs_are_truncated_like_the_reference_with_a_warning(minilm_path):
    long_cand = " ".join(f"word{i % 50} metal band" for i in range(400))
    long_ref = " ".join(f"token{i % 70} heavy music" for i in range(400))
    cands, refs = [long_cand, "short one"], [long_ref, "another short"]
    with pytest.warns(TruncationWarning, match="2 of 4"):
        got = BERTScore(str(minilm_path), 4).score(cands, refs)
    assert_parity(got, reference(cands, refs, model_type=str(minilm_path), num_layers=4))


def test_rescaling_with_a_published_baseline_file(tiny_model_path):
    root = reference_baseline_dir()
    assert root is not None, "bert-score's baseline files should be installed with the test extra"
    baseline = root / "en" / "roberta-large.tsv"
    model = str(tiny_model_path("roberta"))
    expected = reference(CANDS, REFS, model_type=model, num_layers=3, lang="en", rescale_with_baseline=True,
                         baseline_path=str(baseline))
    got = BERTScore(model, 3, lang="en", rescale_with_baseline=True, baseline_path=baseline).score(CANDS, REFS)
    assert_parity(got, expected)
    assert read_baseline(baseline).shape[1] == 3


def test_baseline_tool_writes_a_file_the_reference_can_use(minilm_path, tmp_path):
    corpus = CANDS + REFS + [f"sentence number {i} about topic {i % 7}" for i in range(30)]
    path = tmp_path / "minilm.tsv"
    table = compute_baseline(corpus, str(minilm_path), n_pairs=300, seed=7, out_path=path)
    again = compute_baseline(corpus, str(minilm_path), n_pairs=300, seed=7)
    assert table.shape == (7, 3) and np.array_equal(table, again)  # deterministic for a seed
    np.testing.assert_allclose(read_baseline(path), table, rtol=0, atol=1e-12)
    expected = reference(CANDS, REFS, model_type=str(minilm_path), num_layers=6, lang="en",
                         rescale_with_baseline=True, baseline_path=str(path))
    got = BERTScore(str(minilm_path), 6, lang="en", rescale_with_baseline=True, baseline_path=path).score(CANDS, REFS)
    assert_parity(got, expected)


def test_drop_in_returns_the_reference_types_and_hash(minilm_path):
    import torch

    ours, our_hash = rapidscore.bert_score.score(CANDS, REFS, model_type=str(minilm_path), num_layers=3,
                                                 return_hash=True)
    theirs, their_hash = bert_score.score(CANDS, REFS, model_type=str(minilm_path), num_layers=3, return_hash=True)
    for o, t in zip(ours, theirs):
        assert isinstance(o, torch.Tensor) and o.dtype == t.dtype and o.shape == t.shape
        assert (o - t).abs().max().item() <= TOLERANCE
    prefix = f"{minilm_path}_L3_no-idf_version="
    assert their_hash.startswith(prefix) and our_hash.startswith(prefix + "rapidscore-")
    assert our_hash.split("(hug_trans=")[1] == their_hash.split("(hug_trans=")[1]


def test_empty_sentences_score_zero_and_never_nan(minilm_path):
    result = BERTScore(str(minilm_path), 2).score(["", "   ", "fine"], ["something", "", "fine"])
    assert result.f1.tolist()[:2] == [0.0, 0.0] and result.precision[:2].tolist() == [0.0, 0.0]
    assert result.f1[2] > 0.99
    assert not np.isnan(result.f1).any()


def test_degenerate_idf_falls_back_to_uniform_weights(minilm_path):
    cands, refs = ["the cat sat on the mat", "a dog"], ["the cat sat", "the cat sat"]
    with pytest.warns(RapidscoreWarning, match="uniform weights"):
        got = BERTScore(str(minilm_path), 4, idf=True).score(cands, refs)
    uniform = BERTScore(str(minilm_path), 4).score(cands, refs)
    assert not np.isnan(got.f1).any()
    np.testing.assert_allclose(got.recall, uniform.recall, atol=1e-6)  # every reference weight was 0


@settings(max_examples=15, deadline=None)
@given(st.permutations(list(range(len(CANDS)))), st.integers(1, 8), st.sampled_from([64, 256, 4096]))
def test_scores_do_not_depend_on_order_batching_or_duplicates(order_and_scorer, permutation, copies, batch_tokens):
    scorer, baseline = order_and_scorer
    scorer.encoder.batch_tokens = batch_tokens
    index = list(permutation) + list(permutation[:copies])
    got = scorer.score([CANDS[i] for i in index], [REFS[i] for i in index])
    np.testing.assert_allclose(got.f1, baseline.f1[index], atol=1e-6, rtol=0)
    np.testing.assert_allclose(got.precision, baseline.precision[index], atol=1e-6, rtol=0)


@pytest.fixture(scope="module")
def order_and_scorer(tiny_models_root):
    from rapidscore.testing import tiny_models

    scorer = BERTScore(str(tiny_models.tiny_model_dir("bert", tiny_models_root)), 3)
    single = [scorer.score([c], [r]) for c, r in zip(CANDS, REFS)]
    baseline = type(single[0])(precision=np.concatenate([s.precision for s in single]),
                               recall=np.concatenate([s.recall for s in single]),
                               f1=np.concatenate([s.f1 for s in single]), signature="")
    return scorer, baseline


@pytest.mark.parametrize(
    "cands, refs, error, message",
    [
        (["a", "b"], ["a"], ValueError, "Different number"),
        ("a string", ["a"], TypeError, "cands must be a list"),
        (["a"], "a string", TypeError, "refs must be a list"),
        (["a", None], ["a", "b"], TypeError, r"cands\[1\]"),
        (["a"], [["b", 3]], TypeError, r"refs\[0\]\[1\]"),
        (["a"], [[]], ValueError, "empty list of references"),
    ],
)
def test_bad_inputs_raise_clear_errors(minilm_path, cands, refs, error, message):
    with pytest.raises(error, match=message):
        BERTScore(str(minilm_path), 1).score(cands, refs)


def test_bad_configuration_raises_clear_errors(minilm_path, tiny_bert, tmp_path):
    with pytest.raises(FileNotFoundError, match="baseline file not found"):
        BERTScore(str(minilm_path), 2, lang="en", rescale_with_baseline=True, baseline_path=tmp_path / "missing.tsv")
    with pytest.raises(ValueError, match="needs lang"):  # a model other than the embedded one (English baseline)
        BERTScore(tiny_bert, 2, rescale_with_baseline=True)
    with pytest.raises(ValueError, match="Either lang or model_type"):
        rapidscore.bert_score.score(["a"], ["b"])
    with pytest.raises(rapidscore.errors.ModelNotFoundError, match="bert-base-multilingual-cased"):
        rapidscore.bert_score.score(["a"], ["b"], lang="xx")  # the reference's model for other languages
    with pytest.raises(ValueError, match="no default layer"):  # the embedded model's layer is known (issue 40)
        rapidscore.bert_score.score(["a"], ["b"], model_type=str(tmp_path))
    with pytest.raises(TypeError, match="unexpected keyword"):
        rapidscore.bert_score.score(["a"], ["b"], model_type=str(minilm_path), num_layers=2, colour="red")


def test_score_without_baseline_file_warns_and_returns_raw_scores(tiny_model_path):
    # A model directory has no published baseline (bert-score's rule); the embedded model's directory
    # is the exception, it finds its shipped one (issue 36 row 12, test_embedded_baseline_spellings.py).
    model = str(tiny_model_path("bert"))
    with pytest.warns(UserWarning, match="Baseline not Found"):
        P, R, F = rapidscore.bert_score.score(CANDS[:2], REFS[:2], model_type=model, num_layers=2,
                                              lang="en", rescale_with_baseline=True)
    raw = BERTScore(model, 2).score(CANDS[:2], REFS[:2])
    np.testing.assert_array_equal(F.numpy(), raw.f1)


def test_cli_prints_the_reference_format(minilm_path, tmp_path):
    from rapidscore.cli import main

    cands, refs = tmp_path / "cands.txt", tmp_path / "refs.txt"
    cands.write_text("\n".join(CANDS[:4]) + "\n")
    refs.write_text("\n".join(REFS[:4]) + "\n")
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["bertscore", "-c", str(cands), "-r", str(refs), "-m", str(minilm_path), "-l", "3", "-s"]) == 0
    lines = out.getvalue().strip().splitlines()
    expected = reference([c.strip() for c in CANDS[:4]], [r.strip() for r in REFS[:4]],
                         model_type=str(minilm_path), num_layers=3)
    head = lines[0].split(" P: ")
    assert head[0].endswith("_fast-tokenizer")  # the reference CLI's default marks the fast tokenizer
    p, rest = head[1].split(" R: ")
    r, f = rest.split(" F1: ")
    assert abs(float(p) - expected[0].mean()) <= 2e-6 and abs(float(f) - expected[2].mean()) <= 2e-6
    for line, ep, er, ef in zip(lines[1:], *expected):
        values = [float(v) for v in line.split("\t")]
        assert np.abs(np.array(values) - [ep, er, ef]).max() <= 2e-6
    out = io.StringIO()
    with redirect_stdout(out):
        main(["bertscore", "-c", str(cands), "-r", str(refs), str(refs), "-m", str(minilm_path), "-l", "3", "--json"])
    document = json.loads(out.getvalue())
    assert len(document["f1"]) == 4 and "signature" in document


def test_plot_example_writes_a_heatmap(minilm_path, tmp_path):
    pytest.importorskip("matplotlib", reason="plotting needs the [plot] extra")
    fname = tmp_path / "heatmap.png"
    rapidscore.bert_score.plot_example("The cat sat.", "A cat was sitting.", model_type=str(minilm_path),
                                       num_layers=4, fname=str(fname))
    assert fname.stat().st_size > 1000


UNRELATED = [
    "The quarterly earnings report exceeded analyst expectations by a wide margin.",
    "Penguins huddle together to survive the Antarctic winter.",
    "She tuned the violin before the evening concert began.",
    "Rust's borrow checker rejects data races at compile time.",
    "A light drizzle fell over the vineyard all afternoon.",
    "The museum reopened its Egyptian wing after renovations.",
    "Add two cups of flour and stir until the batter is smooth.",
    "The goalkeeper saved a penalty in the final minute.",
    "Volcanic ash grounded flights across northern Europe.",
    "He forgot his umbrella on the crowded morning train.",
    "Quantum dots emit light at sizes tuned by their diameter.",
    "The committee postponed the vote until next Tuesday.",
]


@pytest.mark.parametrize("batch_size", [3, 64])
def test_drop_in_reproduces_the_reference_padding_on_negative_similarities(minilm_path, batch_size):
    """MiniLM's last layer gives unrelated tokens negative cosines, where bert-score's zero padding
    changes maxima. The drop-in reproduces that; the native API (maxima over real tokens) does not."""
    cands = UNRELATED
    refs = UNRELATED[5:] + UNRELATED[:5]
    multi = [[r, UNRELATED[(k + 3) % len(UNRELATED)]] if k % 3 == 0 else [r] for k, r in enumerate(refs)]
    for references in (refs, multi):
        kwargs = dict(model_type=str(minilm_path), num_layers=6, batch_size=batch_size)
        expected = reference(cands, references, **kwargs)
        ours = [t.numpy() for t in rapidscore.bert_score.score(cands, references, **kwargs)]
        scorer = rapidscore.bert_score.BERTScorer(model_type=str(minilm_path), num_layers=6)
        kept = [t.numpy() for t in scorer.score(cands, references, batch_size=batch_size)]
        for got, alt, want in zip(ours, kept, expected):
            assert np.abs(got - want).max() <= TOLERANCE and np.abs(alt - want).max() <= TOLERANCE
        native = BERTScore(str(minilm_path), 6).score(cands, references)
        assert np.abs(native.f1 - expected[2]).max() > 1e-4  # the artefact is present in this input
        plain = rapidscore.bert_score.score(cands, references, reference_padding=False, **kwargs)
        np.testing.assert_array_equal(plain[2].numpy(), native.f1)


def test_drop_in_rejects_a_bad_batch_size(minilm_path):
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="batch_size"):
            rapidscore.bert_score.score(CANDS[:2], REFS[:2], model_type=str(minilm_path), num_layers=2,
                                        batch_size=bad)
        with pytest.raises(ValueError, match="reference_batch_size"):
            BERTScore(str(minilm_path), 2).score(CANDS[:2], REFS[:2], reference_batch_size=bad)
