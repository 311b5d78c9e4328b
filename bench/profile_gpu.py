"""Where every millisecond of the GPU engine goes (issue 39): torch.profiler over G1 and G3 of
bench/bench_gpu.py, broken down from the profiler's own events.

    python bench/profile_gpu.py --out DIR                           # on a CUDA machine
    python bench/profile_gpu.py --device cpu --smoke --out DIR      # every code path on a CPU
    python bench/profile_gpu.py --analyse DIR/trace_g1_fp16.json.gz # re-read a trace brought back

Workloads (the embedded all-MiniLM-L6-v2 at layer 6, as bench_gpu.py resolves it):

  G1  ``BERTScore(model, 6, backend="torch", device=..., precision=p)`` for p in --precisions
      (fp16, fp32): after a warm-up call, --pairs (10,000) held pairs (bench_gpu.held_pairs)
      timed unprofiled (median of --reps), then one ``score(cands, refs, reference_batch_size=64)``
      (bench_gpu's timed call) over the first --profile-pairs (4,000: many of the engine's
      chunks, its start and end included, and a trace of a few MiB) profiled.
  G3  --g3-calls (50) calls of one short pair, profiled together, per precision.
  Bare model: the Hugging Face model cut to layer 6 over the batches rapidscore's model ran for
      the --pairs pairs (bench_gpu.engine_batches / bare_model_times), and its achieved TFLOP/s of
      matrix products (FLOPs counted analytically: bench/gpu_peak.py) against the GPU's fp16 dense
      tensor peak.

Each profiled workload runs inside a ``record_function`` range ``profile_gpu:<workload> <precision>
<pairs|calls>=<n>`` that ends after the device is synchronised: its duration is the profiled wall
time, and the trace names its own size, so ``--analyse`` reads a trace without anything else.
The library is not edited; for the profiled call only, three wrappers are put in place and taken
away afterwards: ``encoder.runner`` (its public contract) inside ``rapidscore:model forward``,
``rapidscore.device.matching_torch.match_rows`` inside ``rapidscore:match_rows`` and the
encoder's tokenizer's ``encode`` inside ``rapidscore:tokenize``. The engine works in threads of
its own (tokeniser; chunk_pipeline's prepare and finish stages: matching runs in the latter), so
every thread is traced (torch's experimental ``profile_all_threads``; --calling-thread-only turns
it off, and a torch without it traces the calling thread only: the markdown then says that
matching could not be separated). The smoke run sets ``encoder.max_batch_size`` to 4, so that its
few pairs take the engine's threaded path as a GPU run's thousands do.

How every millisecond of the profiled wall time is classified (from the Chrome trace the profiler
exports; --analyse runs the same code):

* Device activity: on CUDA the ``kernel``, ``gpu_memcpy`` and ``gpu_memset`` events; on the CPU
  (smoke) the top-level torch operators of every traced thread, the CPU standing in for the
  device. Intervals are clipped to the window. Where intervals overlap (several streams), each
  instant is split evenly between the intervals active then, so the kinds add up to the union.
* Device idle (the host gaps): the window's time covered by no device interval, computed
  separately from the kinds (gaps between merged intervals), so kinds + idle = wall is a check.
* Kind of a device interval, first rule that applies:
  1. memcpy H2D / D2H / D2D: ``gpu_memcpy`` events (or names starting ``Memcpy``) by direction
     (HtoD, DtoH, DtoD; others go to "other"); memset: ``gpu_memset`` or ``Memset``; copies are
     copies wherever they were launched (match_rows' uploads and its one copy of P and R too);
  2. matching: a kernel whose launch (the CUDA runtime / driver call with the kernel's
     ``correlation`` id; on the CPU the operator itself) lies inside a ``rapidscore:match_rows``
     range of the same thread, i.e. every kernel launched from
     rapidscore.device.matching_torch.match_rows (its gathers, batched products, maxima and sums).
     Kernel names cannot tell these apart from the model's (both run batched products, gathers and
     reductions), so the launch decides; a kernel whose launch is not in the trace is classified
     by name (counted as "not attributable" in the tables);
  3. by the kernel's (operator's) lower-cased name, in this order (NAME_RULES):
     attention ``flash|fmha|attention|sdpa|scaled_dot_product|softmax|mem_eff``; layer norm
     ``layer_?norm|layernorm|rms_?norm``; GEMM / matmul ``gemm|gemv|cublas|cutlass|xmma|nvjet|
     wgmma|s1688|s16816|h1688|h16816|matmul|addmm|bmm|aten::mm|aten::linear|splitk|dot_kernel``;
     gather / index / scatter ``index|gather|scatter|embedding|take|masked_select|nonzero|
     catarraybatchedcopy|aten::cat|aten::stack``; reductions ``reduce|amax|amin|argmax|argmin|
     aten::sum|aten::mean|aten::max|aten::min|norm|cub::|devicescan|devicereduce|radix|sort|
     cumsum``; elementwise / activation ``elementwise|gelu|relu|silu|tanh|sigmoid|fill|copy|
     cast`` and the elementwise aten operators; anything else: other.
* Phase of a device interval (a second table): model forward (launched inside
  ``rapidscore:model forward``), matching, or other (padding indices, putting rows into the
  store, normalising rows, weights, copies of results: work outside both ranges).
* Host side, from the CUDA runtime / driver events whose start lies in the window: kernel
  launches (names containing ``Launch``: cudaLaunchKernel, cuLaunchKernel(Ex), cudaGraphLaunch),
  synchronisations (names containing ``Synchronize``: cudaStreamSynchronize,
  cudaDeviceSynchronize, cudaEventSynchronize) and synchronous copies (``cudaMemcpy``,
  ``cuMemcpy*`` without ``Async``): count and time each, in every thread (a synchronisation in the
  finish stage's thread does not stop the model's). Per host thread: the time inside top-level
  torch operators and CUDA API calls; the ``rapidscore:tokenize`` ranges seen in the trace.
* Tokenisation time is also measured outside the profiler: the encoder's tokenizer on the same
  distinct texts, in slices of the engine's TOKENIZE_SLICE, as its background thread runs it.

Output in --out: profile_gpu.md (the tables), profile_gpu.json (the numbers), and one Chrome trace
per profiled workload (trace_g1_fp16.json etc., gzipped when over --gzip-over-mb). With
``--device cpu --smoke`` the sizes are tiny, the activities are the CPU's only, fp16 is refused by
the engine on the CPU (skipped with its reason) and the numbers mean nothing: the markdown says so.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import datetime as _dt
import gzip
import json
import os
import re
import shutil
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bench_gpu
import common
import gpu_peak

LABEL_PREFIX = "profile_gpu:"
LABEL_MODEL = "rapidscore:model forward"
LABEL_MATCH = "rapidscore:match_rows"
LABEL_TOKENIZE = "rapidscore:tokenize"
DEFAULT_OUT = common.RESULTS_DIR / "profile_gpu"
PRECISIONS = ("fp16", "fp32")
SHORT_PAIR = ("The cat sat on the mat.", "A cat was sitting on the mat.")  # bench_gpu's G3 pair

KIND_GEMM, KIND_ATTENTION, KIND_NORM = "GEMM / matmul", "attention (sdpa / flash / softmax)", "layer norm"
KIND_ELEMENTWISE, KIND_GATHER, KIND_REDUCE = "elementwise / activation", "gather / index / scatter", "reductions"
KIND_MATCHING = "matching (kernels launched from match_rows)"
KIND_H2D, KIND_D2H, KIND_D2D, KIND_MEMSET, KIND_OTHER = "memcpy H2D", "memcpy D2H", "memcpy D2D", "memset", "other"
KINDS = (KIND_GEMM, KIND_ATTENTION, KIND_NORM, KIND_ELEMENTWISE, KIND_GATHER, KIND_REDUCE, KIND_MATCHING,
         KIND_H2D, KIND_D2H, KIND_D2D, KIND_MEMSET, KIND_OTHER)
IDLE = "device idle (host gaps)"
WALL = "profiled wall time"
PHASE_MODEL, PHASE_MATCH, PHASE_OTHER = "model forward", "matching", "other"

_ELEMENTWISE_OPS = ("add", "sub", "mul", "div", "where", "fill", "masked_fill", "clamp", "clamp_min", "copy",
                    "to", "_to_copy", "exp", "sqrt", "rsqrt", "pow", "neg", "abs", "eq", "ne", "lt", "le",
                    "gt", "ge", "zero", "zeros", "zeros_like", "ones", "full", "arange", "contiguous", "clone",
                    "double", "float", "half", "bitwise_not", "logical_not", "reciprocal", "empty_like")
NAME_RULES = (
    (KIND_ATTENTION, re.compile(r"flash|fmha|attention|sdpa|scaled_dot_product|softmax|mem_eff")),
    (KIND_NORM, re.compile(r"layer_?norm|layernorm|rms_?norm")),
    (KIND_GEMM, re.compile(r"gemm|gemv|cublas|cutlass|xmma|nvjet|wgmma|s1688|s16816|h1688|h16816|matmul|addmm"
                           r"|bmm|aten::mm\b|aten::linear|splitk|dot_kernel")),
    (KIND_GATHER, re.compile(r"index|gather|scatter|embedding|take|masked_select|nonzero|catarraybatchedcopy"
                             r"|aten::cat\b|aten::stack\b")),
    (KIND_REDUCE, re.compile(r"reduce|amax|amin|argmax|argmin|aten::sum\b|aten::mean\b|aten::max\b|aten::min\b"
                             r"|norm|cub::|devicescan|devicereduce|radix|sort|cumsum")),
    (KIND_ELEMENTWISE, re.compile(r"elementwise|gelu|relu|silu|tanh|sigmoid|fill|copy|cast"
                                  r"|aten::(" + "|".join(_ELEMENTWISE_OPS) + r")_?$")),
)
DEVICE_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}
API_CATEGORIES = {"cuda_runtime", "cuda_driver"}
SMOKE_SIZES = {"pairs": 8, "profile_pairs": 8, "g3_calls": 3, "reps": 1}


def log(message: str) -> None:
    print(f"[profile_gpu {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------
# Classification and the sweep (pure functions over trace events: --analyse runs them too)
# ------------------------------------------------------------------------------------------------

def copy_kind(name: str, category: str = "") -> str | None:
    """memcpy H2D / D2H / D2D, memset or other for a copy or memset; None for a kernel (rule 1)."""
    lower = name.lower()
    if category == "gpu_memcpy" or lower.startswith("memcpy"):
        for tag, kind in (("htod", KIND_H2D), ("dtoh", KIND_D2H), ("dtod", KIND_D2D)):
            if tag in lower:
                return kind
        return KIND_OTHER
    if category == "gpu_memset" or lower.startswith("memset"):
        return KIND_MEMSET
    return None


def _cat(event: dict) -> str:
    """An event's category, lower-cased ("" when it has none)."""
    return str(event.get("cat") or "").lower()


