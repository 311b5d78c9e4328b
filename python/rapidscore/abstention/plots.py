"""Plots (requires the ``[plot]`` extra: matplotlib)."""

from __future__ import annotations

import numpy as np

from rapidscore.common.outputs import save_figure


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - environment dependent
        raise ImportError("plots need matplotlib: pip install 'rapidscore[plot]'") from exc
    return plt


def plot_levels(levels, model: str, path: str) -> str:
    """Per-level trends: one panel per metric, one line per technique (mean with 95% band)."""
    plt = _pyplot()
    metrics = sorted({e for (m, _t, e) in levels if m == model})
    fig, axes = plt.subplots(1, max(1, len(metrics)), figsize=(4 * max(1, len(metrics)), 3.2), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        for (m, technique, e), by_depth in sorted(levels.items()):
            if m != model or e != metric or not by_depth:
                continue
            depths = sorted(by_depth)
            means = np.array([by_depth[d].mean for d in depths]) * 100
            hws = np.nan_to_num(np.array([by_depth[d].half_width for d in depths]) * 100)
            ax.plot(depths, means, marker="o", label=technique)
            ax.fill_between(depths, means - hws, means + hws, alpha=0.15)
        ax.set_title(metric)
        ax.set_xlabel("taxonomy depth")
        ax.set_ylabel("%")
    axes[0][0].legend(fontsize="small")
    fig.tight_layout()
    save_figure(fig, path, "--plot-dir")
    plt.close(fig)
    return path


def plot_correlations(techniques, matrix, title: str, path: str) -> str:
    """Heatmap of Spearman correlations between techniques."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(1.2 + 0.8 * len(techniques), 1 + 0.7 * len(techniques)))
    image = ax.imshow(matrix, vmin=-1, vmax=1, cmap="coolwarm")
    ax.set_xticks(range(len(techniques)), techniques, rotation=45, ha="right")
    ax.set_yticks(range(len(techniques)), techniques)
    for i in range(len(techniques)):
        for j in range(len(techniques)):
            if not np.isnan(matrix[i, j]):
                ax.text(j, i, f"{matrix[i, j]:.2f}", ha="center", va="center", fontsize=8)
    ax.set_title(title)
    fig.colorbar(image, ax=ax)
    fig.tight_layout()
    save_figure(fig, path, "--plot-dir")
    plt.close(fig)
    return path
