"""Tiny, randomly initialised transformer models built offline for the test suite.

Each supported family gets a tokenizer trained here on a built-in corpus (English sentences plus
accented words, CJK characters and emoji, so that such text does not come out as all-UNK) and a
model with a tiny config whose weights come from a fixed torch seed. Everything is saved with
``save_pretrained`` (weights as safetensors, tokenizer as ``tokenizer.json`` + config files), so

    transformers.AutoModel.from_pretrained(path)
    transformers.AutoTokenizer.from_pretrained(path)
    tokenizers.Tokenizer.from_file(path / "tokenizer.json")

all work with no network. Building is deterministic: two builds give byte-identical files,
in any process (the vocabularies come from a small pure-Python BPE trainer, because the
``tokenizers`` trainers break ties in hash-map order and change from run to run).

The tokenizers are constructed through the transformers tokenizer class of each family
(``BertTokenizer``, ``RobertaTokenizer``, ...) from the trained vocabulary. transformers 5 rebuilds
the normalizer / pre-tokenizer of these classes from their ``__init__`` arguments when loading (it
only takes the vocabulary, merges, post-processor and a SentencePiece charsmap from
``tokenizer.json``), so a tokenizer.json written by the class itself is the one layout for which
the raw ``tokenizers`` pipeline and ``AutoTokenizer`` agree by construction; the tests check it.

The family tables, sizes and configs are in :mod:`.tiny_configs`, the corpus and the tokenizer
trainers in :mod:`.tiny_tokenizers`; this module builds, stamps and caches, and its names are the
public ones (it re-exports the other two's). Plain module (no pytest): usable from conftest.py,
benchmarks, or by hand:

    python -m rapidscore.testing.tiny_models OUT_DIR [family ...]
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

# The recipe lives in two modules (the family tables and configs, the tokenizers); this one
# builds, stamps and caches. Their public names are this module's too.
from rapidscore.testing import tiny_configs, tiny_tokenizers
from rapidscore.testing.tiny_configs import (
    ALL_FAMILIES,
    CUT_ONLY_BY_RAPIDSCORE,
    FAMILIES,
    HEADS,
    HIDDEN,
    INTERMEDIATE,
    MAX_LENGTH,
    MORE_FAMILIES,
    NUM_LAYERS,
    PADDING_SENSITIVE,
    PYTHON_TOKENIZER_FAMILIES,
    SEED,
    UNIGRAM_SIZE,
    VOCAB_SIZE,
    build_config,
    check_family,
)
from rapidscore.testing.tiny_tokenizers import build_tokenizer, learn_bpe, pre_tokenized_counts, training_corpus

__all__ = [
    "FAMILIES", "MORE_FAMILIES", "PYTHON_TOKENIZER_FAMILIES", "ALL_FAMILIES", "CUT_ONLY_BY_RAPIDSCORE",
    "PADDING_SENSITIVE", "MAX_LENGTH", "NUM_LAYERS", "HIDDEN", "HEADS", "INTERMEDIATE", "VOCAB_SIZE",
    "UNIGRAM_SIZE", "SEED", "training_corpus", "learn_bpe", "pre_tokenized_counts", "build_tokenizer",
    "build_config", "build_tiny_model", "recipe_stamp", "tiny_model_dir", "build_in_place",
]


def build_tiny_model(family: str, out_dir: Path) -> Path:
    """Build the tiny ``family`` model and its tokenizer into ``out_dir``; returns ``out_dir``.

    Deterministic (fixed seeds): building twice gives byte-identical files.
    """
    check_family(family)
    import torch
    import transformers

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(family)
    config = build_config(family, tokenizer)
    # fork_rng: leave the caller's global RNG state untouched.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        model = transformers.AutoModel.from_config(config)
    model.eval()
    from transformers.utils import logging as hf_logging

    bars_were_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # "Writing model shards" bars are noise for a 300 kB model
    try:
        model.save_pretrained(out_dir, safe_serialization=True)
    finally:
        if bars_were_on:
            hf_logging.enable_progress_bar()
    tokenizer.save_pretrained(out_dir)
    if family not in PYTHON_TOKENIZER_FAMILIES and not (out_dir / "tokenizer.json").is_file():
        raise RuntimeError(f"tokenizer.save_pretrained wrote no tokenizer.json into {out_dir}")
    return out_dir


def recipe_stamp() -> str:
    """Identifies the build recipe: the sources of this module, of the family configs and of the
    tokenizers, and the transformers/tokenizers versions."""
    import tokenizers
    import transformers

    digest = hashlib.sha256()
    for module in (tiny_configs, tiny_tokenizers):
        digest.update(Path(str(module.__file__)).read_bytes())
    digest.update(Path(__file__).read_bytes())
    digest.update(f"{transformers.__version__}|{tokenizers.__version__}".encode())
    return digest.hexdigest()[:16]


_STAMP_FILE = "tiny_model_stamp.txt"


def tiny_model_dir(family: str, root: Path) -> Path:
    """``root/<family>``, built on first use and reused afterwards (see :func:`build_in_place`)."""
    check_family(family)
    return build_in_place(Path(root) / family, recipe_stamp(), _STAMP_FILE,
                          lambda out: build_tiny_model(family, out))


def build_in_place(target: Path, stamp: str, stamp_file: str, build: Callable[[Path], object]) -> Path:
    """``target``, built by ``build(directory)`` unless it holds a build of ``stamp`` already.

    Safe with several processes: each builds into a private temporary directory and moves it into
    place with an atomic rename; the loser of a race discards its copy. A directory built by a
    different recipe (stamp mismatch) is rebuilt.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    if _is_current(target, stamp, stamp_file):
        return target
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        built = tmp / "model"
        build(built)
        (built / stamp_file).write_text(stamp + "\n", encoding="utf-8")
        if target.exists() and not _is_current(target, stamp, stamp_file):
            stale = Path(tempfile.mkdtemp(prefix=f".{target.name}-stale-", dir=target.parent))
            with contextlib.suppress(OSError):  # someone else moved it first
                os.replace(target, stale / "old")
            shutil.rmtree(stale, ignore_errors=True)
        try:
            os.replace(built, target)
        except OSError:
            # Another process put a build in place first (rename onto a non-empty directory fails).
            if not _is_current(target, stamp, stamp_file):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _is_current(target: Path, stamp: str, stamp_file: str = _STAMP_FILE) -> bool:
    path = target / stamp_file
    return path.is_file() and path.read_text(encoding="utf-8").strip() == stamp


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(f"usage: python {sys.argv[0]} OUT_DIR [family ...]")
    for name in sys.argv[2:] or ALL_FAMILIES:
        print(tiny_model_dir(name, Path(sys.argv[1])))