def kind_by_name(name: str, category: str = "") -> str:
    """The kind of a device interval from its category and name (rules 1 and 3 of the docstring)."""
    copy = copy_kind(name, category)
    if copy is not None:
        return copy
    lower = name.lower()
    for kind, pattern in NAME_RULES:
        if pattern.search(lower):
            return kind
    return KIND_OTHER


def split_by_kind(intervals, lo: float, hi: float) -> dict[str, float]:
    """Time of [lo, hi] covered by ``intervals`` ((start, end, kind)), per kind; an instant
    covered by several intervals is split evenly between them (so the kinds add up to the union)."""
    points = []
    for start, end, kind in intervals:
        start, end = max(start, lo), min(end, hi)
        if end > start:
            points.append((start, 1, kind))
            points.append((end, -1, kind))
    points.sort(key=lambda p: (p[0], p[1]))
    active: Counter = Counter()
    n_active, previous = 0, lo
    out: dict[str, float] = defaultdict(float)
    for t, delta, kind in points:
        if n_active > 0 and t > previous:
            segment = t - previous
            for name, count in active.items():
                if count:
                    out[name] += segment * count / n_active
        active[kind] += delta
        n_active += delta
        previous = t
    return dict(out)


def idle_time(intervals, lo: float, hi: float) -> float:
    """Time of [lo, hi] covered by no interval: the gaps between the merged intervals."""
    clipped = sorted((max(s, lo), min(e, hi)) for s, e, _ in intervals if min(e, hi) > max(s, lo))
    idle, reach = 0.0, lo
    for start, end in clipped:
        if start > reach:
            idle += start - reach
        reach = max(reach, end)
    return idle + max(0.0, hi - reach)


