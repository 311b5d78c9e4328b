"""One style for every figure rapidscore draws (BERTScore, NRR, SELECT, NER).

Figures are meant for a paper or a slide: at the default DPI (150) they are at least 1200 px wide
(:data:`MIN_WIDTH` inches), in DejaVu Sans (the font matplotlib ships, so the same pixels on every
machine), with a colour-blind-safe palette (Okabe-Ito), a diverging map centred at 0 for
correlations, and rates drawn on a 0-100 % axis with intervals bounded to it
(``common/intervals.py``).

Layout is computed, never hoped for: every figure uses matplotlib's constrained layout, and
:func:`fit` then measures the drawn text (the renderer's window extents) and grows the canvas until
no label, title or legend lies outside it. Nothing is left for matplotlib to warn about
(``tight_layout`` is never called).

Figures are created without pyplot (``matplotlib.figure.Figure`` on an Agg canvas): no global
backend switch, no figure kept alive by pyplot's registry (no "More than 20 figures" warning on a
large results tree). Every figure function returns its ``Figure``; :func:`save` writes it (PNG,
or SVG / PDF when the path ends so) through the output layer, :func:`to_svg` returns SVG text for
an HTML report.

The non-drawing helpers import numpy only: a CLI may use them for text output without the
[plot] extra.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import os
import textwrap
import warnings
from collections.abc import Iterator, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.axis import Axis
    from matplotlib.backend_bases import RendererBase
    from matplotlib.figure import Figure
    from matplotlib.transforms import Bbox

__all__ = ["save_if_path", "DPI", "WIDTH", "HEIGHT", "MIN_WIDTH", "PALETTE", "DIVERGING", "SEQUENTIAL", "STYLE",
           "matplotlib_modules", "style", "new_figure", "save", "to_svg", "fit", "text_boxes", "clipped_texts",
           "overlapping_texts", "label", "text_color", "integer_axis",
           "percent_axis", "panels", "legend", "legend_height", "colors"]

DPI = 150  # the default output resolution (PNG); vector formats ignore it
MIN_WIDTH = 8.0  # inches: 1200 px at DPI
WIDTH = 8.4  # inches: the default width (1260 px)
HEIGHT = 4.8
# Okabe & Ito (2008), colour-blind safe; black last (used for reference lines)
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#999999")
REFERENCE_COLOR = "#333333"
DIVERGING = "RdBu_r"  # correlations: blue negative, red positive, white at 0
SEQUENTIAL = "Blues"
FONT = "DejaVu Sans"

STYLE: dict[str, Any] = {
    "font.family": "sans-serif",
    "font.sans-serif": [FONT],
    "font.size": 11,
    "axes.titlesize": 12,
    "axes.titleweight": "bold",
    "axes.labelsize": 11,
    "xtick.labelsize": 10,
    "ytick.labelsize": 10,
    "legend.fontsize": 10,
    "legend.title_fontsize": 10,
    "legend.frameon": False,
    "figure.titlesize": 13,
    "figure.titleweight": "bold",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.axisbelow": True,
    "axes.grid": False,
    "grid.color": "#dddddd",
    "grid.linewidth": 0.8,
    "lines.linewidth": 1.8,
    "lines.markersize": 6,
    "figure.dpi": DPI,
    "savefig.dpi": DPI,
    "figure.facecolor": "white",
    "axes.facecolor": "white",
    "savefig.facecolor": "white",
    "savefig.bbox": None,  # the canvas is the figure: fit() sized it
    "figure.constrained_layout.use": True,
    "text.usetex": False,
    "axes.unicode_minus": True,
    "svg.fonttype": "path",  # the same glyphs in every browser
    "svg.hashsalt": "rapidscore",  # deterministic ids in SVG
    "pdf.fonttype": 42,  # TrueType in PDF (editable text, no Type 3 fonts)
    "ps.fonttype": 42,
    "image.interpolation": "nearest",
}

_METADATA = {"png": {"Software": None}, "svg": {"Date": None}, "pdf": {"CreationDate": None},
             "ps": {}, "eps": {}}


def matplotlib_modules() -> Any:
    """The ``matplotlib`` package, or ImportError naming the [plot] extra."""
    try:
        import matplotlib
    except ImportError as exc:  # pragma: no cover - environment dependent
        raise ImportError("figures need matplotlib: pip install 'rapidscore[plot]'") from exc
    return matplotlib


@contextlib.contextmanager
def style() -> Iterator[None]:
    """The rcParams of :data:`STYLE` for the figures drawn (and saved) inside."""
    matplotlib = matplotlib_modules()
    from cycler import cycler

    with matplotlib.rc_context({**STYLE, "axes.prop_cycle": cycler(color=list(PALETTE))}):
        yield


def new_figure(width: float = WIDTH, height: float = HEIGHT, *, pyplot: bool = False) -> Figure:
    """A constrained-layout figure at least :data:`MIN_WIDTH` inches wide, on an Agg canvas and
    outside pyplot's registry (``pyplot=True``: a pyplot figure, for ``plt.show()``). Call it
    inside :func:`style`."""
    matplotlib_modules()
    size = _whole_pixels(max(float(width), MIN_WIDTH), float(height))
    if pyplot:
        import matplotlib.pyplot as plt

        return plt.figure(figsize=size, dpi=DPI, layout="constrained")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=size, dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _whole_pixels(width: float, height: float, dpi: float = DPI) -> tuple[float, float]:
    """A size in inches that is a whole number of pixels at ``dpi`` (the PNG's size is then exact)."""
    return max(1, round(width * dpi)) / dpi, max(1, round(height * dpi)) / dpi


# ---- measuring the drawn text ---------------------------------------------------------------------

def _renderer(figure: Figure) -> RendererBase:
    canvas = figure.canvas
    if not hasattr(canvas, "get_renderer"):  # a canvas without a renderer of its own (base, vector)
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        canvas = FigureCanvasAgg(figure)
    return canvas.get_renderer()


def _draw(figure: Figure) -> RendererBase:
    """Draw ``figure`` once (the layout engine runs) and return the renderer it was drawn with."""
    renderer = _renderer(figure)
    figure.draw(renderer)
    return renderer


def _drawn_tick_labels(axis: Axis) -> list:
    """The tick labels an axis draws: visible, non-empty, and at a location in the view interval
    (the axis keeps Tick objects beyond it that are not drawn)."""
    low, high = sorted(axis.get_view_interval())
    span = max(abs(high - low), 1e-300)
    labels = []
    for locs, ticks in ((axis.get_majorticklocs(), axis.get_major_ticks()),
                        (axis.get_minorticklocs(), axis.get_minor_ticks())):
        for loc, tick in zip(locs, ticks):
            if not low - 1e-9 * span <= loc <= high + 1e-9 * span:
                continue
            for text in (tick.label1, tick.label2):
                if text.get_visible() and text.get_text():
                    labels.append(text)
    return labels


def _all_tick_labels(axis: Axis) -> list:
    return [text for tick in (*axis.get_major_ticks(), *axis.get_minor_ticks()) for text in (tick.label1, tick.label2)]


def _text_boxes(figure: Figure, renderer: RendererBase) -> list[tuple[str, Bbox, float]]:
    from matplotlib.text import Text

    ticks: set[int] = set()
    drawn: list[Text] = []
    for axes in figure.axes:
        for axis in (axes.xaxis, axes.yaxis):
            ticks.update(id(t) for t in _all_tick_labels(axis))
            if not axes.axison or not axis.get_visible():
                ticks.update({id(axis.label), id(axis.get_offset_text())})
                continue
            drawn.extend(_drawn_tick_labels(axis))
    # a legend is one box (its entries' handles are not text, and overlap as much)
    found = [*figure.legends, *(ax.get_legend() for ax in figure.axes)]
    legends = [item for item in found if item is not None and item.get_visible()]
    for item in legends:
        ticks.update(id(t) for t in (*item.get_texts(), item.get_title()))
    for text in figure.findobj(Text):
        if id(text) in ticks or not text.get_text().strip() or not text.get_visible():
            continue
        if text.axes is not None and not text.axes.get_visible():
            continue
        drawn.append(text)
    boxes = [(t.get_text(), t.get_window_extent(renderer), float(t.get_rotation())) for t in drawn]
    for item in legends:
        entries = ", ".join(t.get_text() for t in item.get_texts())
        boxes.append((f"legend [{entries}]", item.get_window_extent(renderer), 0.0))
    return boxes


def text_boxes(figure: Figure, renderer: RendererBase | None = None) -> list[tuple[str, Bbox]]:
    """``(text, window extent in pixels)`` of every text the figure draws: titles, axis and tick
    labels, annotations, legend entries, colour-bar labels. Draws the figure first when no
    ``renderer`` is given."""
    if renderer is None:
        renderer = _draw(figure)
    return [(text, box) for text, box, _rotation in _text_boxes(figure, renderer)]


def _canvas_size(figure: Figure) -> tuple[float, float]:
    width, height = figure.get_size_inches() * figure.dpi
    return float(width), float(height)


def clipped_texts(figure: Figure, renderer: RendererBase | None = None, tolerance: float = 0.5) -> list[str]:
    """The texts (with their box) that reach outside the canvas; empty for a figure that shows
    all its text."""
    width, height = _canvas_size(figure)
    return [f"{text!r} at x {box.x0:.1f}..{box.x1:.1f}, y {box.y0:.1f}..{box.y1:.1f} (canvas {width:.0f}x{height:.0f})"
            for text, box in text_boxes(figure, renderer)
            if box.x0 < -tolerance or box.y0 < -tolerance or box.x1 > width + tolerance
            or box.y1 > height + tolerance]


def overlapping_texts(figure: Figure, renderer: RendererBase | None = None, gap: float = 1.0) -> list[str]:
    """Pairs of drawn texts whose boxes overlap by more than ``gap`` pixels (a title over a
    legend, crowded tick labels): unreadable. Rotated texts are left out (their box is wider than
    their text)."""
    if renderer is None:
        renderer = _draw(figure)
    boxes = [(text, box) for text, box, rotation in _text_boxes(figure, renderer) if rotation % 90 == 0]
    found = []
    for i, (a, box_a) in enumerate(boxes):
        for b, box_b in boxes[i + 1:]:
            if (box_a.x0 < box_b.x1 - gap and box_b.x0 < box_a.x1 - gap
                    and box_a.y0 < box_b.y1 - gap and box_b.y0 < box_a.y1 - gap):
                found.append(f"{a!r} and {b!r}")
    return found


_COLLAPSED = "constrained_layout not applied"


def _draw_laid_out(figure: Figure, rounds: int = 4) -> RendererBase:
    """Draw ``figure``; where the constrained layout gives up (its decorations leave the axes no
    room: "constrained_layout not applied"), make the canvas larger and draw again instead of
    letting matplotlib warn. Any other warning goes on as raised."""
    for attempt in range(rounds + 1):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            renderer = _draw(figure)
        collapsed = [w for w in caught if _COLLAPSED in str(w.message)]
        for w in caught:
            if w not in collapsed:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        if not collapsed:
            return renderer
        if attempt == rounds:  # still no room: say so, as matplotlib would
            warnings.warn_explicit(collapsed[0].message, collapsed[0].category, collapsed[0].filename,
                                   collapsed[0].lineno)
            return renderer
        w, h = figure.get_size_inches()
        figure.set_size_inches(_whole_pixels(w * 1.25, h * 1.35, figure.dpi))
    return renderer


def fit(figure: Figure, rounds: int = 4, margin: float = 4.0) -> Figure:
    """Grow the canvas until every drawn text lies inside it (``margin`` pixels from each
    edge), letting the layout engine place the axes again after each step. The constrained
    layout already keeps axis labels and legends inside; this catches what it cannot (a title
    wider than the figure, a long legend)."""
    for _ in range(rounds):
        renderer = _draw_laid_out(figure)
        width, height = _canvas_size(figure)
        boxes = [box for _text, box in text_boxes(figure, renderer)]
        if not boxes:
            return figure
        left = max(0.0, margin - min(b.x0 for b in boxes))
        bottom = max(0.0, margin - min(b.y0 for b in boxes))
        right = max(0.0, max(b.x1 for b in boxes) - (width - margin))
        top = max(0.0, max(b.y1 for b in boxes) - (height - margin))
        if left + right + bottom + top < 0.5:
            return figure
        # centred texts (titles) overflow on both sides by the same amount: grow by both
        grow_x, grow_y = left + right, bottom + top
        w, h = figure.get_size_inches()
        figure.set_size_inches(_whole_pixels(w + (grow_x + 2 * margin * (grow_x > 0)) / figure.dpi,
                                             h + (grow_y + 2 * margin * (grow_y > 0)) / figure.dpi, figure.dpi))
    _draw_laid_out(figure)
    return figure


# ---- writing ------------------------------------------------------------------------------------------

def _format(path: str) -> str:
    extension = os.path.splitext(path)[1].lower().lstrip(".")
    return extension or "png"


def save(figure: Figure, path: str | os.PathLike, option: str = "plot", *, dpi: float | None = None) -> str:
    """Write ``figure`` at exactly ``path`` through the output layer (written beside the target,
    renamed when complete): PNG by default, SVG / PDF (vector) when the path ends in .svg / .pdf.
    The layout is fitted first (:func:`fit`); no date or software version in the file (the same
    figure gives the same bytes). A note says where it went (INFO on the ``rapidscore`` logger: a
    command prints it on stderr, as every figure option does). Returns ``path``."""
    from rapidscore.common.outputs import save_figure

    path = os.fspath(path)
    fmt = _format(path)
    with style():
        fit(figure)
        save_figure(figure, path, option, dpi=dpi or DPI, metadata=_METADATA.get(fmt, {}))
    logging.getLogger("rapidscore").info("wrote the figure %s", path)
    return path


def save_if_path(figure: Figure, path: str | os.PathLike | None, option: str = "plot") -> Figure:
    """``figure``, written at ``path`` first (:func:`save`) when a path is given: what a plotting
    function that takes an optional file name returns."""
    if path:
        save(figure, path, option)
    return figure


def to_svg(figure: Figure) -> str:
    """The figure as SVG text (for an HTML report's inline ``<svg>``), fitted and without a date."""
    buffer = io.BytesIO()
    with style():
        fit(figure)
        figure.savefig(buffer, format="svg", metadata=_METADATA["svg"])
    text = buffer.getvalue().decode("utf-8")
    start = text.find("<svg")  # inline SVG: no XML declaration or DOCTYPE
    return text[start:] if start > 0 else text


# ---- text and axes ----------------------------------------------------------------------------------

@lru_cache(maxsize=1)
def _font_charmap() -> frozenset[int]:
    matplotlib_modules()
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font

    path = font_manager.findfont(font_manager.FontProperties(family=FONT), fallback_to_default=True)
    return frozenset(FT2Font(path).get_charmap())


def label(text: Any, width: int | None = None) -> str:
    """``text`` ready to draw: characters the font lacks written as ``U+XXXX`` (matplotlib would
    warn and draw a box), ``$`` kept literal (not mathtext), wrapped to ``width`` characters."""
    value = str(text)
    charmap = _font_charmap()
    value = "".join(c if c in "\n\t" or ord(c) in charmap else f"U+{ord(c):04X}" for c in value)
    value = value.replace("\t", " ").replace("$", r"\$")
    if width and len(value) > width and "\n" not in value:
        value = "\n".join(textwrap.wrap(value, width, break_long_words=True, break_on_hyphens=True)) or value
    return value


def colors(n: int) -> list[Any]:
    """``n`` distinct colours: the palette (Okabe-Ito) up to eight, matplotlib's tab20 up to
    twenty (cycled beyond)."""
    if n <= len(PALETTE):
        return list(PALETTE[:n])
    import matplotlib

    table = matplotlib.colormaps["tab20"]
    return [table(i % 20) for i in range(n)]


def text_color(rgba: Any) -> str:
    """Black or white, whichever reads better on a cell of colour ``rgba`` (WCAG relative luminance)."""
    def channel(c: float) -> float:
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(float(c)) for c in rgba[:3])
    luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b
    return "black" if luminance > 0.179 else "white"


