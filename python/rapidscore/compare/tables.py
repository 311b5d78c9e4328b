"""A comparison as a table: text, markdown or LaTeX (as ``rapidscore abstention``'s tables are),
or the JSON document (:meth:`Comparison.to_dict`)."""

from __future__ import annotations

import json
import math

from rapidscore.abstention.report import latex_escape  # the abstention tables' LaTeX, one escaping
from rapidscore.compare.comparison import Comparison

__all__ = ["FORMATS", "render"]

FORMATS = ("text", "markdown", "latex", "json")
FEW_ITEMS = 30


def _number(value: float | None, digits: int) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def _p(value: float | None, significant: bool | None) -> str:
    if value is None:
        return "-"
    text = f"{value:.4f}" if value >= 0.0001 else f"{value:.1e}"
    return text + ("*" if significant else "")


def rows(result: Comparison, digits: int = 4) -> tuple[list[str], list[list[str]]]:
    """The header and one row per system (baseline first): value [low, high], the difference
    from the baseline [low, high], and the p-values adjusted by the result's correction (``*``:
    below alpha)."""
    level = f"{100 * result.confidence:g}%"
    header = ["System", result.metric, f"{level} CI", "Δ vs baseline", f"{level} CI of Δ"]
    if "bootstrap" in result.tests:
        header.append("p (bootstrap)")
    if "randomization" in result.tests:
        header.append("p (randomization)")
    pairs = {pair.system: pair for pair in result.pairs}
    body = []
    for system in result.systems:
        row = [system.name + (" (baseline)" if system.name == result.baseline else ""),
               _number(system.mean, digits), f"[{_number(system.low, digits)}, {_number(system.high, digits)}]"]
        pair = pairs.get(system.name)
        if pair is None:
            row += ["-", "-"] + ["-"] * len(result.tests)
        else:
            row += [f"{pair.difference:+.{digits}f}", f"[{_number(pair.low, digits)}, {_number(pair.high, digits)}]"]
            if "bootstrap" in result.tests:
                row.append(_p(pair.p_bootstrap_adjusted, pair.significant.get("bootstrap")))
            if "randomization" in result.tests:
                row.append(_p(pair.p_randomization_adjusted, pair.significant.get("randomization")))
        body.append(row)
    return header, body


def _caption(result: Comparison) -> str:
    correction = {"holm": "Holm-adjusted", "bonferroni": "Bonferroni-adjusted", "none": "unadjusted"}[result.correction]
    return (f"{result.metric}: {len(result.systems)} systems against {result.baseline}; {correction} p-values, "
            f"* p < {result.alpha:g}")


def render(result: Comparison, fmt: str = "text", digits: int = 4) -> str:
    """The table in ``fmt`` (``text``, ``markdown``, ``latex``, ``json``), the signature after it."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if fmt == "json":
        return json.dumps(result.to_dict(), indent=1) + "\n"
    header, body = rows(result, digits)
    caption = _caption(result)
    n_items = result.systems[0].n_items
    # the bootstrap cannot represent its null on a handful of items (docs/compare.md)
    few = (f"note: {n_items} items: bootstrap p-values are unreliable below about {FEW_ITEMS} items; read the "
           "randomization test's" + (" (exact here)" if result.exact_randomization else "")
           if n_items < FEW_ITEMS and "bootstrap" in result.tests else "")
    if fmt == "markdown":
        lines = [f"**{caption}**", "", "| " + " | ".join(header) + " |",
                 "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in body]
        lines += ["", f"`{result.signature}`"] + (["", few] if few else [])
    elif fmt == "latex":
        lines = [r"\begin{table}[t]", r"\centering", r"\begin{tabular}{l" + "r" * (len(header) - 1) + "}",
                 r"\toprule", " & ".join(latex_escape(h).replace("Δ", r"$\Delta$") for h in header) + r" \\",
                 r"\midrule"]
        lines += [" & ".join(latex_escape(cell).replace("*", r"$^{*}$") for cell in row) + r" \\" for row in body]
        lines += [r"\bottomrule", r"\end{tabular}", r"\caption{" + latex_escape(caption) + "}", r"\end{table}",
                  "% " + result.signature] + (["% " + few] if few else [])
    else:
        table = [header, *body]
        widths = [max(len(r[i]) for r in table) for i in range(len(header))]
        lines = [caption]
        for k, r in enumerate(table):
            lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
            if k == 0:
                lines.append("  ".join("-" * w for w in widths))
        lines.append(result.signature)
        if few:
            lines.append(few)
    return "\n".join(lines) + "\n"
