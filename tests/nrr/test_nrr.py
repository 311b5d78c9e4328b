"""Semantic similarity and the Negative Rejection Rate against sentence-transformers."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

import numpy as np
import pytest

from rapidscore.nrr import (
    SentenceSimilarity, calibrate_threshold, negative_rejection, negative_rejection_frame,
    negative_rejection_jsonl, nrr_curve,
)

SUBJECTS = ["The cat", "A physicist", "My neighbour", "The committee", "Our CEO", "Das Kind", "El perro"]
VERBS = ["approved", "rejected", "studied", "painted", "ignored", "celebrated", "questioned"]
OBJECTS = ["the budget for next year", "a quantum experiment", "the old red barn", "café naïve menus",
           "東京 travel plans", "the 😀 emoji report", "an extremely long and winding proposal " * 3]


def varied_pairs(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(n):
        s, v, o = rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(OBJECTS)
        generated = f"{s} {v} {o}."
        kind = rng.integers(0, 3)
        if kind == 0:
            reference = generated
        elif kind == 1:
            reference = f"{rng.choice(SUBJECTS)} {v} {o}, according to the report."
        else:
            reference = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}"
        pairs.append((generated, reference))
    return [p[0] for p in pairs], [p[1] for p in pairs]


@pytest.mark.slow
def test_similarities_equal_sentence_transformers_cosine(minilm_path, similarity_model):
    pytest.importorskip("sentence_transformers", reason="sentence-transformers is the parity reference (test extra)")
    from sentence_transformers import SentenceTransformer

    generated, references = varied_pairs(300)
    model = SentenceTransformer(str(minilm_path), device="cpu")
    a = model.encode(generated, normalize_embeddings=True, convert_to_numpy=True).astype(np.float64)
    b = model.encode(references, normalize_embeddings=True, convert_to_numpy=True).astype(np.float64)
    expected = (a * b).sum(axis=1)
    result = negative_rejection(generated, references, threshold=0.8, similarity_model=similarity_model)
    assert np.abs(result.similarities - expected).max() <= 1e-5
    # NRR is exactly the share of similarities strictly below the threshold.
    assert result.n_rejected == int((result.similarities < np.float32(0.8)).sum())
    assert result.rate == result.n_rejected / 300 and result.capture_rate == (300 - result.n_rejected) / 300
    assert 0 < result.n_rejected < 300


@pytest.mark.slow
def test_threshold_is_strict(similarity_model):
    result = negative_rejection(["same text"], ["same text"], threshold=0.5, similarity_model=similarity_model)
    exact = float(result.similarities[0])
    at = negative_rejection(["same text"], ["same text"], threshold=exact, similarity_model=similarity_model)
    assert at.n_rejected == 0  # equal to the threshold is not below it


@pytest.mark.slow
def test_several_references_best_counts(similarity_model):
    single = negative_rejection(["The cat sat on the mat.", "Paris is in France."],
                                ["A dog barked.", "Paris is a French city."], similarity_model=similarity_model)
    other = negative_rejection(["The cat sat on the mat."], ["A cat sat on a mat."], similarity_model=similarity_model)
    multi = negative_rejection(["The cat sat on the mat.", "Paris is in France."],
                               [["A dog barked.", "A cat sat on a mat."], ["Paris is a French city."]],
                               similarity_model=similarity_model)
    np.testing.assert_allclose(multi.similarities, [other.similarities[0], single.similarities[1]], atol=1e-6)
    assert multi.best_reference.tolist() == [1, 0]


@pytest.mark.slow
def test_bertscore_method_uses_bertscore_f1(minilm_path):
    from rapidscore.bertscore import BERTScore

    generated, references = varied_pairs(20, seed=3)
    result = negative_rejection(generated, references, method="bertscore", model=str(minilm_path), threshold=0.9)
    expected = BERTScore(str(minilm_path)).score(generated, references).f1
    np.testing.assert_allclose(result.similarities, expected, atol=1e-6)
    assert "method:bertscore" in result.signature


def test_curve_matches_direct_counts():
    rng = np.random.default_rng(5)
    sims = rng.uniform(-1, 1, size=500)
    grid, rates = nrr_curve(sims)
    for t, r in zip(grid[::17], rates[::17]):
        assert r == (sims < t).sum() / 500


def test_calibration_against_brute_force():
    rng = np.random.default_rng(11)
    sims = np.round(rng.uniform(0, 1, size=80), 2)
    captured = sims + rng.normal(0, 0.2, size=80) > 0.55
    for criterion in ("f1", "youden"):
        cal = calibrate_threshold(sims, captured, criterion)
        best_value = -np.inf
        for t in np.concatenate([[sims.min() - 1e-6], (np.unique(sims)[:-1] + np.unique(sims)[1:]) / 2,
                                 [sims.max() + 1e-6]]):
            rej = sims < t
            tp, fp = (rej & ~captured).sum(), (rej & captured).sum()
            fn = (~rej & ~captured).sum()
            value = 2 * tp / (2 * tp + fp + fn) if criterion == "f1" else tp / (~captured).sum() - fp / captured.sum()
            best_value = max(best_value, value)
        assert cal.value == pytest.approx(best_value)
        assert cal.confusion_matrix.sum() == 80


@pytest.mark.slow
def test_empty_strings_are_similarity_zero(similarity_model):
    result = negative_rejection(["", "fine answer"], ["a reference", "   "], similarity_model=similarity_model)
    assert result.similarities.tolist() == [0.0, 0.0] and result.n_rejected == 2


@pytest.mark.slow
@pytest.mark.parametrize(
    "generated, references, threshold, error, message",
    [
        (["a", None], ["a", "b"], 0.8, TypeError, r"generated\[1\]"),
        (["a", "b"], ["a"], 0.8, ValueError, "Different number"),
        ([], [], 0.8, ValueError, "generated is empty"),
        (["a"], ["b"], 1.5, ValueError, r"\[-1, 1\]"),
        (["a"], ["b"], float("nan"), TypeError, "threshold"),
        ("a", ["b"], 0.8, TypeError, "list of strings"),
    ],
)
def test_bad_input(similarity_model, generated, references, threshold, error, message):
    with pytest.raises(error, match=message):
        negative_rejection(generated, references, threshold=threshold, similarity_model=similarity_model)


@pytest.mark.slow
def test_dataframe_jsonl_and_cli(minilm_path, similarity_model, tmp_path):
    pd = pytest.importorskip("pandas", reason="the DataFrame entry point needs pandas")
    generated, references = varied_pairs(12, seed=9)
    direct = negative_rejection(generated, references, similarity_model=similarity_model)
    frame = pd.DataFrame({"answer": generated, "truth": references})
    via_frame = negative_rejection_frame(frame, "answer", "truth", similarity_model=similarity_model)
    np.testing.assert_array_equal(via_frame.similarities, direct.similarities)
    path = tmp_path / "items.jsonl"
    path.write_text("\n".join(json.dumps({"generated": g, "reference": r}) for g, r in zip(generated, references)))
    via_jsonl = negative_rejection_jsonl(path, similarity_model=similarity_model)
    np.testing.assert_array_equal(via_jsonl.similarities, direct.similarities)

    from rapidscore.cli import main

    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["nrr", "--generated", str(path), "--references", str(path), "--model", str(minilm_path),
                     "--json"]) == 0
    document = json.loads(out.getvalue())
    assert document["n_rejected"] == direct.n_rejected
    assert document["negative_rejection_rate"] == pytest.approx(direct.rate)


@pytest.mark.slow
def test_similarity_histogram_with_threshold_line(similarity_model, tmp_path):
    pytest.importorskip("matplotlib", reason="plotting needs the [plot] extra")
    from rapidscore.nrr import plot_similarities

    result = negative_rejection(*varied_pairs(30, seed=2), similarity_model=similarity_model)
    figure = plot_similarities(result, tmp_path / "hist.png")
    assert (tmp_path / "hist.png").stat().st_size > 1000
    line = figure.axes[0].lines[0]
    assert list(line.get_xdata()) == [0.8, 0.8]


@pytest.mark.slow
def test_prompt_name_on_a_model_without_that_prompt(minilm_path, similarity_model):
    generated, references = varied_pairs(10, seed=4)
    plain = negative_rejection(generated, references, similarity_model=similarity_model)
    # sentence-transformers gives every model an empty "query" prompt: nothing changes, the
    # signature included (no prompt field for an empty prompt)
    query = negative_rejection(generated, references, similarity_model=SentenceSimilarity(str(minilm_path),
                                                                                          prompt_name="query"))
    np.testing.assert_array_equal(query.similarities, plain.similarities)
    assert query.signature == plain.signature and "|pooling:mean|" in plain.signature
    with pytest.raises(ValueError, match=r"prompt_name 'nope' is not one of the model's prompts"):
        SentenceSimilarity(str(minilm_path), prompt_name="nope")
    with pytest.raises(ValueError, match="prompt_name applies to method='embedding'"):
        SentenceSimilarity(str(minilm_path), method="bertscore", prompt_name="query")


def prompted_max_model(tiny_model_path, tmp_path):
    """The tiny BERT as a sentence-transformers model: max pooling, no Normalize, prompts."""
    import shutil

    model_dir = tmp_path / "model"
    shutil.copytree(tiny_model_path("bert"), model_dir)
    (model_dir / "1_Pooling").mkdir()
    (model_dir / "1_Pooling" / "config.json").write_text(json.dumps({"embedding_dimension": 32,
                                                                     "pooling_mode": "max"}))
    (model_dir / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    (model_dir / "config_sentence_transformers.json").write_text(json.dumps({"prompts": {"query": "query: "}}))
    return model_dir


def test_cosines_of_the_models_pipeline_with_a_prompt_and_cli(tiny_model_path, tmp_path):
    from rapidscore.encoder import Encoder

    model_dir = prompted_max_model(tiny_model_path, tmp_path)
    generated, references = ["The cat sat.", "A dog barked loudly."], ["A cat was sitting.", "The dog is quiet."]
    model = SentenceSimilarity(str(model_dir), prompt_name="query")
    result = negative_rejection(generated, references, threshold=0.5, similarity_model=model)
    # max pooling, no Normalize: NRR takes the cosine of the model's (unnormalised) vectors
    vectors = Encoder(str(model_dir)).sentence_embeddings(generated + references, prompt_name="query")
    assert np.abs(np.linalg.norm(vectors, axis=1) - 1).max() > 0.1
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    np.testing.assert_allclose(result.similarities, (unit[:2] * unit[2:]).sum(axis=1), rtol=0, atol=1e-6)
    assert "|pooling:max|prompt:query|" in result.signature
    no_prompt = negative_rejection(generated, references, threshold=0.5, model=str(model_dir))
    assert not np.allclose(no_prompt.similarities, result.similarities)

    from rapidscore.cli import main

    path = tmp_path / "items.jsonl"
    path.write_text("\n".join(json.dumps({"generated": g, "reference": r}) for g, r in zip(generated, references)))
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["nrr", "--generated", str(path), "--references", str(path), "--model", str(model_dir),
                     "--prompt-name", "query", "--threshold", "0.5", "--json"]) == 0
    document = json.loads(out.getvalue())
    assert document["signature"] == result.signature
    np.testing.assert_allclose(document["similarities"], result.similarities, rtol=0, atol=1e-7)
