"""Token-label NER (IOB1, IOB2, IOE1, IOE2, IOBES, BILOU; CoNLL files) against seqeval 1.2.2:
span-level P/R/F1 per type and micro/macro/weighted averages, in seqeval's default and strict
modes, on generated sequences (malformed ones included) and on examples/ner."""

from __future__ import annotations

import gzip
import json
import math
import re
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

seqeval_metrics = pytest.importorskip("seqeval.metrics", reason="seqeval is the parity reference (integrations extra)")
seqeval_scheme = pytest.importorskip("seqeval.scheme", reason="seqeval is the parity reference (integrations extra)")

import rapidscore  # noqa: E402
from rapidscore import ner  # noqa: E402
from rapidscore.cli import main  # noqa: E402
from rapidscore.errors import RapidscoreError  # noqa: E402
from rapidscore.ner.tags import TagError  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ner"
SCHEMES = ("IOB1", "IOB2", "IOE1", "IOE2", "IOBES", "BILOU")
PREFIXES = {"IOB1": "IOB", "IOB2": "IOB", "IOE1": "IOE", "IOE2": "IOE", "IOBES": "IOBES", "BILOU": "BILOU"}
TYPES = ("PER", "LOC", "MISC-X")  # a type with the delimiter inside
# Labels seqeval reads in odd ways: no prefix, bare prefixes, a dot, doubled delimiters, an O with a type.
ODD_LABELS = ("PER", "X", "B", "I", "E", "S", ".", "X-", "B--PER", "O-PER", "U-LOC", "L-PER", "B-PER-")
TOLERANCE = 1e-12
FIELDS = ("precision", "recall", "f1-score", "support")


def seqeval_dict(y_true, y_pred, **options) -> dict:
    with warnings.catch_warnings():  # seqeval warns on undefined ratios and odd labels
        warnings.simplefilter("ignore")
        report = seqeval_metrics.classification_report(y_true, y_pred, output_dict=True, **options)
    return {row: {key: float(value) for key, value in scores.items()} for row, scores in report.items()}


def assert_same_report(ours: dict, reference: dict) -> None:
    assert list(ours) == list(reference)  # the same types, sorted, then the three averages
    for row, scores in reference.items():
        for key in FIELDS:
            mine, theirs = ours[row][key], scores[key]
            if math.isnan(theirs):  # seqeval's macro average over no type at all
                assert math.isnan(mine), (row, key)
            else:
                assert mine == pytest.approx(theirs, abs=TOLERANCE), (row, key, mine, theirs)
        assert isinstance(ours[row]["support"], int)


def ours_dict(y_true, y_pred, **options) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rapidscore.RapidscoreWarning)
        return ner.tag_report(y_true, y_pred, **options).to_dict()


# ---------------------------------------------------------------- generated sequences


def label_of(prefixes: str, odd: bool):
    regular = st.one_of(st.just("O"), st.builds(lambda p, t: f"{p}-{t}", st.sampled_from(prefixes),
                                                st.sampled_from(TYPES)))
    return st.one_of(regular, st.sampled_from(ODD_LABELS)) if odd else regular


@st.composite
def corpora(draw, prefixes: str, odd: bool = False):
    """(y_true, y_pred): equal shapes; y_pred mostly copies y_true (so entities match) but with
    random labels mixed in, which makes plenty of malformed sequences (I- after O, type changes,
    an E- without its start...)."""
    label = label_of(prefixes, odd)
    y_true = draw(st.lists(st.lists(label, max_size=9), min_size=1, max_size=5))
    y_pred = [[draw(st.one_of(st.just(gold), label)) for gold in sentence] for sentence in y_true]
    return y_true, y_pred


