"""SELECT's figures (requires the ``[plot]`` extra: matplotlib), in the style of
:mod:`rapidscore.common.figures`:

- :func:`plot_rates`: abstention, generalization and specificity per model and technique
  (grouped bars, 95% Wilson intervals over concepts);
- :func:`plot_levels`: one model's rates by taxonomy depth (integer depth axis, Wilson intervals);
- :func:`plot_correlations`: Spearman correlations between techniques (annotated heatmap, a
  diverging map centred at 0).

Rates are means over concepts (each concept's rate a mean over seeds, as in SELECT's tables); the
interval drawn is the Wilson score interval of that mean with n = the number of concepts, which
stays inside [0, 100] % (the tables' Student-t half-width does not, for few concepts). Each
function returns the matplotlib ``Figure`` and writes it to ``path`` when given (PNG, or SVG /
PDF by the extension).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from rapidscore.common import figures
from rapidscore.common.intervals import wilson_interval

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["RATE_METRICS", "rate_interval", "plot_rates", "plot_summary_rows", "plot_levels", "plot_correlations"]

RATE_METRICS = ("abstention", "generalization", "specificity")
_AXIS_LABELS = {"abstention": "Abstention rate (%)", "generalization": "Generalization rate (%)",
                "specificity": "Specificity (%)"}
MAX_WIDTH = 24.0  # inches (3600 px): a wider figure is no longer a figure
_NOTE = "Bars and points: mean over concepts; whiskers: 95% Wilson score interval (n = concepts)"


def rate_interval(aggregate: Any) -> tuple[float, float, float]:
    """``(mean, low, high)`` in percent of a per-concept aggregate (``rates.Aggregate``: ``mean``
    in [0, 1] over ``n`` concepts): the Wilson score interval with n = concepts; NaNs for n = 0."""
    n = int(aggregate.n)
    if n == 0 or math.isnan(aggregate.mean):
        return float("nan"), float("nan"), float("nan")
    mean = min(max(float(aggregate.mean), 0.0), 1.0)
    low, high = wilson_interval(mean * n, n)
    return 100 * mean, 100 * low, 100 * high


def _names(names: Any) -> Any:
    if names is None:
        from rapidscore.abstention.names import Names

        return Names()
    return names


def _metric_order(metrics: Sequence[str]) -> list[str]:
    known = [m for m in RATE_METRICS if m in metrics]
    return known + sorted(m for m in metrics if m not in RATE_METRICS)


def plot_rates(summary: Mapping[tuple, Mapping[str, Any]], path: str | os.PathLike | None = None, *,
               names: Any = None, metrics: Sequence[str] = RATE_METRICS, title: str | None = None,
               option: str = "--plot-dir") -> Figure:
    """Grouped bars: one panel per metric, models along the x axis, one bar per technique, with
    95% Wilson intervals. ``summary``: ``{(model, technique): {metric: Aggregate}}``
    (``rates.summarize_scores``); ``names``: ``rapidscore.abstention.names.Names`` (default: derived display names)."""
    names = _names(names)
    metrics = _metric_order([m for m in metrics if any(m in cell for cell in summary.values())])
    if not metrics:
        raise ValueError(f"nothing to plot: no {', '.join(RATE_METRICS)} in the summary")
    models = sorted({m for m, _t in summary}, key=lambda m: names.model(m).lower())
    techniques = sorted({t for _m, t in summary}, key=lambda t: names.technique(t).lower())
    group = max(1.1, 0.17 * len(techniques) + 0.3)  # inches per model: 10 models x 8 techniques in 19 in
    group = min(group, max(0.7, (MAX_WIDTH - 1.6) / len(models)))  # very many: thinner bars, not a wider figure
    width = 1.6 + group * len(models)
    key_labels = [figures.label(names.technique(t), 24) for t in techniques]
    with figures.style():
        figure = figures.new_figure(width, 1.0 + 2.5 * len(metrics) + figures.legend_height(key_labels, width))
        grid, key = figures.panels(figure, len(metrics), 1, sharex=True)
        axes = grid[:, 0]
        colours = figures.colors(len(techniques))
        bar = 0.8 / len(techniques)
        handles = []
        for ax, metric in zip(axes, metrics):
            for j, technique in enumerate(techniques):
                xs, heights, below, above = [], [], [], []
                for i, model in enumerate(models):
                    aggregate = summary.get((model, technique), {}).get(metric)
                    if aggregate is None:
                        continue
                    mean, low, high = rate_interval(aggregate)
                    if math.isnan(mean):
                        continue
                    xs.append(i - 0.4 + bar * (j + 0.5))
                    heights.append(mean)
                    below.append(mean - low)
                    above.append(high - mean)
                bars = ax.bar(xs, heights, bar * 0.92, color=colours[j], label=names.technique(technique),
                              yerr=[below, above], error_kw={"elinewidth": 1.0, "capsize": 2.5,
                                                             "ecolor": figures.REFERENCE_COLOR})
                if ax is axes[0]:
                    handles.append(bars)
            figures.percent_axis(ax, label_text=figures.label(_AXIS_LABELS.get(metric, f"{metric} (%)")))
            ax.set_xlim(-0.6, len(models) - 0.4)
        chars = max(8, int((max(width, figures.MIN_WIDTH) - 1.6) / len(models) * 10))  # per model's share
        axes[-1].set_xticks(range(len(models)), [figures.label(names.model(m), chars) for m in models])
        axes[-1].set_xlabel("Model")
        figures.legend(figure, handles, key_labels, title="Technique", ax=key)
        figure.suptitle(figures.label(title or "Abstention, generalization and specificity by model and technique"))
        figure.supxlabel(_NOTE, fontsize=9, color="#555555")
    return figures.save_if_path(figure, path, option)


def plot_summary_rows(rows: Sequence[Mapping[str, Any]], path: str | os.PathLike | None = None, *,
                      title: str | None = None, option: str = "plot") -> Figure:
    """:func:`plot_rates` from the rows of the JSON / CSV report (``rapidscore abstention --json``:
    ``model``, ``technique``, ``metric``, ``mean``, ``n_concepts``; ``model_name`` /
    ``technique_name`` as shown, when present). One experiment's rows."""
    from rapidscore.abstention.names import Names
    from rapidscore.abstention.rates import Aggregate

    experiments = {row.get("experiment") for row in rows}
    if len(experiments) > 1:
        raise ValueError(f"rows of {len(experiments)} experiments: plot one experiment's rows at a time")
    summary: dict = {}
    shown: dict = {}
    for row in rows:
        mean = row.get("mean")
        aggregate = Aggregate(float("nan") if mean is None else float(mean),
                              float("nan") if row.get("half_width") is None else float(row["half_width"]),
                              int(row.get("n_concepts") or 0))
        summary.setdefault((row["model"], row["technique"]), {})[row["metric"]] = aggregate
        for key, name_key in (("model", "model_name"), ("technique", "technique_name")):
            if row.get(name_key):
                shown[row[key]] = row[name_key]
    return plot_rates(summary, path, names=Names(shown), title=title, option=option)


