"""Tiny, randomly initialised sequence classifiers of the families real refusal classifiers use
(BERT, RoBERTa / DistilRoBERTa, DeBERTa-v2, ModernBERT), built offline for the tests, the docs'
examples and the benchmark.

Each is the tiny model of :mod:`.tiny_models` (same tokenizer, same config sizes) with a
sequence-classification head of ``num_labels`` outputs (2: ``NORMAL`` / ``REJECTION``, as
protectai/distilroberta-base-rejection-v1 names them; 1: a single ``REFUSAL`` logit), saved by
``save_pretrained`` (safetensors). The head's weights are drawn wider than the default
initialiser so that the probabilities spread over (0, 1) and no decision sits on a tie.
Deterministic (fixed seeds) and cached like the tiny models (``build_in_place``, a recipe stamp).

    python -m rapidscore.testing.tiny_classifiers OUT_DIR [family ...]
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Mapping
from pathlib import Path

from rapidscore.testing.tiny_models import build_in_place, recipe_stamp

__all__ = ["CLASSIFIER_FAMILIES", "DEFAULT_LABELS", "build_tiny_classifier", "tiny_classifier_dir"]

CLASSIFIER_FAMILIES = ("bert", "roberta", "deberta-v2", "modernbert")
DEFAULT_LABELS = {1: {0: "REFUSAL"}, 2: {0: "NORMAL", 1: "REJECTION"}}
HEAD_SEED = 2024
HEAD_SCALE = 3.0  # head weights ~ N(0, HEAD_SCALE / sqrt(fan_in))
_STAMP_FILE = "tiny_classifier_stamp.txt"


def _labels(num_labels: int, id2label: Mapping[int, str] | None) -> dict[int, str]:
    if id2label is not None:
        labels = {int(k): str(v) for k, v in id2label.items()}
        if sorted(labels) != list(range(num_labels)):
            raise ValueError(f"id2label must name ids 0..{num_labels - 1}, got {labels}")
        return labels
    return dict(DEFAULT_LABELS.get(num_labels) or {i: f"LABEL_{i}" for i in range(num_labels)})


def build_tiny_classifier(family: str, out_dir: Path, num_labels: int = 2,
                          id2label: Mapping[int, str] | None = None, problem_type: str | None = None) -> Path:
    """Build the tiny ``family`` classifier into ``out_dir``; returns ``out_dir``."""
    if family not in CLASSIFIER_FAMILIES:
        raise ValueError(f"unknown classifier family {family!r}; expected one of {CLASSIFIER_FAMILIES}")
    import math

    import torch
    import transformers

    from rapidscore.testing.tiny_configs import SEED, build_config
    from rapidscore.testing.tiny_tokenizers import build_tokenizer

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(family)
    config = build_config(family, tokenizer)
    labels = _labels(num_labels, id2label)
    config.num_labels = num_labels
    config.id2label = labels
    config.label2id = {v: k for k, v in labels.items()}
    if problem_type is not None:
        config.problem_type = problem_type  # type: ignore[assignment]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        model = transformers.AutoModelForSequenceClassification.from_config(config)
        torch.manual_seed(HEAD_SEED)
        with torch.no_grad():
            for name, param in model.named_parameters():
                if name.startswith(("classifier", "pooler", "head")) and param.dim() == 2:
                    param.normal_(0.0, HEAD_SCALE / math.sqrt(param.shape[1]))
    model.eval()
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def tiny_classifier_dir(family: str, num_labels: int, root: Path, *, id2label: Mapping[int, str] | None = None,
                        problem_type: str | None = None) -> Path:
    """``root/<family>-<num_labels>[-<hash of the labels>]``, built on first use and reused while
    the recipe (this module, the tiny models') is unchanged."""
    labels = _labels(num_labels, id2label)
    recipe = json.dumps({"labels": labels, "problem_type": problem_type}, sort_keys=True)
    digest = hashlib.sha256(Path(__file__).read_bytes() + recipe.encode()).hexdigest()[:12]
    name = f"{family}-{num_labels}"
    if id2label is not None or problem_type is not None:
        name += f"-{digest[:8]}"
    return build_in_place(Path(root) / "classifiers" / name, f"{recipe_stamp()}|{digest}", _STAMP_FILE,
                          lambda out: build_tiny_classifier(family, out, num_labels, labels, problem_type))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(f"usage: python {sys.argv[0]} OUT_DIR [family ...]")
    for fam in sys.argv[2:] or CLASSIFIER_FAMILIES:
        for count in (2, 1):
            print(tiny_classifier_dir(fam, count, Path(sys.argv[1])))
