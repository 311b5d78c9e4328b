"""NER figures (need matplotlib: rapidscore[plot]), in the style of :mod:`rapidscore.common.figures`:

- :func:`plot_ner_scores` (``rapidscore ner --plot FILE``): per model, DMBertA
  (mean record score, micro P, R, F1) and the F1 of each SemEval scheme (strict, exact, partial,
  type), grouped bars;
- :func:`plot_ner_by_type` (``--plot-by-type FILE``): per entity type, each SemEval scheme's F1 and
  DMBertA's recall (credit over the type's gold entities), a bar per model.

Input: a ``Comparison`` (``ner.compare``), a ``NerResult`` (``ner.evaluate``), or their JSON
dicts (``rapidscore ner --json``: ``{model: result}``; one result's ``to_dict()``). Each function
returns the matplotlib ``Figure`` and writes it when given a path (PNG, or SVG / PDF by the
extension).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from rapidscore.common import figures

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["SCHEMES", "ner_documents", "plot_ner_scores", "plot_ner_by_type", "plot_models"]

SCHEMES = ("strict", "exact", "partial", "type")
_HEADLINE = (("DMBertA mean", ("dmberta", "mean")), ("DMBertA P", ("dmberta", "precision")),
             ("DMBertA R", ("dmberta", "recall")), ("DMBertA F1", ("dmberta", "f1")),
             *((f"{scheme.capitalize()} F1", ("semeval", scheme, "f1")) for scheme in SCHEMES))


def ner_documents(results: Any) -> dict[str, dict]:
    """``{model: result document}`` (the keys of ``NerResult.to_dict``) from a Comparison, a
    NerResult, ``{model: NerResult or its dict}`` or one result's dict."""
    if hasattr(results, "dmberta") and hasattr(results, "semeval"):  # one NerResult
        results = {getattr(results, "name", "") or "model": results}
    elif isinstance(results, Mapping) and "dmberta" in results:  # one result's dict
        results = {"model": results}
    if not isinstance(results, Mapping) or not results:
        raise ValueError("give NER results: a Comparison, a NerResult or {model: result}")
    documents = {}
    for name, value in results.items():
        if hasattr(value, "dmberta"):
            value = {"dmberta": value.dmberta, "semeval": value.semeval,
                     "semeval_by_type": getattr(value, "semeval_by_type", {}), "per_label": value.per_label}
        if not isinstance(value, Mapping) or "dmberta" not in value or "semeval" not in value:
            raise ValueError(f"{name}: not an NER result (a NerResult or its to_dict())")
        documents[str(name)] = dict(value)
    return documents


def _get(document: Mapping, path: Sequence[str]) -> float:
    value: Any = document
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return float("nan")
        value = value[key]
    return float("nan") if value is None else float(value)


def _bars(ax: Any, groups: int, values: np.ndarray, colours: Sequence[str], labels: Sequence[str],
          horizontal: bool = False, annotate: bool = False) -> list:
    """values: (series, groups); one bar per series in each group; NaN bars left out."""
    series = values.shape[0]
    size = 0.8 / series
    handles = []
    for k in range(series):
        if horizontal:  # the first group at the top, the first series at the top of its group
            positions = (groups - 1 - np.arange(groups)) + 0.4 - size * (k + 0.5)
        else:
            positions = np.arange(groups) - 0.4 + size * (k + 0.5)
        keep = ~np.isnan(values[k])
        if horizontal:
            bars = ax.barh(positions[keep], values[k][keep], size * 0.92, color=colours[k], label=labels[k])
        else:
            bars = ax.bar(positions[keep], values[k][keep], size * 0.92, color=colours[k], label=labels[k])
        if annotate:
            ax.bar_label(bars, fmt="%.2f", padding=2, fontsize=8)
        handles.append(bars)
    return handles


