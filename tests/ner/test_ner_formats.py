"""Format adapters, normalisation (trim, re-anchor, sort, de-duplicate) and record files."""

import json
from types import SimpleNamespace

import pytest

from rapidscore.ner import Entity, normalize_entities, read_combined_jsonl, read_jsonl, to_entities
from rapidscore.ner.records import join_by_id, to_records

TEXT = "Driver's license number D1234567 was issued to Emily Brown."  # D1234567 = 24:32, Emily Brown = 47:58


def spans(entities):
    return [(e.start, e.end, e.label) for e in entities]


# ---------------------------------------------------------------- adapters


def test_seed_keys_split_from_the_right():
    ents = to_entities({"Seattle, WA:52:63": "address", "12:30 pm:5:13": "time"})
    assert [(e.surface, e.start, e.end, e.label) for e in ents] == [
        ("Seattle, WA", 52, 63, "address"), ("12:30 pm", 5, 13, "time")]


@pytest.mark.parametrize(
    "key, message",
    [
        ("John:0", r"record 'r1': malformed entity key 'John:0': expected 'surface:start:end'"),
        ("John:a:b", r"record 'r1': malformed entity key 'John:a:b': start and end must be integers"),
        ("John:4:0", r"record 'r1': entity 'John:4:0' ends before it starts"),
        ("John:-1:3", r"record 'r1': entity 'John:-1:3' has a negative offset"),
    ],
)
def test_malformed_seed_keys_name_the_record(key, message):
    with pytest.raises(ValueError, match=message):
        to_entities({key: "person"}, record="r1")
    with pytest.raises(ValueError, match=message):
        to_entities({key: "person"}, format="seed", record="r1")


def test_hf_aggregated_and_token_level():
    grouped = [{"entity_group": "PER", "score": 0.9, "word": "emily brown", "start": 47, "end": 58}]
    assert spans(to_entities(grouped)) == [(47, 58, "PER")]
    tokens = [
        {"entity": "B-PER", "score": 0.9, "index": 9, "word": "Emily", "start": 47, "end": 52},
        {"entity": "I-PER", "score": 0.7, "index": 10, "word": "Brown", "start": 53, "end": 58},
        {"entity": "B-ID", "score": 0.8, "index": 4, "word": "D", "start": 24, "end": 25},
        {"entity": "I-ID", "score": 0.8, "index": 5, "word": "##123", "start": 25, "end": 28},
        {"entity": "B-ID", "score": 0.8, "index": 6, "word": "##4567", "start": 28, "end": 32},
    ]
    ents = to_entities(tokens)
    assert spans(ents) == [(24, 28, "ID"), (28, 32, "ID"), (47, 58, "PER")]
    assert ents[2].score == pytest.approx(0.8)


def test_gliner_presidio_nervaluate_prodigy_spacy_tuples():
    gliner = [{"start": 47, "end": 58, "text": "Emily Brown", "label": "person", "score": 0.95}]
    assert to_entities(gliner) == [Entity(47, 58, "person", "Emily Brown", 0.95)]
    presidio = [{"entity_type": "PERSON", "start": 47, "end": 58, "score": 0.85, "analysis_explanation": None}]
    assert spans(to_entities(presidio)) == [(47, 58, "PERSON")]
    presidio_objects = [SimpleNamespace(entity_type="PERSON", start=47, end=58, score=0.85)]
    assert spans(to_entities(presidio_objects)) == [(47, 58, "PERSON")]
    assert spans(to_entities([{"label": "PER", "start": 47, "end": 58}])) == [(47, 58, "PER")]
    prodigy = {"text": TEXT, "spans": [{"start": 47, "end": 58, "label": "PER", "token_start": 9}]}
    assert spans(to_entities(prodigy)) == [(47, 58, "PER")]
    spacy_json = {"text": TEXT, "ents": [{"start": 47, "end": 58, "label": "PERSON"}]}
    assert spans(to_entities(spacy_json)) == [(47, 58, "PERSON")]
    span = SimpleNamespace(start_char=47, end_char=58, label_="PERSON", text="Emily Brown")
    assert to_entities(SimpleNamespace(ents=[span])) == [Entity(47, 58, "PERSON", "Emily Brown")]
    assert spans(to_entities([(47, 58, "PER"), (24, 32, "ID", 0.5)])) == [(47, 58, "PER"), (24, 32, "ID")]
    assert to_entities(None) == [] and to_entities({}) == [] and to_entities([]) == []


def test_unknown_format_and_bad_values_are_errors():
    with pytest.raises(ValueError, match="record 7: unknown entity format"):
        to_entities([{"begin": 1, "stop": 2}], record=7)
    with pytest.raises(ValueError, match="record 7: unknown entity format"):
        to_entities("John:0:4", record=7)
    with pytest.raises(ValueError, match="unknown entity format 'conll'"):
        to_entities([], format="conll")
    with pytest.raises(ValueError, match="start must be an integer"):
        to_entities([{"label": "PER", "start": "3", "end": 5}], record=1)
    with pytest.raises(ValueError, match="label must be a non-empty string"):
        to_entities([(0, 3, "")], record=1)
    with pytest.raises(ValueError, match="record 1: entity .* has no label \\(expected 'entity_type'\\)"):
        to_entities([{"label": "PER", "start": 0, "end": 3}], format="presidio", record=1)


# ---------------------------------------------------------------- normalisation


