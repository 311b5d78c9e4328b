"""The results of an NER evaluation (``rapidscore.ner.evaluate`` / ``compare``):
:class:`NerResult` (one model: DMBertA and SemEval scores, per record, per type, per label;
dict, frame and text forms) and :class:`Comparison` (several models against one gold set)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rapidscore.common.result import import_pandas
from rapidscore.ner.semeval import SEMEVAL_SCHEMES

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["NerResult", "Comparison"]


@dataclass
class NerResult:
    """Scores of one model against the gold entities.

    ``dmberta``: ``mean`` (mean record score), ``accumulate`` (sum of record scores, the seed's
    "Accumulate Score"), ``precision_mean``/``recall_mean``, and micro ``precision``/``recall``/``f1``
    (total credit over all predicted / gold entities). ``semeval``: per scheme the SemEval counts
    and precision/recall/F1. ``semeval_by_type``: ``{type: {scheme: counts and P/R/F1}}`` per
    canonical label, each type scored on its own entities (nervaluate's per-tag results).
    ``per_label``: DMBertA by gold label (recall) and by predicted label (precision), with the
    predicted labels each gold label was matched to. ``records``: per-record detail (built on
    first access), with each scheme's counts (``semeval``) and its correct, incorrect, partial,
    missed and spurious entities (``semeval_entities``).

    Safe to read from several threads (two threads reading ``records`` first at once build the
    same list twice).
    """

    name: str
    n_records: int
    dmberta: dict
    semeval: dict
    per_label: dict
    repairs: dict
    settings: dict
    signature: str = ""
    semeval_by_type: dict = field(default_factory=dict)
    _detail: Any = field(default=None, repr=False)
    _records: list | None = field(default=None, repr=False)

    @property
    def records(self) -> list:
        if self._records is None:
            self._records = self._detail()
        return self._records

    def to_dict(self, records: bool = True) -> dict:
        out = {
            "n_records": self.n_records, "dmberta": self.dmberta, "semeval": self.semeval,
            "semeval_by_type": self.semeval_by_type, "per_label": self.per_label, "repairs": self.repairs,
            "settings": self.settings, "signature": self.signature,
        }
        if records:
            out["records"] = self.records
        return out

    def scores(self) -> dict:
        """The headline numbers: DMBertA mean/accumulate/P/R/F1 and each SemEval scheme's P/R/F1."""
        row = {f"dmberta_{key}": self.dmberta[key] for key in ("mean", "accumulate", "precision", "recall", "f1")}
        for scheme in SEMEVAL_SCHEMES:
            row.update({f"{scheme}_{key}": self.semeval[scheme][key] for key in ("precision", "recall", "f1")})
        return row

    def to_frame(self) -> pd.DataFrame:
        """One row per record: id, n_gold, n_pred, precision, recall, score, and each SemEval
        scheme's counts (``strict_correct``...); the signature in ``attrs``."""
        pandas = import_pandas()
        rows = []
        for record in self.records:
            row = {key: record[key] for key in ("id", "n_gold", "n_pred", "precision", "recall", "score")}
            for scheme, counts in record["semeval"].items():
                row.update({f"{scheme}_{key}": value for key, value in counts.items()})
            rows.append(row)
        frame = pandas.DataFrame(rows)
        frame.attrs["signature"] = self.signature
        return frame

    def by_type_frame(self) -> pd.DataFrame:
        """One row per entity type (canonical label): ``type`` and each SemEval scheme's counts
        and precision/recall/F1 (``strict_correct``, ..., ``type_f1``); the signature in ``attrs``."""
        pandas = import_pandas()
        rows = []
        for label, schemes in self.semeval_by_type.items():
            row: dict[str, Any] = {"type": label}
            for scheme, summary in schemes.items():
                row.update({f"{scheme}_{key}": value for key, value in summary.items()})
            rows.append(row)
        frame = pandas.DataFrame(rows)
        frame.attrs["signature"] = self.signature
        return frame

    def __str__(self) -> str:
        d = self.dmberta
        return (f"{self.signature} {self.name}: DMBertA mean: {d['mean']:.4f} P: {d['precision']:.4f} "
                f"R: {d['recall']:.4f} F1: {d['f1']:.4f} strict F1: {self.semeval['strict']['f1']:.4f} "
                f"records: {self.n_records}")
class Comparison(dict):
    """``{model name: NerResult}`` with a comparison table."""

    def ranking(self) -> list:
        """Model names, best DMBertA mean first (ties: accumulate, then name)."""
        return sorted(self, key=lambda m: (-self[m].dmberta["mean"], -self[m].dmberta["accumulate"], m))

    def table(self, markdown: bool = True) -> str:
        """One row per model, best first: DMBertA mean and accumulate, micro precision/recall,
        strict and partial F1."""
        header = ["Model", "DMBertA mean", "DMBertA accumulate", "DMBertA P", "DMBertA R", "Strict F1", "Partial F1"]
        rows = []
        for m in self.ranking():
            r = self[m]
            rows.append([m, f"{r.dmberta['mean']:.3f}", f"{r.dmberta['accumulate']:.3f}",
                         f"{r.dmberta['precision']:.3f}", f"{r.dmberta['recall']:.3f}",
                         f"{r.semeval['strict']['f1']:.3f}", f"{r.semeval['partial']['f1']:.3f}"])
        if markdown:
            lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
            lines += ["| " + " | ".join(row) + " |" for row in rows]
            return "\n".join(lines)
        widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]

        def fmt(row: list) -> str:
            cells = (str(x).ljust(w) if i == 0 else str(x).rjust(w) for i, (x, w) in enumerate(zip(row, widths)))
            return "  ".join(cells)

        return "\n".join([fmt(header), fmt(["-" * w for w in widths]), *map(fmt, rows)])

    def to_dict(self, records: bool = True) -> dict:
        return {name: result.to_dict(records=records) for name, result in self.items()}

    @property
    def signature(self) -> str:
        """The models' common signature (one evaluation run: the same settings for every model)."""
        return next(iter(self.values())).signature if self else ""

    def to_frame(self) -> pd.DataFrame:
        """One row per model, best first: the headline scores of :meth:`NerResult.scores`."""
        pandas = import_pandas()
        frame = pandas.DataFrame([{"model": m, **self[m].scores()} for m in self.ranking()])
        frame.attrs["signature"] = self.signature
        return frame

    def __str__(self) -> str:
        ranked = ", ".join(f"{m} {self[m].dmberta['mean']:.4f}" for m in self.ranking())
        return f"{self.signature} DMBertA mean: {ranked}"