def plot_ner_scores(results: Any, path: str | os.PathLike | None = None, *, title: str | None = None,
                    option: str = "plot") -> Figure:
    """Grouped bars: the headline scores (DMBertA mean, P, R, F1; strict, exact, partial and type
    F1) along the x axis, a bar per model (best DMBertA mean first), values on the bars when there
    are few."""
    documents = ner_documents(results)
    models = sorted(documents, key=lambda m: (-_get(documents[m], ("dmberta", "mean")), m))
    values = np.array([[_get(documents[m], path_) for _label, path_ in _HEADLINE] for m in models])
    groups = len(_HEADLINE)
    with figures.style():
        figure = figures.new_figure(max(figures.WIDTH, 1.5 + groups * (0.25 * len(models) + 0.45)), 5.2)
        grid, key = figures.panels(figure, 1, 1)
        ax = grid[0, 0]
        handles = _bars(ax, groups, values, figures.colors(len(models)), models,
                        annotate=len(models) * groups <= 24)
        ax.axvline(3.5, color="#bbbbbb", linewidth=1.0)
        ax.set_xticks(range(groups), [figures.label(label, 12) for label, _path in _HEADLINE])
        ax.set_xlim(-0.6, groups - 0.4)
        ax.set_ylim(0, 1.08)
        ax.set_yticks(np.linspace(0, 1, 6))
        ax.set_ylabel("Score")
        ax.grid(axis="y")
        figures.legend(figure, handles, [figures.label(m, 30) for m in models], title="Model", ax=key)
        figure.suptitle(figures.label(title or "NER: DMBertA and the SemEval-2013 schemes", 90))
        figure.supxlabel("DMBertA: mean record score, micro precision, recall and F1; SemEval: F1 of each scheme",
                         fontsize=9, color="#555555")
    return figures.save_if_path(figure, path, option)


def _types(documents: Mapping[str, Mapping], types: Sequence[str] | None) -> list[tuple[str, int]]:
    """``(type, gold entities)``: the types given, else every type with gold entities, most first."""
    gold: dict[str, int] = {}
    for document in documents.values():
        for name, schemes in (document.get("semeval_by_type") or {}).items():
            possible = int(_get(schemes, ("strict", "possible")) if "strict" in schemes else 0)
            gold[name] = max(gold.get(name, 0), possible)
        for name, entry in ((document.get("per_label") or {}).get("gold") or {}).items():
            gold[name] = max(gold.get(name, 0), int(entry.get("n", 0)))
    if types is not None:
        return [(t, gold.get(t, 0)) for t in types]
    return sorted(((t, n) for t, n in gold.items() if n > 0), key=lambda item: (-item[1], item[0]))


