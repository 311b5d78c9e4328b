"""BERTScore: rapidscore vs bert-score 0.3.13, side by side in the same run.

Workloads (all offline; the synthetic models are built here from transformers configs with
random weights, fixed seed, and cached under --cache-dir):

  W1  the real all-MiniLM-L6-v2 (embedded copy), layer 6 = all layers, short sentence pairs
      (10-40 words). bert_score.BERTScorer vs rapidscore.bertscore.BERTScore, both loaded once
      (steady state); and bert_score.score vs rapidscore.bert_score.score end to end, each in a
      fresh process (model load included, rapidscore's ONNX cache warm; export timed apart).
  W2  roberta-large configuration truncated to 17 layers (the reference's default English
      setting), random weights, short sentence pairs.
  W3  bert-base configuration at layer 9, pairs of long texts (150-400 words).
  W4  single-pair latency, p50 / p99 over --w4-calls calls, W1 model, short pair.

For each: the median over interleaved repetitions of the per-repetition time ratio, max and mean
|dF| against the reference, encoder throughput (real tokens/s) and its fraction of the machine's
fp32 matrix-multiply peak measured in the same run, padding waste, and where rapidscore's time
goes (plan, tokenise, embed, finish: the public phases of BERTScore.score, run one by one in an
extra call per repetition that no ratio includes). Precision modes other than fp32 that this
build of rapidscore offers (rapidscore.encoder.PRECISIONS) run as a third contender on W1 and W2.

rapidscore is measured through its public API only: the phases BERTScore.plan / encode
(encoder.tokenizer.encode + Encoder.embed_ids) / finish, and a counting wrapper assigned to
Encoder.runner (and assigned back afterwards). bert-score's internals are wrapped in place.

    python bench/bench_bertscore.py [--w1-pairs 2000] [--w2-pairs 150] [--w3-pairs 48] [--reps 3]

Writes bench/results/bertscore.md and bench/results/bertscore.json.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common  # light: the --child process below imports nothing of rapidscore before its clock starts

# ------------------------------------------------------------------------------------------------
# End-to-end child process (kept free of heavy imports before the clock starts)
# ------------------------------------------------------------------------------------------------

def run_child(spec_path: str) -> None:
    """Score the inputs of ``spec_path`` with one library from a fresh process; print JSON."""
    start = time.perf_counter()
    with open(spec_path, encoding="utf-8") as handle:
        spec = json.load(handle)
    which, cands, refs = spec["which"], spec["cands"], spec["refs"]
    if which == "bert_score.score":
        import bert_score

        imported = time.perf_counter()
        _, _, f1 = bert_score.score(cands, refs, model_type=spec["model"], num_layers=spec["layer"])
        f1 = f1.numpy().tolist()
    elif which == "rapidscore.bert_score.score":
        from rapidscore import bert_score

        imported = time.perf_counter()
        _, _, f1 = bert_score.score(cands, refs, model_type=spec["model"], num_layers=spec["layer"])
        f1 = f1.numpy().tolist()
    elif which == "rapidscore.bertscore.score":
        from rapidscore import bertscore

        imported = time.perf_counter()
        f1 = bertscore.score(cands, refs, model=spec["model"], layer=spec["layer"]).f1.tolist()
    else:
        raise SystemExit(f"unknown contender {which!r}")
    done = time.perf_counter()
    print(json.dumps({"import_s": imported - start, "score_s": done - imported, "total_s": done - start,
                      "peak_rss_mib": common.peak_rss_mib(), "f1": f1}))


# ------------------------------------------------------------------------------------------------
# Measurements
# ------------------------------------------------------------------------------------------------

def layer_flops_per_token(config: dict) -> tuple[int, int]:
    """(dense FLOPs per token per layer, attention FLOPs per token per layer per context token).

    A BERT layer per token: Q, K, V and output projections 4 h^2 multiply-adds, the feed-forward
    2 h i, so 2 (4 h^2 + 2 h i) FLOPs; attention scores QK^T and the weighted sum AV add
    2 s h multiply-adds = 4 s h FLOPs for a sequence of s tokens. Layer norms, softmax, GELU and
    the embedding lookup are not counted (not matrix multiplies, a few percent)."""
    h = int(config["hidden_size"])
    i = int(config["intermediate_size"])
    return 2 * (4 * h * h + 2 * h * i), 4 * h


def useful_flops(lengths, config: dict, layers: int) -> float:
    """Matrix-multiply FLOPs of the first ``layers`` layers over sequences of ``lengths`` real
    tokens each, padding excluded."""
    dense, attention = layer_flops_per_token(config)
    return float(sum(n * layers * (dense + attention * n) for n in lengths))


class CountingRunner:
    """A runner that wraps another one: time inside the runtime and padded vs real tokens fed to
    it. Assigned to the public ``Encoder.runner`` (see ``counting_runner``); it declares the
    wrapped runner's ``provider``, ``returns`` and ``thread_safe``, so the encoder treats it as
    the runner it wraps."""

    def __init__(self, runner):
        self.runner = runner
        self.provider = runner.provider
        # every member of the runner contract (rapidscore.encoder.runtime.Runner): the wrapped
        # runner's, except the forwards that would bypass the count (packed, graphs)
        self.returns, self.thread_safe, self.device = runner.returns, runner.thread_safe, runner.device
        self.model, self.packed, self.graphs = runner.model, False, None
        self.to_device, self.run_packed, self.run_feed = runner.to_device, runner.run_packed, runner.run_feed
        self.reset()

    def reset(self):
        self.seconds = 0.0
        self.padded = 0
        self.real = 0
        self.batches = 0

    def __call__(self, input_ids, attention_mask):
        start = time.perf_counter()
        out = self.runner(input_ids, attention_mask)
        self.seconds += time.perf_counter() - start
        self.padded += int(attention_mask.size)
        self.real += int(attention_mask.sum())
        self.batches += 1
        return out


@contextlib.contextmanager
def counting_runner(encoder):
    """Put a CountingRunner in front of ``encoder.runner`` for the block; the original runner is
    assigned back afterwards (encoders are shared per setting by ``get_encoder``, so the wrapper
    must not outlive the measurement)."""
    original = encoder.runner
    counter = CountingRunner(original)
    encoder.runner = counter
    try:
        yield counter
    finally:
        encoder.runner = original


def rapidscore_phases(scorer, cands, refs, reference_batch_size=None):
    """One ``BERTScore.score(cands, refs, reference_batch_size=...)`` call, run phase by phase
    through the public API with each phase timed: ``plan`` (validate, strip, dedupe),
    ``encoder.tokenizer.encode`` and ``encoder.embed_ids`` (the two halves of ``encode``; the
    runtime call alone and the padded / real tokens from a CountingRunner), ``finish`` (weights,
    matching, best reference, rescaling). Returns (result, seconds and token counts)."""
    encoder = scorer.encoder
    with counting_runner(encoder) as runner:
        start = time.perf_counter()
        plan = scorer.plan(cands, refs)
        planned = time.perf_counter()
        ids, truncated = encoder.tokenizer.encode(plan.texts)
        tokenized = time.perf_counter()
        store = encoder.embed_ids(ids, truncated=truncated, progress=scorer.progress)
        embedded = time.perf_counter()
        result = scorer.finish(plan, store, reference_batch_size=reference_batch_size)
        done = time.perf_counter()
    pieces = {"total": done - start, "plan": planned - start, "tokenize": tokenized - planned,
              "encode": embedded - tokenized, "runtime": runner.seconds, "finish": done - embedded,
              "padded": runner.padded, "real": runner.real, "batches": runner.batches}
    return result, pieces


class ReferenceInstrumented:
    """Times the pieces of bert-score's path during its real score() calls (bert_score.utils'
    get_bert_embedding and greedy_cos_idf, the competitor's internals, wrapped in place) and
    counts the padded vs real tokens it feeds its model."""

    def __init__(self):
        import bert_score.utils as ref_utils

        self.ref = common.Stopwatch()
        self.ref_padded = 0
        self.ref_real = 0
        original_embedding = ref_utils.get_bert_embedding

        def counted_embedding(*args, **kwargs):
            embedding, mask, idf = original_embedding(*args, **kwargs)
            self.ref_padded += int(mask.numel())
            self.ref_real += int(mask.sum())
            return embedding, mask, idf

        ref_utils.get_bert_embedding = self.ref.wrap("encode", counted_embedding)
        ref_utils.greedy_cos_idf = self.ref.wrap("match", ref_utils.greedy_cos_idf)

    def reset(self):
        self.ref.reset()
        self.ref_padded = self.ref_real = 0


def max_mean_abs(a, b) -> tuple[float, float]:
    import numpy as np

    diff = np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))
    return (float(diff.max()), float(diff.mean())) if diff.size else (0.0, 0.0)


def steady_state(name: str, model_dir: Path, layer: int, cands, refs, reps: int, precisions,
                 inst: ReferenceInstrumented, breakdown: bool) -> dict:
    """BERTScorer vs BERTScore on one workload, interleaved; plus encoder and time breakdown.

    The timed contenders are plain ``score`` calls. rapidscore's pieces (and its encoder time
    and token counts) come from one more run per repetition, after the timed ones and outside
    the ratios: the same call phase by phase (``rapidscore_phases``)."""
    import bert_score
    import numpy as np
    from scipy.stats import kendalltau

    from rapidscore.bertscore import BERTScore
    from rapidscore.encoder.model_source import read_config

    print(f"[{name}] loading models", file=sys.stderr, flush=True)
    start = time.perf_counter()
    reference = bert_score.BERTScorer(model_type=str(model_dir), num_layers=layer)
    ref_load = time.perf_counter() - start
    start = time.perf_counter()
    ours = BERTScore(str(model_dir), layer)
    ours_load = time.perf_counter() - start
    extra = {}
    for precision in precisions:
        try:
            # "openvino-fp32": the exact mode on the OpenVINO backend; other names are precisions.
            options = {"backend": "openvino"} if precision == "openvino-fp32" else {"precision": precision}
            extra[precision] = BERTScore(str(model_dir), layer, **options)
        except Exception as exc:  # noqa: BLE001 - recorded in the report, not fatal
            extra[precision] = exc

    contenders = {
        "bert_score.BERTScorer": lambda: reference.score(cands, refs)[2].numpy(),
        # reference_batch_size=64: the reference's padding reproduced, as the drop-in does (free).
        "rapidscore BERTScore": lambda: ours.score(cands, refs, reference_batch_size=64).f1,
    }
    for precision, scorer in extra.items():
        if not isinstance(scorer, Exception):
            contenders[f"rapidscore BERTScore {precision}"] = (
                lambda s=scorer: s.score(cands, refs, reference_batch_size=64).f1)

    # Warm-up on a slice (first-call allocations), then interleaved full runs with the pieces timed.
    for scorer in [reference, ours] + [s for s in extra.values() if not isinstance(s, Exception)]:
        scorer.score(cands[:8], refs[:8])
    pieces = []
    times = {key: [] for key in contenders}
    results = {}
    names = list(contenders)
    for rep in range(reps):
        print(f"[{name}] repetition {rep + 1}/{reps}", file=sys.stderr, flush=True)
        record = {"probe_gflops": common.gemm_probe(repeats=3, threads=common.available_cpus(),
                                                     bf16=False)["peak_fp32_gflops"]}
        for key in names[rep % len(names):] + names[:rep % len(names)]:
            inst.reset()
            start = time.perf_counter()
            results[key] = contenders[key]()
            elapsed = time.perf_counter() - start
            times[key].append(elapsed)
            if key == "bert_score.BERTScorer":
                record.update(ref_total=elapsed, ref_encode=inst.ref.seconds.get("encode", 0.0),
                              ref_match=inst.ref.seconds.get("match", 0.0), ref_padded=inst.ref_padded,
                              ref_real=inst.ref_real)
            elif key == "rapidscore BERTScore":
                record.update(ours_total=elapsed)
        # rapidscore's pieces: the timed call again, phase by phase (not part of any ratio).
        phased, phases = rapidscore_phases(ours, cands, refs, reference_batch_size=64)
        record.update(phases_total=phases["total"], plan=phases["plan"], tokenize=phases["tokenize"],
                      encode=phases["encode"], runtime=phases["runtime"], finish=phases["finish"],
                      padded=phases["padded"], real=phases["real"], batches=phases["batches"],
                      phases_vs_score_max_abs_dF=max_mean_abs(phased.f1, results["rapidscore BERTScore"])[0])
        pieces.append(record)

    ref_f1 = np.asarray(results["bert_score.BERTScorer"], dtype=np.float64)
    our_f1 = np.asarray(results["rapidscore BERTScore"], dtype=np.float64)
    max_df, mean_df = max_mean_abs(our_f1, ref_f1)
    over_tolerance = int(np.sum(np.abs(our_f1 - ref_f1) > 1e-5))
    # The native API's maxima over real tokens only (untimed): how far the padding artefact moves F.
    native_f1 = np.asarray(ours.score(cands, refs).f1, dtype=np.float64)
    native_max_df, _ = max_mean_abs(native_f1, ref_f1)
    native_over = int(np.sum(np.abs(native_f1 - ref_f1) > 1e-5))

    def piece(key):
        return common.median([p[key] for p in pieces if key in p])

    config = read_config(model_dir)
    lengths = [len(ids) for ids in ours.encoder.tokenize(list(dict.fromkeys(c.strip() for c in cands + refs)))]
    flops = useful_flops(lengths, config, layer)
    real_tokens = int(sum(lengths))
    encode_s, runtime_s, ref_encode_s = piece("encode"), piece("runtime"), piece("ref_encode")
    # Fraction of the GEMM rate probed right before the same repetition (the machine is shared:
    # its load changes during a run); the fraction of the run's best probe is added in main().
    adjacent = {side: common.median([flops / p[key] / 1e9 / p["probe_gflops"] for p in pieces])
                for side, key in (("rapidscore", "encode"), ("rapidscore_runtime", "runtime"),
                                  ("reference", "ref_encode"))}
    out = {
        "workload": name, "model": str(model_dir), "layer": layer, "pairs": len(cands),
        "unique_sentences": len(lengths), "real_tokens": real_tokens,
        "mean_tokens_per_sentence": real_tokens / max(len(lengths), 1),
        "load_s": {"bert_score.BERTScorer": ref_load, "rapidscore BERTScore": ours_load},
        "seconds": times, "median_s": {key: common.median(v) for key, v in times.items()},
        "speedup": common.median_ratio(times["bert_score.BERTScorer"], times["rapidscore BERTScore"]),
        "max_abs_dF": max_df, "mean_abs_dF": mean_df, "pairs_dF_over_1e-5": over_tolerance,
        "native_max_abs_dF": native_max_df, "native_pairs_dF_over_1e-5": native_over,
        "encoder": {
            "useful_gflop": flops / 1e9,
            "rapidscore_tokens_per_s": real_tokens / encode_s,
            "rapidscore_runtime_tokens_per_s": real_tokens / runtime_s,
            "rapidscore_gflops": flops / encode_s / 1e9,
            "rapidscore_runtime_gflops": flops / runtime_s / 1e9,
            "reference_tokens_per_s": real_tokens / ref_encode_s,
            "reference_gflops": flops / ref_encode_s / 1e9,
            "probe_gflops_per_rep": [p["probe_gflops"] for p in pieces],
            "rapidscore_fraction_of_adjacent_probe": adjacent["rapidscore"],
            "rapidscore_runtime_fraction_of_adjacent_probe": adjacent["rapidscore_runtime"],
            "reference_fraction_of_adjacent_probe": adjacent["reference"],
            "rapidscore_padding_waste": piece("padded") / max(piece("real"), 1) - 1.0,
            "reference_padding_waste": piece("ref_padded") / max(piece("ref_real"), 1) - 1.0,
            "rapidscore_batches": piece("batches"),
        },
        "phases_vs_score_max_abs_dF": max(p["phases_vs_score_max_abs_dF"] for p in pieces),
        "breakdown_s": {
            "score_total": piece("ours_total"), "total": piece("phases_total"), "plan": piece("plan"),
            "tokenize": piece("tokenize"), "encode": encode_s, "encode_runtime": runtime_s,
            "finish": piece("finish"),
            "reference_total": piece("ref_total"), "reference_encode_incl_tokenize": ref_encode_s,
            "reference_match": piece("ref_match"),
        } if breakdown else None,
        "precisions": {},
    }
    for precision, scorer in extra.items():
        key = f"rapidscore BERTScore {precision}"
        if isinstance(scorer, Exception):
            out["precisions"][precision] = {"error": f"{type(scorer).__name__}: {scorer}"}
            continue
        fast = np.asarray(results[key], dtype=np.float64)
        tau = kendalltau(fast, our_f1).statistic
        out["precisions"][precision] = {
            "speedup_vs_BERTScorer": common.median_ratio(times["bert_score.BERTScorer"], times[key]),
            "speedup_vs_fp32": common.median_ratio(times["rapidscore BERTScore"], times[key]),
            "mean_abs_dF_vs_fp32": max_mean_abs(fast, our_f1)[1], "max_abs_dF_vs_fp32": max_mean_abs(fast, our_f1)[0],
            "mean_abs_dF_vs_reference": max_mean_abs(fast, ref_f1)[1], "kendall_tau_vs_fp32": float(tau),
        }
    return out


def export_time(model_dir: Path, layer: int) -> dict:
    """Time of a first-use ONNX export of (model, layer) into an empty cache."""
    from rapidscore.encoder import Encoder

    cache = Path(tempfile.mkdtemp(prefix="rapidscore-bench-export-"))
    try:
        start = time.perf_counter()
        encoder = Encoder(str(model_dir), layer=layer, cache_dir=cache)
        elapsed = time.perf_counter() - start
        return {"seconds": elapsed, "exported": bool(encoder.exported)}
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def end_to_end(model_dir: Path, layer: int, cands, refs, reps: int, workdir: Path) -> dict:
    """bert_score.score vs rapidscore's drop-in and native score(), each from a fresh process."""
    import numpy as np

    contenders = ("bert_score.score", "rapidscore.bert_score.score", "rapidscore.bertscore.score")
    specs = {}
    for which in contenders:
        path = workdir / f"e2e-{which}.json"
        path.write_text(json.dumps({"which": which, "cands": cands, "refs": refs, "model": str(model_dir),
                                    "layer": layer}))
        specs[which] = path
    runs = {which: [] for which in contenders}
    for rep in range(reps):
        print(f"[W1 end to end] repetition {rep + 1}/{reps}", file=sys.stderr, flush=True)
        for which in contenders[rep % 3:] + contenders[:rep % 3]:
            start = time.perf_counter()
            proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(specs[which])],
                                  capture_output=True, text=True)
            wall = time.perf_counter() - start
            if proc.returncode != 0:
                raise RuntimeError(f"{which} child failed:\n{proc.stderr[-3000:]}")
            result = json.loads(proc.stdout.strip().splitlines()[-1])
            result["process_wall_s"] = wall
            runs[which].append(result)
    reference_f1 = np.asarray(runs["bert_score.score"][-1]["f1"])
    out = {"pairs": len(cands), "reps": reps, "contenders": {}}
    for which in contenders:
        f1 = runs[which][-1].pop("f1")
        for run in runs[which]:
            run.pop("f1", None)
        max_df, mean_df = max_mean_abs(f1, reference_f1)
        out["contenders"][which] = {
            "runs": runs[which],
            "median": {key: common.median([r[key] for r in runs[which]])
                       for key in ("import_s", "score_s", "total_s", "process_wall_s", "peak_rss_mib")},
            "speedup_score_call": common.median_ratio([r["score_s"] for r in runs["bert_score.score"]],
                                                      [r["score_s"] for r in runs[which]]),
            "speedup_process": common.median_ratio([r["process_wall_s"] for r in runs["bert_score.score"]],
                                                   [r["process_wall_s"] for r in runs[which]]),
            "max_abs_dF": max_df, "mean_abs_dF": mean_df,
        }
    return out


