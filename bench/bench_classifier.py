"""The classifier refusal detector (issue 41) against ``transformers.pipeline("text-classification")``.

A DistilRoBERTa-shaped sequence classifier (distilroberta-base's configuration: 6 layers, 768
hidden, 12 heads; random weights, a byte-level BPE tokenizer trained on synthetic English, the
labels of protectai/distilroberta-base-rejection-v1) is built with transformers into a cache
directory; 2,000 synthetic responses (``rapidscore.testing.corpora``) are classified by the
pipeline at its best batch size among 8 / 32 / 64 and by rapidscore's detector (exact fp32,
ONNX Runtime, its token-budget batching), in one run. The probabilities are checked equal within
1e-5 and the decisions identical.

    python bench/bench_classifier.py [--n 2000] [--cache DIR] [--threads N]

Writes bench/results/classifier.json.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import common
import numpy as np

from rapidscore.testing.corpora import english_sentences
from rapidscore.testing.tiny_models import build_in_place

RECIPE = "bench-distilroberta-classifier-v1"


def distilroberta_classifier_dir(root: Path) -> Path:
    def build(out: Path) -> None:
        import torch
        import transformers

        from rapidscore.testing.tiny_tokenizers import byte_level_bpe

        vocab, merges = byte_level_bpe(english_sentences(4000, 5, 40, seed=99), max_merges=6000)
        tokenizer = transformers.RobertaTokenizer(vocab=vocab, merges=merges,  # type: ignore[arg-type]
                                                  add_prefix_space=False, model_max_length=512)
        tokenizer.save_pretrained(out)
        config = transformers.RobertaConfig(
            vocab_size=50265, hidden_size=768, num_hidden_layers=6, num_attention_heads=12, intermediate_size=3072,
            max_position_embeddings=514, type_vocab_size=1, pad_token_id=1, bos_token_id=0, eos_token_id=2,
            num_labels=2, id2label={0: "NORMAL", 1: "REJECTION"}, label2id={"NORMAL": 0, "REJECTION": 1})
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model = transformers.AutoModelForSequenceClassification.from_config(config)
        model.eval().save_pretrained(out, safe_serialization=True)

    return build_in_place(Path(root) / "distilroberta-classifier-random", RECIPE, "bench_stamp.txt", build)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "rapidscore-bench-models"))
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    import torch
    import transformers

    from rapidscore.abstention.classifier import ClassifierDetector

    if args.threads:
        torch.set_num_threads(args.threads)
    model = distilroberta_classifier_dir(Path(args.cache))
    texts = english_sentences(args.n, 5, 60, seed=41)
    pipe = transformers.pipeline("text-classification", model=str(model), top_k=None, truncation=True, device="cpu")
    timings: dict[str, float] = {}
    reference = None
    for batch_size in (8, 32, 64):
        started = time.perf_counter()
        out = pipe(texts, batch_size=batch_size)
        timings[f"pipeline batch_size={batch_size}"] = time.perf_counter() - started
        reference = np.array([{r["label"]: r["score"] for r in o}["REJECTION"] for o in out])
    assert reference is not None
    detector = ClassifierDetector(model, num_threads=args.threads)  # the export happens here, once
    detector.probabilities(texts[:8])
    started = time.perf_counter()
    probs = detector.probabilities(texts)
    timings["rapidscore classifier (onnx, fp32)"] = time.perf_counter() - started
    max_diff = float(np.abs(probs - reference).max())
    identical = bool((detector.detect(texts) == (reference > 0.5)).all())
    best = min(v for k, v in timings.items() if k.startswith("pipeline"))
    ratio = best / timings["rapidscore classifier (onnx, fp32)"]
    result = {"machine": common.machine_info(), "versions": common.package_versions(), "n": args.n,
              "threads": args.threads, "seconds": timings, "responses_per_second":
              {k: args.n / v for k, v in timings.items()}, "ratio_vs_best_pipeline": ratio,
              "max_abs_diff": max_diff, "decisions_identical": identical}
    out_dir = Path(__file__).resolve().parent / "results"
    out_dir.mkdir(exist_ok=True)
    (out_dir / "classifier.json").write_text(json.dumps(result, indent=1))
    for name, seconds in timings.items():
        print(f"{name:40s} {seconds:7.2f} s  {args.n / seconds:8.1f} responses/s")
    print(f"ratio vs the best pipeline batch size: {ratio:.2f}x; max |diff| {max_diff:.2e}; "
          f"decisions identical: {identical}")


if __name__ == "__main__":
    main()