class Ranges:
    """The record_function ranges of one label per thread: which one holds an instant."""

    def __init__(self, events, label: str):
        by_thread: dict = defaultdict(list)
        for event in events:
            if event.get("name") == label and event.get("ph") == "X" and _cat(event) == "user_annotation":
                start = float(event["ts"])
                by_thread[event.get("tid")].append((start, start + float(event.get("dur", 0))))
        self.starts = {tid: [s for s, _ in sorted(r)] for tid, r in by_thread.items()}
        self.ends = {tid: [e for _, e in sorted(r)] for tid, r in by_thread.items()}
        self.count = sum(len(r) for r in by_thread.values())
        self.total = sum(e - s for r in by_thread.values() for s, e in r)

    def holds(self, tid, t: float) -> bool:
        starts = self.starts.get(tid)
        if not starts:
            return False
        k = bisect.bisect_right(starts, t) - 1
        return k >= 0 and t <= self.ends[tid][k]


def _top_level(ops):
    """The operators of one thread that no other operator of it encloses."""
    out, reach = [], float("-inf")
    for op in sorted(ops, key=lambda e: (float(e["ts"]), -float(e.get("dur", 0)))):
        start = float(op["ts"])
        if start >= reach:
            out.append(op)
            reach = start + float(op.get("dur", 0))
    return out


def find_window(events) -> dict:
    """The ``profile_gpu:`` range of the trace on the host (the first, if several; CUDA traces
    also hold a ``gpu_user_annotation`` of the same name, spanning its kernels only)."""
    for event in events:
        if (event.get("ph") == "X" and _cat(event) == "user_annotation"
                and str(event.get("name", "")).startswith(LABEL_PREFIX)):
            return event
    raise ValueError(f"no '{LABEL_PREFIX}...' range in the trace: not a trace of profile_gpu.py")


def parse_label(name: str) -> dict:
    """``profile_gpu:G1 fp16 pairs=4000`` -> {"workload": "G1", "precision": "fp16", "unit": "pairs", "n": 4000}."""
    words = name[len(LABEL_PREFIX):].split()
    out: dict = {"workload": words[0] if words else "?", "precision": words[1] if len(words) > 1 else "?",
                 "unit": "calls", "n": 1}
    for word in words[2:]:
        key, sep, value = word.partition("=")
        if sep and value.isdigit():
            out["unit"], out["n"] = key, int(value)
    return out


def analyse(events: list[dict]) -> dict:
    """Where the profiled window's wall time goes (see the module docstring), as numbers (µs)."""
    window = find_window(events)
    lo, hi = float(window["ts"]), float(window["ts"]) + float(window["dur"])
    main_tid = window.get("tid")
    label = parse_label(window["name"])
    model, match, tokenize = (Ranges(events, name) for name in (LABEL_MODEL, LABEL_MATCH, LABEL_TOKENIZE))
    launches = {}  # correlation id -> (thread, start) of the API call that launched the work
    api_calls = []
    for event in events:
        if event.get("ph") == "X" and _cat(event) in API_CATEGORIES:
            correlation = (event.get("args") or {}).get("correlation")
            if correlation is not None:
                launches[correlation] = (event.get("tid"), float(event["ts"]))
            if lo <= float(event["ts"]) <= hi:
                api_calls.append(event)
    ops_by_thread: dict = defaultdict(list)
    for event in events:
        if event.get("ph") == "X" and _cat(event) == "cpu_op":
            ops_by_thread[event.get("tid")].append(event)
    top_by_thread = {tid: _top_level(ops) for tid, ops in ops_by_thread.items()}
    device_events = [e for e in events if e.get("ph") == "X" and _cat(e) in DEVICE_CATEGORIES]
    source = "CUDA kernels, copies and memsets"
    if not device_events:  # a CPU run (or a CUDA run without CUPTI activity): the threads' operators
        device_events = [op for ops in top_by_thread.values() for op in ops]
        source = ("top-level torch operators of every traced thread, standing in for device work "
                  "(no device events in the trace)")
    intervals, phases = [], Counter()
    phase_time: dict[str, float] = defaultdict(float)
    kernels: dict = defaultdict(lambda: [0, 0.0])
    attributed = unattributed = 0
    for event in device_events:
        start, duration = float(event["ts"]), float(event.get("dur", 0))
        if start + duration < lo or start > hi:
            continue
        name, category = str(event.get("name", "")), _cat(event)
        if category in DEVICE_CATEGORIES:
            launch = launches.get((event.get("args") or {}).get("correlation"))
        else:
            launch = (event.get("tid"), start)
        if launch is None:
            unattributed += 1
            phase = PHASE_OTHER
        else:
            attributed += 1
            phase = (PHASE_MATCH if match.holds(*launch) else PHASE_MODEL if model.holds(*launch) else PHASE_OTHER)
        kind = copy_kind(name, category) or (KIND_MATCHING if phase == PHASE_MATCH else kind_by_name(name, category))
        intervals.append((start, start + duration, kind))
        phases[phase] += 1
        phase_time[phase] += min(start + duration, hi) - max(start, lo)
        entry = kernels[(name[:120], kind, phase)]
        entry[0] += 1
        entry[1] += duration
    by_kind = split_by_kind(intervals, lo, hi)
    idle = idle_time(intervals, lo, hi)
    raw_by_kind: dict[str, float] = defaultdict(float)
    count_by_kind: Counter = Counter()
    for start, end, kind in intervals:
        raw_by_kind[kind] += min(end, hi) - max(start, lo)
        count_by_kind[kind] += 1

    api: dict = defaultdict(lambda: [0, 0.0])
    for event in api_calls:
        api[event["name"]][0] += 1
        api[event["name"]][1] += float(event.get("dur", 0))
    launch_names = [n for n in api if "launch" in n.lower()]
    sync_names = [n for n in api if "synchronize" in n.lower()]
    sync_copy_names = [n for n in api if re.fullmatch(r"cu(da)?Memcpy(?!.*Async)\w*", n)]
    ops_main = [e for e in top_by_thread.get(main_tid, []) if lo <= float(e["ts"]) <= hi]
    threads: dict = defaultdict(lambda: {"ops": 0, "ops_us": 0.0, "api_calls": 0, "api_us": 0.0})
    for tid, ops in top_by_thread.items():
        for op in ops:
            if lo <= float(op["ts"]) <= hi:
                threads[tid]["ops"] += 1
                threads[tid]["ops_us"] += min(float(op["ts"]) + float(op.get("dur", 0)), hi) - float(op["ts"])
    for event in api_calls:
        threads[event.get("tid")]["api_calls"] += 1
        threads[event.get("tid")]["api_us"] += float(event.get("dur", 0))
    host_threads = sorted(({"thread": "calling" if tid == main_tid else str(tid), **t} for tid, t in threads.items()),
                          key=lambda t: (t["thread"] != "calling", -t["ops_us"] - t["api_us"]))
    device_kernels = sum(1 for s, e, k in intervals if k not in (KIND_H2D, KIND_D2H, KIND_D2D, KIND_MEMSET))
    return {
        "label": window["name"], **label, "source": source, "wall_us": hi - lo,
        "by_kind_us": {kind: by_kind.get(kind, 0.0) for kind in KINDS}, "idle_us": idle,
        "busy_us": sum(by_kind.values()),
        "raw_by_kind_us": {kind: raw_by_kind.get(kind, 0.0) for kind in KINDS},
        "count_by_kind": {kind: count_by_kind.get(kind, 0) for kind in KINDS},
        "device_intervals": len(intervals), "kernels": device_kernels,
        "launch_attributed": attributed, "launch_unattributed": unattributed,
        "phases": {phase: {"intervals": phases.get(phase, 0), "busy_us": phase_time.get(phase, 0.0)}
                   for phase in (PHASE_MODEL, PHASE_MATCH, PHASE_OTHER)},
        "launches": {"names": sorted(launch_names), "count": sum(api[n][0] for n in launch_names),
                     "us": sum(api[n][1] for n in launch_names)},
        "syncs": {n: {"count": api[n][0], "us": api[n][1]} for n in sorted(sync_names + sync_copy_names)},
        "api_top": sorted(([n, c, us] for n, (c, us) in api.items()), key=lambda r: -r[2])[:12],
        "host_in_ops_us": sum(min(float(e["ts"]) + float(e.get("dur", 0)), hi) - float(e["ts"]) for e in ops_main),
        "host_top_level_ops": len(ops_main), "host_threads": host_threads,
        "ranges": {"model forward": {"count": model.count, "us": model.total},
                   "match_rows": {"count": match.count, "us": match.total},
                   "tokenize": {"count": tokenize.count, "us": tokenize.total}},
        "top_kernels": sorted(([n, k, p, c, us] for (n, k, p), (c, us) in kernels.items()), key=lambda r: -r[4])[:15],
    }


