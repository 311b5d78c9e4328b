"""Long texts: rapidscore's windows (``long_texts="window"``) against truncation, side by side.

Workload: pairs of long paragraphs (about 1,000-3,000 tokens each; the token counts are measured
and reported), bert-base configuration with random weights at layer 9 (bench_bertscore.py's W3
model, built and cached the same way), 2 x 512-token model inputs per pair at most under
truncation. Contenders, interleaved in the same run:

  bert-score 0.3.13   bert_score.BERTScorer(model_type=<dir>, num_layers=9).score: truncation at
                      512 tokens (loaded once: the steady state, as bench_bertscore.py measures)
  rapidscore truncate BERTScore(<dir>, 9).score(reference_batch_size=64): the same numbers
  rapidscore window   BERTScore(<dir>, 9, long_texts="window").score(reference_batch_size=64):
                      every token of every text, in windows of 512 half a window apart

Reported: time per call (median over repetitions), the speed-up of each rapidscore mode over
bert-score, the cost of windows relative to truncation, model-input tokens of each mode (the
cost ratio's expectation), max |dF| of truncation against bert-score, and how far windows move
the scores (mean / max |dF| against truncation).

    python bench/bench_long_texts.py [--pairs 8] [--reps 2]

Writes bench/results/long_texts.md and bench/results/long_texts.json.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import common

from rapidscore.testing import corpora
from rapidscore.testing.bench_models import bert_base_dir

LAYER = 9
MIN_WORDS, MAX_WORDS = 900, 2700  # about 1,000-3,000 WordPiece tokens of the synthetic English


def run(args) -> dict:
    import bert_score
    import numpy as np
    import torch
    import transformers

    from rapidscore.bertscore import BERTScore
    from rapidscore.encoder.model_source import embedded_model_dir
    from rapidscore.encoder.tokens.windows import count_windows

    warnings.filterwarnings("ignore")  # the reference's and rapidscore's truncation warnings, every call
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(common.available_cpus())
    model = bert_base_dir(common.offline_cache(args.cache_dir) / "models", Path(embedded_model_dir()))
    cands, refs = corpora.long_text_pairs(args.pairs, MIN_WORDS, MAX_WORDS, seed=25)

    reference = bert_score.BERTScorer(model_type=str(model), num_layers=LAYER)
    truncate = BERTScore(str(model), LAYER)
    window = BERTScore(str(model), LAYER, long_texts="window")
    lengths = np.array([len(ids) for ids in window.encoder.tokenize(cands + refs)])
    width = window.encoder.max_length
    windows = count_windows(lengths, width, 2)
    contenders = {
        "bert-score 0.3.13 (truncate)": lambda: reference.score(cands, refs, batch_size=64)[2].numpy(),
        "rapidscore truncate": lambda: truncate.score(cands, refs, reference_batch_size=64),
        "rapidscore window": lambda: window.score(cands, refs, reference_batch_size=64),
    }
    # warm-up on one pair each (sessions, allocator), then whole interleaved repetitions
    reference.score(cands[:1], refs[:1])
    truncate.score(cands[:1], refs[:1])
    window.score(cands[:1], refs[:1])
    times, results = common.interleaved(contenders, args.reps, warmup=0)
    ref_f1 = results["bert-score 0.3.13 (truncate)"]
    trunc, win = results["rapidscore truncate"], results["rapidscore window"]
    median = {name: common.median(values) for name, values in times.items()}
    return {
        "pairs": args.pairs, "layer": LAYER, "max_length": width, "reps": args.reps,
        "tokens": {"min": int(lengths.min()), "median": float(np.median(lengths)), "max": int(lengths.max()),
                   "total": int(lengths.sum())},
        "model_input_tokens": {"truncate": int(np.minimum(lengths, width).sum()),
                               "window": int((np.where(windows > 1, windows * width, lengths)).sum())},
        "windows": {"texts": int((windows > 1).sum()), "total": int(windows[windows > 1].sum()),
                    "details": win.details},
        "seconds": times, "median_s": median,
        "speedup_truncate_vs_bert_score": common.median_ratio(times["bert-score 0.3.13 (truncate)"],
                                                             times["rapidscore truncate"]),
        "speedup_window_vs_bert_score": common.median_ratio(times["bert-score 0.3.13 (truncate)"],
                                                           times["rapidscore window"]),
        "window_cost_vs_truncate": common.median_ratio(times["rapidscore window"], times["rapidscore truncate"]),
        "truncate_max_abs_dF_vs_bert_score": float(np.abs(trunc.f1.astype(np.float64) - ref_f1).max()),
        "window_vs_truncate_dF": {"mean": float(np.abs(win.f1.astype(np.float64) - trunc.f1).mean()),
                                  "max": float(np.abs(win.f1.astype(np.float64) - trunc.f1).max())},
    }


def render(data: dict) -> str:
    r, m, v = data["result"], data["machine"], data["versions"]
    t, inputs = r["tokens"], r["model_input_tokens"]
    lines = [
        "## Long texts: windows vs truncation (issue 25)",
        "",
        f"{data['date']}, {common.machine_line(m)}, load average {m['load_average_1min']} at start. "
        f"{common.versions_line(v)}. Commit {data['commit']}. Command: `{data['command']}`.",
        "",
        f"{r['pairs']} pairs of synthetic English paragraphs, {t['min']:,}-{t['max']:,} tokens per text (median "
        f"{t['median']:,.0f}); bert-base configuration (random weights), layer {r['layer']}, maximum length "
        f"{r['max_length']}. Windows: {r['windows']['texts']} texts in {r['windows']['total']} windows. Model "
        f"input tokens: truncate {inputs['truncate']:,}, window {inputs['window']:,} "
        f"({inputs['window'] / inputs['truncate']:.2f}x). "
        f"Median of {r['reps']} interleaved repetitions.",
        "",
        "| contender | s per call | vs bert-score | model-input tokens/s |",
        "|---|---|---|---|",
    ]
    for name, seconds in r["median_s"].items():
        ratio = {"rapidscore truncate": r["speedup_truncate_vs_bert_score"],
                 "rapidscore window": r["speedup_window_vs_bert_score"]}.get(name)
        tokens = inputs["window"] if name == "rapidscore window" else inputs["truncate"]
        lines.append(f"| {name} | {seconds:.2f} | {common.fmt_ratio(ratio) if ratio else '1.00x'} | "
                     f"{tokens / seconds:,.0f} |")
    lines += [
        "",
        f"Windows cost **{common.fmt_ratio(r['window_cost_vs_truncate'])}** the time of truncation. "
        f"Truncation max |dF| vs bert-score: {common.fmt_sci(r['truncate_max_abs_dF_vs_bert_score'])}. "
        f"Windows move F1 by {common.fmt_sci(r['window_vs_truncate_dF']['mean'])} on average "
        f"(max {common.fmt_sci(r['window_vs_truncate_dF']['max'])}) against truncation.",
        "",
        *reading(data),
    ]
    return "\n".join(lines)


# bert-base's layers: 4 x 768 x 768 (attention) + 2 x 768 x 3072 (feed-forward) weights each
LAYER_WEIGHTS = 4 * 768 * 768 + 2 * 768 * 3072


def reading(data: dict) -> list[str]:
    """What the table means: per-token throughput of each mode and its share of the GEMM peak
    (the model's FLOPs per token at the maximum length: weights, plus QK^T and AV at 512)."""
    r = data["result"]
    inputs, seconds, width = r["model_input_tokens"], r["median_s"], r["max_length"]
    rate_truncate = inputs["truncate"] / seconds["rapidscore truncate"]
    rate_window = inputs["window"] / seconds["rapidscore window"]
    flops_per_token = r["layer"] * (2 * LAYER_WEIGHTS + 4 * width * 768)
    gflops = rate_truncate * flops_per_token / 1e9
    return [
        f"Per model-input token, windows run at {rate_window / rate_truncate:.0%} of truncation's rate "
        f"({rate_window:,.0f} vs {rate_truncate:,.0f} tokens/s): their cost is the "
        f"{inputs['window'] / inputs['truncate']:.1f}x input (every token of a text embedded about twice, "
        "windows half a window apart), not the windowing. Physical limit: the first "
        f"{r['layer']} layers of bert-base at {width} tokens are {flops_per_token / 1e6:.0f} MFLOP per token, so "
        f"truncation runs at {gflops:.0f} GFLOP/s (compare with the fp32 MatMul probe of the BERTScore "
        "section on the same machine type; softmax, layer norms and attention at 512 tokens take the rest).",
    ]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=8,
                        help="pairs of long texts (bert-base runs about 400-2,400 tokens/s on 2 cores: each pair "
                             "costs about 16 windows of 512 tokens)")
    parser.add_argument("--reps", type=int, default=2, help="interleaved repetitions")
    common.add_cache_and_out_arguments(parser)
    args = parser.parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    start = time.perf_counter()
    data = {"date": common.now(), "machine": common.machine_info(), "versions": common.package_versions(),
            "commit": common.git_commit(), "command": common.command_line()}
    data["result"] = run(args)
    data["peak_rss_mib"] = common.peak_rss_mib()
    data["run_seconds"] = time.perf_counter() - start
    md, js = common.write_results("long_texts", render(data), data, Path(args.out))
    print(Path(md).read_text())
    print(f"wrote {md} and {js}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
