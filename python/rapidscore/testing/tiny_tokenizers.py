"""The tiny tokenizers of ``rapidscore.testing.tiny_models``, trained here, deterministically.

Each family gets a tokenizer trained on a built-in corpus (English sentences plus accented words,
CJK characters and emoji, so that such text does not come out as all-UNK), constructed through
the transformers tokenizer class of the family from the trained vocabulary. The vocabularies come
from a small pure-Python BPE trainer (:func:`learn_bpe`), because the ``tokenizers`` trainers
break ties in hash-map order and change from run to run. Importing this module is cheap (the
tokenizer libraries are imported when a tokenizer is built).
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from rapidscore.testing.tiny_configs import (
    MAX_LENGTH,
    PYTHON_TOKENIZER_FAMILIES,
    SEED,
    UNIGRAM_SIZE,
    VOCAB_SIZE,
    check_family,
)

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

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


def byte_level_bpe(corpus: list[str], max_merges: int | None = None) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """RoBERTa/GPT-2 style byte-level BPE (RoBERTa's ids for <s> <pad> </s> <unk> <mask>):
    specials, the 256 byte symbols, merged pieces; (vocabulary, merges). At most ``max_merges``
    merges (default: as many as fill a vocabulary of VOCAB_SIZE tokens)."""
    from tokenizers import pre_tokenizers

    counts = pre_tokenized_counts(corpus, None, pre_tokenizers.ByteLevel(add_prefix_space=False))
    word_freqs = {tuple(w): n for w, n in counts.items()}
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    budget = VOCAB_SIZE - len(specials) - len(alphabet) if max_merges is None else max_merges
    merges = learn_bpe(word_freqs, budget, lambda a, b: a + b)
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
    check_family(family)
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

        bpe_vocab, merges = byte_level_bpe(corpus)
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
