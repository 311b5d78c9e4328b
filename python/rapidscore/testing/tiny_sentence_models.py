"""Tiny sentence-transformers models, one per module configuration, built offline for the tests.

Each is the tiny BERT of ``rapidscore.testing.tiny_models`` (``tiny_model_dir("bert", root)``)
composed with sentence-transformers modules (``Transformer``, ``Pooling``, ``Dense`` with weights
from a fixed torch seed, ``Normalize``) and written by ``SentenceTransformer.save``, so the files
are what sentence-transformers itself writes. A few configurations are then edited the way older
sentence-transformers versions wrote them (``max_seq_length`` / ``do_lower_case`` in
sentence_bert_config.json, the boolean pooling keys), since real models on the hub carry those.

    python -m rapidscore.testing.tiny_sentence_models OUT_DIR [configuration ...]

Needs torch, transformers and sentence-transformers (the test extras).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from rapidscore.encoder.sentence import POOLING_MODES
from rapidscore.testing import tiny_models

# name -> what it holds (the modules after the Transformer, and the settings around them)
CONFIGURATIONS = {
    "mean_norm": "mean pooling + Normalize (all-MiniLM-L6-v2)",
    "mean": "mean pooling, no Normalize",
    "short": "mean + Normalize, max_seq_length=16 (saved in the tokenizer, as sentence-transformers 6 does)",
    "legacy_max_length": "mean + Normalize, max_seq_length=12 in sentence_bert_config.json (older saves)",
    "cls_norm": "CLS pooling + Normalize (BGE)",
    "max": "max pooling",
    "mean_sqrt": "mean_sqrt_len_tokens pooling",
    "weightedmean": "weightedmean pooling + Normalize",
    "lasttoken": "lasttoken pooling + Normalize",
    "labse": "CLS + Dense(Tanh) + Normalize (LaBSE)",
    "two_dense": "mean + Dense(GELU) + Dense(Identity, no bias, residual projection) + Normalize",
    "concat": "cls, max and mean concatenated (pooling_mode list) + Normalize",
    "concat_legacy": "the boolean pooling keys of older saves (cls, max, mean_sqrt_len_tokens)",
    "lower": "a cased tokenizer with do_lower_case in sentence_bert_config.json + Normalize",
    "prompts": "mean + Normalize, prompts query/passage, default prompt 'query'",
    "prompts_excluded": "mean + Normalize, include_prompt=False, prompts query/passage",
    "prompts_excluded_all": "every pooling mode concatenated, include_prompt=False, prompt query",
    "unknown": "mean + a LayerNorm module (not implemented by rapidscore)",
}
DENSE_SEED = 4321
PROMPTS = {"query": "query: ", "passage": "passage of text: "}


def build_sentence_model(name: str, out_dir: Path, bert_dir: Path) -> Path:
    """Build configuration ``name`` on the tiny BERT in ``bert_dir`` into ``out_dir``."""
    _check(name)
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Dense, LayerNorm, Normalize, Pooling, Transformer

    out_dir = Path(out_dir)
    source = Path(bert_dir)
    if name == "lower":
        source = _cased_copy(bert_dir, out_dir.parent / f".{out_dir.name}-cased")
    transformer = Transformer(str(source), max_seq_length=16 if name == "short" else None)
    dim = transformer.get_embedding_dimension()
    modes: Any = {"cls_norm": "cls", "max": "max", "mean_sqrt": "mean_sqrt_len_tokens", "weightedmean": "weightedmean",
                  "lasttoken": "lasttoken", "labse": "cls", "concat": ["cls", "max", "mean"],
                  "concat_legacy": "mean",  # rewritten below
                  "prompts_excluded_all": list(POOLING_MODES)}.get(name, "mean")
    modules: list = [transformer, Pooling(dim, pooling_mode=modes,
                                          include_prompt=not name.startswith("prompts_excluded"))]
    with torch.random.fork_rng(devices=[]):  # leave the caller's RNG alone
        torch.manual_seed(DENSE_SEED)
        if name == "labse":
            modules.append(Dense(dim, dim, activation_function=torch.nn.Tanh()))
        elif name == "two_dense":
            modules.append(Dense(dim, 24, activation_function=torch.nn.GELU()))
            modules.append(Dense(24, 16, bias=False, activation_function=torch.nn.Identity(), use_residual=True))
    if name == "unknown":
        modules.append(LayerNorm(dim))
    if name not in ("mean", "max", "mean_sqrt", "concat_legacy", "prompts_excluded_all"):
        modules.append(Normalize())
    prompts = PROMPTS if name.startswith("prompts") else None
    default_prompt = "query" if name == "prompts" else None
    model = SentenceTransformer(modules=modules, device="cpu", prompts=prompts, default_prompt_name=default_prompt)
    model.save(str(out_dir))
    if name == "lower":
        shutil.rmtree(source, ignore_errors=True)
    if name in ("legacy_max_length", "lower"):
        _edit_json(out_dir / "sentence_bert_config.json",
                   {"max_seq_length": 12} if name == "legacy_max_length" else {"do_lower_case": True})
    if name == "concat_legacy":
        pooling = out_dir / "1_Pooling" / "config.json"
        pooling.write_text(json.dumps({
            "word_embedding_dimension": dim, "pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False,
            "pooling_mode_max_tokens": True, "pooling_mode_mean_sqrt_len_tokens": True}, indent=2), encoding="utf-8")
    return out_dir


def _cased_copy(bert_dir: Path, target: Path) -> Path:
    """The tiny BERT with a cased tokenizer (same vocabulary, no lowercasing): do_lower_case then
    matters, as for a cased model saved with it."""
    from transformers import AutoTokenizer, BertTokenizer

    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(bert_dir, target)
    uncased = AutoTokenizer.from_pretrained(str(bert_dir))
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        (target / name).unlink(missing_ok=True)
    cased = BertTokenizer(vocab=uncased.get_vocab(), do_lower_case=False,
                          model_max_length=uncased.model_max_length)
    cased.save_pretrained(str(target))
    return target


def _edit_json(path: Path, values: dict) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    data.update(values)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def recipe_stamp() -> str:
    """This file, the tiny BERT's recipe and the sentence-transformers version."""
    import sentence_transformers

    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update(f"{tiny_models.recipe_stamp()}|{sentence_transformers.__version__}".encode())
    return digest.hexdigest()[:16]


_STAMP_FILE = "tiny_sentence_model_stamp.txt"


def tiny_sentence_model_dir(name: str, root: Path) -> Path:
    """``root/st-<name>``, built on first use (on ``tiny_model_dir("bert", root)``) and reused.
    Several processes may race: each builds privately and renames into place."""
    _check(name)
    root = Path(root)

    def build(out: Path) -> None:
        build_sentence_model(name, out, tiny_models.tiny_model_dir("bert", root))
    return tiny_models.build_in_place(root / f"st-{name}", recipe_stamp(), _STAMP_FILE, build)


def _check(name: str) -> None:
    if name not in CONFIGURATIONS:
        raise ValueError(f"unknown sentence model configuration {name!r}; expected one of {list(CONFIGURATIONS)}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(f"usage: python {sys.argv[0]} OUT_DIR [configuration ...]")
    for configuration in sys.argv[2:] or CONFIGURATIONS:
        print(tiny_sentence_model_dir(configuration, Path(sys.argv[1])))
