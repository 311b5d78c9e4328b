"""Histogram of NRR similarities with the threshold line."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from rapidscore.common.outputs import save_figure

if TYPE_CHECKING:  # annotation only: plotting needs no numpy import of its own
    from matplotlib.figure import Figure

    from rapidscore.nrr.scoring import NRRResult

__all__ = ["plot_similarities"]


def plot_similarities(result: NRRResult, fname: str | os.PathLike | None = None) -> Figure:
    """Histogram of the similarities with the threshold line (needs matplotlib: rapidscore[plot])."""
    try:
        import matplotlib

        if fname:
            matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError("plotting needs matplotlib: pip install 'rapidscore[plot]'") from exc
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.hist(result.similarities, bins=40, color="#4c72b0", alpha=0.85)
    ax.axvline(result.threshold, color="#c44e52", linestyle="--",
               label=f"threshold {result.threshold:g}: NRR {result.rate:.1%}")
    ax.set_xlabel("similarity to the reference")
    ax.set_ylabel("items")
    ax.legend()
    fig.tight_layout()
    if fname:
        save_figure(fig, fname, "plot", dpi=100)
    return fig
