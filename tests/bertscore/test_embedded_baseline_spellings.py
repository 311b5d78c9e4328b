"""The embedded all-MiniLM-L6-v2 is one model under every spelling, for baselines too (issue 36 row 12).

Its short name, its hub id, its package directory (as given, with a trailing slash, through "..",
relative to the working directory, as a Path, through a symlink) all find the baseline rapidscore
ships for it, in ``bert_score.score``, ``BERTScorer``, ``BERTScore`` and the CLI, and score exactly
as the canonical spelling does. The directory used to miss it: "Baseline not Found", not rescaled.
"""

from __future__ import annotations

import io
import json
import os
import warnings
from collections.abc import Callable
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest

from rapidscore.bertscore.baselines import default_baseline_path, read_baseline
from rapidscore.encoder.model_source import DEFAULT_MODEL

CANDS = ["The cat sat on the mat.", "Stocks fell sharply on Monday after the announcement."]
REFS = ["A cat was sitting on a rug.", "The weather was lovely for the picnic."]
SPELLINGS = ["short name", "hub id", "directory", "directory/", "dir/../dir", "relative directory", "Path",
             "symlink", "symlink/"]


@pytest.fixture
def spell(minilm_path, tmp_path) -> Callable[[str], str | Path]:
    """Spelling name -> that spelling of the embedded model."""
    link = tmp_path / "minilm-link"
    link.symlink_to(minilm_path, target_is_directory=True)
    spellings = {
        "short name": "all-MiniLM-L6-v2", "hub id": DEFAULT_MODEL, "directory": str(minilm_path),
        "directory/": str(minilm_path) + os.sep,
        "dir/../dir": os.path.join(str(minilm_path), os.pardir, minilm_path.name),
        "relative directory": os.path.relpath(minilm_path), "Path": minilm_path,
        "symlink": str(link), "symlink/": str(link) + os.sep,
    }
    return spellings.__getitem__


def _canonical_file() -> Path:
    path = default_baseline_path("en", DEFAULT_MODEL)
    assert path.is_file()
    return path


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_every_spelling_finds_the_shipped_baseline_file(spell, spelling) -> None:
    assert default_baseline_path("en", spell(spelling)) == _canonical_file()


def test_another_directory_is_not_the_embedded_model(minilm_path, tmp_path) -> None:
    # A copy is another directory: bert-score's rule (a directory has no published baseline) holds.
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(minilm_path, copy, ignore=shutil.ignore_patterns("*.safetensors", "*.bin", "*.onnx"))
    assert default_baseline_path("en", str(copy)) != _canonical_file()
    assert not default_baseline_path("en", str(tmp_path)).is_file()


def _numbers(out) -> np.ndarray:
    return np.stack([np.asarray(x, dtype=np.float64) for x in out])


@pytest.fixture(scope="module")
def canonical(minilm_path) -> dict:
    """The canonical spelling's rescaled P, R, F (drop-in and native) and the unrescaled ones."""
    from rapidscore import bert_score
    from rapidscore.bertscore import BERTScore

    rescaled = bert_score.score(CANDS, REFS, model_type=DEFAULT_MODEL, num_layers=6, lang="en",
                                rescale_with_baseline=True)
    raw = bert_score.score(CANDS, REFS, model_type=DEFAULT_MODEL, num_layers=6)
    native = BERTScore(DEFAULT_MODEL, lang="en", rescale_with_baseline=True).score(CANDS, REFS)
    return {"drop_in": _numbers(x.numpy() for x in rescaled), "raw": _numbers(x.numpy() for x in raw),
            "native": _numbers([native.precision, native.recall, native.f1])}


@pytest.mark.slow
def test_canonical_spelling_is_rescaled_with_the_shipped_baseline(canonical) -> None:
    b = read_baseline(_canonical_file())[6].astype(np.float32)[:, None]  # rows P, R, F of layer 6
    expected = (canonical["raw"].astype(np.float32) - b) / (1 - b)
    np.testing.assert_allclose(canonical["drop_in"], expected, rtol=0, atol=1e-7)
    assert not np.allclose(canonical["drop_in"], canonical["raw"], atol=1e-3)


# issue 36 row 12 (the reproducer: model_type=<the package directory> warned "Baseline not Found")
@pytest.mark.slow
@pytest.mark.parametrize("spelling", SPELLINGS)
def test_drop_in_score_rescales_every_spelling(spell, spelling, canonical) -> None:
    from rapidscore import bert_score

    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="Baseline not Found")
        (P, R, F), hash_ = bert_score.score(CANDS, REFS, model_type=spell(spelling), num_layers=6, lang="en",
                                            rescale_with_baseline=True, return_hash=True)
    assert hash_.endswith("-rescaled")
    np.testing.assert_array_equal(_numbers([P.numpy(), R.numpy(), F.numpy()]), canonical["drop_in"])


@pytest.mark.slow
@pytest.mark.parametrize("spelling", ["directory", "directory/", "symlink"])
def test_bert_scorer_and_native_scorer_rescale_every_spelling(spell, spelling, canonical) -> None:
    from rapidscore import bert_score
    from rapidscore.bertscore import BERTScore

    scorer = bert_score.BERTScorer(model_type=spell(spelling), num_layers=6, lang="en", rescale_with_baseline=True)
    np.testing.assert_array_equal(_numbers(x.numpy() for x in scorer.score(CANDS, REFS)), canonical["drop_in"])
    np.testing.assert_array_equal(scorer.baseline_vals.numpy(), read_baseline(_canonical_file())[6].astype(np.float32))
    native = BERTScore(spell(spelling), lang="en", rescale_with_baseline=True)
    assert native.baseline_path == _canonical_file()
    result = native.score(CANDS, REFS)
    np.testing.assert_array_equal(_numbers([result.precision, result.recall, result.f1]), canonical["native"])


@pytest.mark.slow
@pytest.mark.parametrize("spelling", ["hub id", "directory", "directory/", "symlink"])
def test_cli_rescales_every_spelling(spell, spelling, canonical, tmp_path) -> None:
    from rapidscore.cli import main

    cands, refs = tmp_path / "c.txt", tmp_path / "r.txt"
    cands.write_text("\n".join(CANDS) + "\n", encoding="utf-8")
    refs.write_text("\n".join(REFS) + "\n", encoding="utf-8")
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["bertscore", "-c", str(cands), "-r", str(refs), "-m", str(spell(spelling)), "-l", "6",
                     "--lang", "en", "--rescale_with_baseline", "--json", "-q"]) == 0
    got = json.loads(out.getvalue())
    assert "rescaled:yes" in got["signature"]
    np.testing.assert_array_equal(_numbers([got["precision"], got["recall"], got["f1"]]),
                                  canonical["native"].astype(np.float32).astype(np.float64))
