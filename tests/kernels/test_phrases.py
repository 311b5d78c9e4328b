"""The refusal-phrase matcher (rapidscore.kernels.phrases): the C++ kernel and its pure-Python twin
(rapidscore.kernels.phrases_py) return the same arrays, refuse the same inputs in the same words,
and KeywordMatcher decides as the rapidfuzz reference on either.

Tests that go through the wrapper run twice (the ``kernel_implementation`` fixture of
conftest.py); the twin-against-kernel comparisons call both directly."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rapidfuzz import utils as fuzz_utils

from rapidscore.abstention import reference as R
from rapidscore.abstention._text import transliterate
from rapidscore.abstention.detectors import KeywordMatcher, detect_refusal
from rapidscore.kernels import _native, phrases, phrases_py

pytestmark = pytest.mark.usefixtures("kernel_implementation")

WORDS = ["the", "river", "bank", "airline", "answer", "question", "I", "cannot", "can't", "won't", "sorry", "not",
         "able", "to", "help", "with", "that", "as", "an", "AI", "language", "model", "abstain", "Abstained",
         "decline", "refuse", "apologize", "unable", "provide", "information", "I'm", "Im", "dont", "don't"]
NON_ASCII = ["\u00e9t\u00e9", "\u4e2d\u6587", "\u2019", "\u201cquoted\u201d", "na\u00efve", "\U0001f600", "\u212a",
             "\u00df", "x\u0308", "\u0130", "\u2603"]
TYPOS = ["I canot help", "I am not able to hlp", "as an AI languag model", "I apologise", "Im sory", "I wont"]


def random_text(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(0, 12)):
        r = rng.random()
        if r < 0.15:
            parts.append(rng.choice(R.SELECT_PHRASES))
        elif r < 0.25:
            parts.append(rng.choice(TYPOS))
        elif r < 0.32:
            parts.append(rng.choice(NON_ASCII))
        else:
            parts.append(" ".join(rng.choices(WORDS, k=rng.randint(1, 8))))
    text = rng.choice([" ", ". ", ", ", "\n", ""]).join(parts)
    if rng.random() < 0.1:
        text = text[: rng.randint(0, 40)]
    return text


def texts_of(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    texts = [random_text(rng) for _ in range(count)]
    return texts + ["", "a", "\ud800 sorry, I cannot help with that request at all", "I can't" * 30,
                    " ".join(R.SELECT_PHRASES)]


def matcher_arguments(phrase_list, threshold):
    return [fuzz_utils.default_process(p) for p in phrase_list], [len(p) for p in phrase_list], threshold


def assert_same_arrays(got, want) -> None:
    for a, b in zip(got, want):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


CUSTOM = ["refuse to answer", "not going to", "decline", "outside my instructions here ok"]


@pytest.mark.parametrize("phrase_list", [R.SELECT_PHRASES, CUSTOM], ids=["select", "custom"])
@pytest.mark.parametrize("threshold", [0.95, 0.9, 0.8, 0.5, 0.0])
def test_twin_returns_the_kernels_arrays(phrase_list, threshold):
    texts = texts_of(int(threshold * 100), 600)
    arguments = matcher_arguments(phrase_list, threshold)
    native = _native.core().phrases.FuzzyPhraseMatcher(*arguments)
    twin = phrases_py.FuzzyPhraseMatcher(*arguments)
    want = native.match(texts, 1)
    assert_same_arrays(twin.match(texts, 1), want)
    assert_same_arrays(twin.match(texts), want)
    assert twin.threshold == native.threshold and len(twin) == len(native)
    if threshold == 0.95 and phrase_list is R.SELECT_PHRASES:
        assert {0, 1, 2} <= set(want[0].tolist())  # every branch: below, above, the reference path


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(R.SELECT_PHRASES), st.sampled_from(WORDS + TYPOS + NON_ASCII),
                          st.text(alphabet="abcdeinotI' .,:*\"\u00e9", max_size=12)), max_size=30),
       st.sampled_from([" ", "", "\n"]), st.sampled_from([0.95, 0.8]))
def test_twin_returns_the_kernels_arrays_on_hypothesis_texts(parts, sep, threshold):
    texts = [sep.join(parts)]
    arguments = matcher_arguments(R.SELECT_PHRASES, threshold)
    want = _native.core().phrases.FuzzyPhraseMatcher(*arguments).match(texts, 1)
    assert_same_arrays(phrases_py.FuzzyPhraseMatcher(*arguments).match(texts, 1), want)


def test_the_wrapper_makes_the_selected_implementations_matcher(kernel_implementation):
    matcher = phrases.FuzzyPhraseMatcher(*matcher_arguments(R.SELECT_PHRASES, 0.95))
    assert isinstance(matcher, phrases_py.FuzzyPhraseMatcher) == (kernel_implementation == "python")
    texts = texts_of(5, 200)
    status, best, score = phrases.match_phrases(matcher, texts, 2)
    assert status.dtype == np.int8 and best.dtype == np.int32 and score.dtype == np.float64
    assert ((status == 1) == (best >= 0)).all()


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(R.SELECT_PHRASES), st.sampled_from(WORDS + TYPOS + NON_ASCII)),
                max_size=25))
def test_keyword_matcher_equals_the_reference(parts):
    text = " ".join(parts)
    assert bool(detect_refusal([text], "keyword")[0]) is R.keyword_refusal(text)


@pytest.mark.parametrize("threshold", [0.95, 0.8])
def test_keyword_matcher_equals_the_reference_on_generated_texts(threshold):
    # KeywordMatcher.match takes transliterated texts (unidecode warns on a lone surrogate: left out)
    texts = [transliterate(t) for t in texts_of(17, 500) if "\ud800" not in t]
    for phrase_list in (R.SELECT_PHRASES, CUSTOM):
        above, best = KeywordMatcher(phrase_list, threshold).match(texts)
        want = np.array([R.keyword_score(t, phrase_list) > threshold for t in texts])
        np.testing.assert_array_equal(above, want)
        assert ((best >= 0) == above).all()


def test_text_helpers_equal_rapidfuzz_and_select_rules():
    ascii_all = "".join(chr(i) for i in range(128))
    assert phrases.default_process_ascii(ascii_all) == fuzz_utils.default_process(ascii_all)
    rng = random.Random(3)
    for _ in range(300):
        text = " ".join(rng.choices(WORDS + ["scan't", "can'tx", "_cant", "Im_", "im.", "i'mm", "CAN'T", "Won't"], k=8))
        assert phrases.expand_contractions_ascii(text) == R.expand_contractions(text), text


@pytest.mark.parametrize("text", ["".join(chr(i) for i in range(128)), "h\u00e9llo W\u00f6rld", "\u00e9 can't",
                                  "\u4e2dcan't\u4e2d", "x\u2019t I'M", "", "  ", "can'T Im i'm dont"])
def test_twin_text_helpers_equal_the_kernels_on_any_text(text):
    native = _native.core().phrases
    assert phrases_py.default_process_ascii(text) == native.default_process_ascii(text)
    assert phrases_py.expand_contractions_ascii(text) == native.expand_contractions_ascii(text)


BAD_MATCHERS = [
    (("sorry", [5], 0.9), TypeError),
    ((["sorry", 5], [5, 1], 0.9), TypeError),
    ((["sorry"], [-1], 0.9), ValueError),
    ((["sorry"], [2**64], 0.9), ValueError),
    ((["sorry"], [True], 0.9), TypeError),
    ((["sorry"], (5.0,), 0.9), TypeError),
    ((["sorry"], 5, 0.9), TypeError),
    ((["sorry"], [5], "0.9"), TypeError),
    ((["sorry"], [5], True), TypeError),
    ((["sorry"], [5], 1.0), ValueError),
    ((["sorry"], [5], float("nan")), ValueError),
    (([], [], 0.9), ValueError),
    ((["ok"], [2, 3], 0.95), ValueError),
    ((["Bad Phrase"], [10], 0.95), ValueError),
    (([""], [0], 0.95), ValueError),
    ((["x" * 65], [65], 0.95), ValueError),
    (([" ok"], [3], 0.95), ValueError),
    ((["ok "], [3], 0.95), ValueError),
    ((["\u00e9t\u00e9"], [3], 0.95), ValueError),
    ((["ok\ud800"], [3], 0.95), ValueError),
]


@pytest.mark.parametrize("arguments, error", BAD_MATCHERS)
def test_both_refuse_bad_matchers_in_the_same_words(arguments, error):
    messages = []
    for make in (_native.core().phrases.FuzzyPhraseMatcher, phrases_py.FuzzyPhraseMatcher,
                 phrases.FuzzyPhraseMatcher):
        with pytest.raises(error) as raised:
            make(*arguments)
        messages.append(str(raised.value))
    assert messages[0] == messages[1] == messages[2], messages


@pytest.mark.parametrize("texts, n_threads, error", [
    (("i am sorry",), 0, TypeError),
    (["a", 3], 0, TypeError),
    (["a", None], 1, TypeError),
    (["a"], 2000, ValueError),
    (["a"], 1.5, TypeError),
    (["a"], True, TypeError),
])
def test_both_refuse_bad_match_arguments_in_the_same_words(texts, n_threads, error):
    arguments = matcher_arguments(["I am sorry"], 0.9)
    messages = []
    for matcher in (_native.core().phrases.FuzzyPhraseMatcher(*arguments), phrases_py.FuzzyPhraseMatcher(*arguments)):
        with pytest.raises(error) as raised:
            matcher.match(texts, n_threads)
        messages.append(str(raised.value))
    assert messages[0] == messages[1], messages


@pytest.mark.parametrize("value", [b"abc", None, 5, "a\ud800"])
def test_both_helpers_refuse_what_is_not_text_in_the_same_words(value):
    for name in ("default_process_ascii", "expand_contractions_ascii"):
        messages = []
        for function in (getattr(_native.core().phrases, name), getattr(phrases_py, name), getattr(phrases, name)):
            with pytest.raises((TypeError, ValueError)) as raised:
                function(value)
            messages.append((type(raised.value), str(raised.value)))
        assert messages[0] == messages[1] == messages[2], messages
