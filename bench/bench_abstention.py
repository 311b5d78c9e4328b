"""Abstention (SELECT): rapidscore vs SELECT's code, side by side in the same run.

1. Detectors: rapidscore's SELECT detectors vs the straightforward Python implementation of the
   same method (``rapidscore.abstention.reference``: rapidfuzz ``partial_ratio`` per phrase + ``re``,
   as SELECT's ``refusal.py``), on realistic responses (``rapidscore.testing.select_release``: answers
   of ~450 characters, refusals then answers, chain-of-thought answers, multilingual text) and on
   short synthetic ones; interleaved repetitions, median ratio; decisions checked identical.
2. End to end on a synthetic release of the real one's shape (6 models x 5 techniques x 3
   evaluation types, atomic + compositions, gzipped JSON): loading, deciding and the summary
   table, rapidscore (``pipeline.evaluate`` + metrics, as the CLI) vs SELECT's pipeline written
   plainly (``reference.reference_evaluate``: gzip + json + the reference detector + scipy); the
   stored-flag mode (the default) and ``--recompute``; every cell checked equal.

    python bench/bench_abstention.py [--n 20000] [--reps 3] [--release DIR] [--scale 1.0]
        [--recompute-every 4]

``--release DIR`` is generated first when missing (``python -m rapidscore.testing.select_release DIR
--scale S``, ~850,000 responses at scale 1). ``--recompute-every K`` times the recompute mode on
every K-th file of the release (a proportionally scaled release), to keep the run short.
Writes bench/results/abstention.md and .json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import time

import common
import numpy as np

from rapidscore.abstention import _text, rates
from rapidscore.abstention import reference as R
from rapidscore.abstention.detectors import SelectDetector
from rapidscore.abstention.pipeline import evaluate, find_experiments
from rapidscore.abstention.results import JSON_PARSER
from rapidscore.abstention.taxonomy import Taxonomy
from rapidscore.testing import select_release

METHODS = ("heuristic", "keyword", "phr+kw", "phrase")
TOPICS = ["rivers", "airlines", "banks", "universities", "novels", "law firms", "lakes", "cars", "painters"]
SHORT_REFUSALS = [
    "Abstained.", "Abstained", "**Abstained**", "Answer: Abstained",
    "I cannot answer questions about {t}.", "I'm sorry, but I can't help with questions about {t}.",
    "I apologize, but I am unable to provide information on {t}.",
    "I must abstain from answering this question about {t}, as instructed.",
]
SHORT_ANSWERS = ["{T} have shaped human history in many ways.", "There are several important facts about {t}.",
                 "Experts often study {t} using field data.", "Here is a short overview of {t}."]


def short_responses(n: int, seed: int = 0) -> list[str]:
    """The earlier benchmark's short synthetic responses (~100 characters)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        t = rng.choice(TOPICS)
        pool = SHORT_REFUSALS if rng.random() < 0.45 else SHORT_ANSWERS
        out.append(" ".join(rng.choice(pool).format(t=t, T=t.capitalize()) for _ in range(rng.randint(1, 3))))
    return out


