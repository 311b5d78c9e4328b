"""ONNX Runtime on the CPU: the plain ``InferenceSession.run`` path against the IOBinding path
(output written in place into a preallocated array), on the same graph and batches.

The IOBinding path is what ``backend="onnx", device="cuda"`` runs (docs/gpu.md); on the CPU the
plain path stays the default unless this shows IOBinding faster. Both runners come from
``rapidscore.encoder.runtime.onnx.OnnxRunner`` (``io_binding=False`` / ``True``); the batches are the
length-sorted batches ``Encoder.embed_ids`` would run, recorded from one pass. Interleaved
repetitions, median of the per-repetition ratios; the outputs are compared bit for bit.

    python bench/bench_onnx_binding.py [--texts 2000] [--reps 7] [--layer 6]
"""

from __future__ import annotations

import argparse

import common

from rapidscore.testing import corpora


def recorded_batches(encoder, texts: list[str]) -> list[tuple]:
    """The (input_ids, attention_mask) batches the encoder runs for ``texts``."""
    batches: list[tuple] = []
    runner = encoder.runner

    class Recorder:
        provider, returns, thread_safe = runner.provider, runner.returns, True

        def __call__(self, input_ids, attention_mask):
            batches.append((input_ids, attention_mask))
            return runner(input_ids, attention_mask)

    encoder.runner = Recorder()
    try:
        encoder.encode(texts)
    finally:
        encoder.runner = runner
    return batches


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--layer", type=int, default=6)
    args = parser.parse_args(argv)
    import numpy as np

    from rapidscore.encoder import Encoder
    from rapidscore.encoder.model_source import embedded_model_dir
    from rapidscore.encoder.runtime.onnx import OnnxRunner

    cands, refs = corpora.sentence_pairs(args.texts // 2)
    encoder = Encoder(str(embedded_model_dir()), layer=args.layer)
    batches = recorded_batches(encoder, cands + refs)
    path = encoder.cache_entry / "model.onnx"
    runners = {"run": OnnxRunner(path, "cpu", None, io_binding=False),
               "io_binding": OnnxRunner(path, "cpu", None, io_binding=True)}
    outputs = {name: [runner(*batch) for batch in batches] for name, runner in runners.items()}  # warm-up
    identical = all(np.array_equal(a, b) for a, b in zip(outputs["run"], outputs["io_binding"]))
    contenders = {name: (lambda r=runner: [r(*batch) for batch in batches]) for name, runner in runners.items()}
    times, _ = common.interleaved(contenders, args.reps)
    real = sum(int(mask.sum()) for _, mask in batches)
    print(f"machine: {common.machine_info()['cpu_model']}, {common.available_cpus()} CPUs, "
          f"load {common.machine_info()['load_average_1min']}; {common.now()} {common.git_commit()}")
    print(f"all-MiniLM-L6-v2 layer {args.layer}: {len(batches)} batches, {real} real tokens, "
          f"{args.reps} interleaved repetitions")
    for name, values in times.items():
        print(f"  {name:>10}: median {common.median(values):.3f} s  (all: {', '.join(f'{v:.3f}' for v in values)})")
    print(f"  run / io_binding time, median of per-repetition ratios: "
          f"{common.median_ratio(times['run'], times['io_binding']):.3f}")
    print(f"  outputs bit-identical: {identical}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
