"""Sentence embeddings: rapidscore vs sentence-transformers, side by side in the same run.

all-MiniLM-L6-v2 (the embedded copy), --sentences synthetic English sentences of 10-40 words.
sentence-transformers: ``SentenceTransformer(dir).encode(texts, batch_size=32,
normalize_embeddings=True)``, what its users write. rapidscore: ``Encoder(dir, max_length=256)
.sentence_embeddings(texts)`` (mean pooling, unit norm; 256 = the model's max_seq_length in
sentence-transformers), and the NRR path ``SentenceSimilarity`` which uses it. Both models are
loaded once; interleaved repetitions, median of per-repetition ratios; max abs difference of the
embeddings and of the cosine similarity of consecutive sentence pairs.

    python bench/bench_sentence.py [--sentences 2000] [--reps 3] [--precisions int8,bf16]

``--precisions``: rapidscore's non-exact modes timed in the same interleaved run, each against
rapidscore's exact fp32 (speed-up, and mean / max |d cos| of the sentence pairs: the NRR decision
reads these cosines; the fast-mode bound is a mean of 1e-3).

Writes bench/results/sentence.md and bench/results/sentence.json.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import common

from rapidscore.testing import corpora

TARGET = 1.5  # issue 5: >= 1.5x sentence-transformers' encode on CPU


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--precisions", default="",
                        help="comma-separated non-exact modes to time too (int8, bf16, fast)")
    common.add_cache_and_out_arguments(parser)
    args = parser.parse_args(argv)
    run_start = time.perf_counter()
    common.offline_cache(args.cache_dir)

    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    from rapidscore.encoder import Encoder
    from rapidscore.encoder.model_source import embedded_model_dir

    torch.set_num_threads(common.available_cpus())
    model_dir = str(embedded_model_dir())
    texts = corpora.english_sentences(args.sentences, 10, 40, seed=5)

    start = time.perf_counter()
    st_model = SentenceTransformer(model_dir, device="cpu")
    st_load = time.perf_counter() - start
    start = time.perf_counter()
    encoder = Encoder(model_dir, max_length=st_model.max_seq_length)
    rs_load = time.perf_counter() - start

    contenders = {
        "sentence-transformers encode": lambda: st_model.encode(texts, batch_size=32, normalize_embeddings=True,
                                                                convert_to_numpy=True, show_progress_bar=False),
        "rapidscore Encoder.sentence_embeddings": lambda: encoder.sentence_embeddings(texts),
    }
    modes = [p.strip() for p in args.precisions.split(",") if p.strip()]
    for mode in modes:
        fast = Encoder(model_dir, max_length=st_model.max_seq_length, precision=mode)
        fast.sentence_embeddings(texts[:16])
        contenders[f"rapidscore {mode} ({fast.precision})"] = lambda fast=fast: fast.sentence_embeddings(texts)
    print(f"[sentence] {len(texts)} sentences, {args.reps} repetitions", file=sys.stderr, flush=True)
    st_model.encode(texts[:16], batch_size=32, normalize_embeddings=True, show_progress_bar=False)
    encoder.sentence_embeddings(texts[:16])
    times, results = common.interleaved(contenders, args.reps, warmup=0)

    st = np.asarray(results["sentence-transformers encode"], dtype=np.float64)
    ours = np.asarray(results["rapidscore Encoder.sentence_embeddings"], dtype=np.float64)
    half = len(texts) // 2  # pairs (texts[k], texts[half + k])
    cos_st = np.sum(st[:half] * st[half:2 * half], axis=1)
    cos_ours = np.sum(ours[:half] * ours[half:2 * half], axis=1)
    tokens = int(sum(len(ids) for ids in encoder.tokenize(texts)))
    st_name, rs_name = list(contenders)[:2]
    speedup = common.median_ratio(times[st_name], times[rs_name])
    fast_rows = {}
    for name in list(contenders)[2:]:
        emb = np.asarray(results[name], dtype=np.float64)
        cos = np.sum(emb[:half] * emb[half:2 * half], axis=1)
        fast_rows[name] = {"speedup_vs_fp32": common.median_ratio(times[rs_name], times[name]),
                           "speedup_vs_sentence_transformers": common.median_ratio(times[st_name], times[name]),
                           "mean_abs_dcos_vs_fp32": float(np.abs(cos - cos_ours).mean()),
                           "max_abs_dcos_vs_fp32": float(np.abs(cos - cos_ours).max())}

    # The NRR path on the same pairs, timed once (warm model), checked against the cosines above.
    from rapidscore.nrr import SentenceSimilarity

    similarity = SentenceSimilarity(model_dir)
    start = time.perf_counter()
    nrr_sims = similarity.pairs(texts[:half], [[t] for t in texts[half:2 * half]])[0]
    nrr_seconds = time.perf_counter() - start

    data = {
        "date": common.now(), "machine": common.machine_info(), "versions": common.package_versions(),
        "commit": common.git_commit(), "command": common.command_line(), "model": model_dir,
        "sentences": len(texts), "real_tokens": tokens, "reps": args.reps, "max_length": encoder.max_length,
        "load_s": {st_name: st_load, rs_name: rs_load},
        "seconds": times, "median_s": {k: common.median(v) for k, v in times.items()},
        "speedup": speedup, "target": TARGET,
        "max_abs_diff_embeddings": float(np.abs(st - ours).max()),
        "max_abs_diff_cosine": float(np.abs(cos_st - cos_ours).max()),
        "sentences_per_s": {k: len(texts) / common.median(v) for k, v in times.items()},
        "nrr_similarity_seconds": nrr_seconds, "fast_modes": fast_rows,
        "nrr_max_abs_diff_vs_sentence_transformers": float(np.abs(nrr_sims - cos_st).max()),
        "peak_rss_mib": common.peak_rss_mib(),
    }
    data["run_seconds"] = time.perf_counter() - run_start
    m = data["machine"]
    md = "\n".join([
        "## Sentence embeddings: rapidscore vs sentence-transformers",
        "",
        f"{data['date']}, {common.machine_line(m)}, load average {m['load_average_1min']} at start. "
        f"{common.versions_line(data['versions'])}. Commit {data['commit']}. Command: `{data['command']}`.",
        "",
        f"all-MiniLM-L6-v2 (embedded copy), {len(texts):,} synthetic English sentences of 10-40 words "
        f"({tokens:,} tokens, special tokens included), mean pooling, unit norm, max length "
        f"{encoder.max_length}. Models loaded once; {args.reps} interleaved repetitions (order rotated) after a "
        "warm-up; speed-up = median of per-repetition ratios.",
        "",
        "| contender | median s | sentences/s | speed-up |",
        "|---|---:|---:|---:|",
        f"| `SentenceTransformer.encode(batch_size=32, normalize_embeddings=True)` | {data['median_s'][st_name]:.2f} | "
        f"{data['sentences_per_s'][st_name]:,.0f} | 1.00x |",
        f"| `Encoder(max_length=256).sentence_embeddings` | {data['median_s'][rs_name]:.2f} | "
        f"{data['sentences_per_s'][rs_name]:,.0f} | **{common.fmt_ratio(speedup)}** |",
        "",
        f"Target (issue 5): >= {TARGET}x. Parity: max abs difference of the embeddings "
        f"{data['max_abs_diff_embeddings']:.1e}, of the cosine similarities of {len(cos_st):,} sentence pairs "
        f"{data['max_abs_diff_cosine']:.1e} (target <= 1e-5).",
        "",
        f"`rapidscore.nrr.SentenceSimilarity.pairs` on the same {half:,} pairs (one call, warm model): "
        f"{nrr_seconds:.2f} s, max abs difference to sentence-transformers' cosines "
        f"{data['nrr_max_abs_diff_vs_sentence_transformers']:.1e}.",
        "",
    ])
    if fast_rows:
        md += "\n".join([
            "", "Non-exact modes in the same run (`Encoder(..., precision=MODE).sentence_embeddings`), against "
            "rapidscore's exact fp32: speed-up and |d cos| of the sentence pairs (fast-mode bound: mean <= 1e-3).",
            "", "| mode (used) | median s | speed-up vs fp32 | vs sentence-transformers | mean abs d cos "
            "| max abs d cos |",
            "|---|---:|---:|---:|---:|---:|",
            *[f"| {name.removeprefix('rapidscore ')} | {data['median_s'][name]:.2f} | "
              f"**{common.fmt_ratio(r['speedup_vs_fp32'])}** | "
              f"{common.fmt_ratio(r['speedup_vs_sentence_transformers'])} | "
              f"{common.fmt_sci(r['mean_abs_dcos_vs_fp32'])} | {common.fmt_sci(r['max_abs_dcos_vs_fp32'])} |"
              for name, r in fast_rows.items()], ""])
    paths = common.write_results("sentence", md, data, Path(args.out))
    print(f"wrote {paths[0]} and {paths[1]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
