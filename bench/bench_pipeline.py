"""The device engine's host side against a simulated device (issue 39): does the model ever wait
for the host?

BERTScore's device engine (``BERTScore(backend="torch", device_engine=True)``) runs end to end
on this CPU with its model runner replaced by ``rapidscore.testing.simulated_device``: a runner
that returns correctly shaped hidden states after a delay proportional to its padded tokens,
sleeping with the GIL released, as a thread waiting on a GPU does. Everything else is real:
the plan, tokenisation (the embedded all-MiniLM-L6-v2's tokenizer), padding, placing rows,
matching (torch on the CPU) and the copies of the scores.

1. Host work: the call with an instant device (delay 0), overlapped engine, median of --reps.
2. The device's speed is set so that its busy time is --factor (>= 1) times that host work.
3. Overlapped and serial engines (``score_on_device(..., overlap=True / False)``) interleaved:
   end to end over the device's busy time. 1.0: the device never waits; the serial engine is
   about 1 + 1/factor. Issue 39's bound: overlapped <= 1.15 at factor >= 1.

Scores of the two engines are compared (they run the same batches: equal to the last bit).

    python bench/bench_pipeline.py                      # 10,000 pairs; results to bench/results/
    python bench/bench_pipeline.py --pairs 2000 --reps 3 --json /tmp/pipeline.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import common
import numpy as np

from rapidscore.testing.corpora import sentence_pairs

BOUND = 1.15


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=10000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--factor", type=float, default=1.0,
                        help="simulated device time over the host work (>= 1: the device is the bottleneck)")
    parser.add_argument("--batch-tokens", type=int, default=None,
                        help="padded tokens per batch (default: the encoder's GPU budget)")
    parser.add_argument("--out", default=str(common.RESULTS_DIR), help="directory for pipeline.md / pipeline.json")
    parser.add_argument("--json", default=None, help="also write the results' JSON here")
    args = parser.parse_args(argv)
    if args.factor < 1:
        parser.error(f"--factor must be >= 1 (the simulated device at least as slow as the host), got {args.factor}")
    if args.pairs < 1 or args.reps < 1:
        parser.error("--pairs and --reps must be >= 1")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch

    from rapidscore.bertscore import BERTScore
    from rapidscore.device.engine import score_on_device
    from rapidscore.encoder.tokens.batching import GPU_BATCH_TOKENS
    from rapidscore.encoder.model_source import read_config
    from rapidscore.testing.simulated_device import SimulatedDevice

    batch_tokens = args.batch_tokens or GPU_BATCH_TOKENS
    scorer = BERTScore(layer=6, backend="torch", device="cpu", device_engine=True, batch_tokens=batch_tokens)
    encoder = scorer.encoder
    device = SimulatedDevice(encoder.hidden_size, 0.0, vocab_size=int(read_config(encoder.model_dir)["vocab_size"]))
    encoder.runner = device
    cands, refs = sentence_pairs(args.pairs, seed=39)

    idle: dict[bool, list[dict]] = {True: [], False: []}  # device idle per run, by engine

    def run(overlap: bool):
        device.reset()
        start = time.perf_counter()
        result = score_on_device(scorer, scorer.plan(cands, refs), overlap=overlap)
        end = time.perf_counter()
        idle[overlap].append(device.idle(start, end))
        return end - start, device.busy_seconds, result


    run(True)  # warm-up: the tokenizer's thread pool, torch's kernels
    host = [run(True) for _ in range(args.reps)]
    host_seconds = common.median([h[0] for h in host])
    serial_host = common.median([run(False)[0] for _ in range(args.reps)])
    padded_tokens = device.tokens
    device.seconds_per_token = args.factor * host_seconds / padded_tokens

    for runs in idle.values():  # the timed runs only
        runs.clear()
    rows: dict[str, list[tuple[float, float]]] = {"overlapped": [], "serial": []}
    results = {}
    for rep in range(args.reps):
        order = ("overlapped", "serial") if rep % 2 == 0 else ("serial", "overlapped")
        for name in order:
            seconds, busy, results[name] = run(name == "overlapped")
            rows[name].append((seconds, busy))
    ratio = {name: common.median([s / b for s, b in values]) for name, values in rows.items()}
    end_to_end = {name: common.median([s for s, _ in values]) for name, values in rows.items()}
    busy = common.median([b for _, b in rows["overlapped"]])
    waits = {("overlapped" if overlap else "serial"): {part: common.median([w[part] for w in runs]) for part in runs[0]}
             for overlap, runs in idle.items()}
    f_diff = float(np.abs(results["overlapped"].f1.astype(np.float64) - results["serial"].f1).max())

    machine = common.machine_info()
    data = {
        "machine": machine, "versions": common.package_versions(), "date": common.now(),
        "commit": common.git_commit(), "command": common.command_line(), "torch_threads": torch.get_num_threads(),
        "pairs": args.pairs, "texts": len(set(cands) | set(refs)), "batch_tokens": batch_tokens,
        "padded_tokens": padded_tokens, "device_calls": device.calls, "reps": args.reps, "factor": args.factor,
        "host_seconds": host_seconds, "serial_host_seconds": serial_host,
        "seconds_per_token": device.seconds_per_token, "device_busy_seconds": busy,
        "late_seconds": device.late_seconds, "end_to_end": end_to_end, "ratio": ratio, "device_idle": waits,
        "per_rep": {name: [list(v) for v in values] for name, values in rows.items()},
        "max_abs_dF_overlapped_vs_serial": f_diff, "bound": BOUND, "met": ratio["overlapped"] <= BOUND,
    }
    markdown = render(data)
    print(markdown)
    common.write_results("pipeline", markdown, data, Path(args.out))
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    return 0


def render(data: dict) -> str:
    ratio, e2e, waits = data["ratio"], data["end_to_end"], data["device_idle"]
    return "\n".join([
        f"### Host side against a simulated device: {data['pairs']:,} pairs, MiniLM's tokenizer",
        "",
        f"- machine: {common.machine_line(data['machine'])}; torch threads {data['torch_threads']}",
        f"- date: {data['date']}; commit: {data['commit']}; command: `{data['command']}`",
        f"- {data['texts']:,} distinct texts, batches of {data['batch_tokens']:,} padded tokens: "
        f"{data['device_calls']} device calls, {data['padded_tokens']:,} padded tokens per call of score",
        f"- host work (instant device): overlapped engine {data['host_seconds']:.3f} s, serial "
        f"{data['serial_host_seconds']:.3f} s; simulated device set to {data['factor']:.2f}x the former: "
        f"{data['seconds_per_token'] * 1e6:.3f} us per padded token, busy {data['device_busy_seconds']:.3f} s "
        f"per call (lookups past their delay: {data['late_seconds'] * 1e3:.1f} ms)",
        f"- medians of {data['reps']} interleaved repetitions; F of the two engines differ by at most "
        f"{data['max_abs_dF_overlapped_vs_serial']:.1e}",
        "",
        "| engine | end to end (s) | end to end / device busy | bound | device idle before first batch (s) "
        "| between batches (s) | after last batch (s) |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *(f"| {label} | {e2e[name]:.3f} | {ratio[name]:.3f} | {bound} | {waits[name]['before']:.3f} | "
          f"{waits[name]['between']:.3f} | {waits[name]['after']:.3f} |"
          for name, label, bound in (
              ("overlapped", "overlapped (`device.chunk_pipeline`)",
               f"<= {data['bound']:.2f} ({'met' if data['met'] else 'NOT met'})"),
              ("serial", "serial (same stages, one thread)", ""))),
    ])


if __name__ == "__main__":
    raise SystemExit(main())
