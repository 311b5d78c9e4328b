"""Every figure rapidscore draws (rapidscore.common.figures' style), from small fixed data
(cases.py): at least 1200 px wide at the default DPI, no text outside the canvas or over another,
no warning, the same pixels as its reference PNG (reference/, within MAX_MEAN_DIFFERENCE), and
SVG / PDF on request. Regenerate the references after an intended change: README.md."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib", reason="figures need the [plot] extra")

from rapidscore.common import figures

from .cases import CASES, WITHOUT_REFERENCE

REFERENCE = Path(__file__).parent / "reference"
VERSIONS = REFERENCE / "versions.json"
REGENERATE = os.environ.get("RAPIDSCORE_REGENERATE_FIGURES") == "1"
REFERENCE_DPI = 50  # the references at a third of the default DPI: small files, the same layout
# mean absolute difference per channel, 0-255 scale, over the whole image: an antialiasing
# difference is far below it, a moved label or bar far above
MAX_MEAN_DIFFERENCE = 1.0


def _render_versions() -> dict:
    import matplotlib
    from matplotlib import ft2font

    return {"matplotlib": matplotlib.__version__, "freetype": ft2font.__freetype_version__, "dpi": REFERENCE_DPI}


def _draw(name: str):
    """The figure, and every warning raised while drawing and saving it."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        figure = CASES[name]()
        return figure, caught


def _pixels(path: Path) -> np.ndarray:
    from matplotlib import image

    return image.imread(str(path))


@pytest.mark.parametrize("name", sorted(CASES))
def test_size_layout_and_no_warning(name, tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        figure = CASES[name]()
        path = figures.save(figure, tmp_path / f"{name}.png")
        clipped = figures.clipped_texts(figure)
        overlapping = figures.overlapping_texts(figure)
    assert [str(w.message) for w in caught] == []
    height, width = _pixels(Path(path)).shape[:2]
    assert width >= 1200, f"{name}: {width} px wide at the default DPI"
    assert (width, height) == tuple(round(v) for v in figure.get_size_inches() * figures.DPI)
    assert clipped == [], f"{name}: text outside the canvas: {clipped}"
    assert overlapping == [], f"{name}: texts over each other: {overlapping}"


@pytest.mark.parametrize("name", sorted(set(CASES) - WITHOUT_REFERENCE))
def test_matches_the_reference(name, tmp_path):
    figure, caught = _draw(name)
    assert [str(w.message) for w in caught] == []
    target = REFERENCE / f"{name}.png"
    if REGENERATE:
        figures.save(figure, target, dpi=REFERENCE_DPI)
        VERSIONS.write_text(json.dumps(_render_versions(), indent=1) + "\n")
        pytest.skip(f"regenerated {target}")
    assert target.exists(), f"no reference {target}: run with RAPIDSCORE_REGENERATE_FIGURES=1 (README.md)"
    recorded = json.loads(VERSIONS.read_text())
    if recorded != _render_versions():
        pytest.skip(f"references drawn with {recorded}, this is {_render_versions()}: regenerate them (README.md)")
    drawn = figures.save(figure, tmp_path / f"{name}.png", dpi=REFERENCE_DPI)
    expected, actual = _pixels(target), _pixels(Path(drawn))
    assert actual.shape == expected.shape, f"{name}: {actual.shape[1]}x{actual.shape[0]} px, the reference is " \
                                           f"{expected.shape[1]}x{expected.shape[0]}"
    difference = float(np.abs(actual[..., :3] - expected[..., :3]).mean()) * 255
    assert difference <= MAX_MEAN_DIFFERENCE, f"{name}: mean pixel difference {difference:.2f} > " \
                                              f"{MAX_MEAN_DIFFERENCE} (look at {drawn} and {target})"


@pytest.mark.parametrize("name", ["select_rates", "bertscore_similarity_idf", "nrr_curve", "ner_by_type"])
def test_vector_outputs_on_request(name, tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        figure = CASES[name]()
        svg = Path(figures.save(figure, tmp_path / f"{name}.svg"))
        again = Path(figures.save(CASES[name](), tmp_path / f"{name}-again.svg"))  # drawn anew
        pdf = Path(figures.save(figure, tmp_path / f"{name}.pdf"))
        inline = figures.to_svg(figure)
        png = Path(figures.save(figure, tmp_path / name))  # no extension: PNG, at exactly that name
    assert [str(w.message) for w in caught] == []
    text = svg.read_text()
    assert text.startswith("<?xml") and "<svg" in text and "<dc:date>" not in text
    assert svg.read_bytes() == again.read_bytes()  # no date, fixed ids: the same data give the same bytes
    assert pdf.read_bytes().startswith(b"%PDF") and b"/CreationDate" not in pdf.read_bytes()
    assert inline.startswith("<svg") and inline.rstrip().endswith("</svg>")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([svg.name, again.name, pdf.name, png.name])


def test_figures_stay_out_of_pyplot():
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    for name in ("select_correlations", "nrr_histogram", "bertscore_f1", "ner_scores"):
        CASES[name]()
    assert plt.get_fignums() == before  # nothing for pyplot to keep alive (or warn about after 20)


def test_text_outside_the_canvas_is_found_and_fitted():
    with figures.style():
        figure = figures.new_figure()
        ax = figure.subplots()
        ax.set_title("a title much wider than the figure it is drawn on, " * 3)
        assert figures.clipped_texts(figure), "the check cannot fail"
        figures.fit(figure)
    assert figures.clipped_texts(figure) == []


def test_label_keeps_text_drawable():
    assert figures.label("cost $5 and $6") == r"cost \$5 and \$6"  # literal, not mathtext
    assert figures.label("中文") == "U+4E2DU+6587"  # no glyph in DejaVu Sans: named, not a warning
    assert figures.label("Representation engineering (long name)", 18).count("\n") >= 1


def test_the_names_an_html_report_calls(tmp_path):
    """rapidscore.report embeds these (common.figures.to_svg): plot_systems, plot_similarities with a
    plain namespace, plot_models, plot_summary_rows."""
    from types import SimpleNamespace

    from rapidscore.abstention.plots import plot_summary_rows
    from rapidscore.bertscore.plot import plot_systems
    from rapidscore.ner.plot import plot_models
    from rapidscore.nrr.plot import plot_similarities

    from .cases import _ner_document

    rows = [{"experiment": ".", "model": m, "technique": t, "model_name": m.upper(), "technique_name": t.title(),
             "metric": e, "mean": 0.5 + 0.1 * k, "half_width": 0.2, "n_concepts": 6}
            for m in ("a", "b") for k, t in enumerate(("prompt", "sft")) for e in ("abstention", "specificity")]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        drawn = [plot_systems({"x": [0.9, 0.8, float("nan"), 0.85]}),
                 plot_similarities(SimpleNamespace(similarities=[0.2, 0.9, 0.7, float("nan")], threshold=0.8,
                                                   rate=0.5)),
                 plot_models({"m": _ner_document(0.0)}), plot_summary_rows(rows)]
        svgs = [figures.to_svg(figure) for figure in drawn]
    assert [str(w.message) for w in caught] == []
    assert all(svg.startswith("<svg") for svg in svgs)
    assert [t.get_text() for t in drawn[3].axes[-1].get_xticklabels()] == ["A", "B"]  # the rows' display names
