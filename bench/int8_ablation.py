"""Accuracy of ``precision="int8"`` and of variants of it on the real all-MiniLM-L6-v2.

    python bench/int8_ablation.py [--variants shipped,7-bit,weights-only] [--pairs 400] [--sentences 1000]

Each variant builds its int8 graph in a cache directory of its own (the fp32 export too) and is
scored against rapidscore's exact fp32 on three sets: W1-like related pairs (rapidscore.testing.corpora,
seed 7), unrelated real questions (the SELECT sample in ../shared/data, all ordered pairs
shuffled with seed 0) and the sentence cosines of unrelated sentences (english_sentences seed 5,
first half against second half, as bench_sentence.py). Variants:

* ``shipped``: ``rapidscore.encoder.export.int8`` as it is (the activation passes this CPU gets).
* ``7-bit`` / ``8-bit``: the shipped graph with 7- or 8-bit activation passes (8 bits only where
  the CPU has VNNI or is not x86: elsewhere its integer products saturate).
* ``weights-only``: the shipped int8 weights (GPTQ, equalised) dequantised back into the fp32
  graph, activations exact: the weights' share of the error.
* ``symmetric-weights``: weights symmetric per column (scale 2 max |w| / 255, zero point 0), as
  rapidscore shipped before asymmetric ones (max |w| / 127).
* ``one-pass``: the shipped graph without the residual pass (one int8 pass over the activations,
  per tensor): far outside the bound, run for its speed, the ceiling of any one-pass scheme on
  this graph (its validation against fp32 is skipped).

``--reps N`` (default 3) also times each variant's ``BERTScore.score`` on the W1 pairs against
fp32, interleaved, same process (median of per-repetition ratios); bench_bertscore.py
``--precisions int8`` times the shipped mode against bert-score too.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import common
import numpy as np

from rapidscore.testing import corpora

VARIANTS = ("shipped", "7-bit", "8-bit", "weights-only", "symmetric-weights", "one-pass")


def symmetric_gptq(gptq, w: np.ndarray, hessian: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """GPTQ with a symmetric grid (scale 2 max |w| / 255, zero point 0): the shipped function
    with every column's range made symmetric around 0 (it then puts 0 at the code 0)."""
    w = np.asarray(w, np.float64)
    m = np.abs(w).max(axis=0)
    # Two rows of +-m (outside the calibrated inputs: a zero Hessian row and column, so GPTQ
    # treats them as dead and rounds nothing into them) make the range [-m, m].
    padded = np.vstack([w, m[None], -m[None]])
    h = np.zeros((w.shape[0] + 2, w.shape[0] + 2))
    h[:-2, :-2] = hessian
    q, scale, zero = gptq(padded, h)
    return q[:-2], scale, zero


@contextmanager
def variant(name: str) -> Iterator[None]:
    """Patch rapidscore.encoder.export.int8 for ``name`` while the graph is built."""
    from onnx import numpy_helper

    from rapidscore.encoder.export import int8

    saved = {k: getattr(int8, k) for k in ("activation_bits", "gptq_int8", "quantize_graph", "VALIDATION_BOUND")}
    try:
        if name in ("7-bit", "8-bit"):
            int8.activation_bits = lambda: int(name[0])
        elif name == "symmetric-weights":
            int8.gptq_int8 = functools.partial(symmetric_gptq, saved["gptq_int8"])
        elif name == "weights-only":
            def weights_only(model, hessians, bits=None):
                weighted = int8._weighted_nodes(model)
                by_weight: dict = {}
                for w in weighted:
                    by_weight.setdefault(w.node.input[1], []).append(w)
                equalise = int8._equalisation(weighted, by_weight)
                inits = {i.name: i for i in model.graph.initializer}
                done = set()
                for w in weighted:
                    name = w.node.input[1]
                    if name in done:
                        continue
                    done.add(name)
                    hessian = np.sum([hessians[x] for x in {s.activation for s in by_weight[name]}], axis=0)
                    t = equalise.get(w.activation, np.ones(w.inputs)).astype(np.float64)
                    q, scale, zero = saved["gptq_int8"](w.weight * t[:, None], hessian / np.outer(t, t))
                    dequantised = (q.astype(np.float64) - zero) * scale / t[:, None]
                    if w._transposed:
                        dequantised = dequantised.T
                    inits[name].CopyFrom(numpy_helper.from_array(dequantised.astype(np.float32), name))
                return len(done)

            int8.quantize_graph = weights_only
        elif name == "one-pass":
            def one_pass(model, hessians, bits=None):
                matrices = saved["quantize_graph"](model, hessians, bits)
                for node in model.graph.node:  # y = y1 + y2 -> y1; the residual pass is then unused
                    if node.op_type == "Add" and node.input[0].endswith("_y1") and node.input[1].endswith("_y2"):
                        node.op_type = "Identity"
                        del node.input[1:]
                needed = {o.name for o in model.graph.output}
                kept = []
                for node in reversed(list(model.graph.node)):
                    if any(o in needed for o in node.output):
                        kept.append(node)
                        needed.update(i for i in node.input if i)
                del model.graph.node[:]
                model.graph.node.extend(reversed(kept))
                return matrices

            int8.quantize_graph = one_pass
            int8.VALIDATION_BOUND = float("inf")
        elif name != "shipped":
            raise ValueError(f"unknown variant {name!r}; known: {', '.join(VARIANTS)}")
        yield
    finally:
        for k, v in saved.items():
            setattr(int8, k, v)


