"""Tiny, randomly initialised transformer models built offline for the test suite.

Each supported family gets a tokenizer trained here on a built-in corpus (English sentences plus
accented words, CJK characters and emoji, so that such text does not come out as all-UNK) and a
model with a tiny config whose weights come from a fixed torch seed. Everything is saved with
``save_pretrained`` (weights as safetensors, tokenizer as ``tokenizer.json`` + config files), so

    transformers.AutoModel.from_pretrained(path)
    transformers.AutoTokenizer.from_pretrained(path)
    tokenizers.Tokenizer.from_file(path / "tokenizer.json")

all work with no network. Building is deterministic: two builds give byte-identical files,
in any process (the vocabularies come from a small pure-Python BPE trainer below, because the
``tokenizers`` trainers break ties in hash-map order and change from run to run).

The tokenizers are constructed through the transformers tokenizer class of each family
(``BertTokenizer``, ``RobertaTokenizer``, ...) from the trained vocabulary. transformers 5 rebuilds
the normalizer / pre-tokenizer of these classes from their ``__init__`` arguments when loading (it
only takes the vocabulary, merges, post-processor and a SentencePiece charsmap from
``tokenizer.json``), so a tokenizer.json written by the class itself is the one layout for which
the raw ``tokenizers`` pipeline and ``AutoTokenizer`` agree by construction; the tests check it.

Plain module (no pytest): usable from conftest.py, benchmarks, or by hand:

    python -m rapidscore.testing.tiny_models OUT_DIR [family ...]
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedTokenizerBase

# The families every generic encoder test runs over.
FAMILIES = ("bert", "roberta", "deberta-v2", "xlm-roberta", "distilbert", "electra")
# The other families of bert-score 0.3.13's model table, and modern encoders beyond it; the
# parity suite (tests/bertscore/test_families.py) runs each against bert-score on both backends.
MORE_FAMILIES = ("deberta", "mpnet", "big_bird", "albert", "xlnet", "t5", "mt5", "bart", "pegasus",
                 "blenderbot", "led", "longformer", "modernbert", "xlm", "prophetnet", "mbart", "squeezebert",
                 "convbert", "byt5")
# Families whose tokenizer is transformers' Python one (no tokenizer.json): XLM's needs sacremoses.
PYTHON_TOKENIZER_FAMILIES = ("xlm", "prophetnet", "byt5")
ALL_FAMILIES = FAMILIES + MORE_FAMILIES

# Longest input in tokens, special tokens included (the tokenizer's model_max_length). Small so
# truncation tests stay cheap.
MAX_LENGTH = 128
NUM_LAYERS = 4
HIDDEN = 32
HEADS = 2
INTERMEDIATE = 64
VOCAB_SIZE = 1000  # WordPiece and byte-level BPE
UNIGRAM_SIZE = 800  # SentencePiece-style pieces, specials excluded
SEED = 1234

# ----------------------------------------------------------------------------------------------
# Built-in training corpus
# ----------------------------------------------------------------------------------------------

_SENTENCES = [
    "The cat sat on the mat.",
    "A quick brown fox jumps over the lazy dog.",
    "The weather is lovely today, isn't it?",
    "I can't believe it's already December!",
    "She reads three books every month.",
    "They're going to the market tomorrow morning.",
    "He said: \"Don't touch that button.\"",
    "Our flight was delayed by two hours and 45 minutes.",
    "The committee approved the budget on 12 March 2021.",
    "Machine translation quality is often measured with automatic metrics.",
    "Large language models sometimes refuse to answer a question.",
    "The reference answer mentions the capital of France, which is Paris.",
    "Please summarise the following article in two sentences.",
    "The patient was discharged after a short stay in hospital.",
    "Researchers found no significant difference between the groups.",
    "Prices rose by 3.5% in the third quarter.",
    "Who wrote the novel Pride and Prejudice?",
    "Jane Austen wrote Pride and Prejudice in 1813.",
    "The river flows north through the valley.",
    "My phone battery died halfway through the call.",
    "Can you recommend a good Italian restaurant nearby?",
    "The museum opens at 9 a.m. and closes at 5 p.m.",
    "Water boils at 100 degrees Celsius at sea level.",
    "The children played football in the park until sunset.",
    "An apple a day keeps the doctor away.",
    "The server returned an error: connection timed out.",
    "Unfortunately, I don't know the answer to that question.",
    "I am unable to provide information about that topic.",
    "The answer cannot be found in the given context.",
    "According to the document, the treaty was signed in Vienna.",
    "Einstein published the theory of general relativity in 1915.",
    "The mitochondria is the powerhouse of the cell.",
    "Shakespeare's plays are still performed around the world.",
    "The train to Edinburgh leaves from platform four.",
    "We measured precision, recall and F1 on the test set.",
    "Tokenization splits text into smaller units called tokens.",
    "Embeddings map words to vectors of real numbers.",
    "Cosine similarity compares the angle between two vectors.",
    "The dog barked loudly at the postman.",
    "She painted the fence white last weekend.",
    "Why is the sky blue during the day?",
    "Light from the sun is scattered by molecules in the air.",
    "The stock market closed higher on Friday.",
    "New York City has five boroughs.",
    "The Amazon rainforest spans several countries in South America.",
    "Mount Everest is the highest mountain above sea level.",
    "Please don't forget to water the plants.",
    "The meeting has been moved to Thursday afternoon.",
    "It's a truth universally acknowledged.",
    "The recipe calls for two cups of flour and one egg.",
    "Bake the cake for thirty-five minutes at 180 degrees.",
    "He ran the marathon in under three hours.",
    "The library is closed on public holidays.",
    "Our team won the championship after a dramatic final.",
    "The new policy takes effect next January.",
    "Scientists discovered a new species of frog in the rainforest.",
    "The company's revenue grew by 12 percent last year.",
    "Could you please repeat the question?",
    "The hotel room had a beautiful view of the ocean.",
    "Traffic was heavy on the highway this morning.",
]

_SUBJECTS = [
    "the teacher", "my neighbour", "a young student", "the old fisherman", "our manager",
    "the scientist", "a tired traveller", "the small robot", "her brother", "the city council",
    "the doctor", "an engineer", "the pilot", "my grandmother", "the journalist", "the children",
]
_VERBS = [
    "found", "wrote", "opened", "painted", "repaired", "described", "forgot", "carried",
    "discovered", "explained", "ordered", "visited", "cleaned", "borrowed", "answered", "studied",
]
_OBJECTS = [
    "a letter", "the broken window", "an interesting report", "the red bicycle", "a long poem",
    "the ancient map", "three green apples", "the final exam", "a cheap ticket", "the garden gate",
    "the quarterly results", "a strange noise", "the old piano", "two cups of coffee",
]
_PLACES = [
    "in the kitchen", "at the station", "near the river", "after lunch", "before the storm",
    "during the meeting", "on Monday", "in 1999", "at midnight", "in the library",
    "under the bridge", "by the lake", "in London", "at 7:30 pm",
]

_ACCENTED = [
    "café", "naïve", "résumé", "façade", "jalapeño", "Zürich", "São Paulo", "crème brûlée",
    "Dvořák", "Łódź", "İstanbul", "Ångström", "piñata", "Ærøskøbing", "élève", "déjà vu",
    "über", "Müller", "Straße", "coördinate", "Škoda", "Kraków", "Reykjavík", "señor",
]
_ACCENTED_SENTENCES = [
    "We had crème brûlée at a small café in Zürich.",
    "The naïve élève wrote his résumé in São Paulo.",
    "Dvořák's music was played in Kraków and Łódź.",
    "Frau Müller wohnt in der Hauptstraße über dem Bäcker.",
    "El señor compró una piñata para la fiesta.",
    "La façade de l'église est très belle, n'est-ce pas ?",
    "Reykjavík is colder than İstanbul in winter.",
    "Ça va très bien, merci beaucoup.",
    "Él está en la estación de tren.",
    "Ångström measured the solar spectrum.",
]
_CJK_SENTENCES = [
    "我喜欢学习中文。",
    "今天天气很好，我们去公园吧。",  # noqa: RUF001 (the fullwidth comma is the point: CJK punctuation)
    "北京是中国的首都。",
    "東京は日本の首都です。",
    "日本語のテキストを読みます。",
    "これはペンです。",
    "한국어 문장을 씁니다.",
    "서울은 한국의 수도입니다.",
    "机器翻译的质量很重要。",
    "我不知道这个问题的答案。",
]
_EMOJI_SENTENCES = [
    "Great job! 👍",
    "I love this 😀 so much",
    "Launch day 🚀🚀🚀",
    "Happy birthday 🎉🎂",
    "Thanks a lot ❤️",
    "Bonjour from Paris 🇫🇷",
    "Working late 👩‍💻 again",
    "Nice weather ☀️ today",
    "This is funny 😂",
    "Good luck 🍀 with the exam",
    "Thumbs up 👍🏽 from me",
    "Coffee time ☕ now",
]


def training_corpus() -> list[str]:
    """The built-in corpus the tiny tokenizers are trained on (deterministic)."""
    rng = random.Random(SEED)
    corpus = list(_SENTENCES)
    for _ in range(320):
        subject, verb, obj, place = (rng.choice(_SUBJECTS), rng.choice(_VERBS),
                                     rng.choice(_OBJECTS), rng.choice(_PLACES))
        sentence = f"{subject} {verb} {obj} {place}."
        corpus.append(sentence[0].upper() + sentence[1:])
    for _ in range(3):  # repeated so the rare scripts get merged into pieces, not only characters
        corpus.extend(_ACCENTED_SENTENCES)
        corpus.extend(_CJK_SENTENCES)
        corpus.extend(_EMOJI_SENTENCES)
    corpus.append(" ".join(_ACCENTED))
    corpus.extend(f"{word} {emoji}" for word, emoji in zip(_ACCENTED, "😀🚀🎉❤👍😂🍀☕☀🇫"))
    return corpus


# ----------------------------------------------------------------------------------------------
# Tokenizers
# ----------------------------------------------------------------------------------------------

def learn_bpe(word_freqs: dict[tuple[str, ...], int], max_merges: int, join) -> list[tuple[str, str]]:
    """Greedy BPE merges over ``word_freqs`` (symbol tuple -> count), fully deterministic.

    The ``tokenizers`` trainers break count ties in hash-map order, so their vocabularies change
    from one process to the next; this small trainer breaks ties by the pair itself. Incremental
    pair counts plus a lazy max-heap keep it fast on the built-in corpus.
    """
    import heapq
    from collections import defaultdict

    words = [list(symbols) for symbols in word_freqs]
    freqs = list(word_freqs.values())
    counts: dict[tuple[str, str], int] = defaultdict(int)
    where: dict[tuple[str, str], set[int]] = defaultdict(set)
    for index, word in enumerate(words):
        for pair in zip(word, word[1:]):
            counts[pair] += freqs[index]
            where[pair].add(index)
    heap = [(-count, pair) for pair, count in counts.items()]
    heapq.heapify(heap)
    merges: list[tuple[str, str]] = []
    while heap and len(merges) < max_merges:
        negative, pair = heapq.heappop(heap)
        if counts.get(pair, 0) != -negative:
            continue  # stale heap entry
        if -negative < 2:
            break  # only merge pieces seen at least twice
        merges.append(pair)
        merged = join(*pair)
        touched: set[tuple[str, str]] = set()
        for index in sorted(where.pop(pair)):
            word, freq = words[index], freqs[index]
            for old in zip(word, word[1:]):
                counts[old] -= freq
                touched.add(old)
            new_word, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
                    new_word.append(merged)
                    i += 2
                else:
                    new_word.append(word[i])
                    i += 1
            words[index] = new_word
            for new in zip(new_word, new_word[1:]):
                counts[new] += freq
                where[new].add(index)
                touched.add(new)
        counts.pop(pair, None)
        for other in touched:
            if other != pair and counts.get(other, 0) > 0:
                heapq.heappush(heap, (-counts[other], other))
    return merges


def pre_tokenized_counts(corpus: list[str], normalizer, pre_tokenizer) -> dict[str, int]:
    counts: dict[str, int] = {}
    for text in corpus:
        if normalizer is not None:
            text = normalizer.normalize_str(text)
        for piece, _ in pre_tokenizer.pre_tokenize_str(text):
            counts[piece] = counts.get(piece, 0) + 1
    return dict(sorted(counts.items()))


def _respecial(vocab: dict[str, int], specials: list[str]) -> dict[str, int]:
    """``vocab`` with its first ``len(specials)`` entries renamed to ``specials`` (same ids)."""
    tokens = sorted(vocab, key=vocab.__getitem__)
    return {token: index for index, token in enumerate(specials + tokens[len(specials):])}


def _wordpiece_vocab(corpus: list[str], specials: list[str] | None = None) -> dict[str, int]:
    """Uncased BERT WordPiece vocabulary: specials, characters (plain and ``##``), merged pieces."""
    from tokenizers import normalizers, pre_tokenizers

    # Same normalizer / pre-tokenizer as an uncased BertTokenizer (lowercase, strip accents,
    # split CJK characters).
    counts = pre_tokenized_counts(corpus, normalizers.BertNormalizer(lowercase=True),
                                   pre_tokenizers.BertPreTokenizer())
    word_freqs = {(w[0], *("##" + c for c in w[1:])): n for w, n in counts.items()}
    alphabet = sorted({symbol for word in word_freqs for symbol in word})
    specials = specials or ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    budget = VOCAB_SIZE - len(specials) - len(alphabet)
    merges = learn_bpe(word_freqs, budget, lambda a, b: a + b[2:])
    tokens = specials + alphabet
    for a, b in merges:
        token = a + b[2:]
        if token not in tokens:
            tokens.append(token)
    return {token: index for index, token in enumerate(tokens)}


def _byte_level_bpe(corpus: list[str]) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """RoBERTa/GPT-2 style byte-level BPE: specials, the 256 byte symbols, merged pieces."""
    from tokenizers import pre_tokenizers

    counts = pre_tokenized_counts(corpus, None, pre_tokenizers.ByteLevel(add_prefix_space=False))
    word_freqs = {tuple(w): n for w, n in counts.items()}
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    merges = learn_bpe(word_freqs, VOCAB_SIZE - len(specials) - len(alphabet), lambda a, b: a + b)
    tokens = specials + alphabet
    for a, b in merges:
        if a + b not in tokens:
            tokens.append(a + b)
    return {token: index for index, token in enumerate(tokens)}, merges


def _python_tokenizer(family: str, corpus: list[str]) -> PreTrainedTokenizerBase:
    """XLM's (Moses + BPE with </w> word ends) or ProphetNet's (WordPiece, [SEP] at the end)
    Python tokenizer, from vocabulary files written to a temporary directory."""
    import json
    import re
    import unicodedata

    import transformers

    if family == "byt5":  # UTF-8 bytes, no vocabulary file
        return transformers.ByT5Tokenizer(extra_ids=0, model_max_length=MAX_LENGTH)
    with tempfile.TemporaryDirectory() as folder:
        if family == "prophetnet":
            vocab = _wordpiece_vocab(corpus, specials=["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]", "[X_SEP]"])
            path = Path(folder) / "vocab.txt"
            path.write_text("".join(f"{token}\n" for token in vocab), encoding="utf-8")
            return transformers.ProphetNetTokenizer(str(path), model_max_length=MAX_LENGTH)

        def words(text: str) -> list[str]:  # roughly XLM's Moses split, lowercased, accents removed
            text = "".join(c for c in unicodedata.normalize("NFD", text.lower()) if unicodedata.category(c) != "Mn")
            return re.findall(r"\w+|[^\w\s]", text)

        counts: dict[str, int] = {}
        for sentence in corpus:
            for word in words(sentence):
                counts[word] = counts.get(word, 0) + 1
        word_freqs = {(*word[:-1], word[-1] + "</w>"): n for word, n in sorted(counts.items())}
        specials = ["<s>", "</s>", "<pad>", "<unk>"] + [f"<special{i}>" for i in range(10)]
        alphabet = sorted({symbol for word in word_freqs for symbol in word})
        merges = learn_bpe(word_freqs, VOCAB_SIZE - len(specials) - len(alphabet), lambda a, b: a + b)
        tokens = specials + alphabet
        for a, b in merges:
            if a + b not in tokens:
                tokens.append(a + b)
        (Path(folder) / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(tokens)}), encoding="utf-8")
        (Path(folder) / "merges.txt").write_text("".join(f"{a} {b}\n" for a, b in merges), encoding="utf-8")
        return transformers.XLMTokenizer(str(Path(folder) / "vocab.json"), str(Path(folder) / "merges.txt"),
                                         model_max_length=MAX_LENGTH)


