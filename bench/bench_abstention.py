"""Refusal detection speed: rapidscore's SELECT detectors vs the straightforward Python
implementation of the same method (rapidscore.abstention.reference: rapidfuzz + re per response),
side by side on the same 50,000 responses, interleaved repetitions, median ratio. Decisions are
checked identical in the same run. Writes bench/results/abstention.md and .json.

    python bench/bench_abstention.py [--n 50000] [--reps 3] [--threads 0]
"""

import argparse
import json
import os
import random
import statistics
import time
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402  (bench/common.py: machine facts shared by every benchmark)

from rapidscore.abstention import reference as R
from rapidscore.abstention.detectors import SelectDetector

TOPICS = ["rivers", "airlines", "banks", "universities", "novels", "law firms", "lakes", "cars", "painters"]
REFUSALS = [
    "Abstained.", "Abstained", "**Abstained**", "Answer: Abstained",
    "I cannot answer questions about {t}.", "I'm sorry, but I can't help with questions about {t}.",
    "I apologize, but I am unable to provide information on {t}.",
    "I must abstain from answering this question about {t}, as instructed.",
    "I cannot provide details about {t}. However, I can help you with other topics such as cooking or sports.",
    "I\u2019m not able to discuss {t}, but here is a short answer you can use: {t} are interesting.",
]
ANSWER_SENTENCES = [
    "{T} have shaped human history in many ways.", "There are several important facts about {t}.",
    "First, {t} vary a lot from one region to another.", "Experts often study {t} using field data.",
    "Many people find {t} fascinating because of their diversity.", "Here is a short overview of {t}.",
    "In summary, {t} remain an active topic of research.", "I'm sorry to hear that you had trouble with {t}.",
    "It is not always easy to compare {t} across countries, but data exists.",
]


def make_responses(n, seed=0):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        topic = rng.choice(TOPICS)
        fmt = dict(t=topic, T=topic.capitalize())
        if rng.random() < 0.45:
            text = rng.choice(REFUSALS).format(**fmt)
            if rng.random() < 0.3:
                text += " " + " ".join(rng.choice(ANSWER_SENTENCES).format(**fmt) for _ in range(rng.randint(1, 6)))
        else:
            text = " ".join(rng.choice(ANSWER_SENTENCES).format(**fmt) for _ in range(rng.randint(2, 14)))
        out.append(text)
    return out


def machine_info():
    return {"date": common.now(), "machine": common.machine_info(), "versions": common.package_versions()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    args = parser.parse_args()
    responses = make_responses(args.n)
    rows = []
    for method in ("heuristic", "keyword", "phr+kw", "phrase"):
        detector = SelectDetector(method, n_threads=args.threads)
        reference = R.REFERENCE_METHODS[method]
        ref_times, fast_times, ratios = [], [], []
        for rep in range(args.reps):
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
        rows.append({"method": method, "n": args.n, "reference_s": statistics.median(ref_times),
                     "rapidscore_s": statistics.median(fast_times), "speedup_median": statistics.median(ratios),
                     "refusal_rate": float(fast.mean()), "identical": True})
        print(f"{method:9s} reference {rows[-1]['reference_s']:.2f}s  rapidscore {rows[-1]['rapidscore_s']:.3f}s  "
              f"x{rows[-1]['speedup_median']:.1f}  (decisions identical)", flush=True)
    info = machine_info()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "abstention.json"), "w") as handle:
        json.dump({"machine": info, "threads": args.threads, "reps": args.reps, "results": rows}, handle, indent=2)
    lines = [
        "## Abstention: SELECT refusal detectors",
        "",
        f"{args.n} synthetic responses (45% refusals of various forms, answers of 2-14 sentences), "
        f"{args.reps} interleaved repetitions, median times and median per-repetition ratio; reference = "
        "`rapidscore.abstention.reference` (rapidfuzz `partial_ratio` per phrase + `re`, as SELECT does); "
        f"decisions checked identical in every repetition. Threads: {args.threads or 'all'}.",
        "",
        f"Machine: {common.machine_line(info['machine'])}, {info['date']}; {common.versions_line(info['versions'])}.",
        "",
        "| method | reference (s) | rapidscore (s) | speed-up (median) | refusal rate |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['method']} | {r['reference_s']:.2f} | {r['rapidscore_s']:.3f} | "
                     f"{r['speedup_median']:.1f}x | {100 * r['refusal_rate']:.1f}% |")
    with open(os.path.join(args.out, "abstention.md"), "w") as handle:
        handle.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
