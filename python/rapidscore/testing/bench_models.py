"""Full-size model shapes with random weights, built offline for the benchmarks (bench/).

Speed does not depend on the weights, so the benchmarks measure models of real sizes built here
from transformers configs (weights from a fixed torch seed): a bert-base configuration with
MiniLM's uncased WordPiece, and a roberta-large configuration (any number of layers; 17 is
bert-score's default layer for roberta-large) with a byte-level BPE tokenizer trained on synthetic
English by :mod:`.tiny_tokenizers`' deterministic trainer, so common words are single tokens as
with the real vocabulary. Each is built once into ``root/<name>`` and reused while its recipe
stamp matches (:func:`rapidscore.testing.tiny_models.build_in_place`).

Building needs the ``[export]`` extra (torch, transformers); importing this module does not.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from rapidscore.testing.tiny_models import build_in_place

BERT_TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
MODEL_SEED = 0
MODEL_RECIPE = "bench-models-v1"  # bump when the builders below change
_STAMP_FILE = "bench_stamp.txt"


def _save_random_model(config, out: Path) -> None:
    import torch
    import transformers

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(MODEL_SEED)
        model = transformers.AutoModel.from_config(config)
    model.eval()
    model.save_pretrained(out, safe_serialization=True)


def bert_base_dir(root: Path, minilm_dir: Path) -> Path:
    """bert-base configuration (12 layers, 768 hidden), random weights, MiniLM's uncased WordPiece."""

    def build(out: Path) -> None:
        import transformers

        out.mkdir(parents=True, exist_ok=True)
        for name in BERT_TOKENIZER_FILES:
            if (minilm_dir / name).is_file():
                shutil.copy(minilm_dir / name, out / name)
        config = transformers.BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12,
                                         num_attention_heads=12, intermediate_size=3072,
                                         max_position_embeddings=512)
        _save_random_model(config, out)

    return build_in_place(Path(root) / "bert-base-random", f"{MODEL_RECIPE}|bert-base", _STAMP_FILE, build)


def roberta_large_17_dir(root: Path) -> Path:
    """:func:`roberta_large_dir` cut to its first 17 layers: saving only 17 layers keeps the files
    and memory at what a layer-17 model needs; both libraries then run the same 17 layers."""
    return roberta_large_dir(root, 17)


def roberta_large_dir(root: Path, num_layers: int = 24) -> Path:
    """roberta-large configuration with ``num_layers`` layers (24: the full model), random
    weights, and a byte-level BPE tokenizer (RoBERTa's ids for <s> <pad> </s> <unk> <mask>)
    trained on synthetic English (:func:`.corpora.english_sentences`)."""

    def build(out: Path) -> None:
        import transformers

        from rapidscore.testing.corpora import english_sentences
        from rapidscore.testing.tiny_tokenizers import byte_level_bpe

        vocab, merges = byte_level_bpe(english_sentences(4000, 5, 40, seed=99), max_merges=6000)
        tokenizer = transformers.RobertaTokenizer(vocab=vocab, merges=merges,  # type: ignore[arg-type]
                                                  add_prefix_space=False, model_max_length=512)
        tokenizer.save_pretrained(out)
        config = transformers.RobertaConfig(vocab_size=50265, hidden_size=1024, num_hidden_layers=num_layers,
                                            num_attention_heads=16, intermediate_size=4096,
                                            max_position_embeddings=514, type_vocab_size=1, pad_token_id=1,
                                            bos_token_id=0, eos_token_id=2)
        _save_random_model(config, out)

    return build_in_place(Path(root) / f"roberta-large-{num_layers}-random",
                          f"{MODEL_RECIPE}|roberta-large-{num_layers}", _STAMP_FILE, build)
