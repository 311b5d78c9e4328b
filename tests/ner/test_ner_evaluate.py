"""DMBertA scores, label similarity, the API and the ``rapidscore ner`` command."""

import itertools
import json
import random
from pathlib import Path

import numpy as np
import pytest

from rapidscore.cli import main
from rapidscore.ner import LabelSimilarity, compare, evaluate, read_jsonl

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ner"
TEXT = "Driver's license number D1234567 was issued to Emily Brown."

# Hand-chosen label vectors whose cosines are derivable by hand (see each test's comment).
VECTORS = {
    "driver licence": [1.0, 0.0, 0.0],
    "driver's license number": [0.8, 0.6, 0.0],  # cos with "driver licence" = 0.8
    "pin": [0.0, 1.0, 0.0],  # cos with "driver licence" = 0
    "person": [0.0, 0.0, 1.0],
    "fullname": [0.0, 0.6, 0.8],  # cos with "person" = 0.8
    "org": [-1.0, 0.0, 0.0],  # cos with "driver licence" = -1 -> 0
}


class CountingEmbedder:
    def __init__(self, vectors=VECTORS):
        self.vectors, self.seen = vectors, []

    def __call__(self, labels):
        self.seen.extend(labels)
        return np.array([self.vectors[label] for label in labels])


def seed_example():
    gold = [{"id": 1, "prompt": TEXT, "labels": {"D1234567:23:31": "driver licence", "Emily Brown:46:57": "person"}}]
    models = {
        "gliner": [{"id": 1, "labels": {"D1234567:24:32": "driver's license number", "Emily Brown:47:58": "person"}}],
        "deberta": [{"id": 1, "labels": {" D1234567:23:32": "pin", " Emily Brown.:46:59": "fullname"}}],
        "spacy": [{"id": 1, "labels": {"Driver:0:6": "org", "Emily Brown:47:58": "person"}}],
    }
    return gold, models


def test_seed_example_with_hand_made_embeddings():
    # All spans align with Jaccard 1 after normalisation. Credits: gliner 0.8 + 1 -> P = R = 0.9;
    # deberta 0 + 0.8 -> P = R = 0.4; spacy 1 of 2 gold, 1 of 2 predicted -> P = R = 0.5.
    gold, models = seed_example()
    result = compare(gold, models, embedder=CountingEmbedder())
    expected = {"gliner": 0.9, "deberta": 0.4, "spacy": 0.5}
    for name, value in expected.items():
        assert result[name].dmberta["mean"] == pytest.approx(value, abs=1e-12)
        assert result[name].dmberta["accumulate"] == pytest.approx(value, abs=1e-12)
    assert result.ranking() == ["gliner", "spacy", "deberta"]
    assert result["gliner"].repairs["gold"]["reanchored"] == 2
    assert result["deberta"].repairs["pred"]["trimmed"] == 2
    assert result["spacy"].semeval["strict"]["correct"] == 1 and result["spacy"].semeval["strict"]["spurious"] == 1
    per_label = result["gliner"].per_label
    assert per_label["gold"]["driver licence"]["recall"] == pytest.approx(0.8)
    assert per_label["gold"]["driver licence"]["matched_pred_labels"] == {"driver's license number": 1}
    table = result.table()
    assert table.splitlines()[2].startswith("| gliner | 0.900 | 0.900 |")


def test_each_distinct_label_is_embedded_once_per_run():
    gold, models = seed_example()
    embedder = CountingEmbedder()
    similarity = LabelSimilarity(embedder=embedder)
    compare(gold, models, label_similarity=similarity)
    compare(gold, models, label_similarity=similarity)  # same run object: nothing new to embed
    assert sorted(embedder.seen) == sorted(VECTORS)
    assert similarity.embedded_labels == len(VECTORS)


