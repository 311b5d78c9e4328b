"""DMBertA span alignment: rapidscore's C++ kernel vs a pure-Python DP of the same definition.

Synthetic corpus shaped like PII detection output: 100,000 records, ~10 gold entities per record
(sorted, disjoint, in a ~400-character text) and ~10 predicted entities (most exact, some with
shifted boundaries, some missed, some spurious). Both sides compute the same thing: character
Jaccard of every pair, the DJA table DJA(i, j) = max(DJA(i-1, j), DJA(i, j-1), DJA(i-1, j-1) + J)
with back-pointers, and the matched pairs. Inputs are prepared beforehand for both (numpy CSR
arrays for the kernel, Python lists of tuples for the reference); the kernel is timed on all
cores and on one thread. Repetitions are interleaved; medians and ratios are reported, and the
total matched Jaccard of both sides is checked equal.

A second part runs ``rapidscore.ner.evaluate`` end to end (format conversion, normalisation,
alignment, SemEval schemes) on 20,000 records with a counting label embedder, reporting how many
labels reached the embedder.

    python bench/bench_ner.py [--records 100000] [--reps 3]

Writes bench/results/ner.md and bench/results/ner.json.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path

import common  # bench/common.py: machine facts shared by every benchmark
import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
LABELS = ["person", "address", "phone number", "email", "driver licence", "ssn", "credit card", "date of birth"]


def make_corpus(n_records: int, seed: int = 0):
    rng = random.Random(seed)
    gold, pred = [], []
    for _ in range(n_records):
        spans, at = [], rng.randint(0, 10)
        for _ in range(rng.randint(8, 12)):
            length = rng.randint(3, 20)
            spans.append((at, at + length, rng.choice(LABELS)))
            at += length + rng.randint(2, 30)
        gold.append(spans)
        out, last_end = [], 0
        for s, e, lab in spans:
            roll = rng.random()
            if roll < 0.1:
                continue  # missed
            if roll < 0.35:  # boundary error
                s2, e2 = max(last_end, s + rng.randint(-2, 2)), e + rng.randint(-2, 2)
                if e2 <= s2:
                    s2, e2 = s, e
                s, e = s2, e2
            s = max(s, last_end)
            out.append((s, e, lab if rng.random() < 0.7 else rng.choice(LABELS)))
            last_end = e
        if rng.random() < 0.5:  # spurious entity after the last one
            out.append((last_end + 1, last_end + 1 + rng.randint(2, 8), rng.choice(LABELS)))
        pred.append(out)
    return gold, pred


def python_dja(gold_records, pred_records):
    """Pure-Python DJA alignment of every record; returns the total matched Jaccard."""
    total = 0.0
    for gold, pred in zip(gold_records, pred_records):
        n, m = len(gold), len(pred)
        table = [[0.0] * (m + 1) for _ in range(n + 1)]
        back = [[0] * (m + 1) for _ in range(n + 1)]
        jac = [[0.0] * m for _ in range(n)]
        for i in range(n):
            gs, ge = gold[i][0], gold[i][1]
            row = jac[i]
            for j in range(m):
                ps, pe = pred[j][0], pred[j][1]
                inter = min(ge, pe) - max(gs, ps)
                if inter > 0:
                    row[j] = inter / ((ge - gs) + (pe - ps) - inter)
        for i in range(1, n + 1):
            prev, cur, brow, jrow = table[i - 1], table[i], back[i], jac[i - 1]
            for j in range(1, m + 1):
                best, frm = prev[j], 1
                if cur[j - 1] > best:
                    best, frm = cur[j - 1], 2
                w = jrow[j - 1]
                if w > 0.0 and prev[j - 1] + w > best:
                    best, frm = prev[j - 1] + w, 3
                cur[j] = best
                brow[j] = frm
        i, j = n, m
        while i > 0 and j > 0:
            frm = back[i][j]
            if frm == 3:
                total += jac[i - 1][j - 1]
                i -= 1
                j -= 1
            elif frm == 1:
                i -= 1
            else:
                j -= 1
    return total


def machine_info():
    return {"date": common.now(), "machine": common.machine_info(), "versions": common.package_versions(),
            "cores": common.available_cpus()}


def end_to_end(n_records: int):
    from rapidscore.ner import LabelSimilarity, evaluate

    gold, pred = make_corpus(n_records, seed=1)
    seen = []

    def embedder(labels):
        seen.extend(labels)
        rng = np.random.default_rng(abs(hash(tuple(labels))) % (2**32))
        return rng.standard_normal((len(labels), 16))

    similarity = LabelSimilarity(embedder=embedder)
    t0 = time.perf_counter()
    result = evaluate(gold, pred, format="tuples", label_similarity=similarity)
    elapsed = time.perf_counter() - t0
    occurrences = sum(map(len, gold)) + sum(map(len, pred))
    return {
        "records": n_records, "seconds": elapsed, "label_occurrences": occurrences,
        "labels_embedded": len(seen), "distinct_labels": len(set(seen)), "embedder_calls": similarity.embedder_calls,
        "dmberta_mean": result.dmberta["mean"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--e2e-records", type=int, default=20_000)
    args = parser.parse_args()

    from rapidscore.ner.alignment import PackedSpans, align_batch

    gold, pred = make_corpus(args.records)
    n_gold, n_pred = sum(map(len, gold)), sum(map(len, pred))
    g, p = PackedSpans.from_records(gold), PackedSpans.from_records(pred)
    gold_lists = [[(s, e) for s, e, _ in rec] for rec in gold]
    pred_lists = [[(s, e) for s, e, _ in rec] for rec in pred]
    align_batch(g, p)  # warm-up (thread pool, page faults)

    times = {"python_dp": [], "kernel_all_cores": [], "kernel_1_thread": []}
    totals = {}
    for rep in range(args.reps):
        t0 = time.perf_counter()
        totals["python_dp"] = python_dja(gold_lists, pred_lists)
        times["python_dp"].append(time.perf_counter() - t0)
        for key, threads in (("kernel_all_cores", None), ("kernel_1_thread", 1)):
            t0 = time.perf_counter()
            out = align_batch(g, p, num_threads=threads)
            times[key].append(time.perf_counter() - t0)
            totals[key] = float(out.jaccard.sum())
        print(f"rep {rep + 1}/{args.reps}: " + ", ".join(f"{k} {v[-1]:.3f}s" for k, v in times.items()), flush=True)
    for key in ("kernel_all_cores", "kernel_1_thread"):
        if abs(totals[key] - totals["python_dp"]) > 1e-6 * max(1.0, totals["python_dp"]):
            raise SystemExit(f"mismatch: {key} total Jaccard {totals[key]} vs Python {totals['python_dp']}")
    med = {k: statistics.median(v) for k, v in times.items()}
    e2e = end_to_end(args.e2e_records) if args.e2e_records else None
    info = machine_info()
    report = {
        "machine": info,
        "corpus": {"records": args.records, "gold_entities": n_gold, "pred_entities": n_pred},
        "reps": args.reps, "seconds": times, "median_seconds": med,
        "speedup_all_cores": med["python_dp"] / med["kernel_all_cores"],
        "speedup_1_thread": med["python_dp"] / med["kernel_1_thread"],
        "total_matched_jaccard": totals, "end_to_end": e2e,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "ner.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    lines = [
        "## NER: DMBertA span alignment",
        "",
        f"{info['date']}, {common.machine_line(info['machine'])}; {common.versions_line(info['versions'])}; "
        f"1-minute load average {info['machine']['load_average_1min']:.1f} at start. Command: `python bench/bench_ner.py --records {args.records} --reps {args.reps}`.",
        "",
        f"{args.records:,} records, {n_gold:,} gold and {n_pred:,} predicted entities (~{n_gold / args.records:.1f} / "
        f"~{n_pred / args.records:.1f} per record). Same DJA definition on both sides (pair Jaccard, DP table, "
        "back-pointers, matched pairs); inputs prepared beforehand; interleaved repetitions, medians; "
        "total matched Jaccard identical on both sides.",
        "",
        "| Alignment | median seconds | records/s | speed-up vs pure Python |",
        "|---|---:|---:|---:|",
    ]
    for key, title in (("python_dp", "pure-Python DP"), ("kernel_1_thread", "rapidscore C++, 1 thread"),
                       ("kernel_all_cores", f"rapidscore C++, {info['cores']} threads")):
        lines.append(f"| {title} | {med[key]:.3f} | {args.records / med[key]:,.0f} | {med['python_dp'] / med[key]:.1f}x |")
    if e2e:
        lines += [
            "",
            f"End to end, `rapidscore.ner.evaluate` on {e2e['records']:,} records (tuples format: conversion, "
            f"normalisation, DMBertA and the four SemEval alignments): {e2e['seconds']:.2f} s. "
            f"Label embedding: {e2e['label_occurrences']:,} label occurrences, {e2e['labels_embedded']} labels sent to "
            f"the embedder ({e2e['distinct_labels']} distinct) in {e2e['embedder_calls']} call(s).",
        ]
    (RESULTS / "ner.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
