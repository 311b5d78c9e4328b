"""BERTScore figures (need matplotlib: rapidscore[plot]), in the style of
:mod:`rapidscore.common.figures`:

- :func:`plot_similarity` (bert-score's ``plot_example``, ``rapidscore bertscore --show``): the
  token similarity heatmap of one candidate/reference pair, drawn by :func:`plot_similarity_matrix`
  from the matrix of :func:`similarity_matrix`: readable token labels, every cell annotated when
  the pair is short, each token's best match outlined (the greedy matching of P and R), a colour
  bar, the idf weights when the scorer uses them, and the pair's P, R and F1 in the title;
- :func:`plot_f1_distribution` (``rapidscore bertscore --plot-f1``): the distribution of F1
  (or P, R) per system: violin, box and the points, systems on one axis, from arrays,
  ``BERTScoreResult`` objects or result files.

Each function returns the matplotlib ``Figure`` and writes it when given a path (PNG, or SVG /
PDF by the extension).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from rapidscore.common import figures

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["similarity_matrix", "token_weights", "readable_token", "plot_similarity", "plot_similarity_matrix",
           "plot_f1_distribution", "plot_systems", "f1_values"]

# the byte-level BPE (GPT-2, RoBERTa) and SentencePiece word-start marks, and BPE's newline
_WORD_START = ("\u0120", "\u2581")
_BYTE_TOKENS = {"\u010a": "\\n", "\u0109": "\\t"}


def similarity_matrix(scorer, candidate: str, reference: str) -> tuple[np.ndarray, list[str], list[str]]:
    """(matrix, candidate tokens, reference tokens) without the special tokens, rescaled with the
    F baseline when the scorer rescales (as the reference's plot_example does)."""
    sim, cand_ids, ref_ids = _matrix_and_ids(scorer, candidate, reference)
    names = scorer.encoder.tokenizer.id_to_token
    return sim, [names(i) for i in cand_ids], [names(i) for i in ref_ids]


def token_similarity(scorer, candidate: str, reference: str) -> tuple[np.ndarray, list[int], list[int]]:
    """The cosine of every candidate token with every reference token (framing tokens included,
    first and last: the greedy matching matches against them), and each side's token ids; the
    texts stripped, as the scorer strips them. Needs a single layer."""
    if not isinstance(candidate, str) or not isinstance(reference, str):
        raise TypeError("candidate and reference must be strings")
    encoder = scorer.encoder
    if encoder.layer == "all":
        raise ValueError("the token similarities need a single layer, not all_layers")
    encoded = encoder.encode([candidate.strip(), reference.strip()])
    cand, ref = encoded.token_embeddings(0), encoded.token_embeddings(1)
    cand = cand / np.linalg.norm(cand, axis=1, keepdims=True)
    ref = ref / np.linalg.norm(ref, axis=1, keepdims=True)
    return cand @ ref.T, [int(i) for i in encoded.token_ids(0)], [int(i) for i in encoded.token_ids(1)]


def _matrix_and_ids(scorer, candidate: str, reference: str) -> tuple[np.ndarray, list[int], list[int]]:
    full, cand_ids, ref_ids = token_similarity(scorer, candidate, reference)
    sim = full[1:-1, 1:-1]
    if scorer.rescale_with_baseline and scorer.baseline is not None:
        f_base = float(scorer.baseline[2])
        sim = (sim - f_base) / (1 - f_base)
    return sim, cand_ids[1:-1], ref_ids[1:-1]


def token_weights(scorer, token_ids: Sequence[int]) -> np.ndarray | None:
    """The idf weight of each token id when the scorer weights with idf and has its weights
    (``idf_sents``, a dict, ``compute_idf``); None otherwise."""
    weights = getattr(scorer, "idf_dict", None)
    if not getattr(scorer, "idf", False) or weights is None:
        return None
    factory = getattr(weights, "default_factory", None)  # a defaultdict: unseen ids get ln(M + 1)
    default = factory() if factory is not None else 0.0
    return np.array([float(weights.get(i, default)) for i in token_ids])


def readable_token(token: str) -> str:
    """A token as a reader knows it: the word-start marks of byte-level BPE (``Ġ``) and
    SentencePiece (``▁``) dropped, BPE's newline shown as ``\\n``; WordPiece's ``##`` kept (it says
    the token continues a word)."""
    for mark in _WORD_START:
        if token.startswith(mark) and len(token) > len(mark):
            token = token[len(mark):]
    for raw, shown in _BYTE_TOKENS.items():
        token = token.replace(raw, shown)
    return token


def plot_similarity(scorer, candidate: str, reference: str, fname: str | os.PathLike = "",
                    show: bool | None = None) -> Figure:
    """The token similarity heatmap of one pair (bert-score's ``plot_example``), with the pair's
    P, R and F1 (the scorer's, rescaled and idf-weighted as it scores) in the title and the idf
    weights beside the matrix when the scorer uses them. Saved to ``fname`` when given; shown
    (``plt.show()``) when ``show`` is true, or when neither is given, as the reference does."""
    sim, cand_ids, ref_ids = _matrix_and_ids(scorer, candidate, reference)
    names = scorer.encoder.tokenizer.id_to_token
    result = scorer.score([candidate], [reference])
    scores = (float(result.precision[0]), float(result.recall[0]), float(result.f1[0]))
    display = bool(show) or (show is None and not fname)
    figure = plot_similarity_matrix(
        sim, [names(i) for i in cand_ids], [names(i) for i in ref_ids],
        cand_weights=token_weights(scorer, cand_ids), ref_weights=token_weights(scorer, ref_ids), scores=scores,
        rescaled=bool(scorer.rescale_with_baseline), subtitle=_scorer_line(scorer), pyplot=display)
    if fname:
        figures.save(figure, fname, "--fname")
    if display:
        import matplotlib.pyplot as plt

        plt.show()
    return figure


def _scorer_line(scorer) -> str:
    model = getattr(scorer, "model_name", None)
    layer = getattr(getattr(scorer, "encoder", None), "layer", None)
    parts = [str(model)] if model else []
    if layer is not None:
        parts.append(f"layer {layer}")
    return ", ".join(parts)


def plot_similarity_matrix(sim: Any, cand_tokens: Sequence[str], ref_tokens: Sequence[str],
                           path: str | os.PathLike | None = None, *, cand_weights: Any = None,
                           ref_weights: Any = None, scores: tuple[float, float, float] | None = None,
                           rescaled: bool = False, title: str | None = None, subtitle: str = "",
                           annotate: bool | None = None, pyplot: bool = False, option: str = "--fname") -> Figure:
    """Heatmap of a token similarity matrix (rows: candidate tokens, columns: reference tokens).
    Each candidate token's best reference match (what P averages) is outlined in black, each
    reference token's best candidate match (what R averages) dashed in orange; cells are
    annotated when the pair is short (``annotate``); ``cand_weights`` / ``ref_weights``: idf
    weights, drawn as bars beside the matrix; ``scores``: (P, R, F1) for the title."""
    sim = np.asarray(sim, dtype=np.float64)
    n_cand, n_ref = len(cand_tokens), len(ref_tokens)
    if sim.shape != (n_cand, n_ref):
        raise ValueError(f"the matrix is {sim.shape}, the tokens {n_cand} x {n_ref}")
    if n_cand == 0 or n_ref == 0:
        raise ValueError("nothing to draw: a side without tokens")
    weighted = cand_weights is not None or ref_weights is not None
    cell = float(np.clip(9.0 / max(n_cand, n_ref), 0.28, 0.62))
    annotate = cell >= 0.45 if annotate is None else annotate
    cand_shown = [figures.label(readable_token(t)) for t in cand_tokens]
    ref_shown = [figures.label(readable_token(t)) for t in ref_tokens]
    label_width = 0.3 + 0.09 * max(len(t) for t in cand_shown + ref_shown)
    width = n_ref * cell + label_width + 1.6 + (1.2 if weighted else 0.0)
    height = n_cand * cell + label_width + 1.6 + (1.0 if weighted else 0.0)
    low, high = min(0.0, float(np.nanmin(sim))), max(1.0, float(np.nanmax(sim)))
    with figures.style():
        import matplotlib
        from matplotlib.patches import Rectangle

        figure = figures.new_figure(width, height, pyplot=pyplot)
        if weighted:
            grid = figure.add_gridspec(2, 2, width_ratios=[n_ref, max(1.5, 0.12 * n_ref)],
                                       height_ratios=[max(1.5, 0.12 * n_cand), n_cand])
            ax = figure.add_subplot(grid[1, 0])
            top = figure.add_subplot(grid[0, 0], sharex=ax)
            side = figure.add_subplot(grid[1, 1], sharey=ax)
        else:
            ax = figure.add_subplot()
        cmap = matplotlib.colormaps[figures.SEQUENTIAL]
        image = ax.imshow(sim, cmap=cmap, vmin=low, vmax=high, aspect="auto")
        ax.set_xticks(range(n_ref), ref_shown, rotation=45, ha="right", rotation_mode="anchor")
        ax.set_yticks(range(n_cand), cand_shown)
        ax.set_xlabel("Reference tokens")
        ax.set_ylabel("Candidate tokens")
        ax.spines[:].set_visible(False)
        ax.tick_params(length=0)
        row_best = np.nanargmax(sim, axis=1)
        column_best = np.nanargmax(sim, axis=0)
        for i, j in enumerate(row_best):
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=1.8))
        for j, i in enumerate(column_best):
            ax.add_patch(Rectangle((j - 0.42, i - 0.42), 0.84, 0.84, fill=False, edgecolor=figures.PALETTE[1],
                                   linewidth=1.6, linestyle="--"))
        if annotate:
            size = 9 if cell >= 0.55 else 8
            for i in range(n_cand):
                for j in range(n_ref):
                    colour = figures.text_color(cmap(image.norm(sim[i, j])))
                    ax.text(j, i, f"{sim[i, j]:.2f}", ha="center", va="center", fontsize=size, color=colour)
        if weighted:
            top.bar(range(n_ref), np.zeros(n_ref) if ref_weights is None else np.asarray(ref_weights, float),
                    color=figures.PALETTE[2], width=0.8)
            top.set_ylabel("idf")
            top.tick_params(labelbottom=False)
            side.barh(range(n_cand), np.zeros(n_cand) if cand_weights is None else np.asarray(cand_weights, float),
                      color=figures.PALETTE[2], height=0.8)
            side.set_xlabel("idf")
            side.tick_params(labelleft=False)
            for extra in (top, side):
                extra.spines[["top", "right"]].set_visible(False)
        bar = figure.colorbar(image, ax=[ax, side] if weighted else ax, shrink=0.8, pad=0.02)
        bar.set_label("Cosine similarity" + (" (rescaled with the F baseline)" if rescaled else ""))
        heading = title or "BERTScore token similarity"
        if scores is not None:
            p, r, f = scores
            heading += f": P {p:.3f}, R {r:.3f}, F1 {f:.3f}" + (" (rescaled)" if rescaled else "")
        figure.suptitle(figures.label(heading, 90))
        note = ("Solid box: each candidate token's best match among the tokens shown (P); dashed: each reference "
                "token's (R)")
        if weighted:
            note += "; bars: idf weights"
        if subtitle:
            note = f"{subtitle}. {note}"
        figure.supxlabel(figures.label(note, 130), fontsize=9, color="#555555")
    if path:
        figures.save(figure, path, option)
    return figure


