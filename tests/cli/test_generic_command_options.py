"""The generic command's flags come from the metric's declaration (issue 37): each request
option a metric declares (``Metric.request_options``) is a flag of ``rapidscore METRIC``, typed
and bounded as declared, passed to ``metric.build``; a run resumed under another value is
refused naming the flag. Metrics registered in this process, no library file changed."""

from __future__ import annotations

import json

import pytest

from rapidscore.cli import main
from rapidscore.common.metric import Column, Metric, RequestOption


def _texts(tmp_path, lines=("ab", "c")):
    source = tmp_path / "texts.txt"
    source.write_text("".join(line + "\n" for line in lines))
    return source


def test_declared_option_is_a_flag(toy_metric, tmp_path, capsys):
    source = _texts(tmp_path)
    out = tmp_path / "out.jsonl"
    assert main(["toy", "--input", str(source), "-o", str(out), "--suffix", "?", "-q"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row["shout"] for row in rows] == ["AB?", "C?"] and [row["length"] for row in rows] == [3, 2]
    assert main(["shout", "-i", str(source), "-q"]) == 0  # not given: the build's default
    assert [json.loads(line)["shout"] for line in capsys.readouterr().out.splitlines()] == ["AB!", "C!"]
    with pytest.raises(SystemExit):
        main(["toy", "--help"])
    assert "--suffix" in capsys.readouterr().out


def test_a_flag_and_set_for_one_option_is_an_error(toy_metric, tmp_path, capsys):
    source = _texts(tmp_path)
    assert main(["toy", "-i", str(source), "--suffix", "?", "--set", "suffix=!", "-q"]) == 2
    err = capsys.readouterr().err
    assert "--suffix and --set suffix=... both set 'suffix'" in err


def test_a_resumed_run_under_another_value_is_refused_naming_the_flag(toy_metric, tmp_path, capsys):
    source = tmp_path / "texts.jsonl"
    source.write_text("".join(json.dumps({"text": text}) + "\n" for text in ["a", "b", "c", "d", 5]))
    out = tmp_path / "out.jsonl"
    args = ["toy", "-i", str(source), "-o", str(out), "--chunk-size", "2", "-q"]
    assert main([*args, "--suffix", "?"]) == 2  # row 4 fails the run after two chunks were written
    assert "item 4: the text must be a str" in capsys.readouterr().err
    assert (tmp_path / "out.jsonl.resume.json").exists()  # the options are in its fingerprint
    assert main([*args, "--suffix", "!", "--resume"]) == 2
    err = capsys.readouterr().err
    assert "other settings" in err and '--suffix: "?" then, "!" now' in err


class Repeat(Metric):
    """A metric with a typed, bounded option, a choice and a bool."""

    name = "repeat-toy"
    inputs = (Column("text", "text", "any text"),)
    outputs = ("text",)
    request_options = (RequestOption("times", int, 1, "repeat each text", minimum=1, maximum=3),
                       RequestOption("case", str, "same", "letter case", choices=("same", "upper")),
                       RequestOption("reverse", bool, False, "reverse each text"),
                       RequestOption("json", bool, False, "a name the command's own --json has"))

    def build(self, *, times: int = 1, case: str = "same", reverse: bool = False, json: bool = False):
        return {"times": times, "case": case, "reverse": reverse}

    def score(self, engine, columns, names=None):
        texts = [text * engine["times"] for text in columns["text"]]
        texts = [t.upper() if engine["case"] == "upper" else t for t in texts]
        return {"text": [t[::-1] if engine["reverse"] else t for t in texts]}


@pytest.fixture
def repeat_metric():
    from rapidscore.metrics import register, unregister

    metric = register(Repeat())
    yield metric
    unregister(metric.name)


def test_typed_options_and_bad_values_name_the_flag(repeat_metric, tmp_path, capsys):
    source = _texts(tmp_path)
    assert main(["repeat-toy", "-i", str(source), "--times", "2", "--case", "upper", "--reverse", "-q"]) == 0
    assert [json.loads(line)["text"] for line in capsys.readouterr().out.splitlines()] == ["BABA", "CC"]
    assert main(["repeat-toy", "-i", str(source), "--no-reverse", "-q"]) == 0
    assert [json.loads(line)["text"] for line in capsys.readouterr().out.splitlines()] == ["ab", "c"]
    for flags, message in [(["--times", "x"], "argument --times: invalid int value: 'x'"),
                           (["--times", "4"], "argument --times: must be >= 1 and <= 3, got 4"),
                           (["--case", "lower"], "argument --case: invalid choice: 'lower'")]:
        with pytest.raises(SystemExit) as exited:
            main(["repeat-toy", "-i", str(source), *flags])
        assert exited.value.code == 2
        assert message in capsys.readouterr().err
    # an option whose flag the command already has stays a --set name (the command's --json wins)
    assert main(["repeat-toy", "-i", str(source), "--set", "json=true", "-q"]) == 0
