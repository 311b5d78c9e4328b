"""Scale benchmark (issue 14): streaming vs in-memory BERTScore (time, peak RSS), peak RSS of a
stream as it grows tenfold, and Ray Data with 1 vs 2 workers.

Every measurement runs in a fresh child process (peak RSS is per process: /proc/self/VmHWM), on
all-MiniLM-L6-v2 (embedded, ONNX Runtime, CPU, fp32). Inputs are generated lazily from a seed
(rapidscore.testing.corpora's synthetic English): texts of one to three sentences of 6-16 words each
(``--profile sentences``), or one sentence of 4-10 words (``short``) or of 2-5 words (``tiny``,
used for the 200,000-pair RSS run to keep it near ~8 minutes on 2 shared cores).

    python bench/bench_scale.py --parts throughput --pairs 20000
    python bench/bench_scale.py --parts rss --rss-pairs 20000 200000
    python bench/bench_scale.py --parts ray --ray-pairs 4000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

from common import (
    command_line,
    git_commit,
    machine_info,
    machine_line,
    now,
    package_versions,
    peak_rss_mib,
    versions_line,
    write_results,
)

from rapidscore.testing.corpora import paraphrase, sentence

PROFILES = {"sentences": (1, 3, 6, 16), "short": (1, 1, 4, 10), "tiny": (1, 1, 2, 5)}  # sentences min/max, words min/max


def lazy_pairs(n: int, profile: str, seed: int = 0):
    """``n`` (candidate, reference) pairs, generated one at a time (the stream holds none of them)."""
    min_s, max_s, min_w, max_w = PROFILES[profile]
    rng = random.Random(seed)
    for _ in range(n):
        ref = [sentence(rng, rng.randint(min_w, max_w)) for _ in range(rng.randint(min_s, max_s))]
        if rng.random() < 0.2:  # an unrelated candidate
            cand = [sentence(rng, rng.randint(min_w, max_w)) for _ in range(rng.randint(min_s, max_s))]
        else:
            cand = [paraphrase(rng, s) for s in ref]
        yield " ".join(cand), " ".join(ref)


# -- children -----------------------------------------------------------------------------------

def child(args) -> dict:
    import numpy as np

    from rapidscore.bertscore import BERTScore

    scorer = BERTScore()  # the embedded all-MiniLM-L6-v2, last layer
    scorer.score(["warm up the runtime"], ["warm up the runtime, once"])
    base_rss = peak_rss_mib()
    start = time.perf_counter()
    if args.child == "memory":
        cands, refs = zip(*lazy_pairs(args.pairs, args.profile))
        f1 = scorer.score(list(cands), list(refs)).f1
    else:
        f1 = np.fromiter((s.f1 for s in scorer.score_iter(lazy_pairs(args.pairs, args.profile))), np.float32,
                         count=args.pairs)
    seconds = time.perf_counter() - start
    if args.save:
        np.save(args.save, f1)
    return {"mode": args.child, "pairs": args.pairs, "profile": args.profile, "seconds": seconds,
            "pairs_per_s": args.pairs / seconds, "peak_rss_mib": peak_rss_mib(), "rss_after_load_mib": base_rss}


def ray_child(args) -> dict:
    import numpy as np
    import ray

    from rapidscore.bertscore import BERTScore
    from rapidscore.integrations.ray import score_dataset

    pairs = list(lazy_pairs(args.pairs, args.profile))
    cands, refs = [c for c, _ in pairs], [r for _, r in pairs]
    start = time.perf_counter()
    expected = BERTScore(num_threads=2).score(cands, refs).f1
    single = time.perf_counter() - start
    start = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    init = time.perf_counter() - start
    ray.data.DataContext.get_current().enable_progress_bars = False
    ds = ray.data.from_items([{"id": i, "candidate": c, "reference": r} for i, (c, r) in enumerate(pairs)],
                             override_num_blocks=max(2 * args.workers, 8))
    threads = 2 // args.workers
    start = time.perf_counter()
    frame = score_dataset(ds, concurrency=args.workers, num_cpus=threads, num_threads=threads,
                          batch_size=256).to_pandas().sort_values("id")
    seconds = time.perf_counter() - start
    ray.shutdown()
    diff = float(np.abs(frame["f1"].to_numpy(np.float32) - expected).max())
    return {"mode": "ray", "workers": args.workers, "threads_per_worker": threads, "pairs": args.pairs,
            "seconds": seconds, "pairs_per_s": args.pairs / seconds, "ray_init_s": init,
            "single_process_s": single, "max_abs_df_vs_single_process": diff}


def run_child(*extra) -> dict:
    out = subprocess.run([sys.executable, __file__, *extra], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"child {extra} failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- parent -------------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", nargs="+", default=["throughput", "rss", "ray"],
                        choices=("throughput", "rss", "ray"))
    parser.add_argument("--pairs", type=int, default=20_000, help="throughput: pairs (profile 'sentences')")
    parser.add_argument("--reps", type=int, default=1, help="throughput: alternating repetitions")
    parser.add_argument("--rss-pairs", type=int, nargs="+", default=[20_000, 200_000])
    parser.add_argument("--rss-profile", default="short", choices=tuple(PROFILES))
    parser.add_argument("--ray-pairs", type=int, default=4000)
    parser.add_argument("--area", default="scale", help="results file name under bench/results/")
    # child modes
    parser.add_argument("--child", choices=("memory", "stream", "ray"), help=argparse.SUPPRESS)
    parser.add_argument("--profile", default="sentences", help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--save", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "ray":
        print(json.dumps(ray_child(args)))
        return
    if args.child:
        print(json.dumps(child(args)))
        return

    import numpy as np

    started = time.perf_counter()
    machine, versions = machine_info(), package_versions()
    data: dict = {"date": now(), "machine": machine, "versions": versions, "commit": git_commit(),
                  "command": command_line()}
    lines = [f"## Scale: streaming and Ray (issue 14)", "",
             f"{data['date']}, {machine_line(machine)}. {versions_line(versions)}. Commit {data['commit']}. "
             f"Command: `{data['command']}`. The machine is shared (2 cores; other work niced during the run). "
             "all-MiniLM-L6-v2, ONNX Runtime, CPU, fp32; every run a fresh process; model load and a warm-up "
             "call excluded from the times.", ""]
    if "throughput" in args.parts:
        rows = []
        with tempfile.TemporaryDirectory() as tmp:
            for rep in range(args.reps):
                order = ("memory", "stream") if rep % 2 == 0 else ("stream", "memory")
                for mode in order:
                    rows.append(run_child("--child", mode, "--pairs", str(args.pairs), "--profile", "sentences",
                                          "--save", os.path.join(tmp, f"{mode}{rep}.npy")))
                    print(rows[-1], flush=True)
            same = all(np.array_equal(np.load(os.path.join(tmp, f"memory{r}.npy")),
                                      np.load(os.path.join(tmp, f"stream{r}.npy"))) for r in range(args.reps))
        data["throughput"] = {"runs": rows, "identical_f1": same}
        med = {m: float(np.median([r["seconds"] for r in rows if r["mode"] == m])) for m in ("memory", "stream")}
        rss = {m: max(r["peak_rss_mib"] for r in rows if r["mode"] == m) for m in ("memory", "stream")}
        lines += [f"### Streaming vs in-memory, {args.pairs:,} pairs (texts of 1-3 sentences)", "",
                  "| path | seconds (median of %d) | pairs/s | peak RSS MiB | RSS after model load MiB |" % args.reps,
                  "|---|---:|---:|---:|---:|"]
        for mode, label in (("memory", "`BERTScore.score` (in memory)"), ("stream", "`BERTScore.score_iter`")):
            after = min(r["rss_after_load_mib"] for r in rows if r["mode"] == mode)
            lines.append(f"| {label} | {med[mode]:.1f} | {args.pairs / med[mode]:.0f} | {rss[mode]:.0f} | {after:.0f} |")
        lines += ["", f"Streaming throughput = {med['memory'] / med['stream']:.3f} x in-memory "
                  f"(target >= 0.90); F1 identical: {same}.", ""]
    if "rss" in args.parts:
        rows = [run_child("--child", "stream", "--pairs", str(n), "--profile", args.rss_profile)
                for n in args.rss_pairs]
        for row in rows:
            print(row, flush=True)
        data["rss"] = rows
        lines += [f"### Peak RSS of a stream as it grows (profile '{args.rss_profile}')", "",
                  "| pairs | seconds | pairs/s | peak RSS MiB | ratio to the first |", "|---:|---:|---:|---:|---:|"]
        for row in rows:
            lines.append(f"| {row['pairs']:,} | {row['seconds']:.1f} | {row['pairs_per_s']:.0f} | "
                         f"{row['peak_rss_mib']:.0f} | {row['peak_rss_mib'] / rows[0]['peak_rss_mib']:.3f} |")
        lines += ["", "Target: peak RSS for 200,000 pairs <= 1.2 x the peak for 20,000 pairs.", ""]
    if "ray" in args.parts:
        rows = []
        for workers in (1, 2):
            rows.append(run_child("--child", "ray", "--workers", str(workers), "--pairs", str(args.ray_pairs),
                                  "--profile", "sentences"))
            print(rows[-1], flush=True)
        data["ray"] = rows
        lines += [f"### Ray Data: 1 vs 2 workers, {args.ray_pairs:,} pairs", "",
                  "`score_dataset(ds, concurrency=K, num_cpus=2/K, num_threads=2/K, batch_size=256)` on "
                  "`ray.init(num_cpus=2)`; the job time includes starting the actors and loading the model in "
                  "each (Ray's start is listed apart). Single process: `BERTScore(num_threads=2).score` on "
                  "the same pairs in the same child.", "",
                  "| workers | threads each | job seconds | pairs/s | ray.init s | single process s | "
                  "max abs dF vs single process |", "|---:|---:|---:|---:|---:|---:|---:|"]
        for row in rows:
            lines.append(f"| {row['workers']} | {row['threads_per_worker']} | {row['seconds']:.1f} | "
                         f"{row['pairs_per_s']:.0f} | {row['ray_init_s']:.1f} | {row['single_process_s']:.1f} | "
                         f"{row['max_abs_df_vs_single_process']:.1e} |")
        lines.append("")
    lines.append(f"Total run time {(time.perf_counter() - started) / 60:.1f} min.")
    md, _json = write_results(args.area, "\n".join(lines), data)
    print("\n".join(lines))
    print(f"wrote {md}")


if __name__ == "__main__":
    main()
