"""The offline model fixtures: they build, load, tokenize consistently, and are reproducible.

Also pins down how the reference package (bert-score 0.3.13) tokenizes with the installed
transformers, since BERTScore parity tests depend on it.
"""

from __future__ import annotations

import hashlib
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rapidscore.testing import tiny_models

# Short texts across scripts; every character except those in UNSEEN occurs in the training corpus.
TEXTS = [
    "The cat sat on the mat.",
    "  Leading and trailing spaces  ",
    "We had crème brûlée at a small café in Zürich.",
    "Dvořák's music was played in Kraków and Łódź.",
    "我喜欢学习中文。",
    "東京は日本の首都です。",
    "서울은 한국의 수도입니다.",
    "Great job! 👍 Launch day 🚀 I love this 😀",
    "Working late 👩‍💻 again, thanks a lot ❤️",
    "tab\tand\nnewline",
    "Don't STOP believing, it's 3.5% at 7:30 pm",
]
RARE_SCRIPT_TEXTS = TEXTS[2:9]
UNSEEN = "Ω ∑"  # not in the corpus: unknown to every family except byte-level BPE


def _transformers_major() -> int:
    import transformers

    return int(transformers.__version__.split(".")[0])


def _raw_tokenizer(model_dir: Path):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(model_dir / "tokenizer.json"))


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_files_and_config(tiny_model):
    import transformers

    family = tiny_model.name
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        assert (tiny_model / name).is_file(), name
    assert not (tiny_model / "pytorch_model.bin").exists()
    config = transformers.AutoConfig.from_pretrained(tiny_model)
    assert config.model_type == family
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    assert tokenizer.is_fast
    assert tokenizer.model_max_length == tiny_models.MAX_LENGTH
    assert config.vocab_size == len(tokenizer)
    # RoBERTa-style position ids start after the padding index (pad id 1), hence + 2.
    extra_positions = 2 if family in ("roberta", "xlm-roberta") else 0
    assert config.max_position_embeddings == tiny_models.MAX_LENGTH + extra_positions


def test_model_loads_and_runs_at_max_length(tiny_model):
    import torch
    import transformers

    model, info = transformers.AutoModel.from_pretrained(tiny_model, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    tokenizer = transformers.AutoTokenizer.from_pretrained(tiny_model)
    batch = tokenizer(["word " * 500, "short one"], truncation=True, padding=True, return_tensors="pt")
    assert batch["input_ids"].shape[1] == tiny_models.MAX_LENGTH
    inputs = {k: v for k, v in batch.items() if k in ("input_ids", "attention_mask")}
    with torch.no_grad():
        out = model(**inputs, output_hidden_states=True)
    assert len(out.hidden_states) == tiny_models.NUM_LAYERS + 1
    assert out.last_hidden_state.shape == (2, tiny_models.MAX_LENGTH, model.config.hidden_size)
    assert torch.isfinite(out.last_hidden_state).all()


def test_tokenizer_json_ids_equal_auto_tokenizer(tiny_model):
    import transformers

    raw = _raw_tokenizer(tiny_model)
    # No padding/truncation baked into the file: callers see natural lengths.
    assert raw.padding is None and raw.truncation is None
    auto = transformers.AutoTokenizer.from_pretrained(tiny_model)
    for text in TEXTS + [UNSEEN]:
        assert raw.encode(text).ids == auto(text)["input_ids"], text


def test_rare_scripts_are_not_unknown(tiny_model):
    raw = _raw_tokenizer(tiny_model)
    unk_token = {"roberta": "<unk>", "xlm-roberta": "<unk>"}.get(tiny_model.name, "[UNK]")
    unk_id = raw.token_to_id(unk_token)
    assert unk_id is not None
    for text in RARE_SCRIPT_TEXTS:
        ids = raw.encode(text, add_special_tokens=False).ids
        assert ids and unk_id not in ids, (text, raw.encode(text).tokens)
    # Characters never seen in training: unknown, except for byte-level BPE which has all bytes.
    unseen = raw.encode(UNSEEN, add_special_tokens=False).ids
    assert (unk_id in unseen) == (tiny_model.name != "roberta")


@pytest.mark.slow
def test_builds_are_identical_across_processes(tiny_model_path, tmp_path):
    """A fresh process (other hash seed) builds byte-identical files for every family."""
    env = dict(os.environ, PYTHONHASHSEED="12345")
    subprocess.run([sys.executable, "-m", "rapidscore.testing.tiny_models", str(tmp_path)], env=env, check=True,
                   capture_output=True, timeout=300)
    for family in tiny_models.ALL_FAMILIES:
        ours, theirs = tiny_model_path(family), tmp_path / family
        names = sorted(p.name for p in ours.iterdir())
        assert names == sorted(p.name for p in theirs.iterdir())
        for name in names:
            assert _digest(ours / name) == _digest(theirs / name), (family, name)


def test_build_in_process_twice_gives_same_weights(tmp_path):
    first = tiny_models.build_tiny_model("bert", tmp_path / "a")
    second = tiny_models.build_tiny_model("bert", tmp_path / "b")
    assert _digest(first / "model.safetensors") == _digest(second / "model.safetensors")
    assert _digest(first / "tokenizer.json") == _digest(second / "tokenizer.json")


def test_tiny_model_dir_reuses_and_rebuilds_stale(tmp_path):
    target = tiny_models.tiny_model_dir("electra", tmp_path)
    stamp = target / "tiny_model_stamp.txt"
    inode = target.stat().st_ino
    assert tiny_models.tiny_model_dir("electra", tmp_path) == target
    assert target.stat().st_ino == inode  # reused, not rebuilt
    stamp.write_text("older recipe\n", encoding="utf-8")
    assert tiny_models.tiny_model_dir("electra", tmp_path) == target
    assert stamp.read_text(encoding="utf-8").strip() == tiny_models.recipe_stamp()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["electra"]  # no temp dirs left


def test_unknown_family_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="gpt2"):
        tiny_models.build_tiny_model("gpt2", tmp_path)