def latency(model_dir: Path, layer: int, cand: str, ref: str, calls: int, precisions=(),
            breakdown: bool = True) -> dict:
    """Single-pair latency: BERTScorer.score vs BERTScore.score (and the extra precisions /
    backends), alternating in blocks. With ``breakdown``, rapidscore's pieces come from
    ``calls`` more calls afterwards, run phase by phase (``rapidscore_phases``; not timed for
    the percentiles)."""
    import bert_score

    from rapidscore.bertscore import BERTScore

    reference = bert_score.BERTScorer(model_type=str(model_dir), num_layers=layer)
    ours = BERTScore(str(model_dir), layer)
    runs = {"bert_score.BERTScorer": lambda: reference.score([cand], [ref]),
            "rapidscore BERTScore": lambda: ours.score([cand], [ref])}
    scorers = {"rapidscore BERTScore": ours}
    for precision in precisions:
        options = {"backend": "openvino"} if precision == "openvino-fp32" else {"precision": precision}
        try:
            scorer = BERTScore(str(model_dir), layer, **options)
        except Exception:  # noqa: BLE001 - a mode this machine cannot run is simply not timed
            continue
        runs[f"rapidscore BERTScore {precision}"] = lambda s=scorer: s.score([cand], [ref])
        scorers[f"rapidscore BERTScore {precision}"] = scorer
    samples = {key: [] for key in runs}
    for _ in range(5):
        for run in runs.values():
            run()
    # Blocks of 10 calls, alternating: the runtimes' worker threads spin for a moment after a
    # call, which would tax the other library's very next call.
    block = 10
    for first in range(0, calls, block):
        keys = list(runs) if (first // block) % 2 == 0 else list(runs)[::-1]
        for key in keys:
            for _ in range(min(block, calls - first)):
                start = time.perf_counter()
                runs[key]()
                samples[key].append((time.perf_counter() - start) * 1000.0)
    out = {"calls": calls, "candidate": cand, "reference": ref,
           "tokens": [len(ours.encoder.tokenize([cand])[0]), len(ours.encoder.tokenize([ref])[0])]}
    for key, values in samples.items():
        out[key] = {"p50_ms": common.percentile(values, 50), "p99_ms": common.percentile(values, 99),
                    "mean_ms": sum(values) / len(values)}
    out["p50_ratio"] = out["rapidscore BERTScore"]["p50_ms"] / out["bert_score.BERTScorer"]["p50_ms"]
    if breakdown:
        keys = ("total", "plan", "tokenize", "encode", "runtime", "finish")
        pieces = [rapidscore_phases(ours, [cand], [ref])[1] for _ in range(calls)]
        out["rapidscore_breakdown_ms"] = {key: 1000.0 * common.median([p[key] for p in pieces]) for key in keys}
    from rapidscore.encoder.model_source import read_config

    out["useful_gflop"] = useful_flops(out["tokens"], read_config(model_dir), layer) / 1e9
    out["weight_bytes"] = weight_bytes(ours.encoder.cache_entry / "model.onnx")
    out["one_token_forward_ms"] = one_token_forward_ms(scorers)
    return out


def weight_bytes(onnx_path: Path) -> int:
    """Bytes of the graph's weight matrices a forward pass reads (2-D float initialisers other
    than the embedding tables, which are gathered from, not streamed)."""
    import onnx

    graph = onnx.load(str(onnx_path)).graph
    total = 0
    for init in graph.initializer:
        if len(init.dims) == 2 and "embeddings" not in init.name and init.data_type == onnx.TensorProto.FLOAT:
            total += 4 * int(init.dims[0]) * int(init.dims[1])
    return total


def one_token_forward_ms(scorers: dict) -> dict:
    """p50 of the runtime's forward pass over a single token, per contender of rapidscore: with
    almost no arithmetic this is the cost of streaming the weights from memory, the floor under
    any single-pair latency."""
    import numpy as np

    out = {}
    for key, scorer in scorers.items():
        ids = np.array([[scorer.encoder.spec.cls_id or 0]], dtype=np.int64)
        mask = np.ones_like(ids)
        runner = scorer.encoder.runner
        for _ in range(10):
            runner(ids, mask)
        times = []
        for _ in range(100):
            start = time.perf_counter()
            runner(ids, mask)
            times.append((time.perf_counter() - start) * 1000.0)
        out[key] = common.percentile(times, 50)
    return out


# ------------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------------

TARGETS = {"W1": 1.5, "W2": 1.3}


def render(data: dict) -> str:
    m, v = data["machine"], data["versions"]
    g = data["gemm"]
    lines = [
        "## BERTScore: rapidscore vs bert-score 0.3.13",
        "",
        f"{data['date']}, {common.machine_line(m)}, load average {m['load_average_1min']} at start. "
        f"{common.versions_line(v)}. Commit {data['commit']}. Command: `{data['command']}`. "
        f"Total run time {data['run_seconds'] / 60:.1f} min.",
        "",
        f"Matrix-multiply probe ({g['n']}x{g['n']} products, best of {g['repeats']}): fp32 numpy "
        f"{g['numpy_fp32_gflops']} GFLOP/s, torch (MKL) {g.get('torch_fp32_gflops', 'n/a')} GFLOP/s, "
        f"ONNX Runtime MatMul (MLAS) {g.get('onnxruntime_fp32_gflops', 'n/a')} GFLOP/s"
        + (f", torch bf16 {g['torch_bf16_gflops']} GFLOP/s" if "torch_bf16_gflops" in g else "")
        + f". The machine is shared, so a shorter fp32 probe also runs before every repetition of "
        f"W1-W3: probes ranged {data['probe_range_gflops'][0]:.0f} / {data['probe_range_gflops'][1]:.0f} / "
        f"{data['probe_range_gflops'][2]:.0f} GFLOP/s (min / median / max); fp32 peak used below = the "
        f"best probe of the run, {data['peak_fp32_gflops']:.0f} GFLOP/s.",
        "",
        "Inputs: deterministic synthetic English (rapidscore.testing.corpora). Synthetic models: random weights "
        "(seed 0) from transformers configs; speed does not depend on the weights. Every comparison: "
        f"same process, same inputs, {data['reps']} interleaved repetitions (order rotated), after one "
        "warm-up call each; speed-up = median of per-repetition ratios. dF = F1 difference to the "
        "reference on the same pairs.",
        "",
        "### Steady state: models loaded once, `BERTScorer.score` vs `BERTScore.score`",
        "",
        "| workload | model, layer | pairs | unique sentences (mean tokens) | BERTScorer s | rapidscore s | speed-up | target | max abs dF | mean abs dF | pairs with abs dF > 1e-5 |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key, w in data["workloads"].items():
        lines.append(
            f"| {key} | {w['label']} | {w['pairs']:,} | {w['unique_sentences']:,} ({w['mean_tokens_per_sentence']:.0f}) | "
            f"{w['median_s']['bert_score.BERTScorer']:.2f} | {w['median_s']['rapidscore BERTScore']:.2f} | "
            f"**{common.fmt_ratio(w['speedup'])}** | {('>= %.1fx' % TARGETS[key]) if key in TARGETS else '-'} | "
            f"{common.fmt_sci(w['max_abs_dF'])} | {common.fmt_sci(w['mean_abs_dF'])} | {w['pairs_dF_over_1e-5']} |")
    lines += ["", "rapidscore's timed call is `BERTScore.score(cands, refs, reference_batch_size=64)`: the "
              "reference's zero padding of its batches of 64 pairs reproduced, as the drop-in "
              "`rapidscore.bert_score` does. Without it (the native default, maxima over real tokens only) "
              "max abs dF is " + "; ".join(
                  f"{k}: {common.fmt_sci(w['native_max_abs_dF'])} ({w['native_pairs_dF_over_1e-5']} pairs over 1e-5)"
                  for k, w in data["workloads"].items() if "native_max_abs_dF" in w) +
              " (docs/bertscore.md).", "",
              "Sizes: " + "; ".join(f"{k}: {w['size_note']}" for k, w in data["workloads"].items()), ""]

    e2e = data.get("end_to_end")
    if e2e:
        lines += [
            "### W1 end to end: `bert_score.score` vs rapidscore, each in a fresh process",
            "",
            f"{e2e['pairs']:,} pairs, {e2e['reps']} interleaved repetitions, one new Python process per call. "
            "score() s = the call itself (model load included); process s = interpreter start to exit "
            "(imports included). rapidscore's ONNX cache is warm (the export happens once per model and "
            f"layer: {data['export']['seconds']:.1f} s for all-MiniLM-L6-v2 layer 6 into an empty cache, "
            "measured separately). Peak RSS of each process.",
            "",
            "| contender | import s | score() s | process s | speed-up (score()) | speed-up (process) | peak RSS MiB | max abs dF |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for which, c in e2e["contenders"].items():
            med = c["median"]
            lines.append(f"| `{which}` | {med['import_s']:.2f} | {med['score_s']:.2f} | {med['process_wall_s']:.2f} | "
                         f"**{common.fmt_ratio(c['speedup_score_call'])}** | {common.fmt_ratio(c['speedup_process'])} | "
                         f"{med['peak_rss_mib']:.0f} | {common.fmt_sci(c['max_abs_dF'])} |")
        lines += ["", "Target: >= 3x `bert_score.score` end to end (model load included).", ""]

    lat = data.get("latency")
    if lat:
        r, o = lat["bert_score.BERTScorer"], lat["rapidscore BERTScore"]
        lines += [
            "### W4: single-pair latency (all-MiniLM-L6-v2, layer 6)",
            "",
            f"{lat['calls']} calls each, alternating in blocks of 10; pair of {lat['tokens'][0]} and {lat['tokens'][1]} tokens.",
            "",
            "| | p50 ms | p99 ms | mean ms |",
            "|---|---:|---:|---:|",
            f"| `BERTScorer.score` | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['mean_ms']:.2f} |",
            f"| `BERTScore.score` | {o['p50_ms']:.2f} | {o['p99_ms']:.2f} | {o['mean_ms']:.2f} |",
        ]
        extra_keys = [k for k in lat if k.startswith("rapidscore BERTScore ")]
        for key in extra_keys:
            e = lat[key]
            lines.append(f"| `BERTScore.score` {key.split()[-1]} | {e['p50_ms']:.2f} | {e['p99_ms']:.2f} | "
                         f"{e['mean_ms']:.2f} |")
        lines += [
            "",
            f"p50 ratio rapidscore / reference = {lat['p50_ratio']:.3f} (target <= 0.2)"
            + "".join(f"; {k.split()[-1]}: {lat[k]['p50_ms'] / r['p50_ms']:.3f}" for k in extra_keys) + ".",
            "",
        ]
        b = lat.get("rapidscore_breakdown_ms")
        if b:
            floor_ms = lat["useful_gflop"] / data["peak_fp32_gflops"] * 1000.0
            lines += [
                f"rapidscore's call run phase by phase ({lat['calls']} more calls after the timed ones), median "
                f"pieces: `plan` {b['plan']:.3f} ms, `encoder.tokenizer.encode` {b['tokenize']:.2f} ms, "
                f"`encoder.embed_ids` {b['encode']:.2f} ms (the runner call alone, ONNX Runtime: "
                f"{b['runtime']:.2f} ms), `finish` {b['finish']:.3f} ms (weights, matching, best reference); "
                f"{b['total']:.2f} ms in all. The encoder work of one pair is "
                f"{lat['useful_gflop'] * 1000:.0f} MFLOP: {floor_ms:.2f} ms at the measured fp32 peak, so the "
                f"compute floor in fp32 is about {floor_ms + b['total'] - b['encode']:.1f} ms.",
                "",
            ]
        if lat.get("one_token_forward_ms"):
            lines += [
                f"Memory floor: a forward pass over one token reads the layers' {lat['weight_bytes'] / 2**20:.0f} MiB "
                "of fp32 weight matrices and does almost no arithmetic; its p50 is "
                + ", ".join(f"{ms:.2f} ms ({key.replace('rapidscore BERTScore', '').strip() or 'fp32, ONNX Runtime'})"
                            for key, ms in lat["one_token_forward_ms"].items())
                + ". A pair's forward pass cannot take less than this, plus its arithmetic.",
                "",
            ]

    lines += [
        "### Encoder throughput, fraction of the fp32 peak, padding",
        "",
        "Useful FLOPs per real token per layer = 2 (4 h^2 + 2 h i) + 4 s h (h hidden size, i "
        "feed-forward size, s the sentence's own length; padding, layer norms, softmax, GELU and "
        "embeddings not counted). Encoder time: rapidscore's `Encoder.embed_ids` (padding, runtime, "
        "copies; the runner call alone in brackets, timed by a counting wrapper assigned to "
        "`Encoder.runner`), from the phase-by-phase run of each repetition; the reference's `get_bert_embedding` "
        "calls (tokenisation included, as the reference does it per batch). Padding waste = padded "
        "tokens fed to the model / real tokens - 1 (rapidscore: length-sorted batches under a token "
        "budget; reference: 64 sentences per batch sorted by word count).",
        "",
        "| workload | real tokens | rapidscore tokens/s (runtime alone) | reference tokens/s | rapidscore GFLOP/s | fraction of peak (of adjacent probe) | runtime alone: fraction of peak (adjacent) | reference GFLOP/s | reference fraction of peak (adjacent) | padding waste rapidscore | padding waste reference |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key, w in data["workloads"].items():
        e = w["encoder"]
        lines.append(
            f"| {key} | {w['real_tokens']:,} | {e['rapidscore_tokens_per_s']:,.0f} ({e['rapidscore_runtime_tokens_per_s']:,.0f}) | "
            f"{e['reference_tokens_per_s']:,.0f} | {e['rapidscore_gflops']:.1f} | "
            f"**{e['rapidscore_fraction_of_peak']:.0%}** ({e['rapidscore_fraction_of_adjacent_probe']:.0%}) | "
            f"{e['rapidscore_runtime_fraction_of_peak']:.0%} ({e['rapidscore_runtime_fraction_of_adjacent_probe']:.0%}) | "
            f"{e['reference_gflops']:.1f} | {e['reference_fraction_of_peak']:.0%} ({e['reference_fraction_of_adjacent_probe']:.0%}) | "
            f"{e['rapidscore_padding_waste']:.1%} | {e['reference_padding_waste']:.1%} |")
    lines += ["", "Target: encoder >= 70% of the measured fp32 peak on W2.", ""]

    breakdowns = {k: w for k, w in data["workloads"].items() if w.get("breakdown_s")}
    if breakdowns:
        lines += [
            "### Where the time goes (medians over the repetitions, seconds)",
            "",
            "rapidscore: score() = the timed `BERTScore.score` call; its pieces come from one more "
            "call per repetition, untimed for the ratios, run phase by phase through the public API "
            "(percentages of that run's total): plan = `BERTScore.plan` (validation, strip, dedupe), "
            "tokenise = `encoder.tokenizer.encode`, encode = `encoder.embed_ids` (the runner call "
            "alone in brackets, timed by a counting wrapper assigned to `Encoder.runner`), finish = "
            "`BERTScore.finish` (weights, matching, best reference, rescaling). Reference, inside its "
            "timed calls: `get_bert_embedding` (with its tokenisation) and `greedy_cos_idf`.",
            "",
            "| workload | rapidscore score() | phases total | plan | tokenise | encode (runtime) | finish | reference total | reference encode | reference match | reference rest |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for key, w in breakdowns.items():
            b = w["breakdown_s"]
            total = b["total"]

            def pct(x, t=total):
                return f"{x:.3f} ({x / t:.0%})" if t > 0 else f"{x:.3f}"

            ref_rest = b["reference_total"] - b["reference_encode_incl_tokenize"] - b["reference_match"]
            lines.append(
                f"| {key} | {b['score_total']:.3f} | {total:.3f} | {pct(b['plan'])} | {pct(b['tokenize'])} | "
                f"{pct(b['encode'])} ({b['encode_runtime']:.3f}) | {pct(b['finish'])} | {b['reference_total']:.3f} | "
                f"{pct(b['reference_encode_incl_tokenize'], b['reference_total'])} | "
                f"{pct(b['reference_match'], b['reference_total'])} | {pct(ref_rest, b['reference_total'])} |")
        lines.append("")

    lines += ["### Precision modes", ""]
    available = data["precisions_available"]
    rows = [(k, p, r) for k, w in data["workloads"].items() for p, r in w["precisions"].items()]
    if not rows:
        lines += [f"This build offers precision {', '.join(available)} only (`rapidscore.encoder.PRECISIONS`); "
                  "no fast mode was measured. Targets for `precision=\"bf16\"`: >= 3x BERTScorer on W1 and "
                  "W2, mean |dF| <= 5e-4, Kendall tau >= 0.995 vs fp32.", ""]
    else:
        lines += ["| workload | precision | speed-up vs BERTScorer | vs rapidscore fp32 | mean abs dF vs fp32 | max abs dF vs fp32 | Kendall tau vs fp32 |",
                  "|---|---|---:|---:|---:|---:|---:|"]
        for key, precision, r in rows:
            if "error" in r:
                lines.append(f"| {key} | {precision} | not run: {r['error']} | | | | |")
            else:
                lines.append(f"| {key} | {precision} | {common.fmt_ratio(r['speedup_vs_BERTScorer'])} | "
                             f"{common.fmt_ratio(r['speedup_vs_fp32'])} | {common.fmt_sci(r['mean_abs_dF_vs_fp32'])} | "
                             f"{common.fmt_sci(r['max_abs_dF_vs_fp32'])} | {r['kendall_tau_vs_fp32']:.4f} |")
        lines.append("")
    lines += [f"Peak RSS of the benchmark process (both libraries, all workloads loaded in turn): "
              f"{data['peak_rss_mib']:.0f} MiB.", ""]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------
# Main
# ------------------------------------------------------------------------------------------------

def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default="W1,W2,W3,W4", help="comma-separated subset of W1,W2,W3,W4")
    parser.add_argument("--w1-pairs", type=int, default=2000)
    parser.add_argument("--w2-pairs", type=int, default=500, help="the issue size")
    parser.add_argument("--w3-pairs", type=int, default=200,
                        help="issue size: 1000 (the reference needs about 12 min per repetition there on 2 cores)")
    parser.add_argument("--w4-calls", type=int, default=200)
    parser.add_argument("--reps", type=int, default=3, help="interleaved repetitions per comparison")
    parser.add_argument("--e2e-reps", type=int, default=3, help="fresh-process repetitions for W1 end to end (0: skip)")
    parser.add_argument("--precisions", default="auto",
                        help="extra rapidscore precisions to run on W1/W2: 'auto' (all non-fp32 ones the build "
                             "offers), 'none', or a comma-separated list")
    common.add_cache_and_out_arguments(parser)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        run_child(args.child)
        return 0

    run_start = time.perf_counter()
    cache = common.offline_cache(args.cache_dir)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    workloads = [w.strip().upper() for w in args.workloads.split(",") if w.strip()]

    import warnings

    import torch
    import transformers

    from rapidscore import encoder as encoder_module
    from rapidscore.encoder.model_source import embedded_model_dir
    from rapidscore.testing import corpora
    from rapidscore.testing.bench_models import bert_base_dir, roberta_large_17_dir

    warnings.filterwarnings("ignore", category=FutureWarning)
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    torch.set_num_threads(common.available_cpus())
    available = list(getattr(encoder_module, "PRECISIONS", ("fp32",)))
    if args.precisions == "auto":
        precisions = [p for p in available if p != "fp32"]
        if importlib.util.find_spec("openvino") is not None:
            precisions.insert(0, "openvino-fp32")
    elif args.precisions == "none":
        precisions = []
    else:
        precisions = [p.strip() for p in args.precisions.split(",") if p.strip() and p.strip() != "fp32"]

    data = {"date": common.now(), "machine": common.machine_info(), "versions": common.package_versions(),
            "commit": common.git_commit(), "command": common.command_line(), "reps": args.reps,
            "precisions_available": available, "precisions_run": precisions, "workloads": {}}
    print("[probe] matrix multiply", file=sys.stderr, flush=True)
    data["gemm"] = common.gemm_probe(threads=common.available_cpus())
    inst = ReferenceInstrumented()
    minilm = Path(embedded_model_dir())

    if "W1" in workloads:
        cands, refs = corpora.sentence_pairs(args.w1_pairs, 10, 40, seed=1)
        print("[W1] export time", file=sys.stderr, flush=True)
        data["export"] = export_time(minilm, 6)
        w = steady_state("W1", minilm, 6, cands, refs, args.reps, precisions, inst, breakdown=True)
        w["label"] = "all-MiniLM-L6-v2, 6 (all)"
        w["size_note"] = f"{args.w1_pairs:,} pairs of 10-40 words (issue: 2,000)"
        data["workloads"]["W1"] = w
        if args.e2e_reps > 0:
            with tempfile.TemporaryDirectory(prefix="rapidscore-bench-e2e-") as workdir:
                data["end_to_end"] = end_to_end(minilm, 6, cands, refs, args.e2e_reps, Path(workdir))
    if "W2" in workloads:
        print("[W2] building roberta-large-17 (random weights)", file=sys.stderr, flush=True)
        model = roberta_large_17_dir(cache / "models")
        cands, refs = corpora.sentence_pairs(args.w2_pairs, 10, 40, seed=2)
        w = steady_state("W2", model, 17, cands, refs, args.reps, precisions, inst, breakdown=True)
        w["label"] = "roberta-large config (random), 17"
        w["size_note"] = f"{args.w2_pairs:,} pairs of 10-40 words (issue: 500)"
        data["workloads"]["W2"] = w
    if "W3" in workloads:
        print("[W3] building bert-base (random weights)", file=sys.stderr, flush=True)
        model = bert_base_dir(cache / "models", minilm)
        cands, refs = corpora.long_text_pairs(args.w3_pairs, 150, 400, seed=3)
        w = steady_state("W3", model, 9, cands, refs, args.reps, [], inst, breakdown=True)
        w["label"] = "bert-base config (random), 9"
        w["size_note"] = f"{args.w3_pairs:,} pairs of 150-400 words (issue: 1,000)"
        data["workloads"]["W3"] = w
    if "W4" in workloads:
        print("[W4] single-pair latency", file=sys.stderr, flush=True)
        cands, refs = corpora.sentence_pairs(50, 10, 16, seed=4)
        data["latency"] = latency(minilm, 6, cands[0], refs[0], args.w4_calls, precisions)
    # fp32 peak = the best matrix-multiply rate seen in any probe of this run.
    probes = [data["gemm"]["peak_fp32_gflops"]] + [g for w in data["workloads"].values()
                                                   for g in w["encoder"]["probe_gflops_per_rep"]]
    data["peak_fp32_gflops"] = peak = max(probes)
    data["probe_range_gflops"] = [min(probes), common.median(probes), max(probes)]
    for w in data["workloads"].values():
        e = w["encoder"]
        e["rapidscore_fraction_of_peak"] = e["rapidscore_gflops"] / peak
        e["rapidscore_runtime_fraction_of_peak"] = e["rapidscore_runtime_gflops"] / peak
        e["reference_fraction_of_peak"] = e["reference_gflops"] / peak
    data["peak_rss_mib"] = common.peak_rss_mib()
    data["run_seconds"] = time.perf_counter() - run_start
    md, js = common.write_results("bertscore", render(data), data, Path(args.out))
    print(f"wrote {md} and {js}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
