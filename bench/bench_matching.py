"""Greedy matching kernel vs bert-score 0.3.13's padded batched torch matching.

Same embeddings for both (random but shaped like contextual embeddings: positive cosines,
lengths 10-60, dim 384, idf-like weights with 0 on CLS/SEP). The reference side runs exactly
what bert_score.utils.bert_cos_score_idf does after encoding: for each batch of 64 pairs,
pad_batch_stats (pad_sequence with 2.0, length mask) then greedy_cos_idf. Encoding is excluded
from both sides. Repetitions are interleaved; medians and their ratio are reported.

    python bench/bench_matching.py [--reps 5] [--quick] [--core PATH --label NAME]

Writes bench/results/matching.md and bench/results/matching.json (matching-NAME.* with --label).
--core PATH runs the kernels of another build of the extension (a rapidscore._core file), to
compare builds (the run-time ISA dispatch against a baseline-only build: bench/RESULTS.md).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
from pathlib import Path

import common  # bench/common.py: machine facts shared by every benchmark
import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
BATCH = 64  # bert_score.score's default batch_size


def realistic_store(rng, n_sentences, dim=384, min_len=10, max_len=60):
    common = rng.standard_normal(dim)
    embs, weights = [], []
    for _ in range(n_sentences):
        n = int(rng.integers(min_len, max_len + 1))
        x = 2.0 * common + 0.8 * rng.standard_normal(dim) + rng.standard_normal((n, dim))
        embs.append((x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32))
        w = rng.uniform(0.05, 4.0, size=n).astype(np.float32)
        w[0] = w[-1] = 0.0
        weights.append(w)
    return embs, weights


def reference_matching(torch, greedy_cos_idf, embs_t, idf_t, hyps, refs):
    """bert_cos_score_idf's matching loop (its pad_batch_stats copied verbatim in effect)."""
    from torch.nn.utils.rnn import pad_sequence

    def pad_batch_stats(ids):
        emb = [embs_t[i] for i in ids]
        idf = [idf_t[i] for i in ids]
        lens = [e.size(0) for e in emb]
        emb_pad = pad_sequence(emb, batch_first=True, padding_value=2.0)
        idf_pad = pad_sequence(idf, batch_first=True)
        lens_t = torch.tensor(lens, dtype=torch.long)
        base = torch.arange(max(lens), dtype=torch.long).expand(len(lens), max(lens))
        return emb_pad, base < lens_t.unsqueeze(1), idf_pad

    preds = []
    peak_batch_bytes = 0
    with torch.no_grad():
        for start in range(0, len(refs), BATCH):
            ref_stats = pad_batch_stats(refs[start : start + BATCH])
            hyp_stats = pad_batch_stats(hyps[start : start + BATCH])
            B, Kr, D = ref_stats[0].shape
            Kh = hyp_stats[0].shape[1]
            # live float32 tensors inside greedy_cos_idf: both padded batches, sim, masks, sim*masks
            peak_batch_bytes = max(peak_batch_bytes, 4 * (B * (Kr + Kh) * D + 3 * B * Kh * Kr))
            P, R, F = greedy_cos_idf(*ref_stats, *hyp_stats)
            preds.append(torch.stack((P, R, F), dim=-1))
    out = torch.cat(preds).numpy()
    return out[:, 0], out[:, 1], out[:, 2], peak_batch_bytes


def rss_peak_delta(fn):
    """Runs fn and returns (result, seconds, peak RSS growth in bytes) using Linux clear_refs."""
    def status(key):
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
        return 0

    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM to the current RSS
        before = status("VmRSS:")
    except OSError:
        before = None
    t0 = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - t0
    peak = status("VmHWM:") - before if before is not None else None
    return result, seconds, peak


def machine_info(torch):
    return {"date": common.now(), "machine": common.machine_info(), "versions": common.package_versions(),
            "torch_threads": torch.get_num_threads(), "load_average_at_start": os.getloadavg()}