def plot_levels(levels: Mapping[tuple, Mapping[int, Any]], model: str, path: str | os.PathLike | None = None, *,
                names: Any = None, title: str | None = None, option: str = "--plot-dir") -> Figure:
    """One model's rates by taxonomy depth: a panel per metric, a line per technique, 95% Wilson
    intervals, an integer depth axis. ``levels``: ``{(model, technique, eval_type): {depth:
    Aggregate}}`` (``rates.by_level_scores``)."""
    names = _names(names)
    metrics = _metric_order(sorted({e for (m, _t, e), by_depth in levels.items() if m == model and by_depth}))
    if not metrics:
        raise ValueError(f"nothing to plot: no levels for model {model!r}")
    techniques = sorted({t for (m, t, _e) in levels if m == model}, key=lambda t: names.technique(t).lower())
    colours = dict(zip(techniques, figures.colors(len(techniques))))
    dodge = 0.0 if len(techniques) < 2 else min(0.3, 0.6 / len(techniques))
    width = 1.5 + 3.4 * len(metrics) + 1.8
    key_labels = [figures.label(names.technique(t), 24) for t in techniques]
    with figures.style():
        figure = figures.new_figure(width, 3.6 + figures.legend_height(key_labels, width))
        grid, key = figures.panels(figure, 1, len(metrics), sharey=True)
        axes = grid[0]
        handles, labels = [], []
        for ax, metric in zip(axes, metrics):
            depths_seen: dict[int, set[int]] = {}
            for j, technique in enumerate(techniques):
                by_depth = levels.get((model, technique, metric)) or {}
                if not by_depth:
                    continue
                depths = sorted(by_depth)
                values = np.array([rate_interval(by_depth[d]) for d in depths])
                offset = (j - (len(techniques) - 1) / 2) * dodge
                line = ax.errorbar(np.array(depths, dtype=float) + offset, values[:, 0],
                                   yerr=[values[:, 0] - values[:, 1], values[:, 2] - values[:, 0]],
                                   color=colours[technique], marker="o", capsize=3, elinewidth=1.0,
                                   label=names.technique(technique))
                if names.technique(technique) not in labels:
                    handles.append(line)
                    labels.append(names.technique(technique))
                for d in depths:
                    depths_seen.setdefault(int(d), set()).add(int(by_depth[d].n))
            ticks = sorted(depths_seen)
            figures.integer_axis(ax.xaxis, ticks)
            if ticks and len(ticks) <= 12:
                # the number of concepts under each depth, when every technique has the same
                ax.set_xticks(ticks, [f"{d}\nn={next(iter(depths_seen[d]))}" if len(depths_seen[d]) == 1 else str(d)
                                      for d in ticks])
                ax.set_xlim(ticks[0] - 0.5, ticks[-1] + 0.5)
            ax.set_xlabel("Taxonomy depth (0 = top level)")
            ax.set_title(figures.label(metric.capitalize()), loc="left")
            figures.percent_axis(ax, label_text="Rate (%)" if ax is axes[0] else "")
            if ax is not axes[0]:
                ax.set_ylabel("")
        figures.legend(figure, handles, [figures.label(t, 24) for t in labels], title="Technique", ax=key)
        figure.suptitle(figures.label(title or f"{names.model(model)}: rates by taxonomy depth"))
        figure.supxlabel("Points: mean over the concepts at that depth (n); whiskers: 95% Wilson score interval",
                         fontsize=9, color="#555555")
    return figures.save_if_path(figure, path, option)


