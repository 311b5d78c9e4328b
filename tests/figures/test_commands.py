"""The commands write the figures: abstention --plot-dir (--plot-format), ner --plot / --plot-by-type,
nrr --plot / --plot-curve, bertscore --plot-f1 / --show --fname."""

from __future__ import annotations

import os
import shutil
import warnings

import pytest

pytest.importorskip("matplotlib", reason="figures need the [plot] extra")

from rapidscore.cli import main

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
EXAMPLE = os.path.join(ROOT, "examples")


def _run(argv: list[str]) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(argv) == 0
    assert [str(w.message) for w in caught] == []


def test_abstention_plot_dir(tmp_path, capsys):
    results, taxonomy = os.path.join(EXAMPLE, "abstention", "results"), os.path.join(EXAMPLE, "abstention",
                                                                                      "taxonomy.json")
    _run(["abstention", results, "--taxonomy", taxonomy, "--workers", "1", "--plot-dir", str(tmp_path / "png"),
          "-q"])
    names = sorted(os.listdir(tmp_path / "png"))
    assert names == sorted(["rates.png", "model-a_levels.png", "model-b_levels.png",
                            *(f"model-{m}_{e}_correlation.png" for m in "ab"
                              for e in ("abstention", "generalization", "specificity"))])
    _run(["abstention", results, "--taxonomy", taxonomy, "--workers", "1", "--plot-dir", str(tmp_path / "svg"),
          "--plot-format", "svg", "-q"])
    assert sorted(os.listdir(tmp_path / "svg")) == [name.replace(".png", ".svg") for name in names]
    assert capsys.readouterr().err == ""  # -q: nothing on stderr (no matplotlib warning either)


def test_ner_plots(tmp_path, capsys):
    ner = os.path.join(EXAMPLE, "ner")
    _run(["ner", "--gold", os.path.join(ner, "gold.jsonl"), "--pred", f"gliner={os.path.join(ner, 'gliner.jsonl')}",
          "--pred", f"spacy={os.path.join(ner, 'spacy.jsonl')}", "--label-similarity", "exact",
          "--plot", str(tmp_path / "scores.pdf"), "--plot-by-type", str(tmp_path / "types.svg"), "-q"])
    assert sorted(os.listdir(tmp_path)) == ["scores.pdf", "types.svg"]
    assert (tmp_path / "scores.pdf").read_bytes()[:4] == b"%PDF"
    assert capsys.readouterr().err == ""


@pytest.mark.slow
def test_nrr_and_bertscore_figures(tmp_path, tiny_bert, capsys):
    generated = tmp_path / "generated.txt"
    references = tmp_path / "references.txt"
    generated.write_text("a cat sat on the mat\ndogs bark at night\nthe sun is hot\n")
    references.write_text("the cat sat\na dog barked\nit is sunny\n")
    _run(["nrr", "--generated", str(generated), "--references", str(references), "--model", tiny_bert,
          "--plot", str(tmp_path / "histogram.svg"), "--plot-curve", str(tmp_path / "curve.png"), "-q"])
    assert (tmp_path / "histogram.svg").read_text().startswith("<?xml")
    assert (tmp_path / "curve.png").read_bytes()[:4] == b"\x89PNG"
    _run(["bertscore", "-c", str(generated), "-r", str(references), "-m", tiny_bert, "-l", "1",
          "--plot-f1", str(tmp_path / "f1.png"), "-q"])
    assert (tmp_path / "f1.png").read_bytes()[:4] == b"\x89PNG"
    _run(["bertscore", "-c", str(generated), "-r", str(references), "-m", tiny_bert, "-l", "1", "--show",
          "--fname", str(tmp_path / "pair.pdf"), "-q"])
    assert (tmp_path / "pair.pdf").read_bytes()[:4] == b"%PDF"
    assert main(["nrr", "--generated", str(generated), "--references", str(references), "--model", tiny_bert,
                 "--plot-curve", str(tmp_path / "c.png"), "--output", str(tmp_path / "rows.jsonl"), "-q"]) == 2
    assert "--plot-curve needs every similarity at once" in capsys.readouterr().err
    shutil.rmtree(tmp_path / "rows.jsonl", ignore_errors=True)
