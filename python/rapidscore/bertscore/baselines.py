"""Baseline rescaling: reading and writing baseline files, and applying them (making one: baseline_maker).

A baseline file is a small CSV (the reference names them ``.tsv``) with header ``LAYER,P,R,F`` and
one row per layer, row k holding the mean P, R and F of layer k over random pairs of unrelated
sentences. Rescaling maps X to (X - b) / (1 - b), separately for P, R and F.

The published files are bert-score's (Zhang et al., "BERTScore: Evaluating Text Generation with
BERT", ICLR 2020; MIT licence): rapidscore ships a byte-for-byte copy of bert-score 0.3.13's
``rescale_baseline/`` as package data (``rapidscore/bertscore/rescale_baseline/``, with bert-score's
licence notice), so rescaling needs neither bert-score nor torch. Beside them is rapidscore's own
baseline for the embedded all-MiniLM-L6-v2 (docs/bertscore.md says how it was made). Nothing is
read until a baseline is asked for.
"""

from __future__ import annotations

import csv
import importlib.util
import os
from contextlib import closing
from pathlib import Path

import numpy as np

from rapidscore.common.io import iter_lines
from rapidscore.common.outputs import open_output

__all__ = ["packaged_baseline_dir", "default_baseline_path", "available_baselines", "read_baseline", "rescale",
           "write_baseline", "reference_baseline_dir"]

_PACKAGED = Path(__file__).parent / "rescale_baseline"


def packaged_baseline_dir() -> Path:
    """The baseline files shipped with rapidscore: ``<dir>/<lang>/<model>.tsv``."""
    return _PACKAGED


def reference_baseline_dir() -> Path | None:
    """``rescale_baseline/`` of an installed bert-score, found without importing it (None without it).

    rapidscore does not need it (its own copy is ``packaged_baseline_dir()``); tests compare the two."""
    spec = importlib.util.find_spec("bert_score")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "rescale_baseline"
    return path if path.is_dir() else None


def default_baseline_path(lang: str, model: str | os.PathLike) -> Path:
    """Where the baseline of (lang, model) is kept: the packaged ``<lang>/<model>.tsv``.

    The lookup is bert-score's: the model name as given, so a hub id with a slash is a
    sub-directory (``en/microsoft/deberta-xlarge-mnli.tsv``) and a model directory has none. The
    embedded default under any spelling (its short name ``all-MiniLM-L6-v2``, its package
    directory, a symlink to it: ``model_source.is_embedded_model``) finds the file of
    ``sentence-transformers/all-MiniLM-L6-v2``. The file may not exist: ``read_baseline`` then
    says which (lang, model) has no baseline and how to make one."""
    if not isinstance(lang, str) or not lang.strip():
        raise ValueError(f"lang must be a language code such as 'en', got {lang!r}")
    if lang in (".", "..") or "/" in lang or "\\" in lang:
        raise ValueError(f"lang must be a language code such as 'en', not a path: {lang!r}")
    if isinstance(model, os.PathLike):
        model = os.fspath(model)
    if not isinstance(model, str) or not model.strip():
        raise ValueError(f"model must be a non-empty model name, got {model!r}")
    from rapidscore.encoder.model_source import DEFAULT_MODEL, is_embedded_model

    name = DEFAULT_MODEL if is_embedded_model(model) else model  # one file for every spelling of it
    # Joined as text, as bert-score joins it: an absolute model directory stays under the root.
    return Path(f"{_PACKAGED}/{lang}/{name}.tsv")


def available_baselines(lang: str | None = None) -> list[tuple[str, str]]:
    """The (lang, model) pairs with a packaged baseline, sorted; only ``lang``'s with a language."""
    found = []
    for path in _PACKAGED.glob("*/**/*.tsv"):
        rel = path.relative_to(_PACKAGED)
        if lang is None or rel.parts[0] == lang:
            found.append((rel.parts[0], rel.with_suffix("").relative_to(rel.parts[0]).as_posix()))
    return sorted(found)


