"""The CLI's commands come from the metric registry (issue 27): a metric without a command of its
own (refusal, a metric added with ``rapidscore.metrics.register``) gets the generic one: rows of a
file in, one output row per input row out (resumable), totals on stderr or as JSON."""

from __future__ import annotations

import json

import pytest

from rapidscore.cli import main


def test_refusal_command_equals_detect_refusal(tmp_path, capsys):
    from rapidscore.abstention import detect_refusal

    responses = ["I'm sorry, I can't help with that.", "Paris is the capital.",
                 {"complete": "...", "answer": "I cannot answer that."}, "As an AI, I won't."] * 3
    source = tmp_path / "responses.jsonl"
    source.write_text("".join(json.dumps({"id": f"r{i}", "answer": r}) + "\n" for i, r in enumerate(responses)))
    out = tmp_path / "decisions.jsonl"
    assert main(["refusal", "-i", str(source), "-o", str(out), "--column", "response=answer", "--id-column", "id",
                 "--set", "method=keyword", "--chunk-size", "5", "--json", "-q"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    expected = detect_refusal(responses, "keyword").tolist()
    assert [r["refusal"] for r in rows] == expected
    assert [r["id"] for r in rows] == [f"r{i}" for i in range(len(responses))]
    assert [r["index"] for r in rows] == list(range(len(responses)))
    totals = json.loads(capsys.readouterr().out)
    assert totals["n_refusals"] == sum(expected) and totals["n_responses"] == len(responses)


def test_generic_command_errors_name_the_row_and_the_column(tmp_path, capsys):
    source = tmp_path / "responses.jsonl"
    source.write_text('{"response": "fine"}\n{"response": 3}\n')
    assert main(["refusal", "-i", str(source), "-q"]) == 2
    assert "item 1: response at position 1 must be a str" in capsys.readouterr().err
    assert main(["refusal", "-i", str(source), "--column", "answer=response", "-q"]) == 2
    assert "refusal has no input ['answer']" in capsys.readouterr().err
    source.write_text('{"text": "fine"}\n')
    assert main(["refusal", "-i", str(source), "-q"]) == 2
    assert "responses.jsonl:1: no column 'response' for the input 'response'" in capsys.readouterr().err


def test_a_registered_metric_has_a_command(toy_metric, tmp_path, capsys):
    source = tmp_path / "texts.txt"
    source.write_text("ab\nc\n")
    out = tmp_path / "out.csv"
    assert main(["shout", "-i", str(source), "-o", str(out), "--set", "suffix=?", "-q"]) == 0  # by its alias
    assert out.read_text().splitlines() == ["index,length,shout", "0,3,AB?", "1,2,C?"]
    assert main(["toy", "-i", str(source), "--set", "suffix=", "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert [json.loads(line)["shout"] for line in captured.out.splitlines()] == ["AB", "C"]
    assert "toy: rows 2, characters 3" in captured.err


@pytest.mark.parametrize("command", ["refusal", "nrr", "similarity"])
def test_metric_commands_have_help(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    assert "--threads" in capsys.readouterr().out
