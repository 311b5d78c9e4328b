"""Deterministic synthetic texts shared by the test suite and bench/ (no model, no download).

- :func:`english_sentences`, :func:`sentence_pairs`, :func:`long_text_pairs`: varied English from
  a small grammar; a candidate is a perturbed copy of its reference (:func:`paraphrase`), a fifth
  are unrelated sentences. :func:`w1_pairs` is the benchmark's W1 input shape (10-40 words), on
  which accuracy bounds of the non-exact modes are measured.
- :func:`transliteration_texts`: hard cases for the abstention metric's transliteration
  (combining marks, CJK, Cyrillic, Greek, fullwidth forms, emoji, typographic quotes).
- :func:`family_parity_pairs`: the inputs of the model-family parity check against bert-score
  (tests/bertscore/test_families.py, bench/family_parity.py).

Pure Python, cheap to import (a child process that measures import time may use it).
"""

from __future__ import annotations

import random

_NAMES = ("Anna", "Ben", "Clara", "David", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jonas", "Keira",
          "Luis", "Maya", "Nikolai", "Olivia", "Priya", "Quentin", "Rosa", "Samir", "Tara", "Umar", "Vera",
          "William", "Xenia", "Yusuf", "Zoe")
_PLACES = ("Paris", "the old harbour", "Lisbon", "the mountains", "a small village", "the city centre",
           "Nairobi", "the university", "the factory", "Toronto", "the coast", "the hospital", "Kyoto",
           "the market", "the train station", "Buenos Aires", "the library", "the north of Scotland",
           "the research lab", "the stadium", "Berlin", "the suburbs", "the island", "Mumbai")
_DETERMINERS = ("the", "a", "this", "that", "every", "one", "another", "our", "their", "his", "her",
                "some", "each", "no")
_ADJECTIVES = ("small", "large", "old", "new", "quiet", "noisy", "bright", "dark", "careful", "quick",
               "slow", "famous", "local", "foreign", "expensive", "cheap", "modern", "ancient", "busy",
               "empty", "strange", "simple", "complex", "useful", "broken", "heavy", "light", "warm",
               "cold", "green", "blue", "red", "golden", "wooden", "public", "private", "official",
               "popular", "rare", "common", "important", "serious", "friendly", "angry", "tired",
               "curious", "brave", "nervous", "happy", "sad", "young", "elderly", "political",
               "economic", "digital", "medical", "scientific", "rural", "urban", "annual", "recent")
_NOUNS = ("teacher", "student", "doctor", "engineer", "farmer", "artist", "writer", "company",
          "government", "committee", "report", "book", "letter", "machine", "computer", "phone", "car",
          "train", "bridge", "river", "forest", "garden", "house", "window", "door", "table", "kitchen",
          "meeting", "decision", "problem", "solution", "question", "answer", "idea", "plan", "project",
          "market", "price", "budget", "law", "court", "judge", "patient", "nurse", "child", "family",
          "neighbour", "friend", "manager", "team", "game", "match", "season", "storm", "winter",
          "summer", "festival", "concert", "painting", "museum", "song", "film", "camera", "picture",
          "map", "road", "journey", "ticket", "passenger", "pilot", "plane", "ship", "island", "village",
          "city", "country", "language", "history", "experiment", "theory", "result", "method", "model",
          "network", "system", "service", "product", "customer", "worker", "union", "policy", "election",
          "vote", "speech", "newspaper", "article", "story", "memory", "dream", "voice", "crowd",
          "hospital", "school", "university", "library", "restaurant", "coffee", "bread", "dinner",
          "recipe", "animal", "horse", "dog", "bird", "tree", "flower", "mountain", "ocean", "beach")
_VERBS = ("found", "wrote", "opened", "closed", "built", "repaired", "described", "ignored",
          "discovered", "explained", "ordered", "visited", "cleaned", "borrowed", "answered", "studied",
          "approved", "rejected", "announced", "delayed", "cancelled", "supported", "criticised",
          "designed", "tested", "measured", "published", "reviewed", "painted", "sold", "bought",
          "carried", "followed", "questioned", "praised", "remembered", "forgot", "changed", "improved",
          "damaged", "protected", "replaced", "moved", "shared", "reported", "recorded", "organised",
          "prepared", "finished", "started", "watched", "heard", "noticed", "planned", "checked")
_ADVERBS = ("quickly", "slowly", "carefully", "suddenly", "finally", "quietly", "openly", "rarely",
            "often", "already", "recently", "eventually", "clearly", "partly", "mostly", "nearly")
_PREPOSITIONS = ("in", "near", "behind", "after", "before", "during", "without", "with", "under",
                 "across", "beyond", "inside", "outside", "around", "towards")
_CONNECTIVES = ("and", "but", "because", "although", "while", "so", "after", "before", "when",
                "since", "until")