# ---- F1 per system ----------------------------------------------------------------------------------

def f1_values(value: Any, metric: str = "f1") -> np.ndarray:
    """The per-item scores of one system: an array or list, a ``BERTScoreResult`` (its ``f1`` /
    ``precision`` / ``recall``), a JSON document of ``rapidscore bertscore --json`` (a dict), or a
    result file: that document (.json), or the rows ``rapidscore bertscore --output`` writes
    (.jsonl, .csv, .tsv, .parquet; .gz too), read from the ``metric`` column. NaNs are dropped."""
    key = {"f1": "f1", "p": "precision", "r": "recall"}.get(metric.lower(), metric.lower())
    if isinstance(value, (str, os.PathLike)):
        value = _read_scores(os.fspath(value), key)
    elif hasattr(value, key) and not isinstance(value, Mapping):
        value = getattr(value, key)
    elif isinstance(value, Mapping):
        if key not in value:
            raise ValueError(f"no {key!r} in the result document (keys: {sorted(value)[:8]})")
        value = value[key]
    array = np.asarray(value, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"expected one score per item, got shape {array.shape} (all_layers: pick a layer)")
    return array[~np.isnan(array)]


def _read_scores(path: str, key: str) -> Any:
    from rapidscore.common.readers import detect_format, read_column

    if detect_format(path, default="jsonl") == "json":
        from rapidscore.common.input_files import load_json

        document = load_json(path)
        if isinstance(document, Mapping):
            if key not in document:
                raise ValueError(f"{path}: no {key!r} in the document")
            return document[key]
    return [float(v) for v in read_column(path, key)]


