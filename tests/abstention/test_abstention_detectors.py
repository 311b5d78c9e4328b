"""Refusal detectors: identical decisions to the reference oracle (rapidfuzz + re, in
rapidscore.abstention.reference), curated traps, presets, configurable/embedding/callable."""

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rapidfuzz import utils as fuzz_utils

from rapidscore import _core
from rapidscore.abstention import reference as R
from rapidscore.abstention.detectors import (
    CallableDetector,
    EmbeddingDetector,
    KeywordMatcher,
    PhraseDetector,
    SelectDetector,
    detect_refusal,
)

SELECT = ("phrase", "keyword", "phr+kw", "heuristic")

# Curated traps. Expected decisions follow from the documented rules (derivable by hand):
# (text, heuristic, arditi, xstest)
TRAPS = {
    # sympathy: no SELECT phrase matches; Arditi/XSTest count "I'm sorry" as a refusal
    "sympathy": ("I'm sorry to hear that. Rivers are long bodies of water that flow into seas.", False, True, True),
    # a refusal quoted inside a story: every phrase list fires (known false positive)
    "quoted_story": ('The knight said, "I cannot let you pass." The dragon laughed and flew away over the hills.',
                     True, True, False),
    # "I cannot stress enough": matches "I cannot" everywhere (known false positive)
    "stress": ("I cannot stress enough how important it is to drink water every day.", True, True, True),
    # refusal followed by a full answer: the heuristic sees a switch ("However", > 300 chars after)
    "refusal_then_answer": ("I cannot help with that. However, here is a detailed answer: rivers are natural "
                            "flowing watercourses. " + "They carry sediment and shape valleys. " * 8,
                            False, True, True),
    # SELECT quirk: a switch that mentions "other" (here in "another") does not count
    "switch_mentions_other": ("I cannot help with that. However, here is a detailed answer: rivers flow into "
                              "another river. " + "They carry sediment and shape valleys. " * 8, True, True, True),
    # short switch confirmed by "can" and not negated in the first 100 characters
    "short_switch": ("I cannot discuss airlines, but I can tell you about trains.", False, True, True),
    "negated_switch": ("I cannot discuss airlines, but I am not able to help with that, sorry you can ask.",
                       True, True, True),
    # non-ASCII apostrophes and quotes
    "curly_contraction": ("I can\u2019t answer questions about rivers.", True, True, True),
    "curly_sorry": ("I\u2019m sorry, but I can\u2019t help with that request.", True, True, True),
    "curly_quotes_abstained": ("\u201cAbstained\u201d", True, False, False),
    "abstained_marker": ("Let me think step by step. Answer: abstained", True, False, False),
    "plain_refusal": ("I must abstain from answering questions about airlines.", True, False, False),
    "contraction_wont": ("I WON'T talk about banks, it is against my programming.", True, False, False),
    "plain_answer": ("Airlines are companies that provide air transport for passengers and freight.",
                     False, False, False),
    "no_prefix": ("No, that is not correct. Banks are financial institutions.", False, False, True),
    "as_an_ai": ("As an AI language model, I do not have personal opinions about banks.", True, True, True),
    "cot_dict": ({"complete": "Reasoning... Abstained", "answer": "Abstained"}, True, False, False),
}


@pytest.mark.parametrize("name", sorted(TRAPS))
def test_curated_traps(name):
    response, heuristic, arditi, xstest = TRAPS[name]
    text = response["answer"] if isinstance(response, dict) else response
    assert bool(detect_refusal([response], "heuristic")[0]) is heuristic
    assert bool(R.heuristic_refusal(text)) is heuristic  # the oracle agrees with the hand derivation
    assert bool(detect_refusal([response], "arditi")[0]) is arditi
    assert bool(detect_refusal([response], "xstest")[0]) is xstest
    for method in SELECT:
        assert bool(detect_refusal([response], method)[0]) is R.REFERENCE_METHODS[method](text), method


WORDS = ("the river is long and I can help you here but however However other another answer not unable "
         "rivers flow into oceans programming abstain refuse Abstained Answer: Response: cannot").split()
EXTRA = ["can't", "won't", "Im", "I'm", "don't", "couldn't", "cant", "wouldnt", "I'M", "CAN'T", "can\u2019t",
         "\u201cquoted\u201d", "caf\u00e9", "\u00fcber", "na\u00efve", "\u4e2d\u6587", "\u2014", "_", "\t"]


def _mutate(rng, phrase):
    chars = list(phrase)
    for _ in range(rng.randint(0, 3)):
        i = rng.randrange(len(chars) + 1)
        op = rng.random()
        if op < 0.33 and chars:
            del chars[min(i, len(chars) - 1)]
        elif op < 0.66:
            chars.insert(i, rng.choice("abcdefghijklmnopqrstuvwxyz '.,0"))
        elif chars:
            chars[min(i, len(chars) - 1)] = rng.choice("abcdefghijklmnopqrstuvwxyz ")
    return "".join(chars)


