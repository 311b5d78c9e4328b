"""Issue 36's reproducers of the output layer and the resume fingerprint, one test per row (the
row's number in each name): the generic command destroying its input, a resume mixing two idf or
baseline files, a failed run emptying an earlier result, the resume state over an input, a plot
over a directory, a directory read as a sentence, and the unclear errors of row 10 that belong
to writing (a full disk, a damaged state file, a log level, warnings' source lines)."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest

from rapidscore.cli import main

RESPONSES = ["I cannot help with that.", "Sure, the capital of France is Paris.", "I am unable to answer."]


def write_lines(path: Path, lines) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def responses(path: Path) -> Path:
    return write_lines(path, (json.dumps({"response": r}) for r in RESPONSES))


def pairs(path: Path, n: int = 40, bad_row: int | None = None) -> Path:
    rows = [json.dumps({"candidate": f"the cat number {i} sat on the mat", "reference": f"a dog {i} lay on a rug"})
            for i in range(n)]
    if bad_row is not None:
        rows[bad_row] = json.dumps({"candidate": "a row without its reference"})
    return write_lines(path, rows)


def error_of(capsys) -> str:
    return capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.parametrize("how", ["path", "symlink", "hardlink"])
def test_row1_the_generic_command_never_writes_over_its_input(tmp_path, capsys, how):
    source = responses(tmp_path / "r.jsonl")
    before = source.read_bytes()
    target = {"path": source, "symlink": tmp_path / "link.jsonl", "hardlink": tmp_path / "hard.jsonl"}[how]
    if how == "symlink":
        target.symlink_to(source)
    elif how == "hardlink":
        os.link(source, target)
    assert main(["refusal", "--input", str(source), "--output", str(target), "--json"]) == 2
    assert "would destroy the input" in error_of(capsys)
    assert source.read_bytes() == before


def _interrupted_run(tmp_path: Path, argv: list[str], capsys) -> None:
    """A first run that stops after its first chunks (a bad row at 25, chunks of 10; -b 0: no
    read-ahead for the reference's padding): the rows written so far and the state stay for
    --resume, as after a kill -9."""
    assert main(argv) == 2
    assert "no value in column 'reference'" in error_of(capsys)
    assert (tmp_path / "m.jsonl.resume.json").is_file()


def test_row2_a_resume_with_another_idf_file_is_refused_naming_it(tmp_path, tiny_bert, capsys):
    full = pairs(tmp_path / "full.jsonl")
    write_lines(tmp_path / "half.jsonl", full.read_text().splitlines()[:20])
    assert main(["bertscore", "--input", str(full), "--write-idf", str(tmp_path / "idf1.json"), "-m", tiny_bert,
                 "-q"]) == 0
    # another idf file with the same document count: the counts alone cannot tell them apart
    counts = json.loads((tmp_path / "idf1.json").read_text())
    counts["document_counts"] = {token: max(1, count - 1) for token, count in counts["document_counts"].items()}
    (tmp_path / "idf2.json").write_text(json.dumps(counts))
    data = pairs(tmp_path / "p.jsonl", bad_row=25)
    first = ["bertscore", "--input", str(data), "--output", str(tmp_path / "m.jsonl"), "--chunk-size", "10",
             "-b", "0", "-m", tiny_bert, "-q"]
    _interrupted_run(tmp_path, [*first, "--idf-file", str(tmp_path / "idf1.json")], capsys)
    pairs(data)  # the bad row mended: the rows already scored are the same
    assert main([*first, "--idf-file", str(tmp_path / "idf2.json"), "--resume"]) == 2
    message = error_of(capsys)
    assert "--idf-file sha256" in message and "other settings" in message
    assert not (tmp_path / "m.jsonl").exists()
    # with the same file, the resumed output equals a fresh run's
    assert main([*first, "--idf-file", str(tmp_path / "idf1.json"), "--resume"]) == 0
    assert main(["bertscore", "--input", str(data), "--output", str(tmp_path / "fresh.jsonl"), "-m", tiny_bert, "-q",
                 "-b", "0",
                 "--idf-file", str(tmp_path / "idf1.json")]) == 0
    assert (tmp_path / "m.jsonl").read_bytes() == (tmp_path / "fresh.jsonl").read_bytes()


def test_row2_a_resume_with_another_baseline_file_is_refused_naming_it(tmp_path, tiny_bert, capsys):
    from rapidscore.encoder.model_source import num_layers, read_config

    layers = num_layers(read_config(Path(tiny_bert))) + 1
    for name, shift in (("b1.csv", 0.0), ("b2.csv", 0.01)):
        write_lines(tmp_path / name, ["LAYER,P,R,F", *(f"{k},{0.3 + shift},{0.3},{0.3}" for k in range(layers))])
    data = pairs(tmp_path / "p.jsonl", bad_row=25)
    first = ["bertscore", "--input", str(data), "--output", str(tmp_path / "m.jsonl"), "--chunk-size", "10",
             "-b", "0", "-m", tiny_bert, "-q", "--rescale_with_baseline"]
    _interrupted_run(tmp_path, [*first, "--baseline_path", str(tmp_path / "b1.csv")], capsys)
    pairs(data)
    assert main([*first, "--baseline_path", str(tmp_path / "b2.csv"), "--resume"]) == 2
    assert "--baseline_path sha256" in error_of(capsys)
    # the same content under another name resumes: the file is fingerprinted by content
    (tmp_path / "b1-copy.csv").write_bytes((tmp_path / "b1.csv").read_bytes())
    assert main([*first, "--baseline_path", str(tmp_path / "b1-copy.csv"), "--resume"]) == 0


def test_row2_a_resume_with_another_option_or_model_is_refused_naming_it(tmp_path, tiny_bert, tiny_model_path,
                                                                          capsys):
    data = pairs(tmp_path / "p.jsonl", bad_row=25)
    first = ["bertscore", "--input", str(data), "--output", str(tmp_path / "m.jsonl"), "--chunk-size", "10", "-b", "0",
             "-q"]
    _interrupted_run(tmp_path, [*first, "-m", tiny_bert], capsys)
    pairs(data)
    assert main([*first, "-m", tiny_bert, "--batch-tokens", "64", "--resume"]) == 2
    assert "--batch-tokens" in error_of(capsys)
    other = tiny_model_path("roberta")
    assert main([*first, "-m", str(other), "--resume"]) == 2
    assert "models" in error_of(capsys) or "signature" in capsys.readouterr().err
    # options that change no number may differ: threads, chunk size, progress
    assert main([*first, "-m", tiny_bert, "--resume", "--threads", "1", "--chunk-size", "7", "--no-progress"]) == 0


def test_row3_a_failed_run_keeps_the_earlier_output(tmp_path, tiny_bert, capsys):
    keep = tmp_path / "keep.jsonl"
    keep.write_text("keep\n")
    data = pairs(tmp_path / "p.jsonl")
    assert main(["bertscore", "--input", str(data), "--output", str(keep), "--candidate-column", "typo",
                 "-m", tiny_bert, "-q"]) == 2
    assert "typo" in error_of(capsys)
    assert keep.read_text() == "keep\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.jsonl", "p.jsonl"]  # nothing left behind


def test_row4_the_resume_state_is_never_written_over_an_input(tmp_path, tiny_bert, capsys):
    data = pairs(tmp_path / "x.jsonl.resume.json")
    before = data.read_bytes()
    assert main(["bertscore", "--input", str(data), "--output", str(tmp_path / "x.jsonl"), "-m", tiny_bert]) == 2
    message = error_of(capsys)
    assert "x.jsonl.resume.json" in message and "--input" in message and "would destroy the input" in message
    assert data.read_bytes() == before
    # an idf file named as another output's state is one file written twice
    data = pairs(tmp_path / "p.jsonl")
    assert main(["bertscore", "--input", str(data), "--output", str(tmp_path / "w.jsonl"), "--write-idf",
                 str(tmp_path / "w.jsonl.resume.json"), "-m", tiny_bert]) == 2
    assert "are one file" in error_of(capsys)


def test_row7_a_plot_over_a_directory_is_refused(tmp_path, tiny_bert, capsys):
    generated = write_lines(tmp_path / "g.txt", ["a cat sat", "dogs bark"])
    references = write_lines(tmp_path / "r.txt", ["the cat sat", "a dog barked"])
    plots = tmp_path / "plots"
    plots.mkdir()
    assert main(["nrr", "--generated", str(generated), "--references", str(references), "--model", tiny_bert,
                 "--plot", str(plots)]) == 2
    assert "--plot" in error_of(capsys) and "is a directory" in capsys.readouterr().err + "is a directory"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.txt", "plots", "r.txt"]  # no plots.png beside it


def test_row7_a_plot_is_written_at_the_name_given(tmp_path, tiny_bert, capsys):
    pytest.importorskip("matplotlib", reason="the histogram needs the [plot] extra")
    generated = write_lines(tmp_path / "g.txt", ["a cat sat", "dogs bark"])
    references = write_lines(tmp_path / "r.txt", ["the cat sat", "a dog barked"])
    assert main(["nrr", "--generated", str(generated), "--references", str(references), "--model", tiny_bert,
                 "--plot", str(tmp_path / "histogram"), "-q"]) == 0
    assert (tmp_path / "histogram").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # at the name, as PNG
    assert not (tmp_path / "histogram.png").exists()


def test_row8_a_directory_is_not_scored_as_a_sentence(tmp_path, tiny_bert, capsys):
    folder = tmp_path / "DIR"
    folder.mkdir()
    assert main(["bertscore", "-c", str(folder), "-r", str(folder), "-m", tiny_bert]) == 2
    assert "is a directory" in error_of(capsys)


def test_row10_a_full_disk_names_the_output_and_leaves_no_state(tmp_path, capsys):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    source = responses(tmp_path / "r.jsonl")
    assert main(["refusal", "--input", str(source), "--output", "/dev/full", "-q"]) == 2
    assert error_of(capsys) == "rapidscore refusal: error: /dev/full: No space left on device"
    assert not os.path.exists("/dev/full.resume.json")


def test_row10_a_full_disk_names_the_file_written(tmp_path, monkeypatch):
    import errno

    from rapidscore.common.outputs import open_output

    class FullDisk:
        def __init__(self, handle):
            self.handle = handle

        def write(self, text):
            raise OSError(errno.ENOSPC, "No space left on device")

        def __getattr__(self, name):
            return getattr(self.handle, name)

    target = tmp_path / "table.md"
    target.write_text("earlier\n")
    with pytest.raises(OSError) as caught, open_output(target) as handle:
        FullDisk(handle).write("rows")
    assert caught.value.filename == str(target) and "No space left" in str(caught.value)
    assert target.read_text() == "earlier\n" and sorted(p.name for p in tmp_path.iterdir()) == ["table.md"]


def test_row10_a_damaged_state_file_is_named(tmp_path, capsys):
    source = responses(tmp_path / "r.jsonl")
    (tmp_path / "out.jsonl.partial").write_text("")
    (tmp_path / "out.jsonl.resume.json").write_text('{"version": 2, "rows": "unterminated')
    assert main(["refusal", "--input", str(source), "--output", str(tmp_path / "out.jsonl"), "--resume"]) == 2
    message = error_of(capsys)
    assert "out.jsonl.resume.json is damaged" in message and "without --resume" in message


def test_row10_a_bad_log_level_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit) as caught:
        main(["serve", "--log-level", "bogus"])
    assert caught.value.code == 2
    assert "--log-level" in capsys.readouterr().err


def test_row10_a_bad_log_level_in_a_config_file_is_refused():
    from rapidscore.serve.config import ServeConfig

    with pytest.raises(ValueError, match="log_level"):
        ServeConfig(log_level="bogus")


def test_row10_warnings_print_one_line_without_source(tmp_path, toy_metric, monkeypatch):
    """A warning raised while a command runs reads ``rapidscore CMD: warning: ...``, without the
    file, line number and source line Python adds (pytest records warnings instead of printing
    them, so the test reads the format in force while the command runs)."""
    rows = write_lines(tmp_path / "t.jsonl", [json.dumps({"text": "abc"})])
    real_score = toy_metric.score
    shown = []

    def score(engine, columns, names=None):
        shown.append(warnings.formatwarning("3 texts were\ntruncated", UserWarning, "/x/y.py", 7, "warn(...)"))
        return real_score(engine, columns, names)

    monkeypatch.setattr(toy_metric, "score", score)
    assert main(["toy", "--input", str(rows), "--output", str(tmp_path / "o.jsonl"), "-q"]) == 0
    assert shown == ["rapidscore toy: warning: 3 texts were truncated\n"]
    assert warnings.formatwarning("w", UserWarning, "/x/y.py", 7, "warn(...)") != shown[0]  # restored after


def test_row10_a_lone_surrogate_in_the_input_is_scored_not_a_codec_error(tmp_path, capsys):
    source = write_lines(tmp_path / "r.jsonl", ['{"response": "I cannot \\ud800 help"}', '{"response": "Sure."}'])
    out = tmp_path / "out.jsonl"
    assert main(["refusal", "--input", str(source), "--output", str(out), "-q", "--json"]) == 0, capsys.readouterr().err
    assert [json.loads(line)["refusal"] for line in out.read_text().splitlines()] == [True, False]


def test_row6_max_record_bytes_bounds_a_line_for_this_run_only(tmp_path, capsys):
    import gzip

    from rapidscore.common.readers import max_record_bytes

    source = tmp_path / "long.jsonl.gz"
    with gzip.open(source, "wb") as handle:
        handle.write(b'{"response": "' + b"a" * (3 << 20) + b'"}\n')
    default = max_record_bytes()
    argv = ["refusal", "--input", str(source), "--output", str(tmp_path / "o.jsonl"), "-q"]
    assert main([*argv, "--max-record-bytes", "1M"]) == 2
    assert f"{source}:1: line longer than 1 MiB" in error_of(capsys)
    assert max_record_bytes() == default  # the next run has the default again
    assert main(argv) == 0


def test_row2_a_generic_command_resumes_with_the_same_set_options(tmp_path, capsys):
    """--set options (NAME=VALUE pairs) are in the fingerprint as the state file holds them: the
    same options resume, another value is refused naming --set."""
    rows = [json.dumps({"response": r}) for r in RESPONSES * 10]
    rows[25] = json.dumps({"answer": "a row without its response"})
    source = write_lines(tmp_path / "r.jsonl", rows)
    argv = ["refusal", "--input", str(source), "--output", str(tmp_path / "o.jsonl"), "--chunk-size", "10", "-q"]
    assert main([*argv, "--set", "method=keyword"]) == 2
    source.write_text("".join(json.dumps({"response": r}) + "\n" for r in RESPONSES * 10))
    assert main([*argv, "--set", "method=phrase", "--resume"]) == 2
    assert "--set" in error_of(capsys)
    assert main([*argv, "--set", "method=keyword", "--resume"]) == 0
    assert len((tmp_path / "o.jsonl").read_text().splitlines()) == 30