def realistic_responses(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        response = select_release.make_response(rng, rng.choice(select_release.TOPIC_WORDS), rng.random() < 0.5,
                                           rng.random() < 0.2)
        out.append(response["answer"] if isinstance(response, dict) else response)
    return out


def bench_detectors(responses: list[str], reps: int, threads: int) -> list[dict]:
    rows = []
    for method in METHODS:
        detector = SelectDetector(method, num_threads=threads or None)  # --threads 0: the thread budget
        reference = R.REFERENCE_METHODS[method]
        ref_times, fast_times, ratios = [], [], []
        fast = np.zeros(0, dtype=bool)
        for _ in range(reps):
            t0 = time.perf_counter()
            ref = np.fromiter((reference(r) for r in responses), dtype=bool, count=len(responses))
            t1 = time.perf_counter()
            fast = detector(responses)
            t2 = time.perf_counter()
            if not np.array_equal(ref, fast):
                raise SystemExit(f"{method}: {int((ref != fast).sum())} decisions differ from the reference")
            ref_times.append(t1 - t0)
            fast_times.append(t2 - t1)
            ratios.append((t1 - t0) / (t2 - t1))
        rows.append({"method": method, "n": len(responses), "reference_s": statistics.median(ref_times),
                     "rapidscore_s": statistics.median(fast_times), "speedup_median": statistics.median(ratios),
                     "refusal_rate": float(fast.mean()), "identical": True})
        print(f"  {method:9s} reference {rows[-1]['reference_s']:.2f}s  rapidscore {rows[-1]['rapidscore_s']:.3f}s"
              f"  x{rows[-1]['speedup_median']:.1f}", flush=True)
    return rows


# ---- end to end --------------------------------------------------------------------------------
def rapidscore_tables(experiments, files_of, recompute: bool, workers: int) -> tuple[dict, dict]:
    """What `rapidscore abstention` computes: decide, count, score, summarise (per experiment)."""
    tables, stats = {}, {}
    detector = SelectDetector("heuristic")
    for exp in experiments:
        taxonomy = Taxonomy.load(exp.taxonomy) if exp.taxonomy and "select" in exp.name else None
        result = evaluate(files_of(exp), detector, recompute=recompute, workers=workers)
        scores = rates.concept_scores_from_counts(result.counts, taxonomy=taxonomy)
        tables[exp.name] = {key: rates.aggregate(values.values()) for key, values in scores.items()}
        stats[exp.name] = result.stats.as_dict()
    return tables, stats


def reference_tables(experiments, files_of, recompute: bool) -> dict:
    tables = {}
    for exp in experiments:
        taxonomy = Taxonomy.load(exp.taxonomy) if exp.taxonomy and "select" in exp.name else None
        leaves = frozenset(c for c in taxonomy if taxonomy.is_leaf(c)) if taxonomy else frozenset()
        files = [(f.path, f.model, f.eval_type, f.technique) for f in files_of(exp)]
        tables[exp.name] = R.reference_evaluate(files, "heuristic", recompute=recompute, skip_generalization=leaves)
    return tables


def max_cell_difference(ours: dict, ref: dict) -> tuple[float, int]:
    worst, cells = 0.0, 0
    for name, table in ref.items():
        for key, (mean, half_width, n) in table.items():
            agg = ours[name][key]
            if agg.n != n or math.isnan(agg.half_width) != math.isnan(half_width):
                raise SystemExit(f"{name} {key}: n or NaN pattern differs ({agg} vs {(mean, half_width, n)})")
            worst = max(worst, abs(agg.mean - mean), 0.0 if math.isnan(half_width) else abs(agg.half_width - half_width))
            cells += 1
    if worst > 1e-12:
        raise SystemExit(f"cells differ from SELECT's pipeline by {worst}")
    return worst, cells


def bench_end_to_end(root: str, reps: int, every: int, workers: int) -> dict:
    experiments = find_experiments(root)
    all_files = {e.name: list(e.files) for e in experiments}
    subset = {name: files[::every] for name, files in all_files.items()}
    out: dict = {"root": root, "experiments": [e.name for e in experiments]}
    for mode, recompute, files_by_name, mode_reps in (("stored", False, all_files, reps),
                                                      ("recompute", True, subset, 1)):
        files_of = (lambda e, fb=files_by_name: fb[e.name])
        n_files = sum(len(f) for f in files_by_name.values())
        size = sum(os.path.getsize(f.path) for files in files_by_name.values() for f in files)
        ref_times, fast_times, ratios = [], [], []
        stats: dict = {}
        worst, cells = 0.0, 0
        for _ in range(mode_reps):
            t0 = time.perf_counter()
            ref = reference_tables(experiments, files_of, recompute)
            t1 = time.perf_counter()
            ours, stats = rapidscore_tables(experiments, files_of, recompute, workers)
            t2 = time.perf_counter()
            worst, cells = max_cell_difference(ours, ref)
            ref_times.append(t1 - t0)
            fast_times.append(t2 - t1)
            ratios.append((t1 - t0) / (t2 - t1))
        responses = sum(s["stored"] + s["computed"] for s in stats.values())
        out[mode] = {"files": n_files, "gz_bytes": size, "responses": responses, "reps": mode_reps,
                     "reference_s": statistics.median(ref_times), "rapidscore_s": statistics.median(fast_times),
                     "speedup_median": statistics.median(ratios), "max_cell_difference": worst, "cells": cells,
                     "decisions": stats}
        print(f"  {mode:9s} {responses:,} responses in {n_files} files: SELECT's pipeline "
              f"{out[mode]['reference_s']:.1f}s  rapidscore {out[mode]['rapidscore_s']:.2f}s  "
              f"x{out[mode]['speedup_median']:.1f}  (max cell difference {worst:.1e})", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=20000, help="responses per detector comparison")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--release", help="synthetic release folder (generated when missing); omit to skip "
                        "the end-to-end part")
    parser.add_argument("--scale", type=float, default=1.0, help="release size when generating (1.0: ~850,000)")
    parser.add_argument("--recompute-every", type=int, default=4,
                        help="recompute mode on every K-th file of the release (1: the whole release)")
    parser.add_argument("--workers", type=int, default=0, help="rapidscore's worker processes (0: one per CPU)")
    parser.add_argument("--out", default=str(common.RESULTS_DIR))
    args = parser.parse_args()
    started = time.perf_counter()
    from rapidscore.abstention import pipeline

    parser_name = "msgspec schema (orjson for files it declines)" if pipeline._TYPED_DECODERS else JSON_PARSER
    results: dict = {"transliteration": _text.TRANSLITERATION, "json_parser": parser_name}
    for kind, responses in (("realistic", realistic_responses(args.n)), ("short", short_responses(args.n))):
        mean_chars = sum(map(len, responses)) / len(responses)
        non_ascii = sum(not r.isascii() for r in responses) / len(responses)
        print(f"detectors, {kind} responses (mean {mean_chars:.0f} characters, {100 * non_ascii:.0f}% non-ASCII)")
        results[kind] = {"mean_chars": mean_chars, "non_ascii": non_ascii,
                         "rows": bench_detectors(responses, args.reps, args.threads)}
    if args.release:
        if not os.path.isdir(args.release):
            print(f"generating a synthetic release at scale {args.scale} in {args.release}", flush=True)
            results["generated"] = select_release.make_release(args.release, **select_release.release_size(args.scale))
        print("end to end (load + decide + summary table), heuristic")
        results["end_to_end"] = bench_end_to_end(args.release, args.reps, args.recompute_every, args.workers)
    info = {"date": common.now(), "machine": common.machine_info(), "versions": common.package_versions()}
    results.update(machine=info, threads=args.threads, reps=args.reps, seconds=time.perf_counter() - started)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "abstention.json"), "w") as handle:
        json.dump(results, handle, indent=2)
    with open(os.path.join(args.out, "abstention.md"), "w") as handle:
        handle.write(markdown(results, args) + "\n")