@pytest.mark.slow  # runs the seqeval reference
@pytest.mark.parametrize("scheme", SCHEMES)
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_default_mode_equals_seqeval_on_generated_sequences(scheme, data):
    y_true, y_pred = data.draw(corpora(PREFIXES[scheme] + "BIES", odd=True))
    zero_division = data.draw(st.sampled_from([0, 1]))
    reference = seqeval_dict(y_true, y_pred, zero_division=zero_division)
    # Without a scheme the labels are read as seqeval reads them, odd ones included.
    assert_same_report(ours_dict(y_true, y_pred, zero_division=zero_division), reference)
    if scheme != "BILOU":  # a scheme name changes nothing in the default mode but BILOU's reading
        assert_same_report(ours_dict(y_true, y_pred, scheme=scheme, zero_division=zero_division), reference)


@pytest.mark.slow  # runs the seqeval reference
@pytest.mark.parametrize("scheme", SCHEMES)
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_strict_mode_equals_seqeval_on_generated_sequences(scheme, data):
    y_true, y_pred = data.draw(corpora(PREFIXES[scheme]))
    zero_division = data.draw(st.sampled_from([0, 1]))
    reference = seqeval_dict(y_true, y_pred, mode="strict", scheme=getattr(seqeval_scheme, scheme),
                             zero_division=zero_division)
    assert_same_report(ours_dict(y_true, y_pred, mode="strict", scheme=scheme, zero_division=zero_division),
                       reference)
    # the seqeval class is accepted as the scheme too
    assert_same_report(ours_dict(y_true, y_pred, mode="strict", scheme=getattr(seqeval_scheme, scheme),
                                 zero_division=zero_division), reference)


@pytest.mark.slow  # runs the seqeval reference
@pytest.mark.parametrize("average", ["micro", "macro", "weighted"])
@pytest.mark.parametrize("strict", [False, True])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_score_functions_equal_seqeval(average, strict, data):
    scheme = data.draw(st.sampled_from(SCHEMES))
    y_true, y_pred = data.draw(corpora(PREFIXES[scheme]))
    options = {"mode": "strict", "scheme": getattr(seqeval_scheme, scheme)} if strict else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = ner.tag_report(y_true, y_pred, **({"mode": "strict", "scheme": scheme} if strict else {}))
        expected = [seqeval_metrics.precision_score(y_true, y_pred, average=average, **options),
                    seqeval_metrics.recall_score(y_true, y_pred, average=average, **options),
                    seqeval_metrics.f1_score(y_true, y_pred, average=average, **options)]
    row = report.rows()[f"{average} avg"]
    for mine, theirs in zip((row.precision, row.recall, row.f1), expected):
        assert (math.isnan(mine) and math.isnan(theirs)) or mine == pytest.approx(theirs, abs=TOLERANCE)
    if average == "micro":
        assert (report.precision, report.recall, report.f1) == (row.precision, row.recall, row.f1)


@pytest.mark.slow  # runs the seqeval reference
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpora("BILOU"))
def test_bilou_default_mode_is_seqeval_on_the_iobes_spelling(corpus):
    """seqeval's default mode knows no U-/L-; rapidscore reads them as S-/E- with scheme='BILOU'."""
    y_true, y_pred = corpus
    as_iobes = lambda seqs: [[re.sub(r"^U-", "S-", re.sub(r"^L-", "E-", label)) for label in s] for s in seqs]
    assert_same_report(ours_dict(y_true, y_pred, scheme="BILOU"), seqeval_dict(as_iobes(y_true), as_iobes(y_pred)))


@pytest.mark.slow  # runs the seqeval reference
@pytest.mark.parametrize("strict", [False, True])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpus=corpora("IOBES"))
def test_suffix_labels_equal_seqeval(strict, corpus):
    to_suffix = lambda seqs: [[label if label == "O" else f"{label[2:]}-{label[0]}" for label in s] for s in seqs]
    y_true, y_pred = to_suffix(corpus[0]), to_suffix(corpus[1])
    options = {"mode": "strict"} if strict else {}
    reference = seqeval_dict(y_true, y_pred, suffix=True,
                             **({**options, "scheme": seqeval_scheme.IOBES} if strict else {}))
    assert_same_report(ours_dict(y_true, y_pred, suffix=True, **({**options, "scheme": "IOBES"} if strict else {})),
                       reference)