def _unigram_pieces(corpus: list[str], normalizer, pre_tokenizer) -> list[tuple[str, float]]:
    """SentencePiece-style Unigram pieces with log-probability scores (no specials).

    Candidates are every character plus deterministic BPE merges; scores come from two rounds of
    hard EM (Viterbi segmentation with the current scores, then log relative frequency, add-one
    smoothed), rounded so the saved JSON is stable.
    """
    import math

    from tokenizers import Tokenizer
    from tokenizers.models import Unigram

    counts = pre_tokenized_counts(corpus, normalizer, pre_tokenizer)
    word_freqs = {tuple(w): n for w, n in counts.items()}
    alphabet = sorted({c for word in word_freqs for c in word})
    merges = learn_bpe(word_freqs, UNIGRAM_SIZE - len(alphabet), lambda a, b: a + b)
    pieces = alphabet + sorted({a + b for a, b in merges} - set(alphabet))
    scores = dict.fromkeys(pieces, 0.0)
    for _ in range(2):
        vocab = [("<unk>", 0.0)] + sorted(scores.items())
        model = Tokenizer(Unigram(vocab, unk_id=0, byte_fallback=False)).model
        usage = dict.fromkeys(pieces, 1)
        for word, freq in counts.items():
            for token in model.tokenize(word):
                usage[token.value] += freq
        total = sum(usage.values())
        scores = {piece: round(math.log(n / total), 6) for piece, n in usage.items()}
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


