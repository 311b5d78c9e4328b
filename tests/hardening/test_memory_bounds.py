"""Issue 46, items 5, 7 and 8: memory bounded by the budget for every item, not by the input.

- 5: a streamed BERTScore row of megabytes of text is held as the part truncation reads (its
  first pieces), a chunk holds at most ``MAX_CHUNK_CHARS`` of text, and the rows kept for a
  resumed run's padding batches are let go once the stream starts: the rows read ahead for the
  padding batches no longer hold whole texts (was: 3.37 GB for 192 rows of 16 MiB).
- 7: ``rapidscore report`` stops at a JSONL line over the record bound with the readers' error,
  instead of reading the file again as one whole document (was: 2.31 GB before exit 2).
- 8: ``rapidscore nrr`` over many tiny lines embeds each distinct text once and gathers the
  rows' vectors a block at a time (was: 6.67 GB for 1,000,000 lines of 50 texts).

How the bound is held: each command runs in a fresh process and its peak resident set is read
with ``getrusage(RUSAGE_CHILDREN)`` (``ru_maxrss``, the kernel's own high-water mark: nothing is
sampled, so no short peak is missed). An address-space limit (``prlimit --as``) is not tight
enough to tell the fixed code from the old on an input scaled down to seconds: onnxruntime,
OpenMP and glibc reserve address space they never touch (a thread's 8 MiB stack, per-thread
malloc arenas of up to 64 MiB), so the virtual size follows the thread count, not the input
(one short row: 426 MB of address space for 214 MB resident on 2 cores, more on more cores).
``RLIMIT_DATA`` counts the same untouched private mappings, and a failure under either limit is
an allocation error anywhere (often in onnxruntime), not the command's own. So each bound is a
margin over the command's floor, the same command's peak on a one-row input measured in the
same test (interpreter, numpy, onnxruntime, the model), well under what the code before the fix
took on the same input (bench/RESULTS.md, "Peak memory per item (issue 46, items 5, 7, 8)").
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import numpy as np
import pytest

MiB = 1 << 20

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="ru_maxrss is in KiB on Linux")

PEAK_SCRIPT = textwrap.dedent("""
    import resource, subprocess, sys
    done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
    print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)  # KiB on Linux
    sys.stderr.write(done.stderr)