@pytest.mark.slow  # runs the seqeval reference
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_strict_mode_without_a_scheme_detects_it_as_seqeval(data):
    scheme = data.draw(st.sampled_from(SCHEMES))
    y_true, y_pred = data.draw(corpora(PREFIXES[scheme]))
    try:
        reference = seqeval_dict(y_true, y_pred, mode="strict")
    except ValueError:  # auto_detect found no scheme (e.g. only O), or a prefix the detected scheme refuses
        with pytest.raises(TagError):
            ner.tag_report(y_true, y_pred, mode="strict")
        return
    assert_same_report(ours_dict(y_true, y_pred, mode="strict"), reference)
    assert_same_report(ours_dict(y_true, y_pred, mode="strict", scheme="auto"), reference)


@pytest.mark.slow  # runs the seqeval reference
@pytest.mark.parametrize("scheme", SCHEMES)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_strict_mode_refuses_the_prefixes_seqeval_refuses(scheme, data):
    foreign = sorted(set("IOBESUL") - set(PREFIXES[scheme]) - {"O"})
    y_true, y_pred = data.draw(corpora(PREFIXES[scheme]))
    position = data.draw(st.integers(0, len(y_pred) - 1))
    y_pred[position] = [*y_pred[position], f"{data.draw(st.sampled_from(foreign))}-PER"]
    y_true[position] = [*y_true[position], "O"]
    with pytest.raises((ValueError, KeyError)):
        seqeval_dict(y_true, y_pred, mode="strict", scheme=getattr(seqeval_scheme, scheme))
    with pytest.raises(TagError, match=rf"y_pred\[{position}\]\[\d+\]: label '.-PER' is not allowed in {scheme}"):
        ner.tag_report(y_true, y_pred, mode="strict", scheme=scheme)


def test_text_report_equals_seqevals_string():
    y_true = [["O", "B-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O"], ["B-LONG-TYPE-NAME", "O"]]
    y_pred = [["B-MISC", "I-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O"], ["O", "O"]]
    for digits in (2, 4):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = seqeval_metrics.classification_report(y_true, y_pred, digits=digits)
        assert ner.tag_report(y_true, y_pred).text(digits) == expected
    assert str(ner.tag_report(y_true, y_pred)) == ner.tag_report(y_true, y_pred).text(2)


def test_frame_and_counts():
    pytest.importorskip("pandas", reason="to_frame returns a pandas DataFrame")
    y_true = [["B-PER", "I-PER", "O", "B-LOC"]]
    y_pred = [["B-PER", "I-PER", "O", "B-PER"]]
    report = ner.tag_report(y_true, y_pred, scheme="IOB2", mode="strict")
    frame = report.to_frame()
    assert list(frame.index) == ["LOC", "PER", "micro avg", "macro avg", "weighted avg"]
    assert list(frame.columns) == list(FIELDS)
    assert frame.loc["PER", "precision"] == report.per_type["PER"].precision
    assert report.counts == {"LOC": {"correct": 0, "predicted": 0, "gold": 1},
                             "PER": {"correct": 1, "predicted": 2, "gold": 1}}
    assert (report.scheme, report.mode) == ("IOB2", "strict")


