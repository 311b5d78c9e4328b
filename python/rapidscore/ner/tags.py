"""Token-label NER scores: span-level precision / recall / F1 equal to seqeval 1.2.2's
``classification_report``, over the spans ``rapidscore.ner.tag_decoding`` decodes (both modes,
every scheme; see there). :func:`tag_report` is pure and thread-safe; a :class:`TagReport` is
immutable (thread-safe to read).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from rapidscore.errors import RapidscoreWarning, TagError
from rapidscore.ner.tag_decoding import (
    SCHEME_TABLES,
    check_lengths,
    default_chunks,
    default_split_all,
    detect_scheme,
    label_sequences,
    not_ne_tags,
    resolve_mode,
    resolve_scheme,
    strict_spans,
    strict_split,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["TagError", "TagScores", "TagReport", "tag_report"]

AVERAGES = ("micro avg", "macro avg", "weighted avg")


class TagScores(NamedTuple):
    """Precision, recall, F1 and support (gold entities) of one type or one average (immutable, thread-safe)."""

    precision: float
    recall: float
    f1: float
    support: int



# ---------------------------------------------------------------- scores


def _divide(numerator: int, denominator: int, zero_division: float) -> float:
    return numerator / denominator if denominator else zero_division


def _f1(precision: float, recall: float) -> float:
    denominator = precision + recall  # seqeval: (1 + beta**2) * p * r / (beta**2 * p + r), beta = 1
    return 2.0 * precision * recall / (denominator if denominator != 0 else 1.0)


def _scores(correct: int, predicted: int, gold: int, zero_division: float) -> TagScores:
    precision = _divide(correct, predicted, zero_division)
    recall = _divide(correct, gold, zero_division)
    return TagScores(precision, recall, _f1(precision, recall), gold)


@dataclass(frozen=True)
class TagReport:
    """Span-level scores of token-label predictions, equal to seqeval's
    ``classification_report(y_true, y_pred, output_dict=True)`` (and ``precision_score`` /
    ``recall_score`` / ``f1_score`` with ``average`` micro, macro or weighted).

    ``per_type``: ``{type: TagScores}``, types sorted; ``micro``, ``macro``, ``weighted``: the
    averages (``macro`` is NaN when there is no entity at all, as in seqeval); ``counts``:
    ``{type: {"correct", "predicted", "gold"}}``; ``precision``/``recall``/``f1``: the micro
    averages. Immutable, thread-safe to read."""

    scheme: str | None
    mode: str
    per_type: dict
    micro: TagScores
    macro: TagScores
    weighted: TagScores
    counts: dict
    zero_division: float = 0.0

    @property
    def precision(self) -> float:
        return self.micro.precision

    @property
    def recall(self) -> float:
        return self.micro.recall

    @property
    def f1(self) -> float:
        return self.micro.f1

    def rows(self) -> dict:
        """Types then ``micro avg``, ``macro avg``, ``weighted avg`` -> TagScores."""
        return {**self.per_type, "micro avg": self.micro, "macro avg": self.macro, "weighted avg": self.weighted}

    def to_dict(self) -> dict:
        """seqeval's ``output_dict=True`` shape: ``{row: {"precision", "recall", "f1-score", "support"}}``."""
        return {name: {"precision": s.precision, "recall": s.recall, "f1-score": s.f1, "support": s.support}
                for name, s in self.rows().items()}

    def to_frame(self) -> pd.DataFrame:
        """One row per type and per average (index), columns precision, recall, f1-score, support."""
        from rapidscore.common.result import import_pandas

        frame = import_pandas().DataFrame.from_dict(self.to_dict(), orient="index")
        frame.attrs["scheme"], frame.attrs["mode"] = self.scheme, self.mode
        return frame

    def text(self, digits: int = 2) -> str:
        """seqeval's text report (the same layout and rounding)."""
        width = max([len(name) for name in self.per_type] + [len("weighted avg"), digits])
        head = "{:>{width}s} " + " {:>9}" * 4
        row = "{:>{width}s} " + f" {{:>9.{digits}f}}" * 3 + " {:>9}"
        lines = [row.format(name, *s, width=width) for name, s in self.per_type.items()]
        lines.append("")
        lines += [row.format(name, *s, width=width) for name, s in
                  (("micro avg", self.micro), ("macro avg", self.macro), ("weighted avg", self.weighted))]
        lines.append("")
        return head.format("", "precision", "recall", "f1-score", "support", width=width) + "\n\n" + "\n".join(lines)

    def __str__(self) -> str:
        return self.text()