def load_trace(path: Path) -> list[dict]:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        data = json.load(handle)
    return data["traceEvents"] if isinstance(data, dict) else data


# ------------------------------------------------------------------------------------------------
# Markdown
# ------------------------------------------------------------------------------------------------

def _ms(us) -> str:
    return "n/a" if us is None else f"{us / 1000.0:.3f}"


def _pct(part, whole) -> str:
    return "n/a" if part is None or not whole else f"{100.0 * part / whole:.1f}%"


def _num(value, digits: int = 2) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.{digits}f}" if isinstance(value, float) else f"{value:,}"


def render_breakdown(a: dict) -> list[str]:
    """The tables of one profiled window."""
    wall, n, unit = a["wall_us"], max(a["n"], 1), a["unit"]
    per = unit[:-1] if unit.endswith("s") else unit
    lines = [f"Device activity: {a['source']}. {a['kernels']:,} kernels ({a['kernels'] / n:,.1f} per {per}), "
             f"{a['device_intervals']:,} device intervals in all; launches attributed to their API call: "
             f"{a['launch_attributed']:,}, not attributable: {a['launch_unattributed']:,}.", "",
             "| where the wall time goes | ms | share of wall | intervals | ms summed (overlaps counted twice) |",
             "|---|---:|---:|---:|---:|"]
    for kind in KINDS:
        lines.append(f"| device: {kind} | {_ms(a['by_kind_us'][kind])} | {_pct(a['by_kind_us'][kind], wall)} | "
                     f"{a['count_by_kind'][kind]:,} | {_ms(a['raw_by_kind_us'][kind])} |")
    lines.append(f"| {IDLE} | {_ms(a['idle_us'])} | {_pct(a['idle_us'], wall)} | | |")
    lines.append(f"| **{WALL}** | {_ms(wall)} | 100.0% | | |")
    total = a["busy_us"] + a["idle_us"]
    lines += ["", f"Rows above the wall time add up to {_ms(total)} ms ({_pct(total, wall)} of the wall time); "
              f"device busy {_pct(a['busy_us'], wall)}, idle {_pct(a['idle_us'], wall)}.", "",
              f"| host side | count | ms | per {per} |", "|---|---:|---:|---:|",
              f"| kernel launches ({', '.join(a['launches']['names']) or 'none in the trace'}) | "
              f"{a['launches']['count']:,} | {_ms(a['launches']['us'])} | {a['launches']['count'] / n:,.1f} |"]
    if a["syncs"]:
        lines += [f"| synchronisation: {name} | {s['count']:,} | {_ms(s['us'])} | {s['count'] / n:,.2f} |"
                  for name, s in a["syncs"].items()]
    else:
        lines.append("| synchronisations (cuda*Synchronize, synchronous cudaMemcpy) | 0 | 0.000 | 0 |")
    lines += [f"| calling thread inside top-level torch operators | {a['host_top_level_ops']:,} | "
              f"{_ms(a['host_in_ops_us'])} | |"]
    for name, key in (("model forward (encoder.runner)", "model forward"), ("match_rows", "match_rows"),
                      ("tokenizer encode", "tokenize")):
        r = a["ranges"][key]
        lines.append(f"| range {name} | {r['count']:,} | {_ms(r['us'])} | |")
    if a["host_threads"]:
        lines += ["", "| host thread | top-level torch operators | ms inside them | CUDA API calls | ms in them |",
                  "|---|---:|---:|---:|---:|"]
        lines += [f"| {t['thread']} | {t['ops']:,} | {_ms(t['ops_us'])} | {t['api_calls']:,} | {_ms(t['api_us'])} |"
                  for t in a["host_threads"][:8]]
    if not a["ranges"]["match_rows"]["count"]:
        lines += ["", "No `rapidscore:match_rows` range in this trace (match_rows not called, or called in a thread "
                  "that was not traced: the engine matches in its finish thread, traced only with all threads on), "
                  "so matching's kernels are in the kinds by name above."]
    lines += ["", "| device time by phase (where the work was launched) | intervals | ms (summed) |",
              "|---|---:|---:|"]
    lines += [f"| {phase} | {p['intervals']:,} | {_ms(p['busy_us'])} |" for phase, p in a["phases"].items()]
    if a["api_top"]:
        lines += ["", "| CUDA API call (busiest 12) | count | ms |", "|---|---:|---:|"]
        lines += [f"| {name} | {count:,} | {_ms(us)} |" for name, count, us in a["api_top"]]
    if a["top_kernels"]:
        lines += ["", "| kernel / operator (busiest 15) | kind | phase | count | ms |", "|---|---|---|---:|---:|"]
        lines += [f"| `{name.replace('|', '/')[:100]}` | {kind} | {phase} | {count:,} | {_ms(us)} |"
                  for name, kind, phase, count, us in a["top_kernels"]]
    return lines + [""]


