"""Baseline rescaling without bert-score: the packaged baseline files, their lookup, the embedded
all-MiniLM-L6-v2's own baseline, and rescaling through every entry point (API, drop-in, CLI).

The published files are compared byte for byte with the installed bert-score's; the end-to-end
runs happen in subprocesses where importing (or even finding) bert-score fails.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import textwrap
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest

from rapidscore.bertscore import BERTScore, compute_baseline
from rapidscore.bertscore.baselines import (available_baselines, default_baseline_path, packaged_baseline_dir,
                                            read_baseline, reference_baseline_dir)

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
CANDS = ["The cat sat on the mat.", "Stocks fell sharply on Monday after the announcement.",
         "A quick brown fox jumps over the lazy dog.", "It rained all day in the valley."]
REFS = ["A cat was sitting on a rug.", "The weather was lovely for the picnic.",
        "The fox, quick and brown, leapt over a sleepy dog.", "Heavy rain fell over the valley all day long."]

# Prepended to a subprocess: from then on, importing or finding these modules fails.
BLOCKER = """
import sys
class _Blocked:
    names = {names!r}
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {{name!r}} (hidden by the test)")
        return None
sys.meta_path.insert(0, _Blocked())
for _name in list(sys.modules):
    if _name.split(".")[0] in _Blocked.names:
        del sys.modules[_name]