""")

# Variables that would change the bounds or the thread count of the commands measured.
_CLEARED = ("RAPIDSCORE_MAX_RECORD_BYTES", "RAPIDSCORE_MAX_DOCUMENT_BYTES")


def peak_run(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, int, str]:
    """(exit status, peak resident MiB, stderr) of ``rapidscore argv`` in a fresh process."""
    environment = {k: v for k, v in os.environ.items() if k not in _CLEARED}
    environment.update(env or {})
    done = subprocess.run([sys.executable, "-c", PEAK_SCRIPT, sys.executable, "-m", "rapidscore", *argv],
                          capture_output=True, text=True, env=environment, timeout=600)
    status, peak_kib = done.stdout.split()
    return int(status), int(peak_kib) // 1024, done.stderr


def words_text(rng: random.Random, size: int) -> str:
    """About ``size`` characters of random words: a block of them repeated (text that
    tokenises and compresses like text, built in milliseconds)."""
    vocabulary = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
                  for _ in range(500)]
    block = " ".join(rng.choice(vocabulary) for _ in range(3000)) + " "
    return (block * (size // len(block) + 1))[:size].strip()


@pytest.mark.slow  # 200 MB of text read, tokenised and hashed (~30 s)
def test_a_streamed_row_of_megabytes_is_held_as_the_part_truncation_reads(tmp_path: Path, tiny_bert: str) -> None:
    # 12 rows of 2 x 8 MiB: the code before held every row of the stream at once (one chunk: each
    # costs max_length tokens of the budget), 200+ MiB of text over the fixed cost
    rng = random.Random(5)
    data = tmp_path / "big.jsonl"
    with open(data, "w", encoding="utf-8") as handle:
        for row in range(12):
            text = words_text(rng, 8 * MiB)
            handle.write(json.dumps({"candidate": text, "reference": text[row:]}) + "\n")
        handle.write(json.dumps({"candidate": "a short one", "reference": "a short reference"}) + "\n")
    small = tmp_path / "small.jsonl"
    small.write_text(json.dumps({"candidate": "a short one", "reference": "a short reference"}) + "\n")
    common = ["bertscore", "-m", tiny_bert, "-q"]
    for _export_then_load in range(2):  # the first run may export the model to the test's cache (torch)
        status, fixed, err = peak_run([*common, "--input", str(small), "--output", str(tmp_path / "small.out.jsonl")])
        assert status == 0, err
    out = tmp_path / "out.jsonl"
    status, peak, err = peak_run([*common, "--input", str(data), "--output", str(out)])
    assert status == 0, err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row["index"] for row in rows] == list(range(13))
    # one row in flight (its line, its decoded text, its JSON for the resume digest: ~4 x 16 MiB)
    print(f"peak {peak} MiB, fixed {fixed} MiB")
    assert peak - fixed < 120, f"peak {peak} MiB, {fixed} MiB for one short row"


@pytest.mark.filterwarnings("ignore::rapidscore.errors.TruncationWarning")
def test_a_resumed_stream_of_long_rows_checks_the_whole_rows_it_continues(tmp_path: Path, tiny_bert: str) -> None:
    # a long text is held cut to its first pieces; the resume digest is still the whole row's
    from rapidscore.cli import main

    rng = random.Random(7)
    texts = [words_text(rng, 40_000 + 1000 * k) for k in range(6)]
    lines = [json.dumps({"candidate": t, "reference": t[::-1]}) + "\n" for t in texts]
    data = tmp_path / "long.jsonl"
    out = tmp_path / "out.jsonl"
    argv = ["bertscore", "-m", tiny_bert, "-q", "--input", str(data), "--output", str(out), "--chunk-size", "2",
            "-b", "2"]  # batches end with the chunks: nothing read ahead of a chunk
    data.write_text("".join(lines))
    assert main(argv) == 0
    whole = out.read_text()
    out.unlink()
    data.write_text("".join(lines[:4]) + "not json\n")  # a run that fails after 4 rows
    assert main(argv) == 2
    assert (tmp_path / "out.jsonl.partial").read_text() == "".join(whole.splitlines(keepends=True)[:4])
    edited = json.loads(lines[1])
    edited["candidate"] = edited["candidate"][:-1] + "x"  # past the part a truncated text is held by
    data.write_text("".join([lines[0], json.dumps(edited) + "\n", *lines[2:]]))
    assert main([*argv, "--resume"]) == 2
    data.write_text("".join(lines))
    assert main([*argv, "--resume"]) == 0
    assert out.read_text() == whole


ROW = b'{"index": 0, "precision": 0.5, "recall": 0.5, "f1": 0.5}\n'  # a row of bertscore --output


def gzip_line(path: Path, size: int) -> Path:
    """One JSONL line of ``size`` bytes (a JSON string of one repeated byte), gzipped piece by
    piece (never held whole)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(path, "wb") as handle:
        handle.write(compressor.compress(ROW + b'{"index": 1, "precision": "'))
        piece = b"a" * (16 * MiB)
        for _ in range(size // len(piece)):
            handle.write(compressor.compress(piece))
        handle.write(compressor.compress(b'"}\n'))
        handle.write(compressor.flush())
    return path


@pytest.mark.slow  # a 256 MiB line compressed and read up to the bound (~3 s)
def test_report_stops_at_a_line_over_the_bound_without_reading_the_file_whole(tmp_path: Path) -> None:
    bomb = gzip_line(tmp_path / "results.jsonl.gz", 256 * MiB)
    html = tmp_path / "report.html"
    small = tmp_path / "small.jsonl"
    small.write_bytes(ROW)
    status, fixed, err = peak_run(["report", str(small), "-o", str(html)])
    assert status == 0, err
    status, peak, err = peak_run(["report", str(bomb), "-o", str(html)], env={"RAPIDSCORE_MAX_RECORD_BYTES": "16M"})
    assert status == 2, err
    assert err.strip().splitlines()[-1].startswith(f"rapidscore report: error: {bomb}:2: line longer than 16 MiB"), err
    # the code before read the 256 MiB line again as a whole document (bytes, text, parse)
    print(f"peak {peak} MiB, fixed {fixed} MiB")
    assert peak - fixed < 100, f"peak {peak} MiB, {fixed} MiB for a small file"


def test_report_still_reads_an_indented_json_document_under_another_name(tmp_path: Path) -> None:
    from rapidscore.report.inputs import _load

    document = {"negative_rejection_rate": 0.5, "similarities": [0.1, 0.9], "rejected": [True, False]}
    path = tmp_path / "nrr.out"
    path.write_text(json.dumps(document, indent=1))
    assert _load(str(path)) == ("document", document)
    bad = tmp_path / "rows.jsonl"
    bad.write_text('{"f1": 0.5}\n{"f1": \n')
    with pytest.raises(ValueError, match=rf"^{bad}:2: not valid JSON"):
        _load(str(bad))


@pytest.mark.slow  # loads the real MiniLM; 300,000 rows
def test_nrr_over_many_tiny_lines_embeds_each_text_once(tmp_path: Path) -> None:
    rng = random.Random(8)
    texts = [f"answer number {k}" for k in range(50)]
    generated, references = tmp_path / "gen.txt", tmp_path / "ref.txt"
    generated.write_text("".join(rng.choice(texts) + "\n" for _ in range(300_000)))
    references.write_text("".join(rng.choice(texts) + "\n" for _ in range(300_000)))
    one = tmp_path / "one.txt"
    one.write_text(texts[0] + "\n")
    for _export_then_load in range(2):  # the first run exports the model to the test's cache (torch)
        status, fixed, err = peak_run(["nrr", "--generated", str(one), "--references", str(one)])
        assert status == 0, err
    status, peak, err = peak_run(["nrr", "--generated", str(generated), "--references", str(references)])
    assert status == 0, err
    # the code before gathered a 384-wide float64 vector per row and side: 1.8 GB more here
    print(f"peak {peak} MiB, fixed {fixed} MiB")
    assert peak - fixed < 250, f"peak {peak} MiB, {fixed} MiB for one row"


def test_nrr_pairs_match_a_vector_per_row(tmp_path: Path, tiny_bert: str) -> None:
    import numpy as np

    from rapidscore.nrr import SentenceSimilarity

    model = SentenceSimilarity(tiny_bert)
    rng = random.Random(9)
    texts = ["alpha beta", "gamma", "", "delta epsilon zeta", "beta alpha"]
    generated = [rng.choice(texts) for _ in range(40)]
    groups = [[rng.choice(texts) for _ in range(rng.randint(1, 3))] for _ in range(40)]
    sims, best = model.pairs(generated, groups)
    vectors = dict(zip(texts, model.sentence_vectors(texts)))
    for k, (text, group) in enumerate(zip(generated, groups)):
        row = [0.0 if not text or not ref else float(np.clip(vectors[text] @ vectors[ref], -1, 1)) for ref in group]
        assert sims[k] == pytest.approx(max(row), abs=1e-6)
        assert best[k] == int(np.argmax(np.asarray(row, dtype=np.float32) == np.float32(sims[k])))


@pytest.mark.filterwarnings("ignore::rapidscore.errors.TruncationWarning")
def test_chunks_and_the_idf_pass_hold_a_budget_of_characters(monkeypatch, tiny_bert: str) -> None:
    # the token budget alone let a chunk (and the first idf pass, 4,096 rows at a time) hold
    # every row of megabytes: each costs only max_length tokens
    from rapidscore.bertscore import BERTScore, idf_pass, streaming
    from rapidscore.common import stream

    scorer = BERTScore(model=tiny_bert, idf=True)
    rng = random.Random(3)
    pairs = [(words_text(rng, 30_000), words_text(rng, 30_000)) for _ in range(8)]
    whole = [r.f1 for _items, r in streaming.chunk_results(scorer, pairs)]
    monkeypatch.setattr(streaming, "MAX_CHUNK_CHARS", 100_000)
    monkeypatch.setattr(idf_pass, "MAX_CHUNK_CHARS", 100_000)
    read: list[int] = []
    chunks = stream.chunks

    def counted_chunks(*args, **kwargs):
        for chunk in chunks(*args, **kwargs):
            read.append(sum(stream.item_chars(item) for item in chunk))
            yield chunk

    monkeypatch.setattr(idf_pass, "chunks", counted_chunks)
    parts = list(streaming.chunk_results(scorer, pairs))
    assert len(read) == 8 and max(read) <= 100_000  # the idf pass: one row of 60,000 characters at a time
    assert [len(items) for items, _result in parts] == [8]  # held as the first pieces: all fit
    assert all(stream.item_chars(item) < 2 * 16 * 128 * 2 for item in parts[0][0])  # 2 texts, 16 x max_length
    assert np.array_equal(np.concatenate([r.f1 for _items, r in parts]), np.concatenate(whole))
    monkeypatch.setattr(streaming, "MAX_CHUNK_CHARS", 5_000)
    parts = list(streaming.chunk_results(scorer, pairs))
    assert [len(items) for items, _result in parts] == [1] * 8
    assert np.array_equal(np.concatenate([r.f1 for _items, r in parts]), np.concatenate(whole))