def render(data: dict) -> str:
    env = data["environment"]
    lines = ["# Where the time goes: torch.profiler over G1 and G3 (issue 39)", ""]
    if data["smoke"]:
        lines += ["**Smoke run** (`--device cpu --smoke`): tiny sizes, CPU activities only, the CPU's "
                  "operators standing in for device kernels. These numbers measure nothing and must not be "
                  "quoted.", ""]
    lines += [f"- GPU: {env.get('gpu') or 'none (CPU)'}; fp16 dense tensor peak: {data['peak_label']}",
              f"- NVIDIA driver: {env.get('driver', 'n/a')}; CUDA (torch build): {env.get('torch_cuda')}",
              f"- host: {common.machine_line(data['machine'])}",
              f"- versions: {common.versions_line(data['versions'])}",
              f"- date: {data['date']}; commit: {data['commit']}",
              f"- command: `{data['command']}`",
              f"- profiler: activities {', '.join(data['activities'])}; all threads traced: {data['all_threads']}; "
              "classification rules: bench/profile_gpu.py's docstring (summarised at the end)", ""]
    lines += ["## Summary", "",
              "| workload | profiled | unprofiled s (same size) | profiled wall ms | device busy | device idle | "
              "kernels | per pair / call | launches | syncs (ms) |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for key, w in data["workloads"].items():
        a = w.get("analysis")
        if not a:
            lines.append(f"| {key} | {w.get('skipped', w.get('error', 'n/a'))} | | | | | | | | |")
            continue
        syncs = sum(s["count"] for s in a["syncs"].values())
        sync_us = sum(s["us"] for s in a["syncs"].values())
        lines.append(f"| {key} | {a['n']:,} {a['unit']} | {_num(w.get('unprofiled_profiled_size_s'), 4)} | "
                     f"{_ms(a['wall_us'])} | {_pct(a['busy_us'], a['wall_us'])} | {_pct(a['idle_us'], a['wall_us'])} | "
                     f"{a['kernels']:,} | {a['kernels'] / max(a['n'], 1):,.1f} | {a['launches']['count']:,} | "
                     f"{syncs:,} ({_ms(sync_us)}) |")
    lines += [""]
    bare = data.get("bare_model")
    if bare:
        lines += [f"## Bare model: matrix-product rate ({bare['batches']} batches of rapidscore's model for "
                  f"{bare['pairs']:,} pairs, {bare['padded_tokens']:,} padded tokens, layer {bare['layers']})", "",
                  f"FLOPs counted analytically (bench/gpu_peak.py: per token and layer 2·4h² + 2·2h·f + 2·2·L·h, "
                  f"h {bare['dims']['hidden']}, f {bare['dims']['ffn']}, L the batch's padded length): "
                  f"{bare['flops'] / 1e12:.3f} TFLOP per pass. Peak: {data['peak_label']}.", "",
                  "| what | seconds | TFLOP/s | share of the fp16 dense peak |", "|---|---:|---:|---:|"]
        for mode, r in bare["modes"].items():
            share = _pct(r["share_of_fp16_peak"], 1.0) if mode in ("fp16", "bf16") else "-"
            lines.append(f"| bare model {mode} | {_num(r['seconds'], 4)} | {_num(r['tflops_per_s'], 2)} | {share} |")
        for mode, why in bare["skipped"].items():
            lines.append(f"| bare model {mode} | skipped: {why} | | |")
        for precision, r in bare.get("end_to_end", {}).items():
            lines.append(f"| rapidscore {precision} end to end (same FLOPs) | {_num(r['seconds'], 4)} | "
                         f"{_num(r['tflops_per_s'], 2)} | {_pct(r['share_of_fp16_peak'], 1.0)} |")
        lines += [""]
    if data.get("bare_model_error"):
        lines += [f"Bare model: failed ({data['bare_model_error']}).", ""]
    for key, w in data["workloads"].items():
        lines += [f"## {key}: {w['title']}", ""]
        if "skipped" in w or "error" in w:
            lines += [f"Not profiled: {w.get('skipped') or w.get('error')}", ""]
            continue
        lines += _render_timing(w)
        lines += render_breakdown(w["analysis"])
        trace = w.get("trace")
        if trace:
            lines += [f"Trace: `{trace['file']}` ({trace['mib']:.1f} MiB; open in chrome://tracing or Perfetto).", ""]
    lines += ["## How the times are classified", ""]
    lines += ["- " + line for line in CLASSIFICATION_NOTES]
    return "\n".join(lines) + "\n"


CLASSIFICATION_NOTES = (
    "Wall time: the `profile_gpu:` record_function range around the profiled call(s), which ends after "
    "the device is synchronised; the profiler's own cost is in it (compare with the unprofiled time).",
    "Device rows: CUDA kernels, copies and memsets clipped to the window; an instant covered by several "
    "(streams overlapping) is split evenly between them. Idle: the window's time covered by none, computed "
    "separately; so the rows adding up to the wall time is a check of both.",
    "Copies and memsets by direction wherever launched. Matching: every other kernel whose launch call "
    "(matched by correlation id) lies inside the "
    "`rapidscore:match_rows` range put around rapidscore.device.matching_torch.match_rows for the profiled "
    "call; the other kinds by kernel name (NAME_RULES in the script, first match): attention, layer norm, "
    "GEMM (gemm, cutlass, xmma, nvjet, ...), gather / index / scatter, reductions, elementwise.",
    "Host side: CUDA runtime and driver calls starting in the window: launches (names with `Launch`), "
    "synchronisations (names with `Synchronize`) and synchronous `cudaMemcpy`.",
    "Tokenisation: timed outside the profiler with the encoder's tokenizer on the same distinct texts (the "
    "engine tokenises in a background thread, overlapped with the model).",
)


def _render_timing(w: dict) -> list[str]:
    a = w["analysis"]
    lines = []
    if w["workload"] == "G1":
        rate = w["pairs"] / w["unprofiled_s"] if w.get("unprofiled_s") else None
        lines += [f"Unprofiled: {w['pairs']:,} pairs in {_num(w.get('unprofiled_s'), 4)} s (median of {w['reps']}; "
                  f"{_num(rate, 0)} pairs/s); {a['n']:,} pairs in {_num(w.get('unprofiled_profiled_size_s'), 4)} s. "
                  f"Profiled: {a['n']:,} pairs, {_ms(a['wall_us'])} ms of wall time "
                  f"({_num(w.get('profiler_overhead'), 2)}x the unprofiled call: the profiler's own cost)."]
    else:
        lines += [f"Unprofiled: one short pair, {w['calls']} calls: p50 {_num(w.get('unprofiled_p50_ms'), 3)} ms, "
                  f"p99 {_num(w.get('unprofiled_p99_ms'), 3)} ms. Profiled: {a['n']} calls together, "
                  f"{_ms(a['wall_us'])} ms ({_ms(a['wall_us'] / max(a['n'], 1))} ms per call; "
                  f"{_num(w.get('profiler_overhead'), 2)}x unprofiled)."]
    tok = w.get("tokenize")
    if tok:
        lines += ["", f"Tokenisation alone (the encoder's tokenizer, outside the profiler, {tok['how']}): "
                  + "; ".join(f"{r['texts']:,} distinct texts in {r['seconds'] * 1000:.2f} ms" for r in tok["runs"])
                  + (f" ({_pct(tok['runs'][-1]['seconds'], w.get('unprofiled_s'))} of the unprofiled call)"
                     if w.get("unprofiled_s") else "") + "."]
    return lines + [""]


# ------------------------------------------------------------------------------------------------
# Profiling
# ------------------------------------------------------------------------------------------------

class AnnotatedRunner:
    """``encoder.runner`` inside a ``rapidscore:model forward`` range (its public contract)."""

    def __init__(self, runner) -> None:
        self.runner = runner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.runner, name)

    def __call__(self, *args, **kwargs) -> Any:
        from torch.profiler import record_function

        with record_function(LABEL_MODEL):
            return self.runner(*args, **kwargs)