def text_sets(pairs: int) -> dict:
    sets = {"W1 pairs (seed 7)": corpora.sentence_pairs(pairs, 10, 40, seed=7)}
    sample = common.REPO_ROOT.parent / "shared" / "data" / "select" / "data.sample.json"
    if sample.is_file():
        concepts = json.loads(sample.read_text(encoding="utf-8")).values()
        questions = [q for c in concepts for q in c["queries"] + c["extra_queries"]]
        ordered = list(itertools.permutations(questions, 2))
        random.Random(0).shuffle(ordered)
        sets["unrelated real questions"] = ([a for a, _ in ordered[:pairs]], [b for _, b in ordered[:pairs]])
    return sets


def kendall_tau(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import kendalltau

    return float(kendalltau(a, b)[0])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", default="shipped,7-bit,weights-only,symmetric-weights")
    parser.add_argument("--pairs", type=int, default=400)
    parser.add_argument("--sentences", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=3, help="timed repetitions of W1 per variant (0: accuracy only)")
    common.add_cache_and_out_arguments(parser)
    args = parser.parse_args(argv)
    common.offline_cache(args.cache_dir)
    started = time.perf_counter()

    from rapidscore.bertscore import BERTScore
    from rapidscore.encoder import Encoder
    from rapidscore.encoder.export import int8
    from rapidscore.encoder.model_source import embedded_model_dir

    model_dir = str(embedded_model_dir())
    sets = text_sets(args.pairs)
    texts = corpora.english_sentences(args.sentences, 10, 40, seed=5)
    half = len(texts) // 2
    exact = BERTScore(model_dir, 6)
    exact_f = {name: np.asarray(exact.score(c, r).f1, np.float64) for name, (c, r) in sets.items()}
    exact_vectors = Encoder(model_dir, max_length=256).sentence_embeddings(texts)
    exact_cos = np.sum(exact_vectors[:half] * exact_vectors[half:2 * half], axis=1)
    rows: dict = {}
    scorers = {"fp32": exact}
    workdir = tempfile.TemporaryDirectory(prefix="int8-ablation-")
    for name in [v.strip() for v in args.variants.split(",") if v.strip()]:
        if name == "8-bit" and int8.activation_bits() != 8:
            print(f"[{name}] skipped: this CPU's int8 products saturate at 8 bits (no VNNI)", file=sys.stderr)
            continue
        print(f"[{name}] building and scoring", file=sys.stderr, flush=True)
        cache = Path(workdir.name) / name
        with variant(name):
            scorer = scorers[name] = BERTScore(model_dir, 6, precision="int8", cache_dir=cache)
            row: dict = {}
            for set_name, (c, r) in sets.items():
                f = np.asarray(scorer.score(c, r).f1, np.float64)
                row[set_name] = {"mean_abs_dF": float(np.abs(f - exact_f[set_name]).mean()),
                                 "kendall_tau": kendall_tau(f, exact_f[set_name])}
            vectors = Encoder(model_dir, max_length=256, precision="int8", cache_dir=cache).sentence_embeddings(texts)
            cos = np.sum(vectors[:half] * vectors[half:2 * half], axis=1)
            row["sentence cosines"] = {"mean_abs_dcos": float(np.abs(cos - exact_cos).mean()),
                                       "max_abs_dcos": float(np.abs(cos - exact_cos).max())}
        rows[name] = row
    if args.reps:
        cands, refs = sets["W1 pairs (seed 7)"]
        contenders = {name: (lambda s=s: s.score(cands, refs)) for name, s in scorers.items()}
        times, _ = common.interleaved(contenders, args.reps)
        for name in rows:
            rows[name]["speedup_vs_fp32_w1"] = common.median_ratio(times["fp32"], times[name])
        rows_fp32_s = common.median(times["fp32"])
    workdir.cleanup()
    data = {"machine": common.machine_info(), "versions": common.package_versions(), "commit": common.git_commit(),
            "date": common.now(), "command": common.command_line(), "pairs": args.pairs,
            "sentence_pairs": half, "variants": rows, "fp32_w1_s": rows_fp32_s if args.reps else None,
            "seconds": time.perf_counter() - started}
    set_names = list(sets)
    header = ("| variant | " + " | ".join(f"{s}: mean abs dF, tau" for s in set_names)
              + " | sentence cosines: mean (max) abs d cos | W1 speed-up vs fp32 |")
    lines = [f"{common.machine_line(data['machine'])} Commit {data['commit']}. Command: `{data['command']}`.", "",
             header, "|---" * (len(set_names) + 3) + "|"]
    for name, row in rows.items():
        cells = [f"{common.fmt_sci(row[s]['mean_abs_dF'])}, {row[s]['kendall_tau']:.4f}" for s in set_names]
        cos = row["sentence cosines"]
        lines.append(f"| {name} | " + " | ".join(cells)
                     + f" | {common.fmt_sci(cos['mean_abs_dcos'])} ({common.fmt_sci(cos['max_abs_dcos'])}) | "
                     + (common.fmt_ratio(row["speedup_vs_fp32_w1"]) if "speedup_vs_fp32_w1" in row else "n/a") + " |")
    markdown = "\n".join(lines) + "\n"
    print(markdown)
    common.write_results("int8_ablation", markdown, data, Path(args.out) if args.out else common.RESULTS_DIR)
    return 0


if __name__ == "__main__":
    sys.exit(main())