def integer_axis(axis: Axis, values: Sequence[int] | None = None) -> None:
    """Ticks at integers only (a depth, a count); at exactly ``values`` when there are few."""
    from matplotlib.ticker import FixedLocator, MaxNLocator

    if values is not None and 0 < len(values) <= 12:
        axis.set_major_locator(FixedLocator(sorted({int(v) for v in values})))
    else:
        axis.set_major_locator(MaxNLocator(integer=True))


def percent_axis(ax: Axes, which: str = "y", label_text: str = "%") -> None:
    """A 0-100 % axis (rates), with a light grid."""
    from matplotlib.ticker import MultipleLocator

    if which == "y":
        ax.set_ylim(0, 100)
        ax.yaxis.set_major_locator(MultipleLocator(20))
        ax.set_ylabel(label_text)
        ax.grid(axis="y")
    else:
        ax.set_xlim(0, 100)
        ax.xaxis.set_major_locator(MultipleLocator(20))
        ax.set_xlabel(label_text)
        ax.grid(axis="x")


def panels(figure: Figure, rows: int, columns: int, *, sharex: bool = False, sharey: bool = False,
           key: bool = True) -> tuple[Any, Axes | None]:
    """A grid of axes (an object array ``rows x columns``) and, with ``key``, a row above them for
    the legend (an axes without axis lines, spanning every column: the constrained layout sizes
    it to the legend, between the suptitle and the panels). Shared axes show their tick labels
    on the outer panels only."""
    import numpy as np

    grid = figure.add_gridspec(rows + int(key), columns, height_ratios=[0.001] * int(key) + [1.0] * rows)
    legend_axes = None
    if key:
        legend_axes = figure.add_subplot(grid[0, :])
        legend_axes.set_axis_off()
    axes = np.empty((rows, columns), dtype=object)
    for i in range(rows):
        for j in range(columns):
            axes[i, j] = figure.add_subplot(grid[int(key) + i, j], sharex=axes[0, 0] if sharex and (i or j) else None,
                                            sharey=axes[0, 0] if sharey and (i or j) else None)
            if sharex and i < rows - 1:
                axes[i, j].tick_params(labelbottom=False)
            if sharey and j > 0:
                axes[i, j].tick_params(labelleft=False)
    return axes, legend_axes