def run_case(name, torch, greedy_cos_idf, store, hyps, refs, ours_fn, reps):
    embs, weights = store
    embs_t = [torch.from_numpy(e) for e in embs]
    idf_t = [torch.from_numpy(w) for w in weights]
    ours_times, ref_times, ours_peaks, ref_peaks = [], [], [], []
    ours = ref = None
    for rep in range(reps):  # interleaved: ours, reference, ours, reference, ...
        ours, t, peak = rss_peak_delta(ours_fn)
        ours_times.append(t)
        ours_peaks.append(peak)
        ref, t, peak = rss_peak_delta(
            lambda: reference_matching(torch, greedy_cos_idf, embs_t, idf_t, hyps, refs)
        )
        ref_times.append(t)
        ref_peaks.append(peak)
        print(f"  {name} rep {rep}: ours {ours_times[-1]:.3f}s  reference {ref_times[-1]:.3f}s", flush=True)
    P, R, F = (np.asarray(x).ravel() for x in ours)
    rP, rR, rF, ref_tensor_bytes = ref
    t_ours, t_ref = statistics.median(ours_times), statistics.median(ref_times)
    return {
        "case": name,
        "pairs": len(hyps),
        "reps": reps,
        "ours_median_s": t_ours,
        "reference_median_s": t_ref,
        "speedup": t_ref / t_ours,
        # Under CPU contention from other jobs torch's thread pool slows far more than the
        # kernel; the ratio of the fastest runs is the conservative comparison.
        "speedup_of_minima": min(ref_times) / min(ours_times),
        "ours_times_s": ours_times,
        "reference_times_s": ref_times,
        "max_abs_dP": float(np.abs(P - rP).max()),
        "max_abs_dR": float(np.abs(R - rR).max()),
        "max_abs_dF": float(np.abs(F - rF).max()),
        "ours_peak_rss_delta_bytes": max(p for p in ours_peaks if p is not None) if any(p is not None for p in ours_peaks) else None,
        "reference_peak_rss_delta_bytes": max(p for p in ref_peaks if p is not None) if any(p is not None for p in ref_peaks) else None,
        "reference_live_tensor_bytes_per_batch": ref_tensor_bytes,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="100 x 100 pairwise instead of 500 x 500")
    parser.add_argument("--core", type=Path,
                        help="a rapidscore._core extension file to run instead of the installed one")
    parser.add_argument("--label", default="", help="suffix of the result files (matching-LABEL.md)")
    args = parser.parse_args(argv)
    if args.core is not None:
        # Registered before rapidscore's loader imports the extension: every kernel call uses this build.
        spec = importlib.util.spec_from_file_location("rapidscore._core", args.core)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules["rapidscore._core"] = module

    import torch
    from bert_score.utils import greedy_cos_idf

    from rapidscore.kernels.matching import flatten_sentences, greedy_match, pairwise_match

    info = machine_info(torch)
    rng = np.random.default_rng(0)
    results = []

    # Case 1: 1,000 (candidate, reference) pairs of distinct sentences.
    store = realistic_store(rng, 2000)
    E, offsets, weights = flatten_sentences(*store, normalize=False)
    pairs = np.stack([np.arange(1000), np.arange(1000, 2000)], axis=1)
    results.append(run_case(
        "1,000 pairs", torch, greedy_cos_idf, store, list(pairs[:, 0]), list(pairs[:, 1]),
        lambda: greedy_match(E, offsets, weights, pairs), args.reps,
    ))

    # Case 2: all candidates x all references (the reference must list every pair).
    side = 100 if args.quick else 500
    store = realistic_store(rng, 2 * side)
    E, offsets, weights = flatten_sentences(*store, normalize=False)
    cands, refs = np.arange(side), np.arange(side, 2 * side)
    grid = np.stack(np.meshgrid(cands, refs, indexing="ij"), axis=-1).reshape(-1, 2)
    results.append(run_case(
        f"{side} x {side} pairwise", torch, greedy_cos_idf, store, list(grid[:, 0]), list(grid[:, 1]),
        lambda: pairwise_match(E, offsets, weights, cands, refs), max(3, args.reps // 2),
    ))

    info["load_average_at_end"] = os.getloadavg()
    RESULTS.mkdir(exist_ok=True)
    stem = f"matching-{args.label}" if args.label else "matching"
    if args.core is not None:
        info["core"] = str(args.core)
    (RESULTS / f"{stem}.json").write_text(json.dumps({"machine": info, "results": results}, indent=2) + "\n")
    mib = lambda b: "n/a" if b is None else f"{b / 2**20:.1f}"
    lines = [
        "## BERTScore greedy matching kernel",
        "",
        f"{info['date']}, {common.machine_line(info['machine'])}; {common.versions_line(info['versions'])}; "
        f"torch threads {info['torch_threads']}; "
        f"1-min load average {info['load_average_at_start'][0]:.1f} at start, {info['load_average_at_end'][0]:.1f} at end "
        "(other jobs shared the machine when above the core count).",
        "Embeddings: dim 384, lengths 10-60 tokens, positive cosines, idf-like weights (0 on CLS/SEP).",
        "Reference: bert_score.utils.greedy_cos_idf on batches of 64 pairs padded as bert_cos_score_idf pads "
        "them. Ours: rapidscore.kernels.matching (all cores). Encoding excluded from both. "
        "Interleaved repetitions, medians.",
        "",
        "| case | reference (s) | rapidscore (s) | speed-up (medians) | speed-up (fastest runs) | max abs dF | peak RSS growth ref / ours (MiB) | ref tensors per batch (MiB) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        lines.append(
            f"| {r['case']} | {r['reference_median_s']:.3f} | {r['ours_median_s']:.4f} | {r['speedup']:.1f}x | "
            f"{r['speedup_of_minima']:.1f}x | "
            f"{r['max_abs_dF']:.2e} | {mib(r['reference_peak_rss_delta_bytes'])} / {mib(r['ours_peak_rss_delta_bytes'])} | "
            f"{mib(r['reference_live_tensor_bytes_per_batch'])} |"
        )
    lines += ["", f"Command: `python bench/bench_matching.py {' '.join(argv if argv is not None else sys.argv[1:])}`", ""]
    (RESULTS / f"{stem}.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
