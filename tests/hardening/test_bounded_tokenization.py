"""Bounded work per item in tokenisation (issue 36, row 5): a long text is tokenised in pieces
that stop past the truncation point (``rapidscore.encoder.tokens.bounded``), with the whole text's ids
and truncation count; a 100 MB text costs memory in proportion to max_length.

The references tokenise the whole text with the tokenizer itself (``tokenizers`` from
tokenizer.json, or transformers' Python tokenizer), truncated as ``BatchTokenizer`` truncates.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rapidscore.encoder.tokens.bounded import LAST_PIECE_FACTOR, MAX_UNCUT_CHARS
from rapidscore.encoder.tokens.python_tokenizer import PythonTokenizer
from rapidscore.encoder.tokens.tokenization import BatchTokenizer, TokenizerSpec
from rapidscore.encoder.tokens.windows import MAX_WINDOW_TEXT_CHARS
from rapidscore.testing.tiny_models import ALL_FAMILIES, PYTHON_TOKENIZER_FAMILIES

# Families whose tokenizer cannot be cut (transformers' XLM: Moses rules read the next word).
UNCUT_FAMILIES = ("xlm",)

# Pieces around every kind of cut: whitespace runs, accents (composed and combining), CJK with
# and without spaces, emoji sequences, punctuation runs, contractions (byte-level BPE), added
# tokens written out, words at and over WordPiece's 100 characters, controls, NBSP, ideographic
# space, U+FFFD, a grapheme "Prepend" sign, final sigma, ligatures, Hangul jamo.
FRAGMENTS = ["the", "Quick", "brown", "wörld", "Ünïcode", "e\u0301", "a\u0301\u0302", "ΑΣ", "Σ", "中文字",
             "日本語です", "한국어", "\u1100\u1161", "😀", "👩\u200d👩\u200d👧", "!!", "...", "?!", "--", "it's",
             "'s", "'", "a'b", "[MASK]", "[SEP]", "<mask>", "</s>", "<s>", "<pad>", "<unk>", "12,345", "3.14",
             "x" * 99, "y" * 100, "z" * 101, "w" * 130, "\u00a0", "\u3000", "\u3002", "\uff0c", "\u3001", "\x00",
             "\x1c", "\ufffd", "\u200b", "Straße", "ǅ", "İ", "ﬁ", "①", "\u0600", "\u0d4e", "▁", "``", "''", "\u2028"]
SEPARATORS = [" ", " ", " ", "  ", "\n", "\t", " \t ", "\r\n", "", " " * 40, "\n\n\n", "\u3000", " \u0301"]


def batch_tokenizer(source, max_length: int, truncate: bool = True) -> BatchTokenizer:
    spec = TokenizerSpec(max_length=max_length, pad_id=0, special_ids=(), cls_id=None, sep_id=None)
    return BatchTokenizer(source, spec, truncate=truncate)


def source_of(model_dir: Path, family: str):
    return model_dir if family in PYTHON_TOKENIZER_FAMILIES else model_dir / "tokenizer.json"


def reference_tokenizer(model_dir: Path, family: str, max_length: int | None):
    """The family's tokenizer on whole texts: truncated at ``max_length`` (None: not at all)."""
    if family in PYTHON_TOKENIZER_FAMILIES:
        tokenizer = PythonTokenizer.load(model_dir)
    else:
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        tokenizer.no_padding()
    if max_length is None:
        tokenizer.no_truncation()
    else:
        tokenizer.enable_truncation(max_length)
    return tokenizer


def assert_same_as_whole(tokenizer: BatchTokenizer, reference, texts: list[str]) -> None:
    """``tokenizer.encode(texts)`` (pieces for long texts) against the whole texts' encodings."""
    ids, truncated = tokenizer.encode(texts)
    expected = [reference.encode(text, add_special_tokens=True) for text in texts]
    for k, (got, want) in enumerate(zip(ids, expected, strict=True)):
        assert got.dtype == np.int64
        assert got.tolist() == list(want.ids), f"text {k} ({len(texts[k])} characters): {texts[k][:120]!r}"
    assert truncated == sum(1 for want in expected if want.overflowing)


