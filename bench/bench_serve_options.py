"""Request options over HTTP cost nothing extra: `rapidscore serve` at 32 clients with idf and
rescaling on, against the same server without them, and against the previous main's server.

Three servers, each its own process on a free port, measured in alternation (rounds of the three,
so that the machine's drift falls on each alike): this tree's server with plain requests, the
same with `"idf": true, "rescale_with_baseline": true` in every request, and the server of a
previous main (a source tree with its built `_core`, `--previous DIR`; plain requests: it knows
no options). Each request holds `--pairs-per-request` short pairs (idf over one reference is
degenerate). The load generator is bench_serving.py's (raw keep-alive HTTP/1.1, closed loop).

    git worktree add /tmp/prev 10dc61f && cp python/rapidscore/_core*.so /tmp/prev/python/rapidscore/
    python bench/bench_serve_options.py --previous /tmp/prev --rounds 3 --seconds 10
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import bench_serving
import common

from rapidscore.testing import corpora

# Runs the previous tree's `rapidscore serve`: its source first on PYTHONPATH (see start), this
# environment's editable finder (which points `rapidscore` at this checkout) removed.
_PREVIOUS = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower() "
             "and 'skbc' not in repr(f).lower()]; "
             "import rapidscore.cli; sys.exit(rapidscore.cli.main(sys.argv[1:]))")


def start(kind: str, port: int, previous: str | None) -> subprocess.Popen:
    env = dict(os.environ)
    if kind == "previous":
        command = [sys.executable, "-c", _PREVIOUS, "serve"]
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(Path(previous) / "python"), env.get("PYTHONPATH"))))
    else:
        command = [sys.executable, "-m", "rapidscore", "serve"]
    return subprocess.Popen([*command, "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--previous", help="source tree of the previous main, with its _core built")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--pairs-per-request", type=int, default=4)
    parser.add_argument("--cache-dir", default="~/.cache/rapidscore-bench")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "serve_options.json"))
    args = parser.parse_args()
    common.offline_cache(args.cache_dir)

    cands, refs = corpora.sentence_pairs(args.pairs, min_words=5, max_words=12, seed=13)
    k = args.pairs_per_request
    requests = [(cands[i:i + k], refs[i:i + k]) for i in range(0, len(cands) - k + 1, k)]
    root = Path(args.cache_dir).expanduser()
    bodies = {}
    for name, options in (("plain", {}), ("idf+rescale", {"idf": True, "rescale_with_baseline": True})):
        bodies[name] = root / f"serve_options_{name}.jsonl"
        bodies[name].write_text("\n".join(json.dumps({"candidates": c, "references": r, **options})
                                          for c, r in requests))
    runs = [("this tree", "current", "plain"), ("this tree", "current", "idf+rescale")]
    if args.previous:
        runs.append(("previous main", "previous", "plain"))
    rates: dict[str, list[float]] = {}
    rows: dict[str, list[dict]] = {}
    for _round in range(args.rounds):
        for label, kind, body in runs:
            port = bench_serving.free_port()
            server = start(kind, port, args.previous)
            try:
                bench_serving.wait_healthy(port, server)
                run = bench_serving.run_level(port, bodies[body], args.clients, args.seconds, args.warmup, server.pid)
                row = bench_serving.summarize(run, 1.0)
            finally:
                bench_serving.stop_server(server)
            key = f"{label}, {body}"
            rates.setdefault(key, []).append(row["rps"])
            rows.setdefault(key, []).append(row)
            print(key, {name: row[name] for name in ("rps", "p50_ms", "p99_ms", "statuses")}, flush=True)
    baseline = statistics.median(rates["this tree, plain"])
    results = {"machine": common.machine_info(), "versions": common.package_versions(), "date": common.now(),
               "commit": common.git_commit(), "command": common.command_line(), "previous": args.previous,
               "clients": args.clients, "pairs_per_request": k, "rates": rates, "rows": rows,
               "median_requests_per_s": {key: statistics.median(values) for key, values in rates.items()},
               "ratio_to_this_tree_plain": {key: statistics.median(values) / baseline
                                            for key, values in rates.items()}}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1))
    print(json.dumps({key: round(value, 3) for key, value in results["ratio_to_this_tree_plain"].items()}))


if __name__ == "__main__":
    main()