def test_label_normalisation_label_map_and_exact_mode():
    sim = LabelSimilarity(embedder=CountingEmbedder(), label_map={"FullName": "person"})
    assert sim("Driver_Licence", "driver  licence") == 1.0  # identical once normalised
    assert sim("person", "fullname") == 1.0  # label map
    assert sim("driver licence", "org") == 0.0  # cosine -1 clipped
    assert sim("driver licence", "driver's license number") == pytest.approx(0.8)
    exact = LabelSimilarity("exact")
    assert exact("PERSON", "person") == 1.0 and exact("person", "fullname") == 0.0
    with pytest.raises(ValueError, match="label similarity must be 'embedding' or 'exact'"):
        LabelSimilarity("fuzzy")
    bad = LabelSimilarity(embedder=lambda labels: np.zeros((1, 3)))
    with pytest.raises(ValueError, match="label embedder returned shape"):
        bad.matrix(["a"], ["b"])


def test_partial_overlap_credit_and_empty_records():
    # Hand-derived: gold "full address" = Seattle [52, 59), prediction "Seattle, WA" [52, 63):
    # Jaccard 7/11; with exact labels the credit is 7/11, P = R = 7/11.
    text = "John is working on the new project for Microsoft in Seattle, WA."
    gold = [[(52, 59, "address")], [], [], [(0, 4, "person")]]
    pred = [[(52, 63, "address")], [], [(0, 4, "person")], []]
    result = evaluate(gold, pred, texts=[text] * 4, format="tuples", label_similarity="exact")
    scores = [r["score"] for r in result.records]
    assert scores[0] == pytest.approx(7 / 11)
    assert scores[1:] == [1.0, 0.0, 0.0]  # both empty -> 1; exactly one side empty -> 0
    assert result.dmberta["accumulate"] == pytest.approx(7 / 11 + 1)
    assert result.records[0]["matches"][0]["jaccard"] == pytest.approx(7 / 11)


def _brute_force_best_jaccard(gold, pred):
    def jac(a, b):
        inter = min(a[1], b[1]) - max(a[0], b[0])
        return inter / ((a[1] - a[0]) + (b[1] - b[0]) - inter) if inter > 0 else 0.0

    best = 0.0
    for k in range(min(len(gold), len(pred)) + 1):
        for gs in itertools.combinations(range(len(gold)), k):
            for ps in itertools.permutations(range(len(pred)), k):
                if all(jac(gold[i], pred[j]) > 0 for i, j in zip(gs, ps)):
                    best = max(best, sum(jac(gold[i], pred[j]) for i, j in zip(gs, ps)))
    return best


def test_dmberta_against_an_independent_oracle():
    """Random records: the alignment's Jaccard total equals brute force, each pair's credit is
    J x clipped cosine of its labels, and the record score follows the definition."""
    rng = random.Random(7)
    labels = ["person", "fullname", "pin", "driver licence", "org"]
    vectors = {label: np.array([rng.uniform(-1, 1) for _ in range(4)]) for label in labels}
    cosine = lambda a, b: 1.0 if a == b else max(0.0, float(vectors[a] @ vectors[b] / np.linalg.norm(vectors[a]) / np.linalg.norm(vectors[b])))
    text = "x" * 60
    gold, pred = [], []
    for _ in range(40):
        gold.append([(s, s + rng.randint(1, 6), rng.choice(labels)) for s in rng.sample(range(50), rng.randint(0, 4))])
        pred.append([(s, s + rng.randint(1, 6), rng.choice(labels)) for s in rng.sample(range(50), rng.randint(0, 4))])
    result = evaluate(gold, pred, texts=[text] * 40, format="tuples", embedder=lambda ls: np.stack([vectors[x] for x in ls]))
    for g, p, rec in zip(gold, pred, result.records):
        g_sorted = sorted(set(g), key=lambda e: (e[0], e[1], e[2]))
        p_sorted = sorted(set(p), key=lambda e: (e[0], e[1], e[2]))
        assert sum(m["jaccard"] for m in rec["matches"]) == pytest.approx(_brute_force_best_jaccard(g_sorted, p_sorted), abs=1e-9)
        credit = 0.0
        for m in rec["matches"]:
            assert m["label_similarity"] == pytest.approx(cosine(m["gold"][2], m["pred"][2]), abs=1e-9)
            credit += m["jaccard"] * m["label_similarity"]
        if not g_sorted and not p_sorted:
            assert rec["score"] == 1.0
            continue
        precision = credit / len(p_sorted) if p_sorted else 0.0
        recall = credit / len(g_sorted) if g_sorted else 0.0
        expected = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        assert rec["score"] == pytest.approx(expected, abs=1e-9)