def test_seed_example_is_repaired_as_expected():
    # Hand-derived from TEXT: gold offsets are one off (re-anchored), DeBERTa's spans carry a
    # leading space and a trailing full stop (trimmed).
    gold, repairs = normalize_entities(to_entities({"D1234567:23:31": "driver licence", "Emily Brown:46:57": "person"}), TEXT)
    assert spans(gold) == [(24, 32, "driver licence"), (47, 58, "person")]
    assert (repairs.reanchored, repairs.trimmed) == (2, 0)
    deberta, repairs = normalize_entities(to_entities({" D1234567:23:32": "pin", " Emily Brown.:46:59": "fullname"}), TEXT)
    assert spans(deberta) == [(24, 32, "pin"), (47, 58, "fullname")]
    assert (repairs.reanchored, repairs.trimmed) == (0, 2)


def test_reanchor_picks_the_nearest_occurrence():
    text = "Ann met Ann and Ann."
    ents, repairs = normalize_entities([Entity(9, 12, "P", "Ann")], text)  # occurrences at 0, 8, 16
    assert spans(ents) == [(8, 11, "P")] and repairs.reanchored == 1


def test_sort_and_deduplicate():
    ents, repairs = normalize_entities(
        [Entity(47, 58, "person"), Entity(24, 32, "id"), Entity(47, 58, "person"), Entity(47, 58, "name")], TEXT
    )
    assert spans(ents) == [(24, 32, "id"), (47, 58, "name"), (47, 58, "person")]
    assert repairs.duplicates == 1


def test_missing_surface_and_offsets_beyond_text():
    with pytest.raises(ValueError, match=r"record 'x': entity surface 'Bob' .* does not occur in the text"):
        normalize_entities([Entity(0, 3, "P", "Bob")], TEXT, record="x")
    with pytest.raises(ValueError, match=r"record 'x': entity \(50, 80, 'P'\) lies beyond the text"):
        normalize_entities([Entity(50, 80, "P")], TEXT, record="x")
    ents, repairs = normalize_entities([Entity(0, 3, "P", "Bob"), Entity(47, 58, "P")], TEXT, record="x",
                                       on_missing_surface="drop")
    assert spans(ents) == [(47, 58, "P")]
    assert repairs.dropped == 1 and repairs.dropped_entities == [("x", "Bob", 0, 3)]
    # A surface beyond the text that does occur in it is re-anchored, not rejected.
    ents, repairs = normalize_entities([Entity(70, 81, "P", "Emily Brown")], TEXT)
    assert spans(ents) == [(47, 58, "P")] and repairs.reanchored == 1


def test_punctuation_only_span_is_dropped_and_listed():
    ents, repairs = normalize_entities([Entity(58, 59, "P")], TEXT, record=3)  # "."
    assert ents == [] and repairs.dropped == 1 and repairs.trimmed == 1


# ---------------------------------------------------------------- records and files


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return str(path)


def test_jsonl_duplicated_and_missing_ids(tmp_path):
    path = write_jsonl(tmp_path / "g.jsonl", [{"id": 1, "text": "a", "labels": {}}, {"id": 1, "text": "b", "labels": {}}])
    with pytest.raises(ValueError, match=r"duplicated id 1 \(.*g.jsonl:1 and .*g.jsonl:2\)"):
        read_jsonl(path)
    path = write_jsonl(tmp_path / "n.jsonl", [{"text": "a", "labels": {}}])
    with pytest.raises(ValueError, match=r"n.jsonl:1: record has no 'id'"):
        read_jsonl(path)
    path = write_jsonl(tmp_path / "k.jsonl", [{"id": 1, "text": "a"}])
    with pytest.raises(ValueError, match=r"k.jsonl:1: no entities"):
        read_jsonl(path)
    (tmp_path / "bad.jsonl").write_text('{"id": 1,\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.jsonl:1: not valid JSON"):
        read_jsonl(str(tmp_path / "bad.jsonl"))


def test_join_by_id_reports_missing_extra_and_text_mismatch():
    gold = to_records([{"id": "a", "text": "x", "labels": {}}, {"id": "b", "text": "y", "labels": {}}])
    with pytest.raises(ValueError, match=r"model 'm': no prediction for gold id\(s\) \['b'\]"):
        join_by_id(gold, to_records([{"id": "a", "labels": {}}]), "m")
    with pytest.raises(ValueError, match=r"prediction id\(s\) \['c'\] not in the gold"):
        join_by_id(gold, to_records([{"id": "a", "labels": {}}, {"id": "b", "labels": {}}, {"id": "c", "labels": {}}]), "m")
    with pytest.raises(ValueError, match=r"id 'b': text differs"):
        join_by_id(gold, to_records([{"id": "a", "labels": {}}, {"id": "b", "text": "z", "labels": {}}]), "m")
    joined = join_by_id(gold, to_records([{"id": "b", "labels": [1]}, {"id": "a", "labels": [0]}]), "m")
    assert [r.entities for r in joined] == [[0], [1]]


def test_combined_file(tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [
        {"id": 1, "prompt": TEXT, "gold": {"Emily Brown:47:58": "person"}, "predictions": {"a": {}, "b": []}},
    ])
    gold, preds = read_combined_jsonl(path)
    assert gold[0].text == TEXT and sorted(preds) == ["a", "b"]
    path = write_jsonl(tmp_path / "d.jsonl", [
        {"id": 1, "gold": {}, "predictions": {"a": {}}}, {"id": 2, "gold": {}, "predictions": {"b": {}}},
    ])
    with pytest.raises(ValueError, match=r"d.jsonl:2: predictions name models \['b'\], expected \['a'\]"):
        read_combined_jsonl(path)
