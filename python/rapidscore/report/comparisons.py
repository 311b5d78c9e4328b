"""The report's comparisons: for each metric with two systems or more, each system's interval and
each system against the baseline (``rapidscore.compare``, the same numbers as
``rapidscore compare`` on the same files), or the reason there is none (items unmatched between
systems, named). SELECT results folders: each model/technique a system, paired by concept on
the abstention rate (summaries of ``rapidscore abstention --json`` hold no per-concept rates)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["SECTION_METRICS", "Comparisons", "compare_runs"]

# the metric compared in each section of the page (the one its summary table leads with)
SECTION_METRICS = {"bertscore": "f1", "nrr": "rejection_rate", "ner": "strict_f1", "select": "abstention"}


@dataclass
class Comparisons:
    """``results``: section -> Comparison; ``refused``: section -> why its systems cannot be paired."""

    results: dict[str, Any]
    refused: dict[str, str]


def _section(run: Any) -> str | None:
    if run.kind == "select":
        return "select" if os.path.isdir(run.path) else None
    if run.kind in SECTION_METRICS:
        return run.kind
    if run.kind == "metric" and getattr(run, "rows", None) is not None:
        return f"metric-{run.metric}"
    return None


def compare_runs(runs: Sequence[Any], *, baseline: str | None = None, resamples: int = 10_000,
                 seed: int = 12345) -> Comparisons:
    """Compare the systems of each section that has two or more (``baseline``: a system's name,
    used where a section has it; else each section's first system)."""
    from rapidscore.compare.comparison import compare
    from rapidscore.compare.inputs import pair_systems, select_folder_systems, systems_of_runs
    from rapidscore.errors import PairingError

    sections: dict[str, list[Any]] = {}
    for run in runs:
        section = _section(run)
        if section is not None:
            sections.setdefault(section, []).append(run)
    out = Comparisons({}, {})
    for section, members in sections.items():
        if len(members) < 2 and section != "select":  # a SELECT folder holds a system per cell
            continue
        try:
            if section == "select":
                systems = []
                for run in members:
                    taxonomies = {e.get("name", "."): e.get("taxonomy") for e in run.document["experiments"]
                                  if isinstance(e, dict)}
                    for system in select_folder_systems(run.path, SECTION_METRICS["select"], taxonomies):
                        if len(members) > 1:
                            system.name = f"{run.name}/{system.name}"
                        systems.append(system)
                if len(systems) < 2:
                    continue
            else:
                systems = [system for run in members for system in systems_of_runs([run])]
            names = [s.name for s in systems]
            chosen = baseline if baseline in names else names[0]
            metric, stats, ordered = pair_systems(systems, SECTION_METRICS.get(section), chosen)
            result = compare(stats, ordered[0].name, metric=metric, resamples=resamples, trials=resamples, seed=seed)
            result.inputs.extend({"name": s.name, "file": s.path, "kind": s.kind, "signature": s.signature}
                                 for s in ordered)
            out.results[section] = result
        except PairingError as exc:
            out.refused[section] = str(exc)
    return out