"""


def _run_blocked(names: set, body: str) -> dict:
    """Run ``body`` (which prints one JSON object) with ``names`` unimportable; return the JSON."""
    script = BLOCKER.format(names=sorted(names)) + textwrap.dedent(body)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _rows(path: Path) -> np.ndarray:
    """A baseline file's P, R, F rows, parsed here with csv (not with rapidscore's reader)."""
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["LAYER", "P", "R", "F"]
    assert [int(r[0]) for r in rows[1:]] == list(range(len(rows) - 1))
    return np.asarray([[float(x) for x in r[1:]] for r in rows[1:]], dtype=np.float64)


def _rescaled(values, b) -> np.ndarray:
    """(X - b) / (1 - b) in float32, as bert-score computes it on torch float32 tensors."""
    b = np.float32(b)
    return (np.asarray(values, dtype=np.float32) - b) / (np.float32(1) - b)


def _minilm_file() -> Path:
    return packaged_baseline_dir() / "en" / "sentence-transformers" / "all-MiniLM-L6-v2.tsv"


# --- the packaged files and their lookup -----------------------------------------------------


def test_every_published_baseline_is_packaged_byte_for_byte():
    root = reference_baseline_dir()
    assert root is not None, "bert-score's baseline files should be installed with the test extra"
    theirs = sorted(p.relative_to(root) for p in root.rglob("*.tsv"))
    assert theirs
    published = set()
    for rel in theirs:
        lang, model = rel.parts[0], rel.with_suffix("").relative_to(rel.parts[0]).as_posix()
        published.add((lang, model))
        ours = default_baseline_path(lang, model)
        assert ours == packaged_baseline_dir() / rel
        assert ours.read_bytes() == (root / rel).read_bytes(), rel
    # rapidscore adds exactly one file: the embedded model's own baseline
    assert set(available_baselines()) - published == {("en", MINILM)}
    assert published <= set(available_baselines())


def test_hub_ids_with_a_slash_are_looked_up_as_bert_score_does():
    root = reference_baseline_dir()
    assert root is not None
    for lang, model in [("en", "microsoft/deberta-xlarge-mnli"), ("en-sci", "allenai/scibert_scivocab_uncased"),
                        ("en", "roberta-large"), ("zh", "bert-base-chinese")]:
        # bert-score: os.path.join(dirname(__file__), f"rescale_baseline/{lang}/{model_type}.tsv")
        theirs = Path(os.path.join(root.parent, f"rescale_baseline/{lang}/{model}.tsv"))
        ours = default_baseline_path(lang, model)
        assert theirs.is_file() and ours.is_file()
        assert ours.relative_to(packaged_baseline_dir()) == theirs.relative_to(root)
        np.testing.assert_array_equal(read_baseline(ours), _rows(theirs))


def test_both_names_of_the_embedded_model_find_its_baseline(minilm_path):
    from rapidscore.encoder.model_source import num_layers, read_config

    short, full = default_baseline_path("en", "all-MiniLM-L6-v2"), default_baseline_path("en", MINILM)
    assert short == full == _minilm_file() and full.is_file()
    table = read_baseline(full)
    # one row per hidden state (embedding output + each layer), so all_layers works
    assert table.shape == (num_layers(read_config(minilm_path)) + 1, 3)
    np.testing.assert_array_equal(table, _rows(full))
    assert np.all(np.abs(table) < 1)


def test_a_missing_baseline_names_the_language_and_model_and_how_to_make_one(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        read_baseline(default_baseline_path("en", "my-org/my-model"))
    message = str(info.value)
    assert "'my-org/my-model'" in message and "'en'" in message and "rapidscore bertscore --make-baseline" in message
    assert "baseline_path" in message
    with pytest.raises(FileNotFoundError, match=r"no model has one for 'xx'.*languages with baselines: .*en"):
        read_baseline(default_baseline_path("xx", "roberta-large"))
    with pytest.raises(FileNotFoundError, match="baseline file not found"):  # a user's own path
        read_baseline(tmp_path / "missing.tsv")


@pytest.mark.parametrize("lang", ["", "  ", None, "..", "en/../..", "a\\b"])
def test_a_bad_language_is_a_clear_error(lang):
    with pytest.raises(ValueError, match="lang must be a language code"):
        default_baseline_path(lang, "roberta-large")


@pytest.mark.parametrize("model", ["", None, 3])
def test_a_bad_model_name_is_a_clear_error(model):
    with pytest.raises(ValueError, match="model must be a non-empty model name"):
        default_baseline_path("en", model)


def test_importing_rapidscore_reads_no_baseline_file():
    code = """
        import json, sys
        touched = []
        def hook(event, args):
            if event in ("open", "os.listdir", "os.scandir") and args and "rescale_baseline" in str(args[0]):
                touched.append(str(args[0]))
        sys.addaudithook(hook)
        import rapidscore, rapidscore.bert_score
        from rapidscore.bertscore import BERTScore, baselines
        at_import = list(touched)
        baselines.read_baseline(baselines.default_baseline_path("en", "roberta-large"))
        print(json.dumps({"at_import": at_import, "after_read": touched}))
    """
    seen = _run_blocked(set(), code)
    assert seen["at_import"] == []
    assert any(p.endswith("roberta-large.tsv") for p in seen["after_read"])  # the hook does see reads


# --- rescaling with the packaged files, bert-score hidden --------------------------------------


@pytest.mark.slow
def test_native_api_rescales_the_default_model_without_bert_score_or_torch(minilm_path):
    raw = BERTScore(MINILM).score(CANDS, REFS)  # also exports the ONNX graph the subprocess loads
    b = _rows(_minilm_file())[6]
    got = _run_blocked({"bert_score", "torch", "transformers"}, f"""
        import json
        from rapidscore.bertscore import BERTScore
        for name in ("{MINILM}", "all-MiniLM-L6-v2"):
            scorer = BERTScore(name, lang="en", rescale_with_baseline=True)
            result = scorer.score({CANDS!r}, {REFS!r})
            out = {{"p": result.precision.tolist(), "r": result.recall.tolist(), "f": result.f1.tolist(),
                   "signature": result.signature, "layer": scorer.layer, "torch": "torch" in __import__("sys").modules}}
            assert out["p"] and out["signature"]
        print(json.dumps(out))
    """)
    assert got["layer"] == 6 and not got["torch"]
    assert "rescaled:yes" in got["signature"]
    for key, values, col in (("p", raw.precision, 0), ("r", raw.recall, 1), ("f", raw.f1, 2)):
        np.testing.assert_allclose(got[key], _rescaled(values, b[col]), rtol=0, atol=1e-7)
    assert not np.allclose(got["f"], raw.f1, atol=1e-3)  # rescaling changed the numbers


@pytest.mark.slow
def test_drop_in_rescales_the_embedded_model_without_bert_score(minilm_path):
    import rapidscore.bert_score as drop_in

    P, R, F = drop_in.score(CANDS, REFS, model_type=MINILM, num_layers=6)
    b = _rows(_minilm_file())[6]
    got = _run_blocked({"bert_score"}, f"""
        import json, warnings
        warnings.filterwarnings("error", message="Baseline not Found")  # else: a warning and raw scores
        from rapidscore import bert_score
        (P, R, F), hash_ = bert_score.score({CANDS!r}, {REFS!r}, model_type="{MINILM}", num_layers=6, lang="en",
                                            rescale_with_baseline=True, return_hash=True)
        scorer = bert_score.BERTScorer(model_type="all-MiniLM-L6-v2", num_layers=6, lang="en",
                                       rescale_with_baseline=True)
        P2, R2, F2 = scorer.score({CANDS!r}, {REFS!r})
        print(json.dumps({{"p": P.tolist(), "r": R.tolist(), "f": F.tolist(), "hash": hash_, "f2": F2.tolist(),
                          "baseline_vals": scorer.baseline_vals.tolist()}}))
    """)
    assert got["hash"].endswith("-rescaled")
    for key, values, col in (("p", P, 0), ("r", R, 1), ("f", F, 2)):
        np.testing.assert_allclose(got[key], _rescaled(values.numpy(), b[col]), rtol=0, atol=1e-7)
    np.testing.assert_allclose(got["f2"], got["f"], rtol=0, atol=1e-7)
    np.testing.assert_allclose(got["baseline_vals"], b.astype(np.float32), rtol=0, atol=0)


@pytest.mark.slow
def test_rescaling_uses_the_row_of_the_chosen_layer_and_every_row_with_all_layers(minilm_path):
    table = _rows(_minilm_file())
    raw3 = BERTScore(MINILM, 3).score(CANDS, REFS)
    got3 = BERTScore(MINILM, 3, lang="en", rescale_with_baseline=True).score(CANDS, REFS)
    np.testing.assert_allclose(got3.f1, _rescaled(raw3.f1, table[3, 2]), rtol=0, atol=1e-7)
    np.testing.assert_allclose(got3.precision, _rescaled(raw3.precision, table[3, 0]), rtol=0, atol=1e-7)
    raw_all = BERTScore(MINILM, all_layers=True).score(CANDS, REFS)
    got_all = BERTScore(MINILM, all_layers=True, lang="en", rescale_with_baseline=True).score(CANDS, REFS)
    assert got_all.f1.shape == (len(table), len(CANDS))
    for layer in range(len(table)):
        np.testing.assert_allclose(got_all.recall[layer], _rescaled(raw_all.recall[layer], table[layer, 1]),
                                   rtol=0, atol=1e-7)
        np.testing.assert_allclose(got_all.f1[layer], _rescaled(raw_all.f1[layer], table[layer, 2]),
                                   rtol=0, atol=1e-7)


@pytest.mark.slow
def test_cli_rescales_the_embedded_model_with_its_baseline(minilm_path, tmp_path):
    from rapidscore.cli import main

    cands, refs = tmp_path / "c.txt", tmp_path / "r.txt"
    cands.write_text("\n".join(CANDS) + "\n", encoding="utf-8")
    refs.write_text("\n".join(REFS) + "\n", encoding="utf-8")
    common = ["bertscore", "-c", str(cands), "-r", str(refs), "-m", "all-MiniLM-L6-v2", "--json", "-q"]

    def run(*extra):
        out = io.StringIO()
        with redirect_stdout(out):
            assert main([*common, *extra]) == 0
        return json.loads(out.getvalue())

    raw = run()
    got = run("--lang", "en", "--rescale_with_baseline")
    b = _rows(_minilm_file())[6]
    assert "rescaled:yes" in got["signature"] and "rescaled:no" in raw["signature"]
    for key, col in (("precision", 0), ("recall", 1), ("f1", 2)):
        np.testing.assert_allclose(got[key], _rescaled(raw[key], b[col]), rtol=0, atol=1e-7)


@pytest.mark.slow
def test_packaged_file_gives_bert_scores_numbers_with_its_own_file(tiny_model_path):
    """The same model scored by bert-score with its installed file and by rapidscore with the
    packaged copy (found by name): the same rescaled numbers."""
    bert_score = pytest.importorskip("bert_score")
    model = str(tiny_model_path("roberta"))
    root = reference_baseline_dir()
    assert root is not None
    expected = bert_score.score(CANDS, REFS, model_type=model, num_layers=3, lang="en", rescale_with_baseline=True,
                                baseline_path=str(root / "en" / "roberta-large.tsv"))
    got = BERTScore(model, 3, lang="en", rescale_with_baseline=True,
                    baseline_path=default_baseline_path("en", "roberta-large")).score(CANDS, REFS,
                                                                                      reference_batch_size=64)
    for ours, theirs in zip((got.precision, got.recall, got.f1), expected):
        np.testing.assert_allclose(ours, theirs.numpy(), rtol=0, atol=1e-5)


# --- the baseline maker ------------------------------------------------------------------------


@pytest.mark.slow
def test_baseline_maker_streams_a_corpus_over_its_memory_budget_to_the_same_table(minilm_path, monkeypatch):
    import rapidscore.bertscore.streaming as streaming

    corpus = CANDS + REFS + [f"Sentence number {i} is about topic {i % 7} and nothing else." for i in range(40)]
    in_memory = compute_baseline(corpus, MINILM, n_pairs=400, seed=5)
    calls = []
    original = streaming.chunk_results

    def counting(*args, **kwargs):
        for item in original(*args, **kwargs):
            calls.append(len(item[0]))
            yield item

    monkeypatch.setattr(streaming, "chunk_results", counting)
    streamed = compute_baseline(corpus, MINILM, n_pairs=400, seed=5, memory_budget=2_000_000)
    assert len(calls) > 1 and sum(calls) == 400  # several chunks, every pair once
    assert streamed.shape == in_memory.shape == (7, 3)
    np.testing.assert_allclose(streamed, in_memory, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="memory_budget"):
        compute_baseline(corpus, MINILM, n_pairs=10, memory_budget=0)