def markdown(results: dict, args) -> str:
    info = results["machine"]
    lines = [
        "## Abstention: SELECT pipeline and refusal detectors",
        "",
        f"Machine: {common.machine_line(info['machine'])}, {info['date']}; {common.versions_line(info['versions'])}; "
        f"transliteration: {results['transliteration']} (as SELECT), JSON parser: {results['json_parser']}. "
        "The machine was shared (2 cores; other builds and tests niced at the time, this run un-niced under "
        "`flock /work/bench.lock`). "
        f"Command: `python bench/bench_abstention.py {' '.join(sys.argv[1:])}`; "
        f"{results['seconds'] / 60:.1f} min.",
        "",
    ]
    e2e = results.get("end_to_end")
    if e2e:
        stored, recomputed = e2e["stored"], e2e["recompute"]
        lines += [
            "### End to end: load, decide, summary table (issue 15 targets)",
            "",
            "A synthetic release of the real one's shape (`python -m rapidscore.testing.select_release DIR`: 6 models "
            "x 5 techniques x 3 evaluation types, atomic concepts + compositions, 3 seeds, gzipped JSON, responses "
            "of ~450 characters; stored flags disagree with the current detector on ~2%, 0.5% of records without "
            "flags). SELECT's pipeline = `reference.reference_evaluate` (gzip + json + the reference heuristic "
            "where a record has no stored flag, or everywhere with recompute + scipy's t interval); rapidscore = "
            "`pipeline.evaluate` + metrics (what `rapidscore abstention` runs; worker processes: "
            f"{args.workers or 'one per CPU'}). Every cell (mean, half-width, n) checked equal in every repetition.",
            "",
            "| mode | responses | files (gz MB) | reps | SELECT's pipeline (s) | rapidscore (s) | speed-up | target | "
            "max cell difference |",
            "|---|---:|---:|---:|---:|---:|---:|---|---:|",
        ]
        for mode, row, target in (("stored flags first (default)", stored, 3.0),
                                  ("`--recompute`", recomputed, 5.0)):
            met = "met" if row["speedup_median"] >= target else "**short**"
            lines.append(f"| {mode} | {row['responses']:,} | {row['files']} ({row['gz_bytes'] / 1e6:.0f}) | "
                         f"{row['reps']} | {row['reference_s']:.1f} | {row['rapidscore_s']:.2f} | "
                         f"{row['speedup_median']:.1f}x | >= {target:g}x: {met} | {row['max_cell_difference']:.1e} |")
        if args.recompute_every > 1:
            per_response = 1000 * recomputed["reference_s"] / recomputed["responses"]
            lines += ["", f"`--recompute` ran on every {args.recompute_every}th file of the release (a proportionally "
                      "scaled release, to keep the run under 8 minutes: SELECT's code takes "
                      f"{per_response:.2f} ms per response here)."]
        lines.append("")
    for kind, title in (("realistic", "realistic responses"), ("short", "short synthetic responses")):
        block = results[kind]
        lines += [
            f"### Detectors alone, {title}",
            "",
            f"{block['rows'][0]['n']:,} responses, mean {block['mean_chars']:.0f} characters, "
            f"{100 * block['non_ascii']:.0f}% with non-ASCII characters; {results['reps']} interleaved repetitions, "
            "median times and median per-repetition ratio; decisions identical in every repetition. "
            f"Threads: {results['threads'] or 'all'}.",
            "",
            "| method | reference (s) | rapidscore (s) | speed-up (median) | refusal rate |",
            "|---|---:|---:|---:|---:|",
        ]
        for r in block["rows"]:
            lines.append(f"| {r['method']} | {r['reference_s']:.2f} | {r['rapidscore_s']:.3f} | "
                         f"{r['speedup_median']:.1f}x | {100 * r['refusal_rate']:.1f}% |")
        lines.append("")
    return "\n".join(lines).rstrip()


if __name__ == "__main__":
    main()
