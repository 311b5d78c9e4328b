"""NRR figures (need matplotlib: rapidscore[plot]), in the style of :mod:`rapidscore.common.figures`:

- :func:`plot_similarities`: one system's similarity histogram with the threshold line (``rapidscore
  nrr --plot``);
- :func:`plot_similarity_histograms`: the same for several systems, one panel each;
- :func:`plot_nrr_curve`: NRR as a function of the threshold, a curve per system (``rapidscore
  nrr --plot-curve``).

Systems are given as ``{name: NRRResult}`` (or ``{name: similarities}`` with a ``threshold``).
Each function returns the matplotlib ``Figure`` and writes it when given a path (PNG, or SVG /
PDF by the extension).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from rapidscore.common import figures

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from rapidscore.nrr.scoring import NRRResult

__all__ = ["plot_similarities", "plot_similarity_histograms", "plot_nrr_curve"]

REJECTED_COLOR = "#D55E00"


def _systems(results: Any, threshold: float | None) -> dict[str, tuple[np.ndarray, float]]:
    """``{name: (similarities, threshold)}`` from NRRResults or arrays (NaNs left out)."""
    if hasattr(results, "similarities"):
        results = {"": results}
    if not isinstance(results, Mapping) or not results:
        raise ValueError("give {system name: NRRResult or similarities}, at least one")
    systems = {}
    for name, value in results.items():
        if hasattr(value, "similarities"):
            sims, cut = np.asarray(value.similarities, dtype=np.float64), float(value.threshold)
            cut = cut if threshold is None else float(threshold)
        else:
            if threshold is None:
                raise ValueError(f"{name}: similarities without a result need threshold=")
            sims, cut = np.asarray(value, dtype=np.float64).ravel(), float(threshold)
        if np.isinf(sims).any():
            raise ValueError(f"{name}: similarities must be finite")
        sims = sims[~np.isnan(sims)]  # an item without a similarity (NaN) is not drawn
        if sims.size == 0:
            raise ValueError(f"{name}: no similarities")
        systems[str(name)] = (sims, cut)
    return systems


def _bins(values: list[np.ndarray], thresholds: list[float], bins: int) -> np.ndarray:
    low = min(min(float(v.min()) for v in values), *thresholds)
    high = max(max(float(v.max()) for v in values), *thresholds)
    if high - low < 1e-6:
        low, high = low - 0.05, high + 0.05
    return np.linspace(low, high, bins + 1)


def _histogram(ax: Axes, sims: np.ndarray, threshold: float, edges: np.ndarray, colour: str) -> Any:
    """Histogram with the threshold line (the axes' first line) and the rejected side shaded.
    Half a bin (and 1% of the range) of room on each side: an outer bar ends inside the frame,
    where a reader sees its whole width, not cut by the axis."""
    from matplotlib.ticker import MaxNLocator

    rejected = int((sims < threshold).sum())
    line = ax.axvline(threshold, color=figures.REFERENCE_COLOR, linestyle="--", linewidth=1.6,
                      label=f"threshold {threshold:g}: NRR {rejected / sims.size:.1%} "
                            f"({rejected} of {sims.size} rejected)")
    counts, _edges, _bars = ax.hist(sims, bins=list(edges), color=colour, alpha=0.9, edgecolor="white",
                                    linewidth=0.5)
    room = 0.5 * (edges[1] - edges[0]) + 0.01 * (edges[-1] - edges[0])
    left, right = edges[0] - room, edges[-1] + room
    ax.axvspan(left, threshold, color=REJECTED_COLOR, alpha=0.08, linewidth=0)
    ax.set_xlim(left, right)
    ax.set_ylim(0, max(1.0, float(np.max(counts))) * 1.08)  # the tallest bar below the frame's top
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("Answers")
    ax.grid(axis="y")
    return line


def plot_similarities(result: NRRResult, fname: str | os.PathLike | None = None, *, bins: int = 40,
                      title: str | None = None) -> Figure:
    """Histogram of the similarities with the threshold line (the first line of ``axes[0]``)
    and the rejected side shaded; NRR and counts in the legend, above the bars (never over one)."""
    ((sims, threshold),) = _systems({"": result}, None).values()
    with figures.style():
        figure = figures.new_figure(figures.WIDTH, 4.8)
        ax = figure.subplots()
        line = _histogram(ax, sims, threshold, _bins([sims], [threshold], bins), figures.PALETTE[0])
        ax.set_xlabel("Similarity to the reference (best reference per answer)")
        figures.legend(figure, [line], [line.get_label()], ax=ax)
        figure.suptitle(figures.label(title or "Negative rejection: similarity of each answer", 80))
    return figures.save_if_path(figure, fname, "--plot")


def plot_similarity_histograms(results: Mapping[str, Any], path: str | os.PathLike | None = None, *,
                               threshold: float | None = None, bins: int = 40, title: str | None = None,
                               option: str = "plot") -> Figure:
    """One histogram panel per system (shared similarity axis), each with its threshold line and
    NRR. ``results``: ``{name: NRRResult}`` or ``{name: similarities}`` with ``threshold``."""
    systems = _systems(results, threshold)
    edges = _bins([s for s, _t in systems.values()], [t for _s, t in systems.values()], bins)
    with figures.style():
        figure = figures.new_figure(figures.WIDTH, 1.2 + 2.2 * len(systems))
        grid, _key = figures.panels(figure, len(systems), 1, sharex=True, key=False)
        for (name, (sims, cut)), ax, colour in zip(systems.items(), grid[:, 0], figures.colors(len(systems))):
            _histogram(ax, sims, cut, edges, colour)
            # the system's name and its NRR above its panel, outside the bars
            ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), borderaxespad=0.2, title=figures.label(name, 60),
                      alignment="left")
        grid[-1, 0].set_xlabel("Similarity to the reference (best reference per answer)")
        figure.suptitle(figures.label(title or "Similarity of each answer, per system", 80))
    return figures.save_if_path(figure, path, option)


def plot_nrr_curve(results: Mapping[str, Any], path: str | os.PathLike | None = None, *,
                   threshold: float | None = None, thresholds: Any = None, title: str | None = None,
                   option: str = "--plot-curve") -> Figure:
    """NRR (% of answers below the threshold) as a function of the threshold, a curve per
    system, with the chosen threshold marked and each system's NRR there in the legend.
    ``thresholds``: the grid (default: 501 points over the similarities' range)."""
    from rapidscore.nrr.threshold import nrr_curve

    systems = _systems(results, threshold)
    cuts = sorted({t for _s, t in systems.values()})
    if thresholds is None:
        edges = _bins([s for s, _t in systems.values()], cuts, 1)
        pad = 0.02 * (edges[-1] - edges[0])
        thresholds = np.linspace(edges[0] - pad, edges[-1] + pad, 501)
    with figures.style():
        figure = figures.new_figure(figures.WIDTH, 5.0)
        ax = figure.subplots()
        for cut in cuts:
            ax.axvline(cut, color=figures.REFERENCE_COLOR, linestyle="--", linewidth=1.2)
        for (name, (sims, cut)), colour in zip(systems.items(), figures.colors(len(systems))):
            grid, rate = nrr_curve(sims, thresholds)
            at = float((sims < cut).mean())
            ax.plot(grid, 100 * rate, color=colour, drawstyle="steps-post",
                    label=figures.label(f"{name + ': ' if name else ''}NRR {at:.1%} at {cut:g}", 60))
            ax.plot([cut], [100 * at], marker="o", color=colour, linestyle="none")
        figures.percent_axis(ax, label_text="Negative rejection rate (%)")
        ax.set_xlim(float(np.min(thresholds)), float(np.max(thresholds)))
        ax.set_xlabel("Threshold (an answer is rejected when its similarity is below it)")
        ax.legend(loc="upper left")
        ax.set_title(figures.label(title or "NRR as a function of the threshold", 80))
    return figures.save_if_path(figure, path, option)