def test_api_errors_name_the_record():
    with pytest.raises(ValueError, match="record 'r2': malformed entity key 'John:0'"):
        evaluate([{"id": "r1", "text": "John", "labels": {}}, {"id": "r2", "text": "John", "labels": {"John:0": "p"}}],
                 [{"id": "r1", "labels": {}}, {"id": "r2", "labels": {}}], label_similarity="exact")
    with pytest.raises(ValueError, match="record 0: entity surface 'Bob'"):
        evaluate([{"Bob:0:3": "p"}], [{}], texts=["Ann"], label_similarity="exact")
    with pytest.raises(ValueError, match="gold: duplicated id 'a'"):
        evaluate([{"id": "a", "labels": {}}, {"id": "a", "labels": {}}], [{}, {}], label_similarity="exact")
    with pytest.raises(TypeError, match="predictions must be a non-empty mapping"):
        compare([{}], [])


# ---------------------------------------------------------------- command line


def example_args(*extra):
    return ["ner", "--gold", str(EXAMPLE / "gold.jsonl"), "--pred", f"gliner={EXAMPLE / 'gliner.jsonl'}",
            "--pred", f"deberta={EXAMPLE / 'deberta.jsonl'}", "--pred", f"spacy={EXAMPLE / 'spacy.jsonl'}", *extra]


def test_cli_table_and_json_with_exact_labels(capsys):
    assert main(example_args("--label-similarity", "exact")) == 0
    out = capsys.readouterr().out
    assert "gold repairs: 0 trimmed, 4 re-anchored" in out
    assert "| Model | DMBertA mean | DMBertA accumulate |" in out
    assert main(example_args("--label-similarity", "exact", "--json")) == 0
    doc = json.loads(capsys.readouterr().out)
    assert sorted(doc) == ["deberta", "gliner", "spacy"]
    assert len(doc["gliner"]["records"]) == len(read_jsonl(str(EXAMPLE / "gold.jsonl")))
    assert set(doc["gliner"]["semeval"]) == {"strict", "exact", "partial", "type"}


def test_cli_reports_bad_input(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "text": "John", "labels": {"John:a:b": "person"}}\n', encoding="utf-8")
    assert main(["ner", "--gold", str(bad), "--pred", f"m={bad}", "--label-similarity", "exact"]) == 2
    assert "record 1: malformed entity key 'John:a:b'" in capsys.readouterr().err
    assert main(["ner", "--gold", str(bad), "--label-similarity", "exact"]) == 2
    assert "needs 'gold' and a 'predictions' object" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["ner", "--gold", str(bad), "--pred", "no-equals-sign"])


def test_combined_file_cli(tmp_path, capsys):
    gold, models = seed_example()
    line = {"id": 1, "prompt": TEXT, "gold": gold[0]["labels"], "predictions": {m: v[0]["labels"] for m, v in models.items()}}
    path = tmp_path / "combined.jsonl"
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    assert main(["ner", "--gold", str(path), "--label-similarity", "exact", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["spacy"]["dmberta"]["mean"] == pytest.approx(0.5)  # hand-derived: 1 of 2 both ways


# ---------------------------------------------------------------- the shared encoder (embedded model)


@pytest.mark.slow
def test_end_to_end_with_the_embedded_encoder(capsys):
    from rapidscore.encoder import Encoder
    from rapidscore.encoder.model_source import DEFAULT_MODEL

    assert main(example_args()) == 0
    table = capsys.readouterr().out
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| Model")]
    assert rows[0].startswith("| gliner |")  # the model with the right spans and closest labels ranks first
    # Oracle: the cosine of the encoder's own sentence embeddings.
    vectors = Encoder(DEFAULT_MODEL).sentence_embeddings(["company", "organization"])
    expected = float(vectors[0] @ vectors[1] / np.linalg.norm(vectors[0]) / np.linalg.norm(vectors[1]))
    assert LabelSimilarity()("company", "organization") == pytest.approx(max(expected, 0.0), abs=1e-5)