def _missing_message(path: Path) -> str:
    """Why a file is missing: for a packaged path, which (lang, model) has no baseline."""
    try:
        rel = path.relative_to(_PACKAGED)
    except ValueError:
        return f"baseline file not found: {path}"
    if len(rel.parts) < 2:
        return f"baseline file not found: {path}"
    lang, model = rel.parts[0], rel.with_suffix("").relative_to(rel.parts[0]).as_posix()
    known = available_baselines(lang)
    if known:
        have = (f"{len(known)} models have one for {lang!r} (rapidscore.bertscore.baselines.available_baselines"
                f"({lang!r}); looked up by hub name, so a model directory has none)")
    else:
        langs = sorted({lng for lng, _model in available_baselines()})
        have = f"no model has one for {lang!r} (languages with baselines: {', '.join(langs)})"
    return (f"no baseline for model {model!r} on lang {lang!r}: rapidscore ships bert-score's published baselines "
            f"and its own for all-MiniLM-L6-v2, and {have}. Make one from a few thousand sentences in that "
            "language with `rapidscore bertscore --make-baseline CORPUS.txt -m MODEL --out baseline.tsv` (or "
            "rapidscore.bertscore.compute_baseline) and pass baseline_path='baseline.tsv' (CLI: --baseline_path "
            f"baseline.tsv). Looked for {path}")


def read_baseline(path: str | os.PathLike) -> np.ndarray:
    """Rows of a baseline file as float64 array (layers, 3) of P, R, F baselines."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(_missing_message(path))
    with closing(iter_lines(str(path))) as lines:  # non-UTF-8 bytes: ValueError naming the line
        rows = list(csv.reader(lines))
    header = [h.strip() for h in rows[0]] if rows else []
    if header[-3:] != ["P", "R", "F"]:
        raise ValueError(f"baseline file {path} must have a header ending in P,R,F, got {header}")
    values = []
    for line_no, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        if len(row) < 3:
            raise ValueError(f"baseline file {path}, line {line_no}: expected P, R, F values, got {row}")
        try:
            numbers = [float(x) for x in row[-3:]]
        except ValueError as exc:
            raise ValueError(f"baseline file {path}, line {line_no}: {exc}") from None
        for name, value in zip("PRF", numbers):
            # (X - b) / (1 - b): b must be finite and below 1, or every score becomes NaN or inf.
            if not (np.isfinite(value) and value < 1.0):
                raise ValueError(f"baseline file {path}, line {line_no}: {name} = {value} "
                                 "(a baseline must be a finite number below 1)")
        values.append(numbers)
    if not values:
        raise ValueError(f"baseline file {path} has no layer rows")
    return np.asarray(values, dtype=np.float64)


def baseline_for_layer(table: np.ndarray, layer: int, path) -> np.ndarray:
    if not 0 <= layer < len(table):
        raise ValueError(f"baseline file {path} has {len(table)} layer rows; layer {layer} is not among them")
    return table[layer]


def baseline_for_all_layers(table: np.ndarray, n_hidden_states: int, path) -> np.ndarray:
    """The table for ``all_layers=True``: one row per hidden state (embedding output included)."""
    if len(table) != n_hidden_states:
        raise ValueError(f"baseline file {path} has {len(table)} layer rows; all_layers=True needs one per hidden "
                         f"state of the model ({n_hidden_states}: the embedding output and each layer)")
    return table


def rescale(values: np.ndarray, baseline: np.ndarray) -> np.ndarray:
    """(X - b) / (1 - b), computed in float32 like the reference."""
    b = np.asarray(baseline, dtype=np.float32)
    return (np.asarray(values, dtype=np.float32) - b) / (np.float32(1) - b)


def write_baseline(path: str | os.PathLike, table: np.ndarray) -> None:
    """Write a (layers, 3) table of P, R, F baselines in the reference's file format."""
    with open_output(path, "baseline output", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["LAYER", "P", "R", "F"])
        for layer, (p, r, f) in enumerate(np.asarray(table, dtype=np.float64)):
            writer.writerow([layer, repr(float(p)), repr(float(r)), repr(float(f))])