class AnnotatedTokenizer:
    """The encoder's tokenizer with ``encode`` inside a ``rapidscore:tokenize`` range."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tokenizer, name)

    def encode(self, *args, **kwargs) -> Any:
        from torch.profiler import record_function

        with record_function(LABEL_TOKENIZE):
            return self.tokenizer.encode(*args, **kwargs)


@contextlib.contextmanager
def annotated(scorer) -> Iterator[None]:
    """The three wrappers of the docstring in place for the block, the originals back afterwards."""
    from torch.profiler import record_function

    from rapidscore.device import matching_torch

    encoder = scorer.encoder
    runner, tokenizer, match_rows = encoder.runner, encoder.tokenizer, matching_torch.match_rows

    def annotated_match_rows(*args, **kwargs):
        with record_function(LABEL_MATCH):
            return match_rows(*args, **kwargs)

    encoder.runner = AnnotatedRunner(runner)
    encoder.tokenizer = AnnotatedTokenizer(tokenizer)
    matching_torch.match_rows = annotated_match_rows
    try:
        yield
    finally:
        encoder.runner = runner
        encoder.tokenizer = tokenizer
        matching_torch.match_rows = match_rows


def all_threads_config() -> Any:
    """torch's experimental config that traces every thread, or None where this torch lacks it."""
    try:
        from torch._C._profiler import _ExperimentalConfig

        return _ExperimentalConfig(profile_all_threads=True)
    except (ImportError, TypeError, RuntimeError) as exc:
        log(f"profile_all_threads is not available in this torch ({type(exc).__name__}: {exc}): "
            "the calling thread only")
        return None


def _profiler(cuda: bool, all_threads: bool):
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    kwargs: dict = {}
    config = all_threads_config() if all_threads else None
    if config is not None:
        kwargs["experimental_config"] = config
    return profile(activities=activities, record_shapes=False, with_stack=False, profile_memory=False, **kwargs)


def profile_window(label: str, run, device, trace_path: Path, all_threads: bool) -> tuple[float, dict]:
    """Run ``run()`` once inside the profiler and the ``label`` range (device synchronised before
    the range ends); export the trace and analyse it. Returns (seconds, analysis)."""
    from torch.profiler import record_function

    device.sync()
    try:
        with _profiler(device.cuda, all_threads) as prof, record_function(label):
            start = time.perf_counter()
            run()
            device.sync()
            seconds = time.perf_counter() - start
        prof.export_chrome_trace(str(trace_path))
    except Exception as exc:  # the experimental all-threads mode must not cost the profile
        if not all_threads:
            raise
        log(f"  profiling with every thread traced failed ({type(exc).__name__}: {exc}); again, calling thread only")
        return profile_window(label, run, device, trace_path, False)
    return seconds, analyse(load_trace(trace_path))


def finish_trace(path: Path, gzip_over_mb: float) -> dict:
    """Gzip the trace when it is over the limit; its file name and size."""
    size = path.stat().st_size
    if size > gzip_over_mb * 2**20:
        packed = path.with_name(path.name + ".gz")
        with open(path, "rb") as source, gzip.open(packed, "wb", compresslevel=6) as target:
            shutil.copyfileobj(source, target)
        path.unlink()
        path = packed
    return {"file": path.name, "mib": path.stat().st_size / 2**20, "raw_mib": size / 2**20}


def time_tokenizer(encoder, texts: list[str], slice_size: int) -> dict:
    """The encoder's tokenizer over ``texts`` in slices, as the engine's background thread runs it."""
    start = time.perf_counter()
    for k in range(0, len(texts), slice_size):
        encoder.tokenizer.encode(texts[k:k + slice_size])
    return {"texts": len(texts), "seconds": time.perf_counter() - start}