def build_tokenizer(family: str) -> PreTrainedTokenizerBase:
    """Train the tiny tokenizer of ``family``; returns a transformers tokenizer instance."""
    _check_family(family)
    corpus = training_corpus()
    if family == "electra":
        from transformers import BertTokenizer

        return BertTokenizer(vocab=_wordpiece_vocab(corpus), do_lower_case=True, model_max_length=MAX_LENGTH)
    if family == "distilbert":
        from transformers import DistilBertTokenizer

        return DistilBertTokenizer(vocab=_wordpiece_vocab(corpus), do_lower_case=True, model_max_length=MAX_LENGTH)
    if family in ("bert", "modernbert", "big_bird", "squeezebert", "convbert"):
        # ModernBERT's, BigBird's, SqueezeBERT's and ConvBERT's own tokenizers frame a text as
        # [CLS] ... [SEP] too; the family under test is the model, so they share BERT's vocabulary.
        from transformers import BertTokenizer

        return BertTokenizer(vocab=_wordpiece_vocab(corpus), do_lower_case=True, model_max_length=MAX_LENGTH)
    if family in PYTHON_TOKENIZER_FAMILIES:
        return _python_tokenizer(family, corpus)
    if family == "mpnet":
        from transformers import MPNetTokenizer

        vocab = _wordpiece_vocab(corpus, specials=["<s>", "<pad>", "</s>", "[UNK]", "<mask>"])
        return MPNetTokenizer(vocab=vocab, do_lower_case=True, model_max_length=MAX_LENGTH)
    if family in ("roberta", "bart", "led", "longformer", "deberta", "blenderbot"):
        import transformers

        bpe_vocab, merges = _byte_level_bpe(corpus)
        # The family's own class: BART, LED and Longformer use RoBERTa's; Blenderbot ends a text
        # with </s> only; DeBERTa frames with [CLS] ... [SEP]. Merges as (a, b) pairs: accepted at
        # run time, though annotated as strings "a b".
        if family == "deberta":
            bpe_vocab = _respecial(bpe_vocab, ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"])
            return transformers.DebertaTokenizer(vocab=bpe_vocab, merges=merges,  # type: ignore[arg-type]
                                                 add_prefix_space=False, model_max_length=MAX_LENGTH)
        tokenizer_class = (transformers.BlenderbotTokenizer if family == "blenderbot"
                           else transformers.RobertaTokenizer)
        return tokenizer_class(vocab=bpe_vocab, merges=merges,  # type: ignore[arg-type]
                               add_prefix_space=False, model_max_length=MAX_LENGTH)
    from tokenizers import Regex, normalizers, pre_tokenizers

    metaspace = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    if family == "mbart":  # a text ends with </s> and the source language's code
        import transformers

        pieces = _unigram_pieces(corpus, None, metaspace)
        return transformers.MBartTokenizer(vocab=[("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
                                           + pieces, src_lang="en_XX", model_max_length=MAX_LENGTH)
    if family in ("albert", "xlnet", "t5", "mt5", "pegasus"):
        import transformers

        lower = family == "albert"  # ALBERT's vocabularies are uncased
        pieces = _unigram_pieces(corpus, normalizers.Lowercase() if lower else None, metaspace)
        if family == "albert":  # ALBERT's ids: <pad> <unk> [CLS] [SEP] [MASK]
            specials = ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
            return transformers.AlbertTokenizer(vocab=[(t, 0.0) for t in specials] + pieces, do_lower_case=True,
                                                model_max_length=MAX_LENGTH)
        if family == "xlnet":  # XLNet's ids; a text ends with <sep> <cls>
            specials = ["<unk>", "<s>", "</s>", "<cls>", "<sep>", "<pad>", "<mask>", "<eod>", "<eop>"]
            return transformers.XLNetTokenizer(vocab=[(t, 0.0) for t in specials] + pieces, unk_id=0,
                                               model_max_length=MAX_LENGTH)
        if family == "pegasus":  # <pad> </s> then the masks and <unk_i> the class adds
            return transformers.PegasusTokenizer(vocab=[("<pad>", 0.0), ("</s>", 0.0), ("<mask_1>", 0.0),
                                                        ("<mask_2>", 0.0), ("<unk>", 0.0)] + pieces,
                                                 offset=0, model_max_length=MAX_LENGTH)
        # T5 and mT5: <pad> </s> <unk>; a text ends with </s> and has no [CLS]-like token
        return transformers.T5Tokenizer(vocab=[("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)] + pieces,
                                        extra_ids=0, model_max_length=MAX_LENGTH)

    if family == "deberta-v2":
        from transformers import DebertaV2Tokenizer

        # Same normalizer / pre-tokenizer as DebertaV2Tokenizer builds (cased, like DeBERTa-v3).
        normalizer = normalizers.Sequence([
            normalizers.Replace(Regex(r"\s{2,}|[\n\r\t]"), " "), normalizers.NFC(),
            normalizers.Strip(left=False, right=True),
        ])
        pre: pre_tokenizers.PreTokenizer = metaspace
        specials = ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"]  # DeBERTa-v3 ids 0-3
        pieces = [(token, 0.0) for token in specials] + _unigram_pieces(corpus, normalizer, pre)
        return DebertaV2Tokenizer(vocab=pieces, do_lower_case=False, split_by_punct=False,
                                  add_prefix_space=True, unk_id=specials.index("[UNK]"),
                                  model_max_length=MAX_LENGTH)
    # xlm-roberta: same ids as the real vocabulary for <s> <pad> </s> <unk> (the class hard-codes
    # unk id 3); no normalizer, as XLMRobertaTokenizer builds none without a SentencePiece charsmap.
    from transformers import XLMRobertaTokenizer

    pre = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always"),
    ])
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    pieces = [(token, 0.0) for token in specials] + _unigram_pieces(corpus, None, pre)
    return XLMRobertaTokenizer(vocab=pieces, add_prefix_space=True, model_max_length=MAX_LENGTH)


# ----------------------------------------------------------------------------------------------
# Models
# ----------------------------------------------------------------------------------------------

def build_config(family: str, tokenizer) -> PretrainedConfig:
    """Tiny transformers config of ``family`` sized to ``tokenizer``."""
    _check_family(family)
    import transformers

    vocab_size = len(tokenizer)
    pad_id = tokenizer.pad_token_id
    common = dict(vocab_size=vocab_size, pad_token_id=pad_id, initializer_range=0.02)
    if family == "distilbert":
        return transformers.DistilBertConfig(
            dim=HIDDEN, n_layers=NUM_LAYERS, n_heads=HEADS, hidden_dim=INTERMEDIATE,
            max_position_embeddings=MAX_LENGTH, sinusoidal_pos_embds=False, **common)
    if family in MORE_FAMILIES:
        return _more_config(family, tokenizer, common)
    layers = dict(hidden_size=HIDDEN, num_hidden_layers=NUM_LAYERS, num_attention_heads=HEADS,
                  intermediate_size=INTERMEDIATE, **common)
    if family == "bert":
        return transformers.BertConfig(max_position_embeddings=MAX_LENGTH, **layers)
    if family == "electra":
        # embedding_size < hidden_size exercises ELECTRA's embedding projection.
        return transformers.ElectraConfig(max_position_embeddings=MAX_LENGTH, embedding_size=16, **layers)
    if family in ("roberta", "xlm-roberta"):
        # RoBERTa positions start after the padding index: max_len + pad_id + 1 = max_len + 2.
        config_class = (transformers.RobertaConfig if family == "roberta"
                        else transformers.XLMRobertaConfig)
        return config_class(max_position_embeddings=MAX_LENGTH + 2, type_vocab_size=1,
                            bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                            **layers)
    # deberta-v2, DeBERTa-v3 style: relative attention, no absolute position input.
    # position_buckets, norm_rel_ebd, share_att_key: stored by the config (as extra attributes) and
    # read by the model, though transformers 5 leaves them out of the typed signature.
    return transformers.DebertaV2Config(  # type: ignore[call-arg]
        max_position_embeddings=MAX_LENGTH, type_vocab_size=0, relative_attention=True,
        position_buckets=32, max_relative_positions=-1, pos_att_type=["p2c", "c2p"],
        position_biased_input=False, norm_rel_ebd="layer_norm", share_att_key=True, **layers)


def _more_config(family: str, tokenizer, common: dict) -> PretrainedConfig:
    """Tiny configs of MORE_FAMILIES: each family's own layout (an encoder-decoder keeps a tiny
    decoder too, as bert-score loads the whole model and keeps its encoder)."""
    import transformers

    specials = dict(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    layers = dict(hidden_size=HIDDEN, num_hidden_layers=NUM_LAYERS, num_attention_heads=HEADS,
                  intermediate_size=INTERMEDIATE, **common)
    if family == "deberta":  # DeBERTa v1: relative attention over absolute positions
        return transformers.DebertaConfig(max_position_embeddings=MAX_LENGTH, type_vocab_size=0,
                                          relative_attention=True, pos_att_type=["p2c", "c2p"],
                                          max_relative_positions=-1, **layers)
    if family == "mpnet":  # positions start after the padding index, as RoBERTa's
        return transformers.MPNetConfig(max_position_embeddings=MAX_LENGTH + 2,
                                        **specials, **layers)
    if family == "big_bird":
        # Full attention: block-sparse attention only starts beyond (5 + 2 * random blocks) blocks.
        return transformers.BigBirdConfig(max_position_embeddings=MAX_LENGTH, attention_type="original_full",
                                          **layers)
    if family == "albert":  # factorised embeddings (16 -> 32) and 2 layer groups shared over 4 layers
        return transformers.AlbertConfig(embedding_size=16, num_hidden_groups=2, max_position_embeddings=MAX_LENGTH,
                                         **specials, **layers)
    if family == "xlnet":  # relative positions, no position limit
        return transformers.XLNetConfig(d_model=HIDDEN, n_layer=NUM_LAYERS, n_head=HEADS, d_inner=INTERMEDIATE,
                                        **specials, **common)
    if family in ("t5", "mt5", "byt5"):  # relative position buckets; the encoder ends with a final RMS norm
        config_class = transformers.MT5Config if family == "mt5" else transformers.T5Config
        # decoder_start_token_id: stored by the config, though not in its typed signature
        return config_class(  # type: ignore[call-arg]
                            d_model=HIDDEN, d_kv=HIDDEN // HEADS, d_ff=INTERMEDIATE, num_layers=NUM_LAYERS,
                            num_decoder_layers=1, num_heads=HEADS, relative_attention_num_buckets=8,
                            relative_attention_max_distance=32, decoder_start_token_id=tokenizer.pad_token_id,
                            eos_token_id=tokenizer.eos_token_id, feed_forward_proj="gated-gelu" if family == "mt5"
                            else "relu", **common)
    seq2seq = dict(d_model=HIDDEN, encoder_layers=NUM_LAYERS, decoder_layers=1, encoder_attention_heads=HEADS,
                   decoder_attention_heads=HEADS, encoder_ffn_dim=INTERMEDIATE, decoder_ffn_dim=INTERMEDIATE,
                   decoder_start_token_id=tokenizer.eos_token_id, **specials, **common)
    if family == "bart":  # learned positions offset by 2, a layer norm on the embeddings
        return transformers.BartConfig(max_position_embeddings=MAX_LENGTH, **seq2seq)
    if family == "mbart":  # pre-norm layers, a layer norm on the embeddings and a final one
        return transformers.MBartConfig(max_position_embeddings=MAX_LENGTH, **seq2seq)
    if family == "pegasus":  # sinusoidal positions, pre-norm layers, a final layer norm
        return transformers.PegasusConfig(max_position_embeddings=MAX_LENGTH, **seq2seq)
    if family == "blenderbot":  # pre-norm layers with a final layer norm
        return transformers.BlenderbotConfig(max_position_embeddings=MAX_LENGTH, **seq2seq)
    if family == "led":  # Longformer's local + global attention in a BART layout
        return transformers.LEDConfig(max_encoder_position_embeddings=MAX_LENGTH, max_decoder_position_embeddings=32,
                                      attention_window=[16] * NUM_LAYERS, **seq2seq)
    if family == "longformer":  # sliding-window attention (window 16: texts longer than 8 tokens use it)
        return transformers.LongformerConfig(max_position_embeddings=MAX_LENGTH + 2, attention_window=16,
                                             type_vocab_size=1, **specials, **layers)
    if family == "squeezebert":  # grouped 1x1 convolutions in place of linear layers
        return transformers.SqueezeBertConfig(embedding_size=HIDDEN, max_position_embeddings=MAX_LENGTH,
                                              q_groups=2, k_groups=2, v_groups=2, post_attention_groups=2,
                                              intermediate_groups=2, output_groups=2, **layers)
    if family == "convbert":  # span-based dynamic convolution heads beside self-attention
        return transformers.ConvBertConfig(embedding_size=16, max_position_embeddings=MAX_LENGTH, head_ratio=2,
                                           conv_kernel_size=3, **layers)
    if family == "xlm":  # four parallel per-layer lists, run by a layer count (n_layers)
        # the *_index ids: stored by the config, though not in its typed signature
        return transformers.XLMConfig(  # type: ignore[call-arg]
                                      emb_dim=HIDDEN, n_layers=NUM_LAYERS, n_heads=HEADS, n_langs=1,
                                      max_position_embeddings=MAX_LENGTH, use_lang_emb=False,
                                      pad_index=tokenizer.pad_token_id,
                                      unk_index=tokenizer.unk_token_id, bos_index=tokenizer.bos_token_id,
                                      eos_index=tokenizer.sep_token_id, **common)
    if family == "prophetnet":  # relative position buckets in the decoder; an n-gram decoder
        return transformers.ProphetNetConfig(hidden_size=HIDDEN, encoder_ffn_dim=INTERMEDIATE,
                                             num_encoder_layers=NUM_LAYERS, num_encoder_attention_heads=HEADS,
                                             decoder_ffn_dim=INTERMEDIATE,
                                             num_decoder_layers=1, num_decoder_attention_heads=HEADS,
                                             max_position_embeddings=MAX_LENGTH, ngram=2, num_buckets=8,
                                             relative_max_distance=32, decoder_start_token_id=tokenizer.sep_token_id,
                                             **common)
    # modernbert: rotary positions, alternating global / local (sliding-window) attention, a final norm
    # global_attn_every_n_layers: stored by the config, though not in its typed signature
    return transformers.ModernBertConfig(  # type: ignore[call-arg]
                                         hidden_size=HIDDEN, num_hidden_layers=NUM_LAYERS, num_attention_heads=HEADS,
                                         intermediate_size=INTERMEDIATE, max_position_embeddings=MAX_LENGTH,
                                         global_attn_every_n_layers=2, local_attention=16,
                                         cls_token_id=tokenizer.cls_token_id, sep_token_id=tokenizer.sep_token_id,
                                         **specials, **common)


def build_tiny_model(family: str, out_dir: Path) -> Path:
    """Build the tiny ``family`` model and its tokenizer into ``out_dir``; returns ``out_dir``.

    Deterministic (fixed seeds): building twice gives byte-identical files.
    """
    _check_family(family)
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
    """Identifies the build recipe: this file's source and the transformers/tokenizers versions."""
    import tokenizers
    import transformers

    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update(f"{transformers.__version__}|{tokenizers.__version__}".encode())
    return digest.hexdigest()[:16]


_STAMP_FILE = "tiny_model_stamp.txt"


def tiny_model_dir(family: str, root: Path) -> Path:
    """``root/<family>``, built on first use and reused afterwards (see :func:`build_in_place`)."""
    _check_family(family)
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


def _check_family(family: str) -> None:
    if family not in ALL_FAMILIES:
        raise ValueError(f"unknown model family {family!r}; expected one of {ALL_FAMILIES}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(f"usage: python {sys.argv[0]} OUT_DIR [family ...]")
    for name in sys.argv[2:] or ALL_FAMILIES:
        print(tiny_model_dir(name, Path(sys.argv[1])))