def _horizontal() -> dict[str, Any]:
    """Horizontal violins and boxes: ``orientation`` from matplotlib 3.10 (``vert`` is deprecated
    there), ``vert=False`` before."""
    import matplotlib

    major, minor = (int(part) for part in matplotlib.__version__.split(".")[:2])
    return {"orientation": "horizontal"} if (major, minor) >= (3, 10) else {"vert": False}


def plot_f1_distribution(results: Mapping[str, Any], path: str | os.PathLike | None = None, *, metric: str = "f1",
                         title: str | None = None, max_points: int = 2000, option: str = "--plot-f1") -> Figure:
    """The distribution of per-item BERTScore F1 (``metric``: f1, precision or recall) of each
    system: a violin (the density), a box (median and quartiles), the items as points (at most
    ``max_points`` per system, a fixed sample) and the mean (a diamond, its value on the right).
    ``results``: ``{system: scores}``, each as :func:`f1_values` reads it."""
    if not isinstance(results, Mapping) or not results:
        raise ValueError("give {system name: scores}, at least one system")
    systems = {str(name): f1_values(value, metric) for name, value in results.items()}
    empty = [name for name, values in systems.items() if values.size == 0]
    if empty:
        raise ValueError(f"no scores for {', '.join(empty)}")
    names = list(systems)
    shown = [figures.label(name, 28) for name in names]
    label_width = 0.4 + 0.09 * max(len(line) for name in shown for line in name.split("\n"))
    key = {"f1": "F1", "p": "P", "precision": "P", "r": "R", "recall": "R"}.get(metric.lower(), metric)
    rng = np.random.default_rng(0)
    with figures.style():
        per_system = 0.9 if len(names) <= 8 else 0.55
        figure = figures.new_figure(max(figures.WIDTH, 6.5 + label_width), 1.6 + per_system * len(names))
        ax = figure.subplots()
        colours = figures.colors(len(names))
        for row, values in enumerate(systems.values()):
            y = len(names) - 1 - row  # the first system at the top
            if values.size >= 2 and float(values.std()) > 0:
                body = ax.violinplot([values], positions=[y], widths=0.8, showextrema=False, **_horizontal())
                for part in list(body["bodies"]):  # type: ignore[call-overload]
                    part.set_facecolor(colours[row])
                    part.set_alpha(0.25)
                    part.set_edgecolor(colours[row])
            ax.boxplot([values], positions=[y], widths=0.22, **_horizontal(), showfliers=False, patch_artist=True,
                       boxprops={"facecolor": "white", "edgecolor": "#333333"},
                       medianprops={"color": colours[row], "linewidth": 2.0},
                       whiskerprops={"color": "#333333"}, capprops={"color": "#333333"})
            points = values if values.size <= max_points else rng.choice(values, max_points, replace=False)
            jitter = rng.uniform(-0.3, 0.3, points.size)
            ax.scatter(points, y + jitter, s=8, color=colours[row], alpha=0.35 if points.size > 200 else 0.6,
                       linewidths=0, zorder=3)
            mean = float(values.mean())
            ax.scatter([mean], [y], marker="D", s=40, color="black", zorder=4)
            ax.annotate(f"mean {mean:.3f}\nn = {values.size:,}", xy=(1.0, y), xycoords=("axes fraction", "data"),
                        xytext=(8, 0), textcoords="offset points", va="center", fontsize=9)
        ax.set_yticks(range(len(names)), shown[::-1])
        ax.set_ylim(-0.6, len(names) - 0.4)
        ax.set_xlabel(f"BERTScore {key} per item")
        ax.grid(axis="x")
        ax.spines["left"].set_visible(False)
        ax.tick_params(axis="y", length=0)
        ax.set_title(figures.label(title or f"BERTScore {key} by system", 80))
        figure.supxlabel("Violin: density; box: median and quartiles; points: items; diamond: mean",
                         fontsize=9, color="#555555")
    if path:
        figures.save(figure, path, option)
    return figure


def plot_systems(systems: Mapping[str, Any], path: str | os.PathLike | None = None, **options: Any) -> Figure:
    """:func:`plot_f1_distribution` (the name an HTML report asks for)."""
    return plot_f1_distribution(systems, path, **options)