def test_minilm_fixture(minilm_path):
    import transformers

    assert (minilm_path / "config.json").is_file()
    raw = _raw_tokenizer(minilm_path)
    # The packaged tokenizer.json pads and truncates to 128; compare natural encodings.
    raw.no_padding()
    raw.no_truncation()
    auto = transformers.AutoTokenizer.from_pretrained(minilm_path)
    for text in TEXTS:
        assert raw.encode(text).ids == auto(text)["input_ids"], text


def test_offline_environment(rapidscore_cache):
    assert os.environ["HF_HUB_OFFLINE"] == "1" and os.environ["TRANSFORMERS_OFFLINE"] == "1"
    assert rapidscore_cache.is_dir()
    assert Path(os.environ["RAPIDSCORE_CACHE"]) == rapidscore_cache


# ---- the reference package on these models --------------------------------------------------

needs_transformers_5 = pytest.mark.skipif(
    _transformers_major() < 5,
    reason="transformers 4 has separate slow tokenizers; these expectations describe transformers 5",
)


@pytest.mark.slow
@needs_transformers_5
@pytest.mark.parametrize("use_fast", [False, True], ids=["slow-flag", "fast-flag"])
def test_reference_tokenizer_ids_equal_tokenizer_json(tiny_model, use_fast):
    """bert_score's own tokenizer + sent_encode give exactly the tokenizer.json ids.

    transformers 5 ignores use_fast (every family loads its tokenizers-backed class), so both
    flags give the same ids.
    """
    pytest.importorskip("bert_score", reason="bert-score is the parity reference (test extra)")
    from bert_score.utils import get_tokenizer, sent_encode

    tokenizer = get_tokenizer(str(tiny_model), use_fast=use_fast)
    raw = _raw_tokenizer(tiny_model)
    for text in TEXTS:
        assert sent_encode(tokenizer, text) == raw.encode(text.strip()).ids, text


@pytest.mark.slow
@needs_transformers_5
@pytest.mark.parametrize("tiny_model", ["roberta"], indirect=True)
def test_reference_roberta_gets_no_prefix_space(tiny_model):
    """bert_score passes add_prefix_space=True to encode(); transformers 5 silently drops it.

    So the reference tokenizes RoBERTa like tokenizer.json as saved (no prefix space), unlike
    bert-score on transformers 4 with the slow tokenizer. Proven on a sentence whose first word
    is tokenized differently with a leading space.
    """
    pytest.importorskip("bert_score", reason="bert-score is the parity reference (test extra)")
    from bert_score.utils import get_tokenizer, sent_encode
    from tokenizers import pre_tokenizers

    tokenizer = get_tokenizer(str(tiny_model), use_fast=False)
    with_prefix = _raw_tokenizer(tiny_model)
    with_prefix.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    text = "The cat sat on the mat."
    reference = sent_encode(tokenizer, text)
    assert reference == _raw_tokenizer(tiny_model).encode(text).ids
    assert reference != with_prefix.encode(text).ids


@pytest.mark.slow
@needs_transformers_5
def test_reference_scores_with_both_tokenizer_flags(tiny_model):
    bert_score = pytest.importorskip("bert_score", reason="bert-score is the parity reference (test extra)")

    cands = ["The cat sat on the mat.", "We had crème brûlée in Zürich 😀", "我喜欢学习中文。"]
    refs = ["A cat was sitting on the mat.", "Crème brûlée at a café in Zürich.", "北京是中国的首都。"]
    results = []
    for use_fast in (False, True):
        scores = bert_score.score(cands, refs, model_type=str(tiny_model), num_layers=2,
                                  use_fast_tokenizer=use_fast, batch_size=4)
        for tensor in scores:
            assert tensor.shape == (3,)
            assert all(math.isfinite(v) and -1.0 <= v <= 1.0 for v in tensor.tolist())
        results.append([tensor.tolist() for tensor in scores])
    assert results[0] == results[1]