def legend_height(labels: Sequence[str], width: float) -> float:
    """Inches a :func:`legend` of these labels takes in a figure ``width`` inches wide (its rows and
    title): for sizing the figure before drawing."""
    columns = _legend_columns(labels, width)
    lines = max((str(text).count("\n") + 1 for text in labels), default=1)
    return 0.35 + math.ceil(len(labels) / columns) * 0.24 * lines


def _legend_columns(labels: Sequence[str], width: float) -> int:
    # an entry: its text (about 0.085 in per character at 10 pt) plus the marker and the gap
    entry = max((len(line) for text in labels for line in str(text).split("\n")), default=1) * 0.085 + 0.8
    fits = max(1, int((width - 0.6) // entry))
    return max(1, min(len(labels), fits, 6))


def legend(figure: Figure, handles: Sequence[Any], labels: Sequence[str], *, title: str | None = None,
           ax: Axes | None = None) -> Any:
    """One legend for the figure in the key row of :func:`panels` (``ax``), or above ``ax`` (default:
    the first axes) outside it, in as many columns as the figure's width holds; the
    constrained layout makes room for it either way."""
    target = ax if ax is not None else figure.axes[0]
    columns = _legend_columns(labels, float(figure.get_size_inches()[0]))
    if not target.axison:  # a key row
        return target.legend(handles, labels, loc="center", ncol=columns, title=title, borderaxespad=0.0)
    return target.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, 1.02), ncol=columns,
                         title=title, borderaxespad=0.0)