def plot_ner_by_type(results: Any, path: str | os.PathLike | None = None, *, types: Sequence[str] | None = None,
                     schemes: Sequence[str] = SCHEMES, title: str | None = None,
                     option: str = "plot") -> Figure:
    """Per entity type (rows, with its number of gold entities): a panel per SemEval scheme's F1
    and one of DMBertA recall by gold type, a bar per model. ``types``: the types to show
    (default: every type with gold entities, most frequent first)."""
    documents = ner_documents(results)
    models = sorted(documents, key=lambda m: (-_get(documents[m], ("dmberta", "mean")), m))
    shown_types = _types(documents, types)
    if not shown_types:
        raise ValueError("no entity types with gold entities (semeval_by_type / per_label are empty)")
    panels = [(f"{scheme.capitalize()} F1", ("semeval_by_type", "{type}", scheme, "f1")) for scheme in schemes]
    panels.append(("DMBertA recall", ("per_label", "gold", "{type}", "recall")))
    unpredicted = _unpredicted(documents, models, [t for t, _n in shown_types])
    labels = [figures.label(f"{t} (n={n})", 26) for t, n in shown_types]
    label_width = 0.4 + 0.085 * max(len(line) for text in labels for line in text.split("\n"))
    rows = len(shown_types)
    with figures.style():
        from matplotlib.patches import Patch

        per_bar = 0.18 if rows * len(models) <= 30 else 0.12
        figure = figures.new_figure(label_width + 2.4 * len(panels), 1.9 + rows * (per_bar * len(models) + 0.2))
        grid, key = figures.panels(figure, 1, len(panels), sharey=True)
        colours = figures.colors(len(models))
        for ax, (name, path_) in zip(grid[0], panels):
            values = np.array([[_get(documents[m], [p.replace("{type}", t) for p in path_]) for t, _n in shown_types]
                               for m in models])
            semeval = path_[0] == "semeval_by_type"
            if semeval:  # no bar (and no "0.00") where the model predicted nothing of the type: said in words
                values[unpredicted] = np.nan
            # values on the bars when there are few (a 0 is then told from a type without a score)
            _bars(ax, rows, values, colours, models, horizontal=True, annotate=rows * len(models) <= 40)
            ax.set_xlim(0, 1.22)
            ax.set_xticks([0, 0.5, 1.0], ["0", "0.5", "1"])
            ax.set_title(figures.label(name, 20), loc="left")
            ax.grid(axis="x")
            ax.set_ylim(-0.6, rows - 0.4)
            for k in range(len(models)):  # "n/a" where a model has no score for the type
                for r in range(rows):
                    if math.isnan(values[k, r]):
                        y = rows - 1 - r + 0.4 - 0.8 / len(models) * (k + 0.5)
                        shown = "none predicted" if semeval and unpredicted[k, r] else "n/a"
                        ax.text(0.02, y, shown, va="center", fontsize=8, color="#777777")
        grid[0, 0].set_yticks(range(rows)[::-1], labels)
        grid[0, 0].tick_params(axis="y", length=0)
        # a patch per model: a model without a bar in the first panel still has its colour in the key
        handles = [Patch(facecolor=colour) for colour in colours]
        figures.legend(figure, handles, [figures.label(m, 30) for m in models], title="Model", ax=key)
        figure.suptitle(figures.label(title or "NER by entity type", 90))
        note = _unpredicted_note(documents, models, unpredicted)
        figure.supxlabel("SemEval-2013 F1 of each type's entities; DMBertA recall: credit over the type's gold "
                         "entities; n = gold entities" + ("\n" + figures.label(note, 120) if note else ""),
                         fontsize=9, color="#555555")
    return figures.save_if_path(figure, path, option)


def _unpredicted(documents: Mapping[str, Mapping], models: Sequence[str], types: Sequence[str]) -> np.ndarray:
    """(models, types): True where the model predicted no entity of the type. Each type is scored
    on its own (nervaluate's per-tag results: only the entities predicted with that type count),
    so such a model scores 0 there in every scheme, exact and partial too, however well its
    differently labelled spans match: the figure says so instead of drawing a 0."""
    out = np.zeros((len(models), len(types)), dtype=bool)
    for k, model in enumerate(models):
        by_type = documents[model].get("semeval_by_type") or {}
        if not by_type:
            continue  # no per-type scores at all: "n/a", as before
        for r, name in enumerate(types):  # "actual": the predicted entities of the type
            out[k, r] = name not in by_type or _get(by_type, (name, "strict", "actual")) == 0
    return out


def _unpredicted_note(documents: Mapping[str, Mapping], models: Sequence[str], unpredicted: np.ndarray) -> str:
    """The figure's note on the types a model never predicted (empty when every model predicted
    every type shown)."""
    if not unpredicted.any():
        return ""
    named = []
    for k, model in enumerate(models):
        if unpredicted[k].any():
            exact = _get(documents[model], ("semeval", "exact", "f1"))
            named.append(f"{model} (overall exact F1 {exact:.2f})" if not math.isnan(exact) else model)
    return ("none predicted: the model labelled no entity with that type. Each type is scored on its own "
            "(nervaluate's per-tag scores), so spans under other labels count in no scheme there, exact and "
            "partial included, while the overall exact and partial F1 ignore the type: " + ", ".join(named) +
            ". DMBertA recall compares the labels by meaning.")


def plot_models(models: Any, path: str | os.PathLike | None = None, **options: Any) -> Figure:
    """:func:`plot_ner_scores` (the name an HTML report asks for)."""
    return plot_ner_scores(models, path, **options)