_TIMES = ("on Monday", "last week", "in 2019", "yesterday", "at midnight", "this morning", "in March",
          "two years ago", "at 7:30", "every Friday", "in the spring", "after lunch", "on 12 June",
          "over the weekend", "in the 1990s", "at dawn")
_NUMBERS = ("two", "three", "five", "twelve", "forty", "a hundred", "several", "many", "few", "3.5%",
            "17", "250", "1,200", "half of the")


def _noun_phrase(rng: random.Random) -> list[str]:
    roll = rng.random()
    if roll < 0.12:
        return [rng.choice(_NAMES)]
    if roll < 0.2:
        return [rng.choice(_NUMBERS), rng.choice(_NOUNS) + "s"]
    words = [rng.choice(_DETERMINERS)]
    if rng.random() < 0.55:
        words.append(rng.choice(_ADJECTIVES))
    words.append(rng.choice(_NOUNS))
    return words


def _clause(rng: random.Random) -> list[str]:
    words = _noun_phrase(rng)
    if rng.random() < 0.25:
        words.append(rng.choice(_ADVERBS))
    words.append(rng.choice(_VERBS))
    words += _noun_phrase(rng)
    extra = rng.random()
    if extra < 0.35:
        words += [rng.choice(_PREPOSITIONS)] + _noun_phrase(rng)
    elif extra < 0.6:
        words += [rng.choice(("in", "near", "at", "from", "to"))] + rng.choice(_PLACES).split()
    if rng.random() < 0.3:
        words += rng.choice(_TIMES).split()
    return words


def sentence(rng: random.Random, n_words: int) -> str:
    """One sentence of about ``n_words`` words (clauses joined by connectives), from ``rng``."""
    words = _clause(rng)
    while len(words) < n_words:
        words += [rng.choice(_CONNECTIVES)] + _clause(rng)
        if len(words) < n_words and rng.random() < 0.3:
            words[-1] += rng.choice((",", ";"))
    words = words[:n_words]
    words[-1] = words[-1].rstrip(",;")
    text = " ".join(words)
    return text[0].upper() + text[1:] + rng.choice(".....!?")


def english_sentences(n: int, min_words: int = 10, max_words: int = 40, seed: int = 0) -> list[str]:
    """``n`` distinct synthetic English sentences of ``min_words``-``max_words`` words (deterministic)."""
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[str] = []
    while len(out) < n:
        text = sentence(rng, rng.randint(min_words, max_words))
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


def paraphrase(rng: random.Random, text: str) -> str:
    """A candidate for reference ``text``: some words replaced, dropped, inserted or swapped."""
    words = text[:-1].split()
    pool = _NOUNS + _ADJECTIVES + _VERBS + _ADVERBS
    out: list[str] = []
    for word in words:
        roll = rng.random()
        if roll < 0.12:
            out.append(rng.choice(pool))
        elif roll < 0.18:
            continue
        elif roll < 0.22:
            out += [word, rng.choice(pool)]
        else:
            out.append(word)
    for _ in range(rng.randint(0, 2)):
        if len(out) > 2:
            i = rng.randrange(len(out) - 1)
            out[i], out[i + 1] = out[i + 1], out[i]
    if not out:
        out = words
    sentence = " ".join(out)
    return sentence[0].upper() + sentence[1:] + text[-1]


def sentence_pairs(n: int, min_words: int = 10, max_words: int = 40, seed: int = 0) -> tuple[list[str], list[str]]:
    """(candidates, references): ``n`` pairs of short related sentences (deterministic).

    References are synthetic sentences of ``min_words``-``max_words`` words; each candidate is a
    perturbed copy (word substitutions, drops, insertions, swaps), like a system output next to
    its reference. A fifth of the candidates are unrelated sentences instead.
    """
    rng = random.Random(seed + 1)
    refs = english_sentences(n, min_words, max_words, seed)
    unrelated = english_sentences(n, min_words, max_words, seed + 1000)
    cands = [unrelated[i] if rng.random() < 0.2 else paraphrase(rng, ref) for i, ref in enumerate(refs)]
    return cands, refs


def long_text_pairs(n: int, min_words: int = 150, max_words: int = 400, seed: int = 0) -> tuple[list[str], list[str]]:
    """(candidates, references): ``n`` pairs of paragraphs of ``min_words``-``max_words`` words."""
    rng = random.Random(seed)
    pool = english_sentences(60 * n + 200, 8, 30, seed + 7)
    cursor = 0

    def paragraph(target: int) -> list[str]:
        nonlocal cursor
        sentences, count = [], 0
        while count < target:
            sentence = pool[cursor % len(pool)]
            cursor += 1
            sentences.append(sentence)
            count += len(sentence.split())
        return sentences

    ref_sentences = [paragraph(rng.randint(min_words, max_words)) for _ in range(n)]
    refs = [" ".join(sentences) for sentences in ref_sentences]
    cands = [" ".join(paraphrase(rng, s) for s in sentences) for sentences in ref_sentences]
    return cands, refs


W1_WORDS = (10, 40)  # words per sentence of the benchmark's W1 pairs