@st.composite
def long_texts(draw, min_chars: int, max_chars: int) -> str:
    """Texts of fragments and separators, most between ``min_chars`` and ``max_chars`` long."""
    parts: list[str] = []
    size = 0
    goal = draw(st.integers(min_chars, max_chars))
    while size < goal:
        fragment = draw(st.sampled_from(FRAGMENTS))
        separator = draw(st.sampled_from(SEPARATORS))
        parts.append(fragment + separator)
        size += len(fragment) + len(separator)
    text = "".join(parts)
    return text[:draw(st.integers(min(goal, len(text)), len(text)))]


@pytest.fixture(scope="module", params=ALL_FAMILIES)
def family_dir(request, tiny_model_path) -> tuple[str, Path]:
    return request.param, tiny_model_path(request.param)


def test_every_family_but_xlm_is_cut_into_pieces(family_dir):
    family, model_dir = family_dir
    pieces, reason = batch_tokenizer(source_of(model_dir, family), 16).piece_tokenizer()
    if family in UNCUT_FAMILIES:
        assert pieces is None and "XLMTokenizer" in reason
    else:
        assert pieces is not None, reason


@pytest.mark.parametrize("max_length", [8, 16, 128])
def test_pieces_give_the_whole_texts_ids_and_truncation(family_dir, max_length):
    """Generated texts from under the first piece's length to many pieces (sparse texts take
    several), in one call with short ones (the batch path keeps their places)."""
    family, model_dir = family_dir
    tokenizer = batch_tokenizer(source_of(model_dir, family), max_length)
    reference = reference_tokenizer(model_dir, family, max_length)
    first = tokenizer.piece_chars

    @settings(max_examples=25 if max_length < 128 else 10, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(st.lists(long_texts(first - 40, 6 * first), min_size=1, max_size=3), st.sampled_from(["", "a b", "中"]))
    def check(texts, short):
        assert_same_as_whole(tokenizer, reference, [short, *texts, short])

    check()


@pytest.mark.parametrize("max_length", [8, 64])
def test_cuts_split_texts_into_the_same_tokens_and_offsets(family_dir, max_length):
    """The property the pieces rest on: at every position ``is_cut`` accepts, tokenising
    ``text[:i]`` and ``text[i:]`` gives the whole text's tokens (ids; offsets for the Rust
    tokenizers, shifted by i)."""
    family, model_dir = family_dir
    pieces, _ = batch_tokenizer(source_of(model_dir, family), max_length).piece_tokenizer()
    if pieces is None:
        pytest.skip(f"{family} is tokenised whole")
    whole = reference_tokenizer(model_dir, family, None)
    rust = family not in PYTHON_TOKENIZER_FAMILIES

    @settings(max_examples=20, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(long_texts(20, 240))
    def check(text):
        full = whole.encode(text, add_special_tokens=False)
        cuts = [i for i in range(1, len(text)) if pieces.is_cut(text, i)]
        for i in cuts[:: max(1, len(cuts) // 12)]:
            left = whole.encode(text[:i], add_special_tokens=False)
            right = whole.encode(text[i:], add_special_tokens=False)
            assert list(left.ids) + list(right.ids) == list(full.ids), (i, text)
            if rust:
                shifted = [(start + i, end + i) for start, end in right.offsets]
                assert list(left.offsets) + shifted == list(full.offsets), (i, text)

    check()


# A SentencePiece precompiled normalisation map (as XLM-R's, T5's and ALBERT's tokenizer.json
# hold nmt_nfkc's, 240 KB), made by sentencepiece 0.2 from these rules: U+2581 (the piece mark),
# U+3000, NBSP and U+001C to a space, U+FB01 to "fi", U+2460 to "1", U+3231 to "(株)".
SMALL_CHARSMAP = (
    "AAQAAAB0AAAcDQAAAAAAgKAFAACgBQAACAAAgIERAACxNQAAkbACAIAtAAACAACArBgCAIEFAAAKAACADwAAAJYgAgCAZAIAEAAA"
    "ABMAAAASAAAAFQAAABQAAAAXAAAAFgAAAIi4AgAYAAAAGwAAABoAAAAdAAAAHAAAAB8AAAAeAAAAIQAAACAAAAAjAAAAIgAAACUA"
    "AAAkAAAAJwAAACYAAAApAAAAKAAAACsAAAAqAAAALQAAACwAAAAvAAAALgAAADEAAAAwAAAAMwAAADIAAAA1AAAANAAAADcAAAA2"
    "AAAAOQAAADgAAAA7AAAAOgAAAD0AAAA8AAAAPwAAAD4AAABBAAAAQAAAAEMAAABCAAAARQAAAEQAAABHAAAARgAAAEkAAABIAAAA"
    "SwAAAEoAAABNAAAATAAAAE8AAABOAAAAUQAAAFAAAABTAAAAUgAAAFUAAABUAAAAVwAAAFYAAABZAAAAWAAAAFsAAABaAAAAXQAA"
    "AFwAAABfAAAAXgAAAGEAAABgAAAAYwAAAGIAAABlAAAAZAAAAGcAAABmAAAAaQAAAGgAAABrAAAAagAAAG0AAABsAAAAbwAAAG4A"
    "AABxAAAAcAAAAHMAAAByAAAAdQAAAHQAAAB3AAAAdgAAAHkAAAB4AAAAewAAAHoAAAB9AAAAfAAAAH8AAAB+AAAAgQAAAIAAAACD"
    "AAAAggAAAIUAAACEAAAAhwAAAIYAAACJAAAAiAAAAIsAAACKAAAAjQAAAIwAAACPAAAAjgAAAJEAAACQAAAAkwAAAJIAAACVAAAA"
    "lAAAAJcAAACWAAAAmQAAAJgAAACbAAAAmgAAAJ0AAACcAAAAnwAAAJ4AAAChAAAAoAAAAKMAAACiAAAApQAAAKQAAACnAAAApgAA"
    "AKkAAACoAAAAqwAAAKoAAACtAAAArAAAAK8AAACuAAAAsQAAALAAAACzAAAAsgAAALUAAAC0AAAAtwAAALYAAAC5AAAAuAAAALsA"
    "AAC6AAAAvQAAALwAAAC/AAAAvgAAAMEAAADAAAAAwwAAAMIAAADFAAAAxAAAAMcAAADGAAAAyQAAAMgAAADLAAAAygAAAM0AAADM"
    "AAAAzwAAAM4AAADRAAAA0AAAANMAAADSAAAA1QAAANQAAADXAAAA1gAAANkAAADYAAAA2wAAANoAAADdAAAA3AAAAN8AAADC8AEA"
    "4QAAAOAAAADjAAAA4gAAAOUAAADkAAAA5wAAAOYAAADpAAAA6AAAAOsAAADqAAAA7QAAAOwAAADvAAAA7gAAAPEAAADwAAAA71QB"
    "APIAAAD1AAAA9AAAAPcAAAD2AAAA+QAAAPgAAAD7AAAA+gAAAP0AAAD8AAAA47gBAOKYAQAgACjmoKopADEAZmkA"
)


def sentencepiece_tokenizers(model_dir: Path) -> list[str]:
    """tokenizer.json texts of the tiny XLM-R vocabulary behind the precompiled map and the
    spaces' Replace, as XLM-R's (Metaspace alone) and as transformers 5 rebuilds it
    (WhitespaceSplit, then Metaspace)."""
    data = json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8"))
    data["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Precompiled", "precompiled_charsmap": "".join(SMALL_CHARSMAP)},  # base64, as saved
        {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]}
    metaspace = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
    alone = dict(data, pre_tokenizer=metaspace)
    return [json.dumps(alone), json.dumps(data)]


@pytest.mark.parametrize("layout", [0, 1])
def test_sentencepiece_precompiled_map(tiny_model_path, layout):
    """The map reads graphemes and turns U+2581 (a symbol) into a space: no cut follows such a
    character (``blank_when_normalized``) or splits CR LF; the ids and offsets stay the whole text's."""
    from tokenizers import Tokenizer

    source = sentencepiece_tokenizers(tiny_model_path("xlm-roberta"))[layout]
    whole = Tokenizer.from_str(source)
    whole.no_truncation()
    assert whole.normalizer.normalize_str("a\u2581\u3000ﬁ㈱\x1c") == "a fi(株) "
    for max_length in (8, 32):
        tokenizer = batch_tokenizer(source, max_length)
        pieces = tokenizer.piece_tokenizer()[0]
        assert pieces is not None and "\u2581" in pieces.rules.blank_when_normalized
        reference = Tokenizer.from_str(source)
        reference.enable_truncation(max_length)
        check_pieces_and_cuts(tokenizer, reference, whole)


def check_pieces_and_cuts(tokenizer: BatchTokenizer, reference, whole) -> None:
    """Generated texts: the pieces against the whole text (with ``reference``), and every cut
    in their first 200 characters (ids and offsets, with ``whole``, which does not truncate)."""
    pieces = tokenizer.piece_tokenizer()[0]
    assert pieces is not None

    @settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(long_texts(tokenizer.piece_chars - 40, 6 * tokenizer.piece_chars))
    def check(text):
        assert_same_as_whole(tokenizer, reference, [text + "㈱ \r\n"])
        short = text[:200]
        full = whole.encode(short, add_special_tokens=False)
        for i in range(1, len(short)):
            if pieces.is_cut(short, i):
                left = whole.encode(short[:i], add_special_tokens=False)
                right = whole.encode(short[i:], add_special_tokens=False)
                assert list(left.ids) + list(right.ids) == list(full.ids), (i, short)
                shifted = [(start + i, end + i) for start, end in right.offsets]
                assert list(left.offsets) + shifted == list(full.offsets), (i, short)

    check()


def test_texts_at_the_piece_bounds(tiny_model_path):
    """Lengths at the first piece's length, a whitespace or a word exactly at the first cut's
    target, and words of 100 / 101 characters (WordPiece's limit) across it."""
    for family in ("bert", "roberta", "xlm-roberta", "deberta-v2", "t5"):
        model_dir = tiny_model_path(family)
        for max_length in (8, 16):
            tokenizer = batch_tokenizer(source_of(model_dir, family), max_length)
            reference = reference_tokenizer(model_dir, family, max_length)
            first = tokenizer.piece_chars
            texts = []
            for length in (first - 1, first, first + 1, first + 2):
                texts += ["a" * length, ("ab " * length)[:length], (" " * length)[:length - 1] + "b"]
                for word in (1, 99, 100, 101, 150):
                    for shift in (-2, -1, 0, 1):
                        head = "word " * ((first + shift) // 5)
                        texts.append((head + "q" * word + " tail end")[:length + word + 9])
                        texts.append(head + "\n" * 3 + "é" * word + "\t" + "x " * 5)
            assert_same_as_whole(tokenizer, reference, texts)


@pytest.mark.parametrize("family", ["bert", "roberta", "xlm-roberta", "t5", "prophetnet", "byt5"])
def test_sparse_and_blank_texts_take_many_pieces(tiny_model_path, family):
    """Texts of far more characters than tokens (whitespace runs between a few words, fewer
    tokens than the truncation keeps, or a few more) come out whole, piece after piece."""
    model_dir = tiny_model_path(family)
    tokenizer = batch_tokenizer(source_of(model_dir, family), 8)
    reference = reference_tokenizer(model_dir, family, 8)
    gap = 3 * tokenizer.piece_chars
    texts = [" a" + " " * gap + "b" + "\n" * gap + "c",
             "one" + (" " * gap + "two") * 12,
             ("x" + " " * 500) * 40,
             " " * (20 * gap)]
    assert_same_as_whole(tokenizer, reference, texts)


@pytest.mark.parametrize("family", ["bert", "electra", "mpnet"])
def test_a_long_word_is_one_unk_and_is_skipped(tiny_model_path, family):
    """WordPiece makes a word over 100 characters one [UNK]: a word longer than the largest
    piece is skipped as that token, whatever follows it (one "word" of 1.5 MB included)."""
    model_dir = tiny_model_path(family)
    tokenizer = batch_tokenizer(source_of(model_dir, family), 8)
    reference = reference_tokenizer(model_dir, family, 8)
    big = LAST_PIECE_FACTOR * 8 * 3
    texts = ["hello " + "a" * big + " world", "a" * big, "say: " + "ß" * big + "!" + "b" * big + ". end",
             "x" * (big // 2) + "é" * big + ", then" + " more words" * 3, "k" * 1_500_000]
    pieces = tokenizer.piece_tokenizer()[0]
    assert pieces is not None
    tokenised: list[int] = []
    content_ids = pieces._content_ids
    pieces._content_ids = lambda piece: tokenised.append(len(piece)) or content_ids(piece)
    assert_same_as_whole(tokenizer, reference, texts)
    assert max(tokenised) <= pieces.last_chars + 200  # the words were skipped, never tokenised
    # A "word" of combining marks is normalised away (strip accents): not skippable, tokenised.
    assert_same_as_whole(tokenizer, reference, ["word " * 3 + "\u0301" * big + " z"])
    assert max(tokenised) > big


def test_a_long_stretch_without_a_cut_is_refused_naming_the_text(tiny_model_path):
    """Byte-level BPE has no safe cut inside a word: more than MAX_UNCUT_CHARS characters
    without whitespace are refused (never tokenised differently); fewer are tokenised whole."""
    model_dir = tiny_model_path("roberta")
    tokenizer = batch_tokenizer(source_of(model_dir, "roberta"), 16)
    reference = reference_tokenizer(model_dir, "roberta", 16)
    assert_same_as_whole(tokenizer, reference, ["abc " + "q" * 300_000 + " d"])
    with pytest.raises(ValueError, match=r"text 1: 1,048,577 characters.*1,048,576"):
        tokenizer.encode(["short", "q" * (MAX_UNCUT_CHARS + 1)])
    with pytest.raises(ValueError, match=r"text 0: 1,048,6\d\d characters.*between characters 0 and 1,048,576"):
        tokenizer.encode(["a " + "q" * (MAX_UNCUT_CHARS + 100)])


@pytest.mark.slow
def test_a_stretch_of_exactly_the_bound_is_tokenised_whole(tiny_model_path):
    model_dir = tiny_model_path("roberta")
    tokenizer = batch_tokenizer(source_of(model_dir, "roberta"), 16)
    reference = reference_tokenizer(model_dir, "roberta", 16)
    assert_same_as_whole(tokenizer, reference, ["q" * MAX_UNCUT_CHARS, "a b " + "q" * (MAX_UNCUT_CHARS - 4)])


def test_uncut_tokenizers_refuse_texts_over_the_bound(tiny_model_path):
    model_dir = tiny_model_path("xlm")
    tokenizer = batch_tokenizer(model_dir, 16)
    with pytest.raises(ValueError, match=r"text 0: .* over the 1,048,576 .*XLMTokenizer"):
        tokenizer.encode(["word " * (MAX_UNCUT_CHARS // 5 + 10)])


def test_many_texts_keep_their_places_and_count(tiny_model_path):
    """40 texts (the batch call's path), long ones among them, in input order."""
    model_dir = tiny_model_path("roberta")
    tokenizer = batch_tokenizer(source_of(model_dir, "roberta"), 16)
    reference = reference_tokenizer(model_dir, "roberta", 16)
    texts = [f"long text number {k} " * (40 + k) if k % 3 == 0 else f"short {k}" for k in range(40)]
    assert_same_as_whole(tokenizer, reference, texts)


@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_one_tokenizer_shared_by_many_threads_cuts_long_texts_as_one_thread_does(tiny_model_path, family):
    """A BatchTokenizer is shared by every thread of an encoder: its piece tokenizer is made on
    the first long text (under a lock), and every thread gets the whole texts' ids."""
    import threading

    model_dir = tiny_model_path(family)
    tokenizer = batch_tokenizer(source_of(model_dir, family), 16)  # no long text seen yet
    reference = reference_tokenizer(model_dir, family, 16)
    texts = [f"thread text {k} with some words " * (30 + 7 * k) for k in range(8)]
    expected = [list(reference.encode(text, add_special_tokens=True).ids) for text in texts]
    start = threading.Barrier(8)
    failures: list = []

    def work(k: int) -> None:
        start.wait()
        for _ in range(20):
            ids, truncated = tokenizer.encode([texts[k], texts[(k + 1) % 8]])
            if [i.tolist() for i in ids] != [expected[k], expected[(k + 1) % 8]] or truncated != 2:
                failures.append(k)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures


def test_window_mode_refuses_texts_over_its_bound(tiny_model_path):
    tokenizer = batch_tokenizer(tiny_model_path("bert") / "tokenizer.json", 16, truncate=False)
    big = "word " * (MAX_WINDOW_TEXT_CHARS // 5 + 1)
    with pytest.raises(ValueError, match=r"text 1: 1,048,580 characters, over the 1,048,576 .*window"):
        tokenizer.encode(["fine", big])


def test_window_mode_names_the_callers_item(tiny_model_path):
    from rapidscore import BERTScore
    from rapidscore.encoder import Encoder

    model = tiny_model_path("bert")
    big = "word " * (MAX_WINDOW_TEXT_CHARS // 5 + 1)
    encoder = Encoder(model, long_texts="window")
    with pytest.raises(ValueError, match=r"texts\[2\]: 1,048,580 characters"):
        encoder.encode(["a", "b", big])
    scorer = BERTScore(model, long_texts="window")
    with pytest.raises(ValueError, match=r"refs\[1\]\[1\]: 1,048,580 characters.*long_texts='truncate'"):
        scorer.score(["a", "b"], [["x"], ["y", big]])
    # Whitespace around a text is not counted (BERTScore strips it).
    assert len(scorer.score(["a " + " " * MAX_WINDOW_TEXT_CHARS], ["a"]).f1) == 1


def test_encoder_and_scorer_truncate_long_texts_as_whole(tiny_model_path):
    """The public paths: a 3 MB text scores as its truncated whole would (same ids)."""
    from rapidscore import BERTScore
    from rapidscore.errors import TruncationWarning

    model = tiny_model_path("bert")
    scorer = BERTScore(model)
    text = "the cat sat on the mat. " * 125_000
    head = scorer.encoder.tokenizer.encode([text[:4000]])[0][0]
    assert scorer.encoder.tokenize([text])[0].tolist() == head.tolist()
    with pytest.warns(TruncationWarning):
        long_score = scorer.score([text], ["a cat on a mat"]).f1
    with pytest.warns(TruncationWarning):
        head_score = scorer.score([text[:4000]], ["a cat on a mat"]).f1
    assert long_score.tolist() == head_score.tolist()


# -- the real model -------------------------------------------------------------------------------

ENGLISH = ("The committee met on Tuesday, and after a long debate it approved the budget (with two "
           "amendments). Prices rose 3.5% in May; analysts weren't surprised. \"It's fine,\" she said... ")


@pytest.mark.slow
@pytest.mark.parametrize("max_length", [16, 256, 512])
def test_minilm_pieces_give_the_whole_texts_ids(minilm_path, max_length):
    from rapidscore.encoder.sentence_pipeline import lowercase_tokenizer_json

    raw = (minilm_path / "tokenizer.json").read_text(encoding="utf-8")
    for source in (minilm_path / "tokenizer.json", lowercase_tokenizer_json(raw)):
        tokenizer = batch_tokenizer(source, max_length)
        assert tokenizer.piece_tokenizer()[0] is not None
        from tokenizers import Tokenizer

        reference = Tokenizer.from_str(source if isinstance(source, str) else source.read_text(encoding="utf-8"))
        reference.no_padding()
        reference.enable_truncation(max_length)
        texts = [ENGLISH * ((k + 1) * max_length // 40 + 1) for k in range(4)]
        texts += ["中文的句子没有空格\uff0c" * (4 * max_length), "\n\n".join([ENGLISH] * 2 * max_length)]
        assert_same_as_whole(tokenizer, reference, texts)
        whole = Tokenizer.from_str(source if isinstance(source, str) else source.read_text(encoding="utf-8"))
        whole.no_padding()
        whole.no_truncation()
        check_pieces_and_cuts(tokenizer, reference, whole)


# -- memory ---------------------------------------------------------------------------------------

# Runs the command under an address-space limit and prints its exit status and peak RSS (kB): a
# fresh process, so RUSAGE_CHILDREN is the command's alone.
_MEASURE = textwrap.dedent("""
    import resource, subprocess, sys
    limit = int(sys.argv[1])
    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    done = subprocess.run(sys.argv[2:], preexec_fn=cap, capture_output=True, text=True)
    print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    sys.stderr.write(done.stderr[-2000:])
""")


def run_measured(argv: list[str], limit_bytes: int, cwd: Path) -> tuple[int, int, str]:
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(limit_bytes), *argv], capture_output=True,
                          text=True, cwd=cwd, env=os.environ.copy(), timeout=600)
    status, peak_kb = done.stdout.split()
    return int(status), int(peak_kb), done.stderr


def write_big_row(path: Path, characters: int) -> Path:
    words = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "while", "scientists", "measure"]
    text = " ".join(words[k % len(words)] for k in range(characters // 6))
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(json.dumps({"candidate": text, "reference": "a quick brown fox"}) + "\n")
    return path


_TOKENISE_BIG = textwrap.dedent("""
    import sys
    from pathlib import Path
    from rapidscore.encoder.tokens.tokenization import BatchTokenizer, TokenizerSpec
    spec = TokenizerSpec(max_length=128, pad_id=0, special_ids=(), cls_id=None, sep_id=None)
    tokenizer = BatchTokenizer(Path(sys.argv[1]), spec)
    text = "the quick brown fox jumps over the lazy dog " * (30_000_000 // 44)
    ids, truncated = tokenizer.encode([text, "a b"])
    print(len(ids[0]), truncated)
""")


def test_tokenising_a_30_mb_text_fits_a_small_address_space(tmp_path, tiny_model_path):
    """The fast tier's guard: tokenised whole, 30 MB needed about 4.5 GB (20 MB: 3.0 GB) and
    aborted in Rust under this limit (status 134, "memory allocation of 479999872 bytes failed")."""
    source = str(tiny_model_path("bert") / "tokenizer.json")
    status, peak_kb, err = run_measured([sys.executable, "-c", _TOKENISE_BIG, source], 1536 << 20, tmp_path)
    assert status == 0, err
    assert peak_kb < 512 << 10, f"peak RSS {peak_kb / 1024:.0f} MB"


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "rapidscore", *args]


@pytest.mark.slow
def test_a_100_mb_text_scores_in_bounded_memory_tiny_model(tmp_path, tiny_model_path):
    """It took 13 GB (the whole text tokenised before truncation) and aborted under a memory
    limit with a Rust backtrace (status 134)."""
    model = str(tiny_model_path("bert"))
    small = tmp_path / "small.jsonl"
    small.write_text(json.dumps({"candidate": "a b", "reference": "a c"}) + "\n", encoding="utf-8")
    # The ONNX export (torch) happens here, outside the limit; the measured run loads it.
    subprocess.run(cli("bertscore", "--input", str(small), "--output", str(tmp_path / "s.jsonl"), "-m", model,
                       "-q"), check=True, cwd=tmp_path, timeout=600)
    big = write_big_row(tmp_path / "big.jsonl", 100_000_000)
    status, peak_kb, err = run_measured(cli("bertscore", "--input", str(big), "--output",
                                            str(tmp_path / "out.jsonl"), "-m", model, "-q"), 2 << 30, tmp_path)
    assert status == 0, err
    assert peak_kb < 1 << 20, f"peak RSS {peak_kb / 1024:.0f} MB"
    row = json.loads((tmp_path / "out.jsonl").read_text(encoding="utf-8"))
    assert 0 < row["f1"] <= 1


@pytest.mark.slow
def test_a_100_mb_text_scores_in_bounded_memory_minilm(tmp_path, minilm_path):
    small = tmp_path / "small.jsonl"
    small.write_text(json.dumps({"candidate": "a b", "reference": "a c"}) + "\n", encoding="utf-8")
    subprocess.run(cli("bertscore", "--input", str(small), "--output", str(tmp_path / "s.jsonl"), "-q"),
                   check=True, cwd=tmp_path, timeout=600)
    big = write_big_row(tmp_path / "big.jsonl", 100_000_000)
    status, peak_kb, err = run_measured(cli("bertscore", "--input", str(big), "--output",
                                            str(tmp_path / "out.jsonl"), "-q"), 2 << 30, tmp_path)
    assert status == 0, err
    assert peak_kb < 1 << 20, f"peak RSS {peak_kb / 1024:.0f} MB"
