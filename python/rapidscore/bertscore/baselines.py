"""Baseline rescaling: reading and writing baseline files, and applying them (making one: baseline_maker).

A baseline file is a small CSV (the reference names them ``.tsv``) with header ``LAYER,P,R,F`` and
one row per layer, row k holding the mean P, R and F of layer k over random pairs of unrelated
sentences. Rescaling maps X to (X - b) / (1 - b), separately for P, R and F.

The published files belong to the bert-score package (Zhang et al., "BERTScore: Evaluating Text
Generation with BERT", ICLR 2020; MIT licence); rapidscore reads them from an installed bert-score
and never imports it (no torch needed).
"""

from __future__ import annotations

import csv
import importlib.util
import os
from contextlib import closing
from pathlib import Path

import numpy as np

from rapidscore.common.io import iter_lines


def reference_baseline_dir() -> Path | None:
    """``rescale_baseline/`` of an installed bert-score, found without importing it."""
    spec = importlib.util.find_spec("bert_score")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "rescale_baseline"
    return path if path.is_dir() else None


def default_baseline_path(lang: str, model: str) -> Path | None:
    """Where the reference keeps the baseline of (lang, model); None without bert-score installed."""
    root = reference_baseline_dir()
    return None if root is None else root / lang / f"{model}.tsv"


def read_baseline(path: str | os.PathLike) -> np.ndarray:
    """Rows of a baseline file as float64 array (layers, 3) of P, R, F baselines."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"baseline file not found: {path}")
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
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"baseline output {path} is a directory; give a file name")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["LAYER", "P", "R", "F"])
        for layer, (p, r, f) in enumerate(np.asarray(table, dtype=np.float64)):
            writer.writerow([layer, repr(float(p)), repr(float(r)), repr(float(f))])