def tag_report(y_true: Sequence[Sequence[str]], y_pred: Sequence[Sequence[str]], *, scheme: Any = None,
               mode: Any = None, suffix: bool = False, zero_division: float = 0) -> TagReport:
    """Span-level precision / recall / F1 per entity type and their micro / macro / weighted
    averages, equal to seqeval 1.2.2's ``classification_report(y_true, y_pred, mode=mode,
    scheme=scheme, suffix=suffix, zero_division=zero_division, output_dict=True)``.

    ``y_true``/``y_pred``: one list of labels per sentence, of equal lengths. ``scheme``: one of
    :data:`SCHEMES` (or an alias, a seqeval scheme class, None/``"auto"``); ``mode``: None (the
    default, conlleval-like) or ``"strict"`` (module docstring). ``suffix``: labels written
    ``PER-B`` instead of ``B-PER``. ``zero_division``: 0 or 1, the score of an undefined ratio
    (seqeval's ``"warn"`` is 0). Thread-safe."""
    if zero_division not in (0, 1) or isinstance(zero_division, bool):
        raise TagError(f"zero_division must be 0 or 1, got {zero_division!r}")
    scheme_name, mode_name = resolve_scheme(scheme), resolve_mode(mode)
    gold, pred = label_sequences(y_true, "y_true"), label_sequences(y_pred, "y_pred")
    check_lengths(gold, pred)
    if mode_name == "strict":
        if scheme_name is None:
            scheme_name = detect_scheme(gold, suffix)
        gold_spans = _strict_sets(gold, scheme_name, suffix, "y_true")
        pred_spans = _strict_sets(pred, scheme_name, suffix, "y_pred")
    else:
        odd = not_ne_tags(gold + pred, suffix) if scheme_name != "BILOU" else []
        if odd:
            warnings.warn(f"labels {odd} seem not to be NE tags (no B-/I-/E-/S- prefix); they are read as "
                          "seqeval reads them (first character the prefix)", RapidscoreWarning, stacklevel=2)
        gold_spans = _default_sets(gold, scheme_name == "BILOU", suffix)
        pred_spans = _default_sets(pred, scheme_name == "BILOU", suffix)
    return _report(gold_spans, pred_spans, scheme_name, mode_name, float(zero_division))


def _default_sets(sequences: list[list[str]], bilou: bool, suffix: bool) -> dict[str, set]:
    # seqeval joins the sentences with an O between them and chunks the whole
    joined: list[str] = []
    for labels in sequences:
        joined += labels
        joined.append("O")
    tags, types = default_split_all(joined, suffix, bilou)
    found: dict[str, set] = {}
    for type_, start, end in default_chunks(tags, types):
        found.setdefault(type_, set()).add((start, end))
    return found


def _strict_sets(sequences: list[list[str]], scheme: str, suffix: bool, name: str) -> dict[str, set]:
    table = SCHEME_TABLES[scheme]
    found: dict[str, set] = {}
    for i, labels in enumerate(sequences):
        pairs = [strict_split(label, suffix, table, f"{name}[{i}][{j}]") for j, label in enumerate(labels)]
        for span in strict_spans([p for p, _ in pairs], [t for _, t in pairs], table):
            found.setdefault(span.label, set()).add((i, span.start, span.end))
    return found


def _report(gold: dict[str, set], pred: dict[str, set], scheme: str | None, mode: str,
            zero_division: float) -> TagReport:
    import numpy as np  # the averages as seqeval takes them (np.average), to the last bit

    types = sorted(set(gold) | set(pred))
    per_type, counts = {}, {}
    for name in types:
        gold_set, pred_set = gold.get(name, set()), pred.get(name, set())
        correct = len(gold_set & pred_set)
        counts[name] = {"correct": correct, "predicted": len(pred_set), "gold": len(gold_set)}
        per_type[name] = _scores(correct, len(pred_set), len(gold_set), zero_division)
    total_correct = sum(c["correct"] for c in counts.values())
    total_pred = sum(c["predicted"] for c in counts.values())
    total_gold = sum(c["gold"] for c in counts.values())
    micro = _scores(total_correct, total_pred, total_gold, zero_division)
    columns = [np.array([getattr(s, field) for s in per_type.values()], dtype=np.float64)
               for field in ("precision", "recall", "f1")]
    if types:
        p, r, f = (float(np.average(column)) for column in columns)
        macro = TagScores(p, r, f, total_gold)
    else:  # seqeval averages an empty array: NaN
        macro = TagScores(float("nan"), float("nan"), float("nan"), 0)
    if total_gold == 0:  # seqeval's weighted average without gold entities
        nothing_predicted = total_pred == 0
        weighted = TagScores(zero_division if nothing_predicted else 0.0, zero_division,
                             zero_division if nothing_predicted else 0.0, 0)
    else:
        weights = np.array([c["gold"] for c in counts.values()], dtype=np.int64)
        p, r, f = (float(np.average(column, weights=weights)) for column in columns)
        weighted = TagScores(p, r, f, total_gold)
    return TagReport(scheme, mode, per_type, micro, macro, weighted, counts, zero_division)