def w1_pairs(n: int, seed: int = 1) -> tuple[list[str], list[str]]:
    """(candidates, references): ``n`` pairs like the benchmark's W1 (:func:`sentence_pairs` of
    10-40 words; bench/bench_bertscore.py's W1 is ``w1_pairs(2000, seed=1)``)."""
    return sentence_pairs(n, *W1_WORDS, seed=seed)


def family_parity_pairs() -> tuple[list[str], list[list[str]]]:
    """(candidates, reference groups) of the family parity check: sentences of the tiny
    tokenizers' training corpus, a text of unknown tokens only, one-token texts, a text longer
    than Longformer's and LED's 16-token attention window, and one to two references each."""
    from rapidscore.testing.tiny_tokenizers import training_corpus

    corpus = training_corpus()
    long = " ".join(corpus[60:70])  # ~100 tokens: several of Longformer's 16-token windows
    cands = [*corpus[:6], "Ω ∑ Ω", "👍", "a", long]
    refs = [[corpus[20 + i], corpus[40 + i]] if i % 2 else [corpus[20 + i]] for i in range(6)] + [
        ["hello Ω"], ["👍"], ["a cat"], [corpus[30]]]
    return cands, refs


# ------------------------------------------------------------------------------------------------
# Transliteration hard cases
# ------------------------------------------------------------------------------------------------

TRANSLITERATION_FRAGMENTS = {
    "combining": ["can'\u0301t", "I can\u0301not", "Abstai\u0308ned", "I won'\u0300t", "cafe\u0301",
                  "I a\u0301m unable", "don\u0327't", "n\u0303ot allowed"],
    "cjk": ["\u6211\u4e0d\u80fd\u56de\u7b54\u8fd9\u4e2a\u95ee\u9898", "\u62b1\u6b49", "\u7b54\u6848\uff1a\u5f03\u6743",
            "\u65e5\u672c\u8a9e\u306e\u7b54\u3048",
            "\u3053\u306e\u8cea\u554f\u306b\u306f\u7b54\u3048\u3089\u308c\u307e\u305b\u3093",
            "\uc8c4\uc1a1\ud569\ub2c8\ub2e4", "\u4e2d\u6587\u3002\u8fd9\u662f\u7b54\u6848\u3001\u8c22\u8c22"],
    "cyrillic": ["\u041f\u0440\u0438\u0432\u0435\u0442, \u044d\u0442\u043e \u043e\u0442\u0432\u0435\u0442",
                 "I c\u0430nnot", "\u0410bstained", "n\u043et \u0430llowed", "\u0449\u0451\u0442\u043a\u0430"],
    "greek": ["\u039a\u03b1\u03bb\u03b7\u03bc\u03ad\u03c1\u03b1", "I \u03b1m unable", "\u0391nswer: Abstained",
              "\u03bf\u03c5\u03ba \u03b5\u03c7\u03c9", "\u03a8\u03c5\u03c7\u03ae"],
    "fullwidth": ["\uff29 \uff43\uff41\uff4e\uff4e\uff4f\uff54",
                  "\uff21\uff42\uff53\uff54\uff41\uff49\uff4e\uff45\uff44",
                  "\uff41\uff4e\uff53\uff57\uff45\uff52\uff1a", "\uff11\uff12\uff13"],
    "emoji": ["\U0001f600", "\U0001f645 Abstained", "\U0001f44d\U0001f3fd", "\u2764\ufe0f",
              "\U0001f468\u200d\U0001f469\u200d\U0001f467", "\U0001f1fa\U0001f1f8"],
    "quotes": ["I can\u2019t", "\u201cAbstained\u201d", "\u2018Answer:\u2019 Abstained", "I\u2019m unable",
               "\u00abnot allowed\u00bb", "won\u2019t \u2014 sorry\u2026", "\u201ehere\u201c", "don\u2032t"],
}
TRANSLITERATION_TEMPLATES = [
    "{f}",
    "{f} I cannot answer questions about rivers.",
    "I cannot help with that. However, {f} " + "here is a detailed answer about rivers. " * 2,
    "I cannot help with that, but {f}",
    "Rivers are long. {f} They flow into the sea.",
    "Answer: {f}",
    "**{f}** Abstained",
    "I am not able to provide that. However, {long}",
    "{f}: I must abstain from answering.",
]


def transliteration_texts() -> list[str]:
    """Hard cases for transliteration: every fragment of every script in every template (refusals
    and answers; "However" followed by passages of the script, for the heuristic's windows)."""
    texts = []
    for fragments in TRANSLITERATION_FRAGMENTS.values():
        for i, fragment in enumerate(fragments):
            # passages of the script after "However": the heuristic's 100- and 300-character windows
            long = " ".join(fragments[(i + k) % len(fragments)] for k in range(1 + i % 6))
            for template in TRANSLITERATION_TEMPLATES:
                texts.append(template.format(f=fragment, long=long))
    return texts
