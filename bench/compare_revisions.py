"""The working tree against an earlier revision of rapidscore, in alternating processes.

A refactoring must not slow anything down, but ratios against bert-score move with the machine
(a shared machine whose GEMM rate drifts by 20% between days moves them more than most code
changes). This runs the same workloads with two builds of rapidscore in turn, on the same
machine in the same minutes, so their ratio is the code's doing:

    python bench/compare_revisions.py --base ff1c6da [--rounds 3]

The base revision is built with pip into a temporary directory and imported from there (the
working tree's editable install is bypassed in that process). Workloads: W1 (2,000 MiniLM pairs,
`BERTScore.score(..., reference_batch_size=64)`, median of 3 calls per process) and W4 (one short
pair, p50 of 200 calls), and whether the numbers are the same: a digest of W1's scores and of the
similarities of 500 of its pairs in every process (exit status 1 if a digest differs). Writes
bench/results/revisions.md and .json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import common

from rapidscore.testing import corpora

RESULTS = common.REPO_ROOT / "bench" / "results"

# Runs in a child process: argv = ["base" or "", inputs JSON]; prints one JSON line. For the base
# build, run_child puts its site dir first on PYTHONPATH, and the child drops the editable
# install's finder so that the build wins. The texts come from this tree
# (rapidscore.testing.corpora), so both builds score the same inputs.
CHILD = r"""
import hashlib, json, statistics, sys, time
base, inputs = sys.argv[1], sys.argv[2]
if base:  # the base build: drop the editable install's finder, import from the build
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in type(f).__module__.lower()]
with open(inputs, encoding="utf-8") as handle:
    texts = json.load(handle)
import rapidscore
from rapidscore.bertscore import BERTScore
try:
    from rapidscore.encoder.model_source import embedded_model_dir
except ImportError:  # revisions before the encoder/ layout
    from rapidscore.model_source import embedded_model_dir
cands, refs = texts["w1"]
scorer = BERTScore(str(embedded_model_dir()), 6)
scorer.score(cands[:64], refs[:64], reference_batch_size=64)
w1 = []
for _ in range(3):
    start = time.perf_counter()
    result = scorer.score(cands, refs, reference_batch_size=64)
    w1.append(time.perf_counter() - start)
short_c, short_r = texts["w4"]
for _ in range(20):
    scorer.score([short_c[0]], [short_r[0]])
w4 = []
for k in range(200):
    start = time.perf_counter()
    scorer.score([short_c[k % 50]], [short_r[k % 50]])
    w4.append((time.perf_counter() - start) * 1000.0)
# the numbers themselves, after the timings (a second model session would share the cores):
# a digest of W1's P, R, F1 and of the similarities of 500 of its pairs
scores = hashlib.sha256(b"".join(getattr(result, k).tobytes() for k in ("precision", "recall", "f1"))).hexdigest()
from rapidscore.nrr import SentenceSimilarity
sims, best = SentenceSimilarity(str(embedded_model_dir())).pairs(cands[:500], refs[:500])
similarity = hashlib.sha256(sims.tobytes() + best.tobytes()).hexdigest()
print(json.dumps({"file": rapidscore.__file__, "w1_s": statistics.median(w1), "w4_p50_ms": statistics.median(w4),
                  "w1_scores_sha256": scores, "similarity_sha256": similarity}))
"""


def build(revision: str, into: Path) -> Path:
    """pip-build ``revision`` of this repository into ``into``/site; returns the site dir."""
    tree = into / "tree"
    subprocess.run(["git", "-C", str(common.REPO_ROOT), "worktree", "add", "--detach", str(tree), revision],
                   check=True, capture_output=True)
    site = into / "site"
    try:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(tree)],
                       check=True)
    finally:
        subprocess.run(["git", "-C", str(common.REPO_ROOT), "worktree", "remove", "--force", str(tree)],
                       check=False, capture_output=True)
    return site


def run_child(site: str, inputs: Path) -> dict:
    env = dict(os.environ)
    if site:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (site, env.get("PYTHONPATH"))))
    out = subprocess.run([sys.executable, "-c", CHILD, "base" if site else "", str(inputs)], cwd=common.REPO_ROOT,
                         env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="git revision to compare the working tree with")
    parser.add_argument("--rounds", type=int, default=3, help="alternating process pairs (order rotated)")
    parser.add_argument("--w1-pairs", type=int, default=2000)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="rapidscore-base-") as tmp:
        site = str(build(args.base, Path(tmp)))
        inputs = Path(tmp) / "inputs.json"
        inputs.write_text(json.dumps({"w1": corpora.w1_pairs(args.w1_pairs, seed=1),
                                      "w4": corpora.sentence_pairs(50, 10, 16, seed=4)}), encoding="utf-8")
        runs: dict[str, list[dict]] = {"base": [], "tree": []}
        for round_ in range(args.rounds):
            order = [("base", site), ("tree", "")] if round_ % 2 == 0 else [("tree", ""), ("base", site)]
            for name, where in order:
                print(f"[round {round_ + 1}/{args.rounds}] {name}", file=sys.stderr, flush=True)
                runs[name].append(run_child(where, inputs))
    assert all(r["file"].startswith(site) for r in runs["base"]), "the base process imported the wrong build"
    digests = {key: sorted({r[key] for r in runs["base"] + runs["tree"]}) for key in ("w1_scores_sha256",
                                                                                       "similarity_sha256")}
    identical = all(len(values) == 1 for values in digests.values())

    def ratios(key: str) -> list[float]:  # base / tree per round: > 1 means the tree is faster
        return [b[key] / t[key] for b, t in zip(runs["base"], runs["tree"])]

    summary = {key: {"base": statistics.median(r[key] for r in runs["base"]),
                     "tree": statistics.median(r[key] for r in runs["tree"]),
                     "base_over_tree": statistics.median(ratios(key))} for key in ("w1_s", "w4_p50_ms")}
    data = {"date": common.now(), "machine": common.machine_info(), "commit": common.git_commit(),
            "base": args.base, "rounds": args.rounds, "runs": runs, "summary": summary,
            "numbers_identical": identical}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "revisions.json").write_text(json.dumps(data, indent=2) + "\n")
    lines = [
        f"## The working tree against {args.base}", "",
        f"{data['date']}, {common.machine_line(data['machine'])}. Commit {data['commit']}. "
        f"Command: `python bench/compare_revisions.py --base {args.base} --rounds {args.rounds}`. "
        "Each round runs one process per build, order rotated; base/tree > 1 means the tree is faster.", "",
        "| workload | base | working tree | base / tree (median of rounds) |",
        "|---|---:|---:|---:|",
        f"| W1 `BERTScore.score`, {args.w1_pairs:,} MiniLM pairs (s) | {summary['w1_s']['base']:.2f} | "
        f"{summary['w1_s']['tree']:.2f} | {summary['w1_s']['base_over_tree']:.2f} |",
        f"| W4 one short pair, p50 (ms) | {summary['w4_p50_ms']['base']:.2f} | {summary['w4_p50_ms']['tree']:.2f} | "
        f"{summary['w4_p50_ms']['base_over_tree']:.2f} |", "",
        f"Numbers identical in every process of both builds (sha256 of W1's P, R, F1; of the similarities and "
        f"best references of 500 of its pairs): {'yes' if identical else 'NO: ' + json.dumps(digests)}.", "",
    ]
    (RESULTS / "revisions.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
