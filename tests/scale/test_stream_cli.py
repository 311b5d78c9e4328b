"""The streaming command line: ``rapidscore bertscore --input/--output`` against the in-memory
scorer, every input and output format, and ``--resume`` after a SIGKILL part way."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys

import numpy as np
import pytest

from rapidscore.bertscore import BERTScore
from rapidscore.cli import main
from rapidscore.testing.streams import wait_for_rows

N = 120
CANDS = [f"candidate {i}: the {'quick ' * (i % 4)}brown fox {i % 7} jumps over a lazy dog" for i in range(N)]
REFS = [f"reference {i}: a {'slow ' * (i % 3)}red fox {i % 5} sleeps under the tree" for i in range(N)]
MULTI = [[r, CANDS[(i + 1) % N]] if i % 3 == 0 else r for i, r in enumerate(REFS)]


@pytest.fixture(scope="module")
def model(tiny_model_path) -> str:
    path = str(tiny_model_path("bert"))
    BERTScore(path, 2)  # export once, in this process, before any subprocess needs it
    return path


@pytest.fixture()
def pairs_file(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps({"id": f"row{i}", "candidate": c, "reference": r}) + "\n"
                            for i, (c, r) in enumerate(zip(CANDS, MULTI))))
    return path


def expected_scores(model, idf=False) -> np.ndarray:
    result = BERTScore(model, 2, idf=idf).score(CANDS, MULTI, reference_batch_size=64)  # the CLI's -b 64
    return np.stack([result.precision, result.recall, result.f1], axis=1)


def read_jsonl(path) -> list[dict]:
    return [json.loads(line) for line in open(path, encoding="utf-8")]


def scores_of(rows) -> np.ndarray:
    return np.array([[float(r["precision"]), float(r["recall"]), float(r["f1"])] for r in rows], np.float32)


def test_jsonl_csv_parquet_outputs_equal_the_in_memory_scores(model, pairs_file, tmp_path):
    expected = expected_scores(model)
    base = ["bertscore", "-m", model, "-l", "2", "--input", str(pairs_file), "--chunk-size", "16", "-q"]
    assert main(base + ["--output", str(tmp_path / "out.jsonl"), "--id-column", "id"]) == 0
    rows = read_jsonl(tmp_path / "out.jsonl")
    assert [r["index"] for r in rows] == list(range(N)) and rows[7]["id"] == "row7"
    assert np.array_equal(scores_of(rows), expected)
    assert main(base + ["--output", str(tmp_path / "out.csv")]) == 0
    with open(tmp_path / "out.csv", newline="") as handle:
        assert np.array_equal(scores_of(list(csv.DictReader(handle))), expected)
    assert main(base + ["--output", str(tmp_path / "out.parquet")]) == 0
    pandas = pytest.importorskip("pandas", reason="reading the Parquet output back")
    frame = pandas.read_parquet(tmp_path / "out.parquet")
    assert frame["index"].tolist() == list(range(N))
    assert np.array_equal(frame[["precision", "recall", "f1"]].to_numpy(np.float32), expected)
    assert not any(p.name.endswith((".resume.json", ".parts")) for p in tmp_path.iterdir())


def test_text_files_in_lockstep_and_idf(model, tmp_path):
    (tmp_path / "c.txt").write_text("\n".join(CANDS) + "\n")
    (tmp_path / "r.txt").write_text("\n".join(REFS) + "\n")
    out = tmp_path / "out.jsonl"
    args = ["bertscore", "-m", model, "-l", "2", "-c", str(tmp_path / "c.txt"), "-r", str(tmp_path / "r.txt"),
            "--chunk-size", "20", "-q", "--idf"]
    assert main(args + ["--output", str(out)]) == 0
    result = BERTScore(model, 2, idf=True).score(CANDS, REFS, reference_batch_size=64)
    assert np.array_equal(scores_of(read_jsonl(out))[:, 2], result.f1)
    # the idf file: written by one run, read by another
    assert main(args + ["--write-idf", str(tmp_path / "idf.json")]) == 0
    assert main(args[:-1] + ["--idf-file", str(tmp_path / "idf.json"), "--output", str(tmp_path / "o2.jsonl")]) == 0
    assert read_jsonl(tmp_path / "o2.jsonl") == read_jsonl(out)


def cli(*args, stdin=None, **kwargs):
    return subprocess.run([sys.executable, "-m", "rapidscore", "bertscore", *args], input=stdin,
                          capture_output=True, text=True, **kwargs)


def test_stdin_to_stdout(model, pairs_file):
    out = cli("-m", model, "-l", "2", "--input", "-", "--output", "-", "-q", stdin=pairs_file.read_text())
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert np.array_equal(scores_of(rows), expected_scores(model))


def test_a_killed_run_resumes_to_the_uninterrupted_output(model, pairs_file, tmp_path):
    lines = pairs_file.read_text().splitlines(keepends=True)
    args = ["-m", model, "-l", "2", "--input", "-", "--chunk-size", "10", "-q"]
    full = tmp_path / "full.jsonl"
    assert cli(*args, "--output", str(full), stdin="".join(lines)).returncode == 0

    out = tmp_path / "out.jsonl"
    # stdin is fed by hand, so the kill lands part way for certain: 60 rows in, none after (the
    # rows of -b 64's batches that are complete, 40 of them, can be written)
    proc = subprocess.Popen([sys.executable, "-m", "rapidscore", "bertscore", *args, "--output", str(out)],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None
    proc.stdin.write("".join(lines[:60]))
    proc.stdin.flush()
    done = wait_for_rows(tmp_path / "out.jsonl.resume.json", 40, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL and 40 <= done < N
    with open(out, "a", encoding="utf-8") as handle:  # a torn last line, as a crash mid-write leaves
        handle.write('{"index": 999, "precis')
    resumed = cli(*args, "--output", str(out), "--resume", stdin="".join(lines))
    assert resumed.returncode == 0, resumed.stderr
    assert out.read_bytes() == full.read_bytes()
    assert not (tmp_path / "out.jsonl.resume.json").exists()


@pytest.mark.slow  # three CLI processes, one killed part way: ~6 s on 2 cores
def test_resume_refuses_another_input_or_other_settings(model, pairs_file, tmp_path):
    lines = pairs_file.read_text().splitlines(keepends=True)
    out = tmp_path / "out.jsonl"
    args = ["-m", model, "-l", "2", "--input", "-", "--chunk-size", "10", "-q", "--output", str(out)]
    proc = subprocess.Popen([sys.executable, "-m", "rapidscore", "bertscore", *args],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None
    # a chunk is written once the pairs after it in its -b 64 batch are read: 60 rows (80 pairs) in
    proc.stdin.write("".join(lines[:60]))
    proc.stdin.flush()
    wait_for_rows(tmp_path / "out.jsonl.resume.json", 20, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    other = lines[1:] + lines[:1]
    refused = cli(*args, "--resume", stdin="".join(other))
    assert refused.returncode == 2 and "differ from those" in refused.stderr
    settings = cli(*[a if a != "2" else "1" for a in args], "--resume", stdin="".join(lines))
    assert settings.returncode == 2 and "other settings (-l: 2 then, 1 now; signature:" in settings.stderr
    assert "Traceback" not in refused.stderr + settings.stderr


def test_resume_without_state_and_bad_rows_exit_2(model, pairs_file, tmp_path, capsys):
    assert main(["bertscore", "-m", model, "--input", str(pairs_file), "--output", str(tmp_path / "o.jsonl"),
                 "--resume", "-q"]) == 2
    assert "no resume state" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"candidate": "a", "reference": "b"}\n{"candidate": "a", "reference": 5}\n')
    assert main(["bertscore", "-m", model, "--input", str(bad), "--output", str(tmp_path / "b.jsonl"), "-q"]) == 2
    assert f"{bad}:2: column 'reference' must hold a string" in capsys.readouterr().err
    missing = tmp_path / "missing.jsonl"
    missing.write_text('{"candidate": "a"}\n')
    assert main(["bertscore", "-m", model, "--input", str(missing), "--output", "-", "-q"]) == 2
    assert f"{missing}:1: no value in column 'reference'" in capsys.readouterr().err


def test_nrr_streams_the_decisions_of_negative_rejection(model, tmp_path):
    from rapidscore.nrr import negative_rejection

    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps({"generated": c, "reference": r}) + "\n" for c, r in zip(CANDS, MULTI)))
    out = tmp_path / "nrr.csv"
    assert main(["nrr", "--model", model, "--input", str(path), "--output", str(out), "--chunk-size", "25",
                 "--threshold", "0.6", "-q"]) == 0
    expected = negative_rejection(CANDS, MULTI, threshold=0.6, model=model)
    with open(out, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert np.array_equal(np.array([float(r["similarity"]) for r in rows], np.float32), expected.similarities)
    assert [r["rejected"] == "True" for r in rows] == expected.rejected.tolist()
    assert [int(r["best_reference"]) for r in rows] == expected.best_reference.tolist()


def test_bytes_that_are_not_utf8_name_their_line(model, tmp_path, capsys, monkeypatch):
    import io
    import sys

    content = b'{"candidate": "a", "reference": "b"}\n{"candidate": "caf\xe9", "reference": "b"}\n'
    bad = tmp_path / "latin1.jsonl"
    bad.write_bytes(content)
    assert main(["bertscore", "-m", model, "--input", str(bad), "--output", str(tmp_path / "o.jsonl"), "-q"]) == 2
    assert f"{bad}:2: not valid UTF-8 text: byte 0xe9" in capsys.readouterr().err
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(content)))
    assert main(["bertscore", "-m", model, "--input", "-", "--input-format", "jsonl", "--output",
                 str(tmp_path / "s.jsonl"), "-q"]) == 2
    assert "<stdin>:2: not valid UTF-8 text: byte 0xe9" in capsys.readouterr().err