def distinct_texts(cands, refs) -> list[str]:
    return list(dict.fromkeys(t.strip() for t in list(cands) + list(refs)))


def g1_workload(scorer, precision: str, device, cands, refs, args, out: Path) -> dict:
    from rapidscore.device.engine import TOKENIZE_SLICE

    n_prof = min(args.profile_pairs, len(cands))
    pc, pr = cands[:n_prof], refs[:n_prof]
    w: dict = {"workload": "G1", "precision": precision, "pairs": len(cands), "reps": args.reps,
               "title": f"{precision}, all-MiniLM-L6-v2 (embedded), layer 6, {len(cands):,} pairs timed, "
                        f"{n_prof:,} profiled"}

    def call(c, r):
        return scorer.score(c, r, reference_batch_size=64)

    log(f"[G1 {precision}] warm-up over {len(cands)} pairs")
    call(cands, refs)
    device.sync()
    for key, (c, r) in (("unprofiled_s", (cands, refs)), ("unprofiled_profiled_size_s", (pc, pr))):
        samples = []
        for _ in range(args.reps):
            start = time.perf_counter()
            call(c, r)
            device.sync()
            samples.append(time.perf_counter() - start)
        w[key] = common.median(samples)
    log(f"  unprofiled: {len(cands)} pairs {w['unprofiled_s']:.3f} s, {n_prof} pairs "
        f"{w['unprofiled_profiled_size_s']:.3f} s")
    w["tokenize"] = {"how": f"in slices of {TOKENIZE_SLICE} texts, as the engine's background thread runs it",
                     "runs": [
        time_tokenizer(scorer.encoder, distinct_texts(pc, pr), TOKENIZE_SLICE),
        time_tokenizer(scorer.encoder, distinct_texts(cands, refs), TOKENIZE_SLICE)]}
    trace = out / f"trace_g1_{precision}.json"
    with annotated(scorer):
        seconds, w["analysis"] = profile_window(f"{LABEL_PREFIX}G1 {precision} pairs={n_prof}",
                                                lambda: call(pc, pr), device, trace, args.all_threads)
    w["profiled_s"] = seconds
    w["profiler_overhead"] = seconds / w["unprofiled_profiled_size_s"] if w["unprofiled_profiled_size_s"] else None
    w["trace"] = finish_trace(trace, args.gzip_over_mb)
    log(f"  profiled {n_prof} pairs: {seconds:.3f} s; device busy "
        f"{_pct(w['analysis']['busy_us'], w['analysis']['wall_us'])}; trace {w['trace']['file']} "
        f"{w['trace']['mib']:.1f} MiB")
    return w


def g3_workload(scorer, precision: str, device, args, out: Path) -> dict:
    cand, ref = SHORT_PAIR
    calls = args.g3_calls
    w: dict = {"workload": "G3", "precision": precision, "calls": calls,
               "title": f"{precision}, one short pair, {calls} calls (all-MiniLM-L6-v2, layer 6)"}

    def run_calls():
        for _ in range(calls):
            scorer.score([cand], [ref])

    log(f"[G3 {precision}] {calls} calls of one short pair")
    for _ in range(5):
        scorer.score([cand], [ref])
    samples = []
    for _ in range(calls):
        device.sync()
        start = time.perf_counter()
        scorer.score([cand], [ref])
        device.sync()
        samples.append((time.perf_counter() - start) * 1000.0)
    w["unprofiled_p50_ms"], w["unprofiled_p99_ms"] = common.percentile(samples, 50), common.percentile(samples, 99)
    w["unprofiled_profiled_size_s"] = sum(samples) / 1000.0
    w["tokenize"] = {"how": "in one call, as the engine does for one pair",
                     "runs": [time_tokenizer(scorer.encoder, [cand, ref], 2)]}
    trace = out / f"trace_g3_{precision}.json"
    with annotated(scorer):
        seconds, w["analysis"] = profile_window(f"{LABEL_PREFIX}G3 {precision} calls={calls}", run_calls, device,
                                                trace, args.all_threads)
    w["profiled_s"] = seconds
    w["profiler_overhead"] = seconds / w["unprofiled_profiled_size_s"] if w["unprofiled_profiled_size_s"] else None
    w["trace"] = finish_trace(trace, args.gzip_over_mb)
    log(f"  p50 {w['unprofiled_p50_ms']:.2f} ms unprofiled; profiled {seconds * 1000 / calls:.2f} ms per call")
    return w


def bare_model(device, model_dir: Path, scorer, cands, refs, reps: int, gpu_name, g1: dict) -> dict:
    """bench_gpu's bare model over rapidscore's batches, and its matrix-product rate."""
    batches, how = bench_gpu.engine_batches(scorer, cands, refs)
    shapes = [tuple(ids.shape) for ids, _ in batches]
    dims = gpu_peak.model_dims(model_dir)
    flops = gpu_peak.encoder_flops(dims["hidden"], dims["ffn"], 6, shapes)
    log(f"[bare model] {len(batches)} batches ({how}); {flops / 1e12:.3f} TFLOP per pass")
    timed = bench_gpu.bare_model_times(device, model_dir, 6, batches, reps)
    out = {"batches": len(batches), "batches_from": how, "pairs": len(cands), "layers": 6, "dims": dims,
           "padded_tokens": int(sum(b * n for b, n in shapes)), "flops": flops, "skipped": timed["skipped"],
           "attention": timed["attention"],
           "modes": {mode: gpu_peak.achieved(flops, s, gpu_name) for mode, s in timed["seconds"].items()},
           "end_to_end": {p: gpu_peak.achieved(flops, w["unprofiled_s"], gpu_name)
                          for p, w in g1.items() if w.get("unprofiled_s")}}
    return out


# ------------------------------------------------------------------------------------------------
# Main
# ------------------------------------------------------------------------------------------------

