"""Two figure stumbles of the first hour (issue 48), checked on the figures' artists and data
(Agg), not on pixels:

* the NRR histogram drew its outer bars flush against the axes' limits (half a bar, to the eye)
  and put its legend over the bars ("best" placed it on the rightmost one);
* the NER per-type figure drew 0.00 exact and partial F1 for every type of a model whose overall
  exact and partial F1 are 1.00, with no word why: each type is scored on its own (nervaluate's
  per-tag results), and the model labels its entities with other names.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("matplotlib", reason="figures need the [plot] extra")

from rapidscore.common import figures
from rapidscore.ner import evaluate
from rapidscore.ner.plot import plot_ner_by_type
from rapidscore.nrr.plot import plot_similarities, plot_similarity_histograms
from rapidscore.nrr.scoring import NRRResult


def nrr_result(similarities, threshold=0.8) -> NRRResult:
    sims = np.asarray(similarities, dtype=np.float64)
    return NRRResult(sims, sims < threshold, threshold, "nrr|test")


def bars_of(ax) -> list:
    return [bar for container in ax.containers for bar in container if bar.get_height() > 0]


def check_histogram_axes(figure, ax) -> None:
    renderer = figure.canvas.get_renderer()
    bars = bars_of(ax)
    assert bars
    legend = ax.get_legend() or next(a.get_legend() for a in figure.axes if a.get_legend() is not None)
    box = legend.get_window_extent(renderer)
    overlapping = [bar for bar in bars if box.overlaps(bar.get_window_extent(renderer))]
    assert not overlapping, f"the legend covers {len(overlapping)} bars"
    left, right = ax.get_xlim()
    width = bars[0].get_width()
    outside = [(bar.get_x(), bar.get_x() + bar.get_width()) for bar in bars
               if not left + 0.25 * width <= bar.get_x() <= bar.get_x() + bar.get_width() <= right - 0.25 * width]
    assert not outside, f"bars not whole inside the x-limits {left, right} (with room beside them): {outside}"
    assert max(bar.get_height() for bar in bars) < ax.get_ylim()[1]  # the tallest below the frame's top


@pytest.mark.parametrize("similarities", [
    [0.85, 0.62, 0.55, 0.99, 1.0, 0.97, 0.93],  # the tallest bar at the right edge (1.0)
    np.clip(np.random.default_rng(0).normal(0.8, 0.1, 400), -1, 1),
    [0.7] * 5,  # every answer alike
    [0.2, 0.95, 0.96, 0.97, 0.98, 0.99, 1.0, 1.0, 1.0, 1.0],  # bars piled up at the right
    np.linspace(0.5, 1.0, 400),  # bars as tall everywhere: no corner free for a legend inside the axes
])
def test_histogram_bars_inside_the_limits_and_the_legend_over_none(similarities) -> None:
    figure = plot_similarities(nrr_result(similarities))
    figures.fit(figure)
    histogram = next(ax for ax in figure.axes if ax.containers)
    check_histogram_axes(figure, histogram)
    assert not figures.clipped_texts(figure) and not figures.overlapping_texts(figure)


def test_histograms_per_system_bars_inside_and_legends_over_none() -> None:
    rng = np.random.default_rng(1)
    figure = plot_similarity_histograms({"system A": nrr_result(np.clip(rng.normal(0.9, 0.08, 300), -1, 1)),
                                         "system B": nrr_result(np.clip(rng.normal(0.6, 0.2, 200), -1, 1))})
    figures.fit(figure)
    panels = [ax for ax in figure.axes if ax.containers]
    assert len(panels) == 2
    for ax in panels:
        check_histogram_axes(figure, ax)
        assert ax.get_legend().get_title().get_text() in ("system A", "system B")
    assert not figures.clipped_texts(figure) and not figures.overlapping_texts(figure)


# ---- NER by type -------------------------------------------------------------------------------------
TEXT = "John works for Acme in Paris."
GOLD = [{"id": 1, "text": TEXT, "labels": [{"start": 0, "end": 4, "label": "person"},
                                           {"start": 15, "end": 19, "label": "company"},
                                           {"start": 23, "end": 28, "label": "city"}]}]
SAME_LABELS = [{"id": 1, "labels": [{"start": 0, "end": 4, "label": "person"},
                                    {"start": 15, "end": 19, "label": "company"},
                                    {"start": 23, "end": 26, "label": "city"}]}]  # Paris cut short
OTHER_LABELS = [{"id": 1, "labels": [{"start": 0, "end": 4, "label": "first_name"},
                                     {"start": 15, "end": 19, "label": "organization"},
                                     {"start": 23, "end": 28, "label": "location"}]}]  # every span exact


def panel_data(figure) -> dict[str, dict]:
    """Per panel title: {"widths": [bar widths, in drawing order], "texts": [texts on the bars]}."""
    out = {}
    for ax in figure.axes:
        title = ax.get_title(loc="left")
        if title:
            out[title] = {"widths": [bar.get_width() for c in ax.containers for bar in c],
                          "texts": [t.get_text() for t in ax.texts]}
    return out


def test_a_model_with_other_labels_shows_none_predicted_and_the_note_says_why() -> None:
    same = evaluate(GOLD, SAME_LABELS, label_similarity="exact")
    other = evaluate(GOLD, OTHER_LABELS, label_similarity="exact")
    assert other.semeval["exact"]["f1"] == 1.0 and other.semeval["partial"]["f1"] == 1.0
    assert all(other.semeval_by_type[t]["exact"]["f1"] == 0.0 for t in ("person", "company", "city"))
    figure = plot_ner_by_type({"same": same, "other": other})
    data = panel_data(figure)
    types = ["city", "company", "person"]  # one gold entity each: by name
    for scheme in ("Strict", "Exact", "Partial", "Type"):
        panel = data[f"{scheme} F1"]
        # the bars are the model with the same labels (keys read right: its per-type F1), none of the other's
        expected = [same.semeval_by_type[t][scheme.lower()]["f1"] for t in types]
        assert panel["widths"] == pytest.approx(expected), scheme
        assert panel["texts"].count("none predicted") == len(types), scheme  # the other model, every type
        # the numbers on the bars are the same model's; the other model's cells carry no number (no "0.00")
        assert sorted(t for t in panel["texts"] if t != "none predicted") == sorted(f"{v:.2f}" for v in expected)
    # DMBertA recall compares labels by meaning: a bar per model and type, no "none predicted"
    assert len(data["DMBertA recall"]["widths"]) == 2 * len(types)
    assert "none predicted" not in data["DMBertA recall"]["texts"]
    note = figure.get_supxlabel()
    assert "none predicted: the model labelled no entity with that type" in note.replace("\n", " ")
    assert "other (overall exact F1 1.00)" in note.replace("\n", " ")
    assert "same (" not in note  # it predicted every type
    # the key shows each model's colour, though the other model has no bar in the first panels
    legend = next(ax.get_legend() for ax in figure.axes if ax.get_legend() is not None)
    colours = [tuple(handle.get_facecolor()) for handle in legend.legend_handles]
    assert len(set(colours)) == 2
    assert not figures.clipped_texts(figure) and not figures.overlapping_texts(figure)


def test_no_note_when_every_model_predicts_every_type() -> None:
    same = evaluate(GOLD, SAME_LABELS, label_similarity="exact")
    figure = plot_ner_by_type({"same": same})
    assert "none predicted" not in figure.get_supxlabel()
    assert not any("none predicted" in panel["texts"] for panel in panel_data(figure).values())
    person = same.semeval_by_type["person"]["exact"]["f1"]
    assert not math.isnan(person) and person == 1.0