def test_decode_tags_equals_seqeval_entities():
    labels = ["B-PER", "I-PER", "O", "I-LOC", "I-LOC", "B-LOC", "E-MISC", "S-PER"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = [(s, e + 1, t) for t, s, e in seqeval_metrics.sequence_labeling.get_entities(labels)]
    assert [tuple(span) for span in ner.decode_tags(labels)] == expected
    tokens = seqeval_scheme.Tokens(["B-PER", "I-PER", "O", "I-LOC", "B-LOC"], seqeval_scheme.IOB2)
    assert [tuple(span) for span in ner.decode_tags(["B-PER", "I-PER", "O", "I-LOC", "B-LOC"], scheme="BIO",
                                                     mode="strict")] == \
        [(e.start, e.end, e.tag) for e in tokens.entities]


# ---------------------------------------------------------------- examples/ner as token labels


def _tokens(text: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]


def _labels(spans: list[tuple[int, int, str]], words: list[tuple[int, int]], scheme: str) -> list[str]:
    """Token labels of character spans: a token belongs to the first span (by start) it
    overlaps; each entity is spelled as ``scheme`` spells it."""
    owner: list[int | None] = [None] * len(words)
    for k, (start, end, _) in enumerate(sorted(spans)):
        for i, (ws, we) in enumerate(words):
            if owner[i] is None and ws < end and start < we:
                owner[i] = k
    ordered = sorted(spans)
    labels = ["O"] * len(words)
    i = 0
    while i < len(words):
        if owner[i] is None:
            i += 1
            continue
        j = i
        while j + 1 < len(words) and owner[j + 1] == owner[i]:
            j += 1
        kind = ordered[owner[i]][2].replace(" ", "_")
        n = j - i + 1
        if scheme in ("IOB2", "IOB1"):
            prefixes = ["B"] + ["I"] * (n - 1)
            if scheme == "IOB1" and not (i > 0 and labels[i - 1] != "O" and labels[i - 1][2:] == kind):
                prefixes[0] = "I"  # IOB1 writes B- only between two entities of the same type
        elif scheme in ("IOE2", "IOE1"):
            prefixes = ["I"] * (n - 1) + ["E"]
            if scheme == "IOE1":
                prefixes[-1] = "I"  # E- only where the next token starts an entity of the same type: patched below
        elif scheme == "IOBES":
            prefixes = ["S"] if n == 1 else ["B"] + ["I"] * (n - 2) + ["E"]
        else:
            prefixes = ["U"] if n == 1 else ["B"] + ["I"] * (n - 2) + ["L"]
        for offset, prefix in enumerate(prefixes):
            labels[i + offset] = f"{prefix}-{kind}"
        i = j + 1
    if scheme == "IOE1":
        for i in range(len(labels) - 1):
            if labels[i] != "O" and owner[i] != owner[i + 1] and owner[i + 1] is not None \
                    and labels[i][2:] == labels[i + 1][2:]:
                labels[i] = "E" + labels[i][1:]
    return labels


def example_corpus(scheme: str) -> tuple[list, list, dict]:
    gold = ner.read_jsonl(str(EXAMPLE / "gold.jsonl"))
    texts = {record.id: record.text for record in gold}
    spans_of = lambda record: [(e.start, e.end, e.label) for e in ner.to_entities(record.entities)]
    y_true = [_labels(spans_of(r), _tokens(r.text), scheme) for r in gold]
    models = {}
    for name in ("gliner", "spacy", "deberta"):
        by_id = {r.id: r for r in ner.read_jsonl(str(EXAMPLE / f"{name}.jsonl"))}
        models[name] = [_labels(spans_of(by_id[r.id]), _tokens(texts[r.id]), scheme) for r in gold]
    return [[r.text[s:e] for s, e in _tokens(r.text)] for r in gold], y_true, models


@pytest.mark.slow  # runs the seqeval reference
@pytest.mark.parametrize("scheme", SCHEMES)
def test_examples_as_token_labels_equal_seqeval(scheme):
    _, y_true, models = example_corpus(scheme)
    assert any(label != "O" for labels in y_true for label in labels)
    for y_pred in models.values():
        for strict in (False, True):
            if strict:
                reference = seqeval_dict(y_true, y_pred, mode="strict", scheme=getattr(seqeval_scheme, scheme))
                assert_same_report(ours_dict(y_true, y_pred, mode="strict", scheme=scheme), reference)
            elif scheme == "BILOU":
                iobes = lambda seqs: [[re.sub(r"^L-", "E-", re.sub(r"^U-", "S-", x)) for x in s] for s in seqs]
                assert_same_report(ours_dict(y_true, y_pred, scheme=scheme),
                                   seqeval_dict(iobes(y_true), iobes(y_pred)))
            else:
                assert_same_report(ours_dict(y_true, y_pred, scheme=scheme), seqeval_dict(y_true, y_pred))


def test_examples_token_labels_decode_back_to_their_spans():
    tokens, y_true, _ = example_corpus("IOB2")
    for scheme in SCHEMES:
        _, labels, _ = example_corpus(scheme)
        decoded = ner.tags_to_entities(labels, scheme=scheme, mode="strict")
        assert decoded == ner.tags_to_entities(y_true, scheme="IOB2", mode="strict"), scheme
    records = ner.tags_to_records(y_true, tokens=tokens, ids=["dl-1", "work-1"], scheme="IOB2", mode="strict")
    # character spans over the tokens joined by spaces: the token sequence of "Emily Brown." is there
    assert records[0]["text"] == " ".join(tokens[0])
    assert ("Emily Brown.", "person") in [(records[0]["text"][s:e], label) for s, e, label in records[0]["labels"]]


def test_evaluate_takes_token_labels():
    tokens, y_true, models = example_corpus("IOB2")
    y_pred = models["spacy"]
    as_records = lambda labels: [{"id": i, "tokens": words, "tags": tags}
                                 for i, (words, tags) in enumerate(zip(tokens, labels))]
    from_tags = ner.evaluate(as_records(y_true), as_records(y_pred), label_similarity="exact")
    as_tuples = ner.evaluate(ner.tags_to_records(y_true, tokens=tokens), ner.tags_to_records(y_pred, tokens=tokens),
                             label_similarity="exact")
    assert from_tags.semeval == as_tuples.semeval
    assert from_tags.dmberta == as_tuples.dmberta
    # token offsets without tokens (no text on either side), and the named format
    plain = ner.evaluate(y_true, y_pred, format="tags:IOB2:strict", label_similarity="exact")
    assert plain.semeval["strict"] == as_tuples.semeval["strict"]
    assert ner.detect_format(["B-PER", "O"]) == "tags"
    assert ner.detect_format({"tokens": ["a"], "tags": ["O"]}) == "tags"
    assert ner.to_entities(["O", "B-PER", "I-PER"]) == [ner.Entity(1, 3, "PER")]
    assert ner.to_entities({"tokens": ["Hi", "Emily", "Brown"], "tags": ["O", "B-PER", "I-PER"]}) == \
        [ner.Entity(3, 14, "PER", "Emily Brown")]


# ---------------------------------------------------------------- CoNLL files


@pytest.mark.slow  # runs the seqeval reference
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(corpus=corpora("IOB"), words=st.lists(st.from_regex(r"[A-Za-z0-9.,#]{1,6}", fullmatch=True), min_size=1))
def test_conll_round_trip(tmp_path, corpus, words):
    y_true, y_pred = corpus
    keep = [i for i, s in enumerate(y_true) if s]  # a sentence has at least one token
    if not keep:
        return
    y_true, y_pred = [y_true[i] for i in keep], [y_pred[i] for i in keep]
    tokens = [[words[j % len(words)] for j in range(len(s))] for s in y_true]
    path = tmp_path / "round.conll"
    ner.write_conll(str(path), tokens, y_true, y_pred)
    gold = ner.read_conll(str(path), tag_column=1)
    pred = ner.read_conll(str(path))
    assert (gold.tokens, gold.tags, pred.tags, gold.columns) == (tokens, y_true, y_pred, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rapidscore.RapidscoreWarning)  # odd labels such as O-PER
        assert_same_report(ner.conll_report(str(path)).to_dict(), ours_dict(y_true, y_pred))


def test_conll_docstart_columns_and_gzip(tmp_path):
    text = ("-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\n"
            "-DOCSTART- -X- -X- O\nPeter NNP B-NP B-PER\nBlackburn NNP I-NP I-PER\n\n\n")
    path = tmp_path / "train.txt.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write(text)
    data = ner.read_conll(str(path))
    assert data.tokens == [["EU", "rejects"], ["Peter", "Blackburn"]]
    assert data.tags == [["B-ORG", "O"], ["B-PER", "I-PER"]]
    assert data.lines == [3, 7]
    assert ner.read_conll(str(path), tag_column=2).tags == [["B-NP", "B-VP"], ["B-NP", "I-NP"]]
    tabs = tmp_path / "tabs.tsv"
    tabs.write_text("New York\tB-LOC\nis\tO\n", encoding="utf-8")
    assert ner.read_conll(str(tabs), separator="\t").tokens == [["New York", "is"]]


@pytest.mark.parametrize("content, options, message", [
    ("EU B-ORG\nrejects\n", {}, r"bad\.conll:2: 1 column\(s\), expected 2 \(as on line 1\)"),
    ("EU B-ORG\n\nrejects O x\n", {}, r"bad\.conll:3: 3 column\(s\), expected 2"),
    ("EU B-ORG\n", {"tag_column": 3}, r"bad\.conll:1: tag_column 3 is out of range"),
    ("\n-DOCSTART- O\n\n", {}, r"bad\.conll: no sentences"),
    ("EU\t\n", {"separator": "\t"}, r"bad\.conll:1: empty label"),
])
def test_bad_conll_lines_name_file_and_line(tmp_path, content, options, message):
    path = tmp_path / "bad.conll"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(TagError, match=message):
        ner.read_conll(str(path), **options)


def test_bad_conll_bytes_and_missing_file(tmp_path):
    path = tmp_path / "latin.conll"
    path.write_bytes("Zürich B-LOC\n".encode("latin-1"))
    with pytest.raises(TagError, match=r"latin\.conll: not UTF-8"):
        ner.read_conll(str(path))
    with pytest.raises(TagError, match=r"missing\.conll: cannot read"):
        ner.read_conll(str(tmp_path / "missing.conll"))


@pytest.mark.slow  # runs the seqeval reference
def test_cli_prints_seqevals_report(tmp_path, capsys):
    tokens, y_true, models = example_corpus("IOB2")
    gold, pred, both = tmp_path / "gold.conll", tmp_path / "spacy.conll", tmp_path / "both.conll"
    ner.write_conll(str(gold), tokens, y_true)
    ner.write_conll(str(pred), tokens, models["spacy"])
    ner.write_conll(str(both), tokens, y_true, models["spacy"])
    assert main(["ner", "--gold", str(gold), "--pred", f"spacy={pred}", "--scheme", "IOB2", "--strict",
                 "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    expected = seqeval_dict(y_true, models["spacy"], mode="strict", scheme=seqeval_scheme.IOB2)
    assert_same_report(document["spacy"], expected)
    assert main(["ner", "--gold", str(both), "--scheme", "auto", "-q"]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert capsys.readouterr().out.strip() == \
            seqeval_metrics.classification_report(y_true, models["spacy"]).strip()
    short = tmp_path / "short.conll"
    ner.write_conll(str(short), tokens[:1], y_true[:1])
    assert main(["ner", "--gold", str(gold), "--pred", f"m={short}", "--scheme", "IOB2"]) == 2
    assert "short.conll: 1 sentences, the gold file" in capsys.readouterr().err
    assert main(["ner", "--gold", str(gold), "--pred", f"m={pred}", "--scheme", "IOB9"]) == 2
    assert "unknown tagging scheme 'IOB9'" in capsys.readouterr().err


# ---------------------------------------------------------------- errors


def test_errors_name_the_bad_value():
    ok = [["B-PER", "O"]]
    with pytest.raises(TagError, match=r"unknown tagging scheme 'IOB3'"):
        ner.tag_report(ok, ok, scheme="IOB3")
    with pytest.raises(TagError, match=r"mode must be None .* or 'strict', got 'exact'"):
        ner.tag_report(ok, ok, mode="exact")
    with pytest.raises(TagError, match=r"sequence 1: y_true has 2 labels, y_pred has 3"):
        ner.tag_report([["O"], ["O", "O"]], [["O"], ["O", "O", "O"]])
    with pytest.raises(TagError, match=r"y_true has 1 sequences, y_pred has 2"):
        ner.tag_report(ok, ok + ok)
    with pytest.raises(TagError, match=r"y_true\[0\] is a string"):
        ner.tag_report(["B-PER", "O"], ["B-PER", "O"])
    with pytest.raises(TagError, match=r"y_pred\[0\]\[1\]: a label must be a non-empty string, got ''"):
        ner.tag_report(ok, [["B-PER", ""]])
    with pytest.raises(TagError, match=r"y_true\[0\]\[0\]: a label must be a non-empty string, got 3"):
        ner.tag_report([[3]], [["O"]])
    with pytest.raises(TagError, match=r"no sequences"):
        ner.tag_report([], [])
    with pytest.raises(TagError, match=r"zero_division must be 0 or 1"):
        ner.tag_report(ok, ok, zero_division="warn")
    with pytest.raises(TagError, match=r"y_true\[0\]\[0\]: label 'PER' has no scheme prefix"):
        ner.tag_report([["PER"]], [["O"]], mode="strict")
    with pytest.raises(TagError, match=r"cannot detect the tagging scheme from the prefixes \['O'\]"):
        ner.tag_report([["O"]], [["O"]], mode="strict")
    with pytest.raises(TagError, match=r"labels\[1\]: label 'S-PER' is not allowed in IOB2"):
        ner.decode_tags(["O", "S-PER"], scheme="IOB2", mode="strict")
    with pytest.raises(TagError, match=r"strict' needs a scheme"):
        ner.decode_tags(["O"], mode="strict")
    with pytest.raises(TagError, match=r"sequence 0: 1 tokens for 2 labels"):
        ner.tags_to_records([["B-PER", "O"]], tokens=[["John"]])
    with pytest.raises(TagError, match=r"record 4: .*not allowed in IOB2"):
        ner.to_entities(["S-PER"], format="tags:IOB2:strict", record=4)
    with pytest.raises(ValueError, match=r"unknown tagging scheme 'IOB9'"):
        ner.to_entities(["O"], format="tags:IOB9")
    with pytest.raises(TagError, match=r"gold\[0\]: token labels and a text but no 'tokens'"):
        ner.evaluate([{"id": 0, "text": "a b", "tags": ["B-PER", "O"]}], [{"id": 0, "tags": ["B-PER", "O"]}],
                     label_similarity="exact")
    for error in (TagError("x"),):
        assert isinstance(error, RapidscoreError) and isinstance(error, ValueError)
    assert rapidscore.TagError is TagError


def test_odd_labels_warn_once_in_the_default_mode():
    with pytest.warns(rapidscore.RapidscoreWarning, match=r"\['PER'\] seem not to be NE tags"):
        report = ner.tag_report([["PER", "O"]], [["PER", "O"]])
    assert list(report.per_type) == ["ER"]  # seqeval's reading: prefix 'P', type 'ER'


def test_bare_labels_against_a_text_are_refused_not_scored_in_the_wrong_offsets():
    """Gold with tokens has character offsets; bare labels on the other side have token offsets:
    scoring them together would be silently wrong, so it is an error naming the record."""
    from rapidscore.ner import evaluate
    from rapidscore.ner.tags import TagError

    gold = [{"id": "a", "tokens": ["John", "lives", "in", "Paris"], "tags": ["B-PER", "O", "O", "B-LOC"]}]
    with pytest.raises(TagError, match="record 'a': bare token labels"):
        evaluate(gold, [{"id": "a", "tags": ["B-PER", "O", "O", "B-LOC"]}], label_similarity="exact")
    with_tokens = [{"id": "a", "tokens": ["John", "lives", "in", "Paris"], "tags": ["B-PER", "O", "O", "B-LOC"]}]
    assert evaluate(gold, with_tokens, label_similarity="exact").semeval["strict"]["f1"] == 1.0