def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, CPU activities: code paths only")
    parser.add_argument("--out", default=None, help=f"output folder (default {DEFAULT_OUT}; required with --smoke)")
    parser.add_argument("--workloads", default="G1,G3", help="comma-separated subset of G1,G3")
    parser.add_argument("--precisions", default=",".join(PRECISIONS))
    parser.add_argument("--pairs", type=int, default=10000, help="G1 pairs timed unprofiled")
    parser.add_argument("--profile-pairs", type=int, default=4000, help="G1 pairs profiled (the first of --pairs)")
    parser.add_argument("--g3-calls", type=int, default=50)
    parser.add_argument("--reps", type=int, default=3, help="repetitions of the unprofiled timings")
    parser.add_argument("--no-bare", action="store_true", help="skip the bare model's TFLOP/s")
    parser.add_argument("--calling-thread-only", dest="all_threads", action="store_false",
                        help="trace the calling thread's operators and ranges only (default: every thread, "
                             "torch's experimental profile_all_threads: the engine prepares, matches and "
                             "tokenises in threads of its own)")
    parser.add_argument("--gzip-over-mb", type=float, default=8.0, help="gzip traces larger than this (MiB)")
    parser.add_argument("--cache-dir", default=os.environ.get("RAPIDSCORE_BENCH_CACHE",
                                                              str(Path.home() / ".cache" / "rapidscore-bench")))
    parser.add_argument("--analyse", nargs="+", metavar="TRACE", default=None,
                        help="only analyse these traces (.json or .json.gz) and print the tables")
    args = parser.parse_args(argv)
    if args.analyse:
        return args
    if args.smoke:
        if args.out is None:
            parser.error("--smoke needs --out: a smoke run never writes to bench/results")
        for name, value in SMOKE_SIZES.items():
            if getattr(args, name) == parser.get_default(name):
                setattr(args, name, value)
    elif args.device == "cpu":
        parser.error("--device cpu is for the smoke run only (--device cpu --smoke --out DIR)")
    args.workloads = [w.strip().upper() for w in args.workloads.split(",") if w.strip()]
    if set(args.workloads) - {"G1", "G3"}:
        parser.error("--workloads: choose from G1,G3")
    args.precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
    args.out = Path(args.out) if args.out else DEFAULT_OUT
    return args


def analyse_files(paths) -> int:
    status = 0
    for path in paths:
        try:
            a = analyse(load_trace(Path(path)))
        except (OSError, ValueError, KeyError) as exc:
            print(f"profile_gpu: {path}: {exc}", file=sys.stderr)
            status = 1
            continue
        print(f"## {path}: {a['label']}\n")
        print("\n".join(render_breakdown(a)))
        print("```json\n" + json.dumps(a, indent=1) + "\n```\n")
    return status


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.analyse:
        return analyse_files(args.analyse)
    problem = bench_gpu.check_device(argparse.Namespace(device=args.device, smoke=args.smoke))
    if problem:
        print(f"profile_gpu: {problem}", file=sys.stderr)
        return 2
    common.offline_cache(args.cache_dir)
    device = bench_gpu.Device(args.device)
    env = device.describe()
    gpu_name = env.get("gpu")
    peak, peak_label = gpu_peak.fp16_dense_peak(gpu_name)
    args.out.mkdir(parents=True, exist_ok=True)
    minilm = bench_gpu.minilm_dir()
    if args.all_threads and all_threads_config() is None:
        args.all_threads = False
    data: dict = {"smoke": args.smoke, "command": common.command_line(),
                  "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                  "commit": common.git_commit(), "machine": common.machine_info(),
                  "versions": common.package_versions(bench_gpu.GPU_PACKAGES), "environment": env,
                  "peak_label": peak_label, "fp16_peak_flops": peak, "all_threads": args.all_threads,
                  "activities": ["CPU"] + (["CUDA"] if device.cuda else []), "workloads": {}}
    log(f"device {args.device}; {env}; peak {peak_label}")
    from rapidscore.bertscore import BERTScore

    scorers, g1 = {}, {}
    for precision in args.precisions:
        try:
            # On the CPU the torch backend defaults to the host path (C++ matching): the smoke run asks for
            # the device engine, the path a GPU runs (on CUDA it is the default: bench_gpu's constructor).
            extra = {"device_engine": True} if args.device == "cpu" else {}
            if "+" in precision:  # a variant of bench_gpu's (--precisions fp16+packed)
                made, refused = bench_gpu.make_scorers(minilm, 6, device, [precision])
                if precision not in made:
                    raise ValueError(refused[precision])
                scorers[precision] = made[precision]
            else:
                scorers[precision] = BERTScore(str(minilm), 6, backend="torch", device=args.device,
                                               precision=precision, **extra)
            if args.smoke:  # the threaded path (chunk_pipeline) runs above one batch of texts: see the docstring
                scorers[precision].encoder.max_batch_size = 4
        except (ValueError, RuntimeError, ImportError) as exc:
            reason = f"the engine refuses it here: {type(exc).__name__}: {exc}"
            log(f"  {precision}: skipped ({reason})")
            for workload in args.workloads:
                data["workloads"][f"{workload} {precision}"] = {"workload": workload, "precision": precision,
                                                                "title": f"{precision}", "skipped": reason}
    cands, refs = bench_gpu.held_pairs(args.pairs)
    for workload in args.workloads:
        for precision, scorer in scorers.items():
            key = f"{workload} {precision}"
            try:
                if workload == "G1":
                    data["workloads"][key] = g1[precision] = g1_workload(scorer, precision, device, cands, refs,
                                                                         args, args.out)
                else:
                    data["workloads"][key] = g3_workload(scorer, precision, device, args, args.out)
            except Exception as exc:  # one failed workload must not cost the others (a GPU run is rare)
                log(f"  {key} failed: {type(exc).__name__}: {exc}")
                data["workloads"][key] = {"workload": workload, "precision": precision, "title": precision,
                                          "error": f"{type(exc).__name__}: {exc}"}
                if args.smoke:
                    raise
    if "G1" in args.workloads and scorers and not args.no_bare:
        try:
            batch_scorer = scorers.get("fp32") or next(iter(scorers.values()))  # bench_gpu's batches: fp32's
            data["bare_model"] = bare_model(device, minilm, batch_scorer, cands, refs, args.reps, gpu_name, g1)
        except Exception as exc:
            log(f"  bare model failed: {type(exc).__name__}: {exc}")
            data["bare_model_error"] = f"{type(exc).__name__}: {exc}"
            if args.smoke:
                raise
    data["workloads"] = {key: data["workloads"][key] for key in sorted(data["workloads"])}
    markdown = render(data)
    (args.out / "profile_gpu.md").write_text(markdown, encoding="utf-8")
    (args.out / "profile_gpu.json").write_text(json.dumps(data, indent=1, default=common._jsonable) + "\n",
                                               encoding="utf-8")
    log(f"wrote {args.out / 'profile_gpu.md'} and profile_gpu.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
