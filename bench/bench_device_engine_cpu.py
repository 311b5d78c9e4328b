"""The torch backend's two BERTScore paths on the CPU, side by side in one process.

- host: the torch model, token embeddings copied to numpy, the C++ matching kernel
  (``BERTScore(backend="torch", device_engine=False)``, the CPU default);
- device: the device engine on CPU tensors (``device_engine=True``; the GPU path, run here).

End to end on ``--pairs`` MiniLM pairs (layer 6), matching alone on the same stored embeddings,
one short pair (latency), and sentence vectors (pooled per batch on the device vs the host
store's numpy pooling). Medians of interleaved repetitions. Prints markdown; this is a CPU
measurement of the code path, not a GPU result.

    python bench/bench_device_engine_cpu.py --pairs 1000 --reps 3
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from common import interleaved, machine_info, machine_line, median

from rapidscore.testing.corpora import sentence_pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--latency-calls", type=int, default=50)
    args = parser.parse_args()

    import torch

    from rapidscore.bertscore import BERTScore
    from rapidscore.bertscore.finishing import store_weights
    from rapidscore.kernels.matching import greedy_match
    from rapidscore.device.matching_torch import match_rows

    cands, refs = sentence_pairs(args.pairs, seed=12)
    host = BERTScore(layer=6, backend="torch", device_engine=False)
    device = BERTScore(layer=6, backend="torch", device_engine=True)
    rows = [f"machine: {machine_line(machine_info())}; torch {torch.__version__}, {torch.get_num_threads()} threads",
            "", "| measurement | host path (C++ kernel) | device engine (CPU tensors) | device / host |",
            "|---|---|---|---|"]

    times, results = interleaved({"host": lambda: host.score(cands, refs),
                                  "device": lambda: device.score(cands, refs)}, args.reps)
    diff = float(np.abs(results["host"].f1.astype(np.float64) - results["device"].f1).max())
    rows.append(_row(f"end to end, {args.pairs} pairs (s)", times))

    plan = host.plan(cands, refs)
    store = host.encoder.embed_ids(host.encoder.tokenizer.encode(plan.texts)[0], on_device=True)
    weights, _, _ = store_weights(store, None, host.finishing_options())
    embeddings = store.embeddings
    norms = torch.linalg.vector_norm(embeddings, dim=-1, keepdim=True)
    embeddings.div_(norms)
    array = embeddings.numpy()
    pairs = store.order[plan.pairs]
    times, _ = interleaved({
        "host": lambda: greedy_match(array, store.offsets, weights, pairs),
        "device": lambda: match_rows(embeddings[None], store.offsets, weights, pairs[:, 0], pairs[:, 1], None),
    }, args.reps)
    rows.append(_row(f"matching alone, {args.pairs} pairs (s)", times))

    one_c, one_r = [cands[0]], [refs[0]]
    host.warm_up()
    device.warm_up()
    latencies: dict[str, list[float]] = {"host": [], "device": []}
    for _ in range(args.latency_calls):
        for name, scorer in (("host", host), ("device", device)):
            start = time.perf_counter()
            scorer.score(one_c, one_r)
            latencies[name].append(time.perf_counter() - start)
    rows.append(_row("one pair, p50 (ms)", latencies, scale=1e3))
    rows.append(_row("one pair, tiny bert (model ~free), p50 (ms)", _tiny_latencies(args.latency_calls), scale=1e3))

    texts = cands + refs
    encoder = host.encoder
    times, vectors = interleaved({
        "host": lambda: encoder.pool(encoder.encode_unique(texts)),
        "device": lambda: encoder.sentence_vectors_unique(texts),
    }, args.reps)
    cosine = float(np.abs(np.einsum("ij,ij->i", vectors["host"], vectors["device"]) - 1).max())
    rows.append(_row(f"sentence vectors, {len(texts)} texts (s)", times))
    rows += ["", f"max |dF| device vs host: {diff:.1e}; sentence vectors max |1 - cos|: {cosine:.1e}"]
    print("\n".join(rows))


def _tiny_latencies(calls: int) -> dict[str, list[float]]:
    """One short pair on a tiny random BERT (rapidscore.testing.tiny_models), whose forward pass
    costs little: what remains is each path's own per-call overhead."""
    import tempfile

    from rapidscore.bertscore import BERTScore
    from rapidscore.testing.tiny_models import tiny_model_dir

    model = str(tiny_model_dir("bert", Path(tempfile.gettempdir()) / "rapidscore-bench-tiny"))
    scorers = {name: BERTScore(model, 2, backend="torch", device_engine=name == "device")
               for name in ("host", "device")}
    latencies: dict[str, list[float]] = {"host": [], "device": []}
    for scorer in scorers.values():
        scorer.warm_up()
    for _ in range(calls * 4):
        for name, scorer in scorers.items():
            start = time.perf_counter()
            scorer.score(["The cat sat on the mat."], ["A cat was sitting on the mat."])
            latencies[name].append(time.perf_counter() - start)
    return latencies


def _row(name: str, times: dict, scale: float = 1.0) -> str:
    h, d = median(times["host"]) * scale, median(times["device"]) * scale
    return f"| {name} | {h:.3f} | {d:.3f} | {d / h:.2f} |"


if __name__ == "__main__":
    main()
