"""rapidscore compare's resampling core on one core: 10,000 resamples x 100,000 items x 5 systems,
both resamplers side by side.

Times, with BLAS on one thread (set before numpy loads), for each resampler of
``rapidscore.compare`` (``splitmix64``: the native kernel, the default; ``numpy``: numpy's streams,
the resamples scipy and sacrebleu draw):

1. the paired bootstrap (every system's sums of every resample);
2. the paired approximate randomization (``--trials`` swap patterns, shared by every system);
3. the whole ``compare`` call (both tests, intervals, Holm).

Then the pieces: the splitmix64 kernel alone (ns per draw, and the bytes it gathers a second),
numpy's stages on one block (draw, counts, product), and two physical references measured or
read on this machine: one core's memory copy bandwidth (numpy copy of 256 MiB) and the nominal
clock (``/proc/cpuinfo``), against which a draw's three 64-bit multiplies are counted.

Times are CPU seconds of this process (``time.process_time``; BLAS on one thread, so one
core's busy time): on a shared machine the wall clock counts other people's work too; the wall
time of the whole call is printed beside it. Per system pair = the whole call over the number of
systems compared with the baseline. The peak resident memory is printed too.

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


def _cpu_seconds(run) -> float:
    started = time.process_time()
    run()
    return time.process_time() - started


def _clock_ghz() -> float | None:
    try:
        with open("/proc/cpuinfo", encoding="ascii") as handle:
            return float(next(line for line in handle if line.startswith("cpu MHz")).split(":")[1]) / 1000
    except (OSError, StopIteration, ValueError):
        return None


def _copy_bandwidth_gbs() -> float:
    """One core's copy bandwidth: bytes read plus bytes written a second, best of 3 (64 MiB, twice
    the L3 cache of the machines measured)."""
    source = np.ones(8 << 20)
    target = np.empty_like(source)
    best = min(_cpu_seconds(lambda: np.copyto(target, source)) for _ in range(3))
    return 2 * source.nbytes / best / 1e9


def main(argv=None) -> int:
    args = parse_args(argv)
    from rapidscore.compare import compare, mean_of, resampling
    from rapidscore.kernels import resampling as kernel

    rng = np.random.default_rng(0)
    base = rng.uniform(0.6, 0.95, args.items)
    scores = {"base": base, **{f"s{k}": base + rng.normal(0.002 * k, 0.05, args.items)
                               for k in range(1, args.systems)}}
    block_bytes = args.block_mib << 20
    n = args.items
    pairs = args.systems - 1
    systems = [mean_of(v) for v in scores.values()]

    runs = {}
    for resampler in resampling.RESAMPLERS:
        bootstrap = _cpu_seconds(lambda chosen=resampler: resampling.bootstrap_values(
            systems, args.resamples, 2, block_bytes, chosen))
        randomization = _cpu_seconds(lambda chosen=resampler: resampling.randomization_differences(
            systems[0], systems[1:], args.trials, 3, block_bytes, chosen))
        wall_started = time.perf_counter()
        whole = _cpu_seconds(lambda chosen=resampler: compare(
            scores, "base", resamples=args.resamples, trials=args.trials, block_bytes=block_bytes, resampler=chosen))
        runs[resampler] = {"bootstrap_s": bootstrap, "randomization_s": randomization, "compare_s": whole,
                           "compare_wall_s": time.perf_counter() - wall_started, "per_pair_s": whole / pairs}

    # the splitmix64 kernel alone: the systems' score columns as it gets them (the count columns,
    # all ones, are not sent), and the gaps of the randomization
    stacked = np.stack(list(scores.values()), axis=1)
    rows = kernel.padded(stacked)
    gaps = kernel.padded(stacked[:, :1] - stacked[:, 1:])
    kernel_resamples, kernel_trials = min(args.resamples, 1000), min(args.trials, 2000)
    boot_kernel = _cpu_seconds(lambda: kernel.bootstrap_sums(rows, kernel.stream_key(2, "bootstrap"), 0,
                                                             kernel_resamples))
    rand_kernel = _cpu_seconds(lambda: kernel.randomization_sums(gaps, kernel.stream_key(3, "randomization"), 0,
                                                                 kernel_trials))
    ns_per_draw = boot_kernel / (kernel_resamples * n) * 1e9
    ns_per_swap = rand_kernel / (kernel_trials * n) * 1e9
    gathered_gbs = rows.shape[1] * 8 / ns_per_draw  # one row of every system per draw

    # numpy's stages on one block (the same operations its bootstrap does)
    block_rows = resampling._rows_per_block(n, args.resamples, block_bytes)
    gen = np.random.default_rng(1)
    indices = None

    def draw() -> None:
        nonlocal indices
        indices = gen.integers(0, n, size=(block_rows, n), dtype=np.int32)

    draw_s = _cpu_seconds(draw)
    counts = np.empty((block_rows, n))

    def count() -> None:
        for row in range(block_rows):
            counts[row] = np.bincount(indices[row], minlength=n)

    count_s = _cpu_seconds(count)
    product_s = _cpu_seconds(lambda: counts @ stacked)
    per_element = {stage: seconds / (block_rows * n) * 1e9 for stage, seconds in
                   (("draw", draw_s), ("counts", count_s), ("product", product_s))}

    peak = common.peak_rss_mib()  # before the bandwidth reference's arrays
    copy_gbs = _copy_bandwidth_gbs()
    ghz = _clock_ghz()
    machine = common.machine_info()
    data = {"items": n, "resamples": args.resamples, "trials": args.trials, "systems": args.systems,
            "block_mib": args.block_mib, "runs": runs, "kernel_isa": _kernel_isa(),
            "splitmix64_ns_per_draw": ns_per_draw, "splitmix64_ns_per_item_trial": ns_per_swap,
            "splitmix64_gathered_gb_per_s": gathered_gbs, "numpy_block_rows": block_rows,
            "numpy_ns_per_element": per_element, "copy_bandwidth_gb_per_s": copy_gbs, "clock_ghz": ghz,
            "peak_rss_mib": peak, "machine": machine,
            "versions": common.package_versions(("rapidscore", "numpy")), "commit": common.git_commit(),
            "date": common.now()}
    fast, slow = runs["splitmix64"], runs["numpy"]
    cycles = f"{ns_per_draw * ghz:.1f} cycles at the nominal {ghz:.2f} GHz" if ghz else "clock unknown"
    multiply_bound = f"{3 / ghz:.2f} ns" if ghz else "unknown"
    markdown = "\n".join([
        f"## rapidscore compare: {args.resamples:,} resamples x {n:,} items x {args.systems} systems (one core)",
        "",
        f"{data['date']}, commit {data['commit']}; {common.machine_line(machine)}; load average "
        f"{machine['load_average_1min']}; {common.versions_line(data['versions'])}; kernel copy {data['kernel_isa']}",
        "",
        "| stage (CPU seconds) | splitmix64 | numpy | numpy / splitmix64 |",
        "|---|---:|---:|---:|",
        *(f"| {label} | {fast[key]:.2f} | {slow[key]:.2f} | {slow[key] / fast[key]:.1f}x |" for label, key in (
            (f"paired bootstrap ({args.systems} systems at once)", "bootstrap_s"),
            (f"approximate randomization ({args.trials:,} trials)", "randomization_s"),
            ("whole compare call (both tests, intervals, Holm)", "compare_s"),
            (f"whole call per system pair ({pairs} against the baseline)", "per_pair_s"))),
        "",
        f"Wall time of the whole call: splitmix64 {fast['compare_wall_s']:.2f} s, numpy {slow['compare_wall_s']:.2f} s "
        f"(load average {machine['load_average_1min']}).",
        "",
        f"splitmix64 kernel alone: {ns_per_draw:.2f} ns a bootstrap draw ({cycles}; gathering one "
        f"{rows.shape[1] * 8}-byte row of every system: {gathered_gbs:.1f} GB/s against a measured copy bandwidth of "
        f"{copy_gbs:.1f} GB/s on one core); a draw's three 64-bit multiplies at one a cycle would take "
        f"{multiply_bound}; {ns_per_swap:.3f} ns a randomization item-trial (64 swaps a draw, 8 table additions).",
        "",
        f"numpy, one block ({block_rows} resamples): draw {per_element['draw']:.2f} ns, counts "
        f"{per_element['counts']:.2f} ns, product {per_element['product']:.2f} ns per resampled item; "
        f"peak RSS {peak:.0f} MiB.",
    ])
    print(markdown)
    common.write_results("compare", markdown, data, args.out)
    return 0


def _kernel_isa() -> str:
    from rapidscore.kernels import _native

    if _native.implementation() != "native":
        return "python twin"
    return str(_native.core().resampling.isa())


if __name__ == "__main__":
    raise SystemExit(main())
