"""The report's figures, as inline SVG: the one place the report calls the figure functions of
the metric packages (:mod:`rapidscore.bertscore.plot`, :mod:`rapidscore.nrr.plot`,
:mod:`rapidscore.ner.plot`, :mod:`rapidscore.abstention.plots`; each returns a matplotlib Figure)
and :func:`rapidscore.common.figures.to_svg`.

They are imported when a figure is drawn, never at import: ``rapidscore report --help`` and a
report without figures load no matplotlib. matplotlib missing (the ``[plot]`` extra), or a figure
function this build lacks, is :class:`FiguresUnavailable`: the page then says so instead of
drawing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from importlib import import_module
from types import SimpleNamespace
from typing import Any

from rapidscore.errors import FiguresUnavailable

__all__ = ["FiguresUnavailable", "bertscore_figure", "nrr_figure", "ner_figure",
           "select_figure", "interval_figure", "readable_token", "scoped_svg"]


def _function(module_name: str, name: str, drawing: bool = True) -> Callable:
    """``module.name``, imported now (``drawing``: matplotlib must be there too);
    FiguresUnavailable naming what is missing."""
    if drawing:
        try:
            import matplotlib  # noqa: F401
        except ImportError as exc:
            raise FiguresUnavailable("the figures need matplotlib: pip install 'rapidscore[plot]'") from exc
    try:
        module = import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise FiguresUnavailable(f"this build has no {module_name}") from exc
        raise
    found = getattr(module, name, None)
    if not callable(found):
        raise FiguresUnavailable(f"this build has no {module_name}.{name}")
    return found


_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.DOTALL)


def _svg(figure: Any) -> str:
    """The figure's SVG, less its RDF ``<metadata>`` block (nothing a page shows)."""
    return _METADATA.sub("", _function("rapidscore.common.figures", "to_svg")(figure), count=1)


_ID = re.compile(r'\bid="([^"]+)"')


def scoped_svg(svg: str, prefix: str) -> str:
    """``svg`` with its element ids (and the references to them) prefixed, so that several
    figures inlined in one page never share an id."""
    ids = set(_ID.findall(svg))
    if not ids:
        return svg

    def rename(match: re.Match) -> str:
        lead, name = match.group(1), match.group(2)
        return f"{lead}{prefix}-{name}" if name in ids else match.group(0)

    return re.sub(r'(\bid="|#)([A-Za-z_][\w.\-]*)', rename, svg)


def readable_token(token: str) -> str:
    """A token as a reader knows it (BPE's and SentencePiece's word-start marks dropped;
    ``bertscore.plot.readable_token``), the token itself where this build lacks that function."""
    try:
        return _function("rapidscore.bertscore.plot", "readable_token", drawing=False)(token)
    except FiguresUnavailable:
        return token


# -- the figures ----------------------------------------------------------------------------------

def bertscore_figure(systems: Sequence[tuple[str, Sequence[float]]]) -> str:
    """The distribution of per-item F1 of each system (``(name, f1s)``), mean marked."""
    return _svg(_function("rapidscore.bertscore.plot", "plot_systems")(dict(systems)))


def nrr_figure(name: str, similarities: Sequence[float], threshold: float, rate: float) -> str:
    """The histogram of one system's similarities with the threshold line."""
    result = SimpleNamespace(name=name, similarities=list(similarities), threshold=threshold, rate=rate)
    return _svg(_function("rapidscore.nrr.plot", "plot_similarities")(
        result, title=f"{name}: similarity of each answer to its best reference"))


def ner_figure(models: Sequence[tuple[str, dict]]) -> str:
    """DMBertA and the SemEval F1 of each scheme per model (``(name, ner --json document)``)."""
    return _svg(_function("rapidscore.ner.plot", "plot_models")(dict(models)))


def select_figure(rows: Sequence[dict], title: str) -> str:
    """Abstention, generalization and specificity per model and technique, from the rows of
    ``rapidscore abstention --json`` (fractions, Student-t half-widths, concepts)."""
    plot = _function("rapidscore.abstention.plots", "plot_rates")
    if not any(row.get("metric") in ("abstention", "generalization", "specificity") for row in rows):
        raise FiguresUnavailable(f"{title}: no abstention, generalization or specificity rows to draw")
    from rapidscore.abstention.names import Names
    from rapidscore.abstention.rates import Aggregate

    summary: dict[tuple, dict] = {}
    mapping: dict[str, str] = {}
    for row in rows:
        mean, half_width = row.get("mean"), row.get("half_width")
        summary.setdefault((row["model"], row["technique"]), {})[row["metric"]] = Aggregate(
            float("nan") if mean is None else float(mean), float("nan") if half_width is None else float(half_width),
            int(row.get("n_concepts") or 0))
        mapping.update({row["model"]: row.get("model_name") or row["model"],
                        row["technique"]: row.get("technique_name") or row["technique"]})
    return _svg(plot(summary, names=Names(mapping), title=title))


def interval_figure(result: Any, label: str) -> str:
    """Each system's value with its bootstrap interval as an error bar (a ``Comparison``), the
    baseline's value as a dashed line."""
    _function("rapidscore.common.figures", "new_figure")  # matplotlib there, or FiguresUnavailable
    from rapidscore.common.figures import new_figure, style

    names = [system.name for system in result.systems]
    means = [system.mean for system in result.systems]
    below = [system.mean - system.low for system in result.systems]
    above = [system.high - system.mean for system in result.systems]
    with style():
        figure = new_figure(height=max(1.6, 0.45 * len(names) + 1.0))
        axes = figure.add_subplot()
        positions = list(range(len(names)))[::-1]  # the baseline on top
        axes.errorbar(means, positions, xerr=[below, above], fmt="o", capsize=4)
        axes.axvline(means[0], linestyle="--", linewidth=0.8, color="0.5")
        axes.set_yticks(positions, names)
        axes.set_xlabel(f"{label} ({100 * result.confidence:g}% bootstrap interval)")
        return _svg(figure)
