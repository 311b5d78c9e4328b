"""rapidscore compare's resampling core on one core: 10,000 resamples x 100,000 items x 5 systems.

Times, with BLAS on one thread (set before numpy loads), each stage of ``rapidscore.compare``:

1. the paired bootstrap: drawing the resample indices (the same ones sacrebleu and scipy draw),
   turning them into per-resample item counts, and the matrix product that gives every system's
   sums at once (the stages timed apart on one block, then the whole call);
2. the paired approximate randomization (``--trials`` swap patterns, shared by every system);
3. the whole ``compare`` call (both tests, intervals, Holm).

Times are CPU seconds of this process (``time.process_time``; BLAS on one thread, so one
core's busy time): on a shared machine the wall clock counts other people's work too; the wall
time of the whole call is printed beside it. Per system pair = the whole call over the number of
systems compared with the baseline. The
indices stream through in blocks of ``--block-mib``: the peak resident memory is printed too.

    python bench/bench_compare.py                                   # 10,000 x 100,000 x 5
    python bench/bench_compare.py --items 20000 --resamples 2000    # a quick look
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core, as the figures are stated
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse
import time

import common
import numpy as np


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--systems", type=int, default=5, help="systems in all, the baseline included")
    parser.add_argument("--block-mib", type=int, default=64)
    parser.add_argument("--out", default=str(common.RESULTS_DIR), help="directory for compare.md / compare.json")
    args = parser.parse_args(argv)
    if min(args.items, args.resamples, args.trials, args.block_mib) < 1 or args.systems < 2:
        parser.error("--items, --resamples, --trials, --block-mib must be >= 1 and --systems >= 2")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    from rapidscore.compare import compare, mean_of, resampling

    rng = np.random.default_rng(0)
    base = rng.uniform(0.6, 0.95, args.items)
    scores = {"base": base, **{f"s{k}": base + rng.normal(0.002 * k, 0.05, args.items)
                               for k in range(1, args.systems)}}
    block_bytes = args.block_mib << 20
    n = args.items
    rows = resampling._rows_per_block(n, args.resamples, block_bytes)

    # one block, stage by stage (the same operations bootstrap_values does)
    gen = np.random.default_rng(1)
    started = time.process_time()
    indices = gen.integers(0, n, size=(rows, n))
    draw = time.process_time() - started
    counts = np.empty((rows, n))
    started = time.process_time()
    for row in range(rows):
        counts[row] = np.bincount(indices[row], minlength=n)
    count = time.process_time() - started
    stacked = np.stack(list(scores.values()), axis=1)
    started = time.process_time()
    counts @ stacked
    product = time.process_time() - started
    per_element = {stage: seconds / (rows * n) * 1e9 for stage, seconds in
                   (("draw", draw), ("counts", count), ("product", product))}

    systems = [mean_of(v) for v in scores.values()]
    started = time.process_time()
    resampling.bootstrap_values(systems, args.resamples, 2, block_bytes)
    bootstrap = time.process_time() - started
    started = time.process_time()
    resampling.randomization_differences(systems[0], systems[1:], args.trials, 3, block_bytes)
    randomization = time.process_time() - started
    started, wall_started = time.process_time(), time.perf_counter()
    compare(scores, "base", resamples=args.resamples, trials=args.trials, block_bytes=block_bytes)
    whole, wall = time.process_time() - started, time.perf_counter() - wall_started
    pairs = args.systems - 1
    peak = common.peak_rss_mib()

    machine = common.machine_info()
    data = {"items": n, "resamples": args.resamples, "trials": args.trials, "systems": args.systems,
            "block_rows": rows, "block_mib": args.block_mib, "ns_per_element": per_element,
            "bootstrap_s": bootstrap, "randomization_s": randomization, "compare_s": whole, "compare_wall_s": wall,
            "per_pair_s": whole / pairs, "peak_rss_mib": peak, "machine": machine,
            "versions": common.package_versions(("rapidscore", "numpy")), "commit": common.git_commit(),
            "date": common.now()}
    # bytes an element crosses memory: the int64 index, its count written and read back (float64)
    bandwidth = {stage: 8 / ns for stage, ns in per_element.items()}  # GB/s if each element moved 8 bytes
    markdown = "\n".join([
        f"## rapidscore compare: {args.resamples:,} resamples x {n:,} items x {args.systems} systems (one core)",
        "",
        f"{data['date']}, commit {data['commit']}; {common.machine_line(machine)}; load average "
        f"{machine['load_average_1min']}; {common.versions_line(data['versions'])}",
        "",
        "| stage | CPU seconds | per system pair |",
        "|---|---:|---:|",
        f"| paired bootstrap (draw, counts, product; {args.systems} systems at once) | {bootstrap:.2f} | "
        f"{bootstrap / pairs:.2f} |",
        f"| approximate randomization ({args.trials:,} trials) | {randomization:.2f} | {randomization / pairs:.2f} |",
        f"| whole compare call (both tests, intervals, Holm) | {whole:.2f} | {whole / pairs:.2f} |",
        "",
        f"Wall time of the whole call: {wall:.2f} s (load average {machine['load_average_1min']}).",
        "",
        f"One block ({rows} resamples, {args.block_mib} MiB): draw {per_element['draw']:.2f} ns, counts "
        f"{per_element['counts']:.2f} ns, product {per_element['product']:.2f} ns per resampled item "
        f"(~{bandwidth['draw']:.1f}, {bandwidth['counts']:.1f}, {bandwidth['product']:.1f} GB/s of 8-byte "
        f"elements); peak RSS {peak:.0f} MiB.",
    ])
    print(markdown)
    common.write_results("compare", markdown, data, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