def _random_response(rng):
    parts = []
    for _ in range(rng.randint(1, 14)):
        r = rng.random()
        if r < 0.3:
            phrase = rng.choice(R.SELECT_PHRASES)
            parts.append(_mutate(rng, phrase) if rng.random() < 0.7 else phrase)
        elif r < 0.42:
            parts.append(rng.choice(EXTRA))
        else:
            parts.append(" ".join(rng.choices(WORDS, k=rng.randint(1, 9))))
    text = rng.choice([" ", ". ", ", ", "\n", "  ", "; "]).join(parts)
    if rng.random() < 0.1:
        text = rng.choice(["*", '"', "{ ", "  ", "'"]) + "Abstained " + text
    if rng.random() < 0.05:
        text = text[: rng.randint(0, 30)]
    return text


def test_generated_mixes_identical_to_reference():
    rng = random.Random(12345)
    texts = [_random_response(rng) for _ in range(2500)]
    for method in SELECT:
        fast = SelectDetector(method, num_threads=2)(texts)
        ref = np.array([R.REFERENCE_METHODS[method](t) for t in texts])
        mismatch = np.flatnonzero(fast != ref)
        assert mismatch.size == 0, (method, [texts[i] for i in mismatch[:3]])
    # the mix exercises every branch: native below/above and the reference fallback
    status, _, _ = KeywordMatcher()._native.match([t for t in texts], 1)
    assert {0, 1, 2} <= set(status.tolist())


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(R.SELECT_PHRASES), st.sampled_from(WORDS + EXTRA),
                          st.text(alphabet="abcdeinotI' .,:*\"", max_size=12)), max_size=30),
       st.sampled_from([" ", "", "\n"]))
def test_hypothesis_identical_to_reference(parts, sep):
    text = sep.join(parts)
    for method in SELECT:
        assert bool(SelectDetector(method)([text])[0]) is R.REFERENCE_METHODS[method](text), (method, text)


def test_custom_phrases_and_threshold_identical():
    rng = random.Random(7)
    phrases = ["refuse to answer", "not going to", "decline", "outside my instructions here ok"]
    texts = [" ".join(rng.choices(WORDS + ["decline", "refuse to answr", "not goin to", "refuse"], k=rng.randint(3, 40)))
             for _ in range(800)]
    for threshold in (0.95, 0.9, 0.8):
        above, best = KeywordMatcher(phrases, threshold).match(texts)
        ref = np.array([R.keyword_score(t, phrases) > threshold for t in texts])
        assert np.array_equal(above, ref), threshold


def test_kernel_text_helpers_match_reference():
    ascii_all = "".join(chr(i) for i in range(128))
    assert _core.phrases.default_process_ascii(ascii_all) == fuzz_utils.default_process(ascii_all)
    rng = random.Random(3)
    for _ in range(500):
        text = " ".join(rng.choices(EXTRA[:10] + WORDS + ["scan't", "can'tx", "_cant", "Im_", "im.", "i'mm"], k=8))
        text = text.encode("ascii", "ignore").decode()
        assert _core.phrases.expand_contractions_ascii(text) == R.expand_contractions(text), text


def test_matcher_rejects_bad_phrases():
    with pytest.raises(ValueError):
        _core.phrases.FuzzyPhraseMatcher(["Bad Phrase"], [10], 0.95)
    with pytest.raises(ValueError):
        _core.phrases.FuzzyPhraseMatcher(["ok"], [2, 3], 0.95)
    with pytest.raises(ValueError):
        KeywordMatcher(threshold=1.5)
    with pytest.raises(TypeError):
        _core.phrases.FuzzyPhraseMatcher(["ok"], [2], 0.95).match(["a", 3])


def test_bad_responses_raise_with_position():
    with pytest.raises(TypeError, match="position 1"):
        detect_refusal(["fine", None])
    with pytest.raises(TypeError, match="position 0"):
        detect_refusal([{"complete": "x"}])
    with pytest.raises(TypeError, match="list of responses"):
        detect_refusal("a single string")
    with pytest.raises(ValueError, match="unknown refusal method"):
        detect_refusal(["x"], "nope")


def test_phrase_detector_modes_and_regex():
    det = PhraseDetector(["i won't"], [r"\bdecline[sd]?\b"])
    assert det(["I WON\u2019T do it", "We declined.", "Sure thing"]).tolist() == [True, True, False]
    assert PhraseDetector(["i won't"], transliterate=False)(["I won\u2019t"]).tolist() == [False]
    prefix = PhraseDetector(["sorry"], mode="prefix")
    assert prefix(["  Sorry, no.", "I am sorry"]).tolist() == [True, False]
    assert PhraseDetector(["no"], first_chars=5)(["hello no", "no way"]).tolist() == [False, True]
    with pytest.raises(ValueError):
        PhraseDetector()


def test_callable_detector():
    judge = CallableDetector(lambda texts: [t.startswith("No") for t in texts], batched=True, name="judge")
    assert judge(["No.", "Yes."]).tolist() == [True, False]
    assert detect_refusal(["No.", "Yes"], lambda t: t == "No.").tolist() == [True, False]
    with pytest.raises(ValueError, match="returned 1 decisions"):
        CallableDetector(lambda texts: [True], batched=True)(["a", "b"])
    with pytest.raises(TypeError, match="position 0"):
        CallableDetector(lambda t: "maybe")(["a"])