def plot_correlations(techniques: Sequence[str], matrix: Any, title: str = "",
                      path: str | os.PathLike | None = None, *, names: Any = None,
                      option: str = "--plot-dir") -> Figure:
    """Heatmap of Spearman correlations between techniques (``rates.technique_correlations``):
    every cell annotated, a diverging colour map centred at 0 (-1 blue, +1 red), "n/a" where a
    correlation is undefined (a constant technique)."""
    names = _names(names)
    matrix = np.asarray(matrix, dtype=np.float64)
    n = len(techniques)
    if matrix.shape != (n, n):
        raise ValueError(f"matrix must be {n}x{n} for {n} techniques, got shape {matrix.shape}")
    shown = [figures.label(names.technique(t), 18) for t in techniques]
    lines = max(text.count("\n") + 1 for text in shown) if shown else 1
    # a row holds its label's lines (10 pt, 1.2 line spacing)
    cell = max(0.75 if n <= 10 else max(0.4, 7.5 / n), 0.17 * lines + 0.06)
    with figures.style():
        import matplotlib

        figure = figures.new_figure(max(figures.WIDTH, cell * n + 4.5), cell * n + 3.0)
        ax = figure.subplots()
        cmap = matplotlib.colormaps[figures.DIVERGING].with_extremes(bad="#eeeeee")
        image = ax.imshow(np.ma.masked_invalid(matrix), cmap=cmap, vmin=-1.0, vmax=1.0, aspect="auto")
        ax.set_xticks(range(n), shown, rotation=45, ha="right", rotation_mode="anchor")
        ax.set_yticks(range(n), shown)
        ax.spines[:].set_visible(False)
        ax.tick_params(length=0)
        size = 10 if n <= 8 else max(6, 10 - (n - 8) // 2)
        for i in range(n):
            for j in range(n):
                value = matrix[i, j]
                if math.isnan(value):
                    ax.text(j, i, "n/a", ha="center", va="center", fontsize=size, color="#555555")
                else:
                    colour = figures.text_color(cmap(image.norm(value)))
                    ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=size, color=colour)
        bar = figure.colorbar(image, ax=ax, shrink=0.85)
        bar.set_label("Spearman correlation")
        ax.set_title(figures.label(title or "Correlation between techniques", 60))
    return figures.save_if_path(figure, path, option)
