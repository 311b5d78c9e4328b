"""Built-in transliteration vs SELECT's unidecode: identical refusal decisions on a corpus of hard
cases (combining marks, CJK, Cyrillic, Greek, fullwidth forms, emoji, typographic quotes), the same
strings on the scripts the built-in tables cover, and the path without unidecode installed."""

import os
import subprocess
import sys
import unicodedata

import numpy as np
import pytest

from rapidscore.abstention import _text
from rapidscore.abstention import detectors as D
from rapidscore.abstention import reference as R
from rapidscore.testing.corpora import transliteration_texts as corpus

unidecode = pytest.importorskip("unidecode", reason="unidecode (GPL) is in the test extra only").unidecode


def decisions(transliterate, texts, monkeypatch):
    monkeypatch.setattr(R, "transliterate", transliterate)
    monkeypatch.setattr(D, "transliterate", transliterate)
    out = {}
    for method in ("phrase", "keyword", "phr+kw", "heuristic"):
        out[method] = np.array([R.REFERENCE_METHODS[method](t) for t in texts])
        out["fast " + method] = D.SelectDetector(method)(texts)
    for preset in ("arditi", "xstest"):
        out[preset] = D.detect_refusal(texts, preset)
    return out


def test_corpus_decisions_identical_with_and_without_unidecode(monkeypatch):
    texts = corpus()
    assert len(texts) > 300 and all(not t.isascii() for t in texts)
    with_unidecode = decisions(lambda t: t if t.isascii() else unidecode(t, errors="preserve"), texts, monkeypatch)
    builtin = decisions(_text.builtin_transliterate, texts, monkeypatch)
    for name, expected in with_unidecode.items():
        differ = np.flatnonzero(builtin[name] != expected)
        assert differ.size == 0, (name, [texts[i] for i in differ[:3]])
    # the corpus is not trivial: it has refusals and answers
    assert 0.2 < with_unidecode["heuristic"].mean() < 0.9


# characters the built-in tables cover give unidecode's exact string
COVERED = [*range(0xA0, 0x180), *range(0x300, 0x34F), *range(0x360, 0x370), *range(0x391, 0x3AA),
           *range(0x3B1, 0x3CA), *range(0x400, 0x460), *range(0x2000, 0x2027), *range(0x2030, 0x2040),
           *range(0xFF01, 0xFF5F), *range(0x3000, 0x3004)]


def test_covered_characters_equal_unidecode():
    differ = []
    for cp in COVERED:
        ch = chr(cp)
        if unicodedata.category(ch) in ("Cn", "Co", "Cs"):
            continue
        if _text.builtin_transliterate(ch) != unidecode(ch, errors="preserve"):
            differ.append((hex(cp), _text.builtin_transliterate(ch), unidecode(ch, errors="preserve")))
    # only a few signs are written differently (unidecode: C/, PS, $?, Y=, SS, P); they cannot
    # form or break an English refusal phrase
    assert {cp for cp, _b, _u in differ} <= {"0xa2", "0xa3", "0xa4", "0xa5", "0xa7", "0xb6"}, differ


def test_ideographs_and_unknown_characters():
    # ideographs: a capitalised syllable and a space, as unidecode writes them
    assert _text.builtin_transliterate("\u4e2d\u6587") == unidecode("\u4e2d\u6587") == "Zhong Wen "
    # characters unidecode has no entry for are kept (errors="preserve"), emoji among them
    for ch in ("\U0001f600", "\ufe0f", "\U0001f3fd"):
        assert _text.builtin_transliterate(ch) == unidecode(ch, errors="preserve") == ch
    assert _text.builtin_transliterate("plain ascii") == "plain ascii"


def test_unidecode_wrapper_equals_unidecode():
    if _text.TRANSLITERATION != "unidecode":
        pytest.skip("this process runs the built-in path (RAPIDSCORE_TRANSLITERATION=builtin)")
    texts = [*corpus(), "\x80\x9f controls", "mixed \u00e9\u4e2d\U0001f600 end"]
    for text in texts:
        assert _text.transliterate(text) == unidecode(text, errors="preserve")


@pytest.mark.parametrize("how", ["blocked", "env"])
def test_without_unidecode_installed(how, monkeypatch):
    """In a fresh interpreter without unidecode (import blocked) or told to use the built-in path,
    transliteration is the built-in one and the corpus decisions are unchanged."""
    code = (
        "import sys, json\n"
        + ("sys.modules['unidecode'] = None\n" if how == "blocked" else "")
        + "from rapidscore.abstention import _text\n"
        "from rapidscore.abstention.detectors import SelectDetector\n"
        "from rapidscore.testing.corpora import transliteration_texts as corpus\n"
        "texts = corpus()\n"
        "print(json.dumps([_text.TRANSLITERATION, SelectDetector('heuristic')(texts).tolist()]))\n"
    )
    env = dict(os.environ)
    if how == "env":
        env["RAPIDSCORE_TRANSLITERATION"] = "builtin"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True).stdout
    import json

    mode, decided = json.loads(out)
    assert mode == "builtin"
    monkeypatch.setattr(R, "transliterate", lambda t: unidecode(t, errors="preserve"))
    assert decided == [R.heuristic_refusal(t) for t in corpus()]