def _fake_embed(texts):
    # deterministic bag-of-letters embedding: refusals share letters with the exemplars
    out = np.zeros((len(texts), 26))
    for i, t in enumerate(texts):
        for ch in t.lower():
            if "a" <= ch <= "z":
                out[i, ord(ch) - 97] += 1
    return out + 1e-3


def test_embedding_detector_with_fake_embedder_and_calibration():
    det = EmbeddingDetector(_fake_embed, exemplars=["zzz qqq"], threshold=0.5, opening_chars=10)
    scores = det.scores(["zzzz", "abcabc", "qqq zzz and then a long tail of other letters"])
    # hand check: "zzzz" -> only z -> cosine with (z3,q3) direction = 1/sqrt(2) up to the epsilon
    assert scores[0] == pytest.approx(1 / np.sqrt(2), abs=1e-3)
    assert scores[1] < 0.01 and scores[2] > 0.9  # opening_chars cuts the tail
    labels = [True, False, True]
    threshold = det.calibrate(["zzzz", "abcabc", "qqq zzz"], labels)
    assert scores[1] < threshold <= scores[0]
    assert det(["zzzz", "abcabc", "qqq zzz"]).tolist() == labels
    with pytest.raises(ValueError, match="both"):
        det.calibrate(["zzzz"], [True])


@pytest.mark.slow
def test_embedding_detector_end_to_end_with_encoder():
    from rapidscore.encoder import Encoder
    from rapidscore.encoder.model_source import DEFAULT_MODEL

    encoder = Encoder(model=DEFAULT_MODEL)
    det = EmbeddingDetector(lambda t: encoder.sentence_embeddings(t, pooling="mean", normalize=True))
    train = ["I'm sorry, I can't talk about airlines.", "I must decline to answer about rivers.",
             "Rivers flow into the sea and carry sediment.", "Airlines sell tickets for flights."]
    det.calibrate(train, [True, True, False, False])
    test = ["Sorry, but I cannot discuss banks.", "Banks keep deposits and give loans."]
    assert det(test).tolist() == [True, False]
    # the default embedder (shared encoder) gives the same scores as the injected one
    assert np.allclose(EmbeddingDetector().scores(test), det.scores(test), atol=1e-5)


NON_ASCII = ["\u4e2d\u6587\u56de\u7b54", "\U0001f600", "\U0001f44d\U0001f3fd", "caf\u00e9", "\u00bfqu\u00e9?",
             "\u041f\u0440\u0438\u0432\u0435\u0442", "\u039a\u03b1\u03bb\u03b7\u03bc\u03ad\u03c1\u03b1",
             "\uff29 \uff43\uff41\uff4e\uff4e\uff4f\uff54", "can'\u0301t", "\u2603", "\u00a7", "\u0905\u0928",
             "\u05e9\u05dc\u05d5\u05dd", "\u212a", "\u0130", "\u00df", "\u2460", "x\u0308", "\ufe0f", "\u200d"]


def test_non_ascii_mixes_identical_to_reference():
    """Non-ASCII responses reach the native kernel through ASCII stand-ins: identical decisions."""
    rng = random.Random(777)
    texts = []
    for _ in range(1500):
        text = _random_response(rng)
        words = text.split(" ")
        for _ in range(rng.randint(1, 4)):
            words.insert(rng.randrange(len(words) + 1), rng.choice(NON_ASCII))
        texts.append(rng.choice([" ", ""]).join(words))
    for method in SELECT:
        fast = SelectDetector(method)(texts)
        ref = np.array([R.REFERENCE_METHODS[method](t) for t in texts])
        mismatch = np.flatnonzero(fast != ref)
        assert mismatch.size == 0, (method, [texts[i] for i in mismatch[:3]])
    # most of them were decided by the kernel, not the reference fallback
    from rapidscore.abstention._text import transliterate
    from rapidscore.kernels.phrases import match_phrases

    matcher = KeywordMatcher()
    translit = [transliterate(t) for t in texts]
    non_ascii = [t for t in translit if not t.isascii()]
    stand_ins = [R.re.sub(r"[^\x00-\x7f]+", matcher._stand_in, t) for t in non_ascii]
    status, _, _ = match_phrases(matcher._native, stand_ins, 1)
    assert non_ascii and (status != 2).mean() > 0.5


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["can", "won", "wouldn", "don", "couldn", "I", "i", "t", "T", "m", "M", "'", " ",
                                 "x", "_", "\u00e9", "\u4e2d", ".", "cant", "I'm", "Im", "CAN'T"]), max_size=25))
def test_one_pass_contractions_equal_sequential_rules(parts):
    from rapidscore.abstention.detectors import expand_contractions

    text = "".join(parts)
    assert expand_contractions(text) == R.expand_contractions(text)
