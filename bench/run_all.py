"""Run the whole benchmark suite and write bench/RESULTS.md.

Runs every bench/bench_*.py in its own process (sizes chosen for a 2-core machine, see
DEFAULT_ARGS; override with --args), each of which writes bench/results/<area>.md and .json,
then merges all bench/results/*.md into bench/RESULTS.md under a header with the machine,
library versions, date, the commands run, and a table of the performance targets.

    python bench/run_all.py                      # everything, default sizes (~40 min on 2 cores)
    python bench/run_all.py --only bertscore,sentence
    python bench/run_all.py --args bertscore="--w3-pairs 1000"   # W3 at the issue size
    python bench/run_all.py --quick              # smoke run, small sizes (a few minutes)
    python bench/run_all.py --merge-only         # rebuild RESULTS.md from bench/results/
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import common

# Section order in RESULTS.md; scripts not listed run and merge after these, alphabetically.
ORDER = ("bertscore", "sentence", "matching", "ner", "abstention")
# Scripts run on their own, never by this one (bench/README.md): bench_gpu.py needs a CUDA GPU and
# writes RESULTS_GPU.md; bench_onnx_binding.py and bench_device_engine_cpu.py check one code path;
# bench_scale.py and bench_serving.py take long runs and start servers.
STANDALONE = ("gpu", "onnx_binding", "scale", "serving", "device_engine_cpu")

# Sizes for a 2-core machine (each script's own defaults otherwise).
DEFAULT_ARGS = {
    "bertscore": "--w1-pairs 2000 --w2-pairs 500 --w3-pairs 200 --w4-calls 200 --reps 3 --e2e-reps 3",
    "sentence": "--sentences 2000 --reps 3",
}
QUICK_ARGS = {
    "bertscore": "--w1-pairs 200 --w2-pairs 8 --w3-pairs 4 --w4-calls 40 --reps 2 --e2e-reps 1",
    "sentence": "--sentences 200 --reps 2",
    "matching": "--reps 3 --quick",
    "ner": "--records 10000 --reps 2 --e2e-records 2000",
    "abstention": "--n 5000 --reps 2",
}


def discover() -> list[str]:
    names = sorted(p.stem[len("bench_"):] for p in common.BENCH_DIR.glob("bench_*.py"))
    names = [n for n in names if n not in STANDALONE]
    return [n for n in ORDER if n in names] + [n for n in names if n not in ORDER]


def section_names() -> list[str]:
    names = sorted(p.stem for p in common.RESULTS_DIR.glob("*.md"))
    return [n for n in ORDER if n in names] + [n for n in names if n not in ORDER]


def load_json(name: str):
    path = common.RESULTS_DIR / f"{name}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _row(target: str, measured: str, ok: bool | None, note: str = "") -> str:
    status = {True: "met", False: "**short**", None: "not measured"}[ok]
    return f"| {target} | {measured} | {status} | {note} |"


def targets_table() -> list[str]:
    """Issue 4 and issue 5 targets next to what this run measured (from the JSON files)."""
    rows = []
    b = load_json("bertscore")
    if b:
        workloads = b.get("workloads", {})
        for key, target in (("W1", 1.5), ("W2", 1.3)):
            w = workloads.get(key)
            if w:
                rows.append(_row(f"{key} exact (fp32) >= {target}x `BERTScorer`", f"{w['speedup']:.2f}x",
                                 w["speedup"] >= target, w["size_note"]))
                over = w.get("pairs_dF_over_1e-5")
                note = (f"{over} of {w['pairs']:,} pairs over 1e-5" if over else
                        "bert-score's padding reproduced (`reference_batch_size=64`, as the drop-in)")
                rows.append(_row(f"{key} max abs dF <= 1e-5", f"{w['max_abs_dF']:.1e}", w["max_abs_dF"] <= 1e-5, note))
        e2e = b.get("end_to_end")
        if e2e:
            for which in ("rapidscore.bert_score.score", "rapidscore.bertscore.score"):
                c = e2e["contenders"].get(which)
                if c:
                    rows.append(_row(f"W1 `{which}` >= 3x `bert_score.score` end to end",
                                     f"{c['speedup_score_call']:.2f}x (process: {c['speedup_process']:.2f}x)",
                                     c["speedup_score_call"] >= 3.0, "fresh process, warm ONNX cache"))
        w2 = workloads.get("W2")
        if w2:
            e = w2["encoder"]
            rows.append(_row("W2 encoder >= 70% of the measured fp32 peak",
                             f"{e['rapidscore_fraction_of_peak']:.0%} of {b['peak_fp32_gflops']:.0f} GFLOP/s "
                             f"({e['rapidscore_fraction_of_adjacent_probe']:.0%} of the adjacent probe)",
                             e["rapidscore_fraction_of_peak"] >= 0.7))
        lat = b.get("latency")
        if lat:
            rows.append(_row("W4 p50 <= 1/5 of `BERTScorer`'s",
                             f"{lat['rapidscore BERTScore']['p50_ms']:.1f} ms vs "
                             f"{lat['bert_score.BERTScorer']['p50_ms']:.1f} ms = {lat['p50_ratio']:.2f}",
                             lat["p50_ratio"] <= 0.2))
        fast_rows = [(k, w["precisions"].get("bf16")) for k, w in workloads.items() if k in ("W1", "W2")]
        if any(r for _, r in fast_rows):
            for key, r in fast_rows:
                if r and "error" not in r:
                    ok = r["speedup_vs_BERTScorer"] >= 3 and r["mean_abs_dF_vs_fp32"] <= 5e-4 and \
                        r["kendall_tau_vs_fp32"] >= 0.995
                    rows.append(_row(f"{key} bf16 >= 3x, mean abs dF <= 5e-4, tau >= 0.995",
                                     f"{r['speedup_vs_BERTScorer']:.2f}x, {r['mean_abs_dF_vs_fp32']:.1e}, "
                                     f"{r['kendall_tau_vs_fp32']:.4f}", ok))
        else:
            rows.append(_row("W1, W2 `precision=\"bf16\"` >= 3x `BERTScorer`", "not offered by this build", None,
                             f"precisions: {', '.join(b.get('precisions_available', []))}"))
    m = load_json("matching")
    if m and isinstance(m.get("results"), list):
        for case in m["results"]:
            if "speedup" in case:
                rows.append(_row(f"W5 kernel >= 3x torch matching ({case.get('case')})", f"{case['speedup']:.1f}x",
                                 case["speedup"] >= 3.0))
    s = load_json("sentence")
    if s:
        rows.append(_row("sentence embeddings >= 1.5x `SentenceTransformer.encode` (issue 5)",
                         f"{s['speedup']:.2f}x", s["speedup"] >= 1.5, f"{s['sentences']:,} sentences"))
        rows.append(_row("sentence embedding parity <= 1e-5", f"{s['max_abs_diff_embeddings']:.1e}",
                         s["max_abs_diff_embeddings"] <= 1e-5))
    if not rows:
        return []
    return ["## Targets", "", "| target | measured | status | note |", "|---|---|---|---|", *rows, ""]


RUNS_FILE = common.RESULTS_DIR / "runs.json"


def record_runs(runs: list[dict]) -> dict:
    """Remember each script's last run (arguments, status, duration, date) across invocations,
    so a partial run (--only) still lists where every merged section came from."""
    try:
        known = json.loads(RUNS_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    for run in runs:
        known[run["name"]] = {key: run[key] for key in ("args", "status", "seconds", "finished")}
    if runs:
        RUNS_FILE.parent.mkdir(parents=True, exist_ok=True)
        RUNS_FILE.write_text(json.dumps(known, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return known


def merge(runs: list[dict], command: str) -> Path:
    machine = common.machine_info()
    versions = common.package_versions()
    lines = [
        "# rapidscore benchmark results",
        "",
        "Generated by `python bench/run_all.py` (see bench/README.md). Every comparison runs the "
        "competitor in the same run on the same inputs, interleaved; ratios are medians over "
        "repetitions. The machine may be shared with other work: absolute times vary, ratios much less.",
        "",
        f"- Date: {common.now()}",
        f"- Machine: {common.machine_line(machine)} ({machine['os']}, Python {machine['python']})",
        f"- Versions: {common.versions_line(versions)}",
        f"- Commit: {common.git_commit()}",
        f"- Command: `{command}`",
    ]
    known = record_runs(runs)
    this_time = {run["name"] for run in runs}
    if known:
        lines += ["", "| script | arguments | status | minutes | finished |", "|---|---|---|---:|---|"]
        for name in [n for n in ORDER if n in known] + sorted(set(known) - set(ORDER)):
            run = known[name]
            when = run["finished"] + (" (earlier invocation)" if runs and name not in this_time else "")
            lines.append(f"| bench_{name}.py | `{run['args'] or '(defaults)'}` | {run['status']} | "
                         f"{run['seconds'] / 60:.1f} | {when} |")
    lines.append("")
    lines += targets_table()
    for name in section_names():
        text = (common.RESULTS_DIR / f"{name}.md").read_text(encoding="utf-8").strip()
        lines += [text, ""]
    out = common.BENCH_DIR / "RESULTS.md"
    out.write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated scripts to run (names after bench_, e.g. bertscore,sentence)")
    parser.add_argument("--skip", default="", help="comma-separated scripts not to run")
    parser.add_argument("--args", action="append", default=[], metavar='NAME="ARGS"',
                        help="arguments for one script, replacing its default sizes (repeatable)")
    parser.add_argument("--quick", action="store_true", help="small sizes everywhere (smoke run, not for RESULTS)")
    parser.add_argument("--merge-only", action="store_true", help="only rebuild RESULTS.md from bench/results/")
    args = parser.parse_args(argv)

    command = common.command_line()
    if args.merge_only:
        print(merge([], command))
        return 0
    names = discover()
    if args.only:
        wanted = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = sorted(set(wanted) - set(names))
        if unknown:
            parser.error(f"unknown script(s) {unknown}; available: {names}")
        names = [n for n in names if n in wanted]
    names = [n for n in names if n not in {s.strip() for s in args.skip.split(",")}]
    chosen = dict(QUICK_ARGS if args.quick else DEFAULT_ARGS)
    for item in args.args:
        name, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--args expects NAME=\"ARGS\", got {item!r}")
        chosen[name.strip()] = value

    runs = []
    failed = 0
    for name in names:
        script = common.BENCH_DIR / f"bench_{name}.py"
        extra = chosen.get(name, "")
        cmd = [sys.executable, str(script), *shlex.split(extra)]
        print(f"=== bench_{name}.py {extra}", file=sys.stderr, flush=True)
        start = time.perf_counter()
        code = subprocess.call(cmd, cwd=common.REPO_ROOT)
        seconds = time.perf_counter() - start
        status = "ok" if code == 0 else f"failed (exit {code}); its section may be from an earlier run"
        failed += code != 0
        runs.append({"name": name, "args": extra, "status": status, "seconds": seconds, "finished": common.now()})
        print(f"=== bench_{name}.py: {status}, {seconds / 60:.1f} min", file=sys.stderr, flush=True)
    print(merge(runs, command))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
