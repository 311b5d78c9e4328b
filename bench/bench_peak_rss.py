"""Peak resident memory of the commands of issue 46, items 5, 7 and 8, each in a fresh process.

Builds its inputs (seeded) in a temporary folder and runs each command as a subprocess, reading
its peak with ``getrusage(RUSAGE_CHILDREN)`` (``ru_maxrss``: the kernel's high-water mark):

- ``stream``: ``rapidscore bertscore --input big.jsonl.gz --output out.jsonl`` over ROWS rows of
  ROW_MIB MiB of random words each (candidate and reference; a repeated block, so the .gz is
  small), the embedded MiniLM (item 5; the issue's case is 192 rows of 16 MiB);
- ``report``: ``rapidscore report`` on a .jsonl.gz whose second line is 4 GiB (over the 256 MiB
  record bound; item 7);
- ``nrr``: ``rapidscore nrr --generated g.txt --references r.txt`` over 1,000,000 lines of 50
  distinct tiny texts (item 8), and ``bertscore -c/-r`` on the same files for comparison.

``--python`` runs another interpreter (the code before: ``--python /work/base-venv/bin/python``
with ``PYTHONPATH`` at its checkout); each case runs once after a one-row run of the same
command (which exports the model to the cache when it is not there). Prints one line per case:
name, exit status, peak MiB, seconds.

    python bench/bench_peak_rss.py [--python PY] [--rows 192] [--row-mib 16] [--cases stream,report,nrr]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import textwrap
import time
import zlib
from pathlib import Path

MiB = 1 << 20

PEAK = textwrap.dedent("""
    import resource, subprocess, sys
    done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    sys.stderr.write(done.stderr[-400:])
""")


def peak(python: str, argv: list[str]) -> tuple[int, int, float, str]:
    """(exit status, peak MiB, seconds, end of stderr) of ``python -m rapidscore argv``."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", PEAK, python, "-m", "rapidscore", *argv], capture_output=True,
                          text=True)
    seconds = time.perf_counter() - started
    status, kib = done.stdout.split()
    last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
    return int(status), int(kib) // 1024, seconds, last


def words_block(rng: random.Random, size: int = 1 << 16) -> str:
    vocabulary = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
                  for _ in range(2000)]
    text = " ".join(rng.choice(vocabulary) for _ in range(size // 5))
    return text[:size] + " "


def build_stream(path: Path, rows: int, row_mib: float, seed: int) -> None:
    """ROWS JSONL rows, candidate and reference of ROW_MIB / 2 MiB each, gzipped as written."""
    rng = random.Random(seed)
    block = words_block(rng)
    side = int(row_mib * MiB / 2)
    compressor = zlib.compressobj(1, zlib.DEFLATED, 31)
    with open(path, "wb") as handle:
        for row in range(rows):
            shift = rng.randrange(len(block))
            text = ((block[shift:] + block[:shift]) * (side // len(block) + 1))[:side].strip()
            line = json.dumps({"candidate": text, "reference": text[row % 97:]}) + "\n"
            handle.write(compressor.compress(line.encode()))
        handle.write(compressor.flush())


def build_report_bomb(path: Path, size: int = 4 << 30) -> None:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(path, "wb") as handle:
        handle.write(compressor.compress(b'{"index": 0, "precision": 0.5, "recall": 0.5, "f1": 0.5}\n'
                                         b'{"index": 1, "precision": "'))
        piece = b"a" * (16 * MiB)
        for _ in range(size // len(piece)):
            handle.write(compressor.compress(piece))
        handle.write(compressor.compress(b'"}\n') + compressor.flush())


def build_tiny_lines(folder: Path, lines: int, seed: int) -> tuple[Path, Path]:
    rng = random.Random(seed)
    texts = [f"t{k}" for k in range(50)]
    generated, references = folder / "g.txt", folder / "r.txt"
    generated.write_text("".join(rng.choice(texts) + "\n" for _ in range(lines)))
    references.write_text("".join(rng.choice(texts) + "\n" for _ in range(lines)))
    return generated, references


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable, help="the interpreter whose rapidscore runs")
    parser.add_argument("--rows", type=int, default=192)
    parser.add_argument("--row-mib", type=float, default=16.0)
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--cases", default="stream,report,nrr")
    parser.add_argument("--seed", type=int, default=46)
    args = parser.parse_args()
    cases = set(args.cases.split(","))
    if sys.platform != "linux":
        raise SystemExit("ru_maxrss is read in KiB: Linux only")
    with tempfile.TemporaryDirectory(prefix="bench-peak-") as folder_name:
        folder = Path(folder_name)
        one = folder / "one.txt"
        one.write_text("a short answer\n")
        warm = ["bertscore", "-c", str(one), "-r", str(one)]
        print("warm-up (model export when not cached):", peak(args.python, warm)[:3], flush=True)
        runs: list[tuple[str, list[str]]] = []
        if "stream" in cases:
            data = folder / "big.jsonl.gz"
            build_stream(data, args.rows, args.row_mib, args.seed)
            runs.append((f"stream {args.rows} x {args.row_mib:g} MiB rows ({data.stat().st_size / MiB:.0f} MiB .gz)",
                         ["bertscore", "--input", str(data), "--output", str(folder / "out.jsonl"), "-q"]))
        if "report" in cases:
            bomb = folder / "results.jsonl.gz"
            build_report_bomb(bomb)
            runs.append(("report, a 4 GiB second line", ["report", str(bomb), "-o", str(folder / "r.html")]))
        if "nrr" in cases:
            generated, references = build_tiny_lines(folder, args.lines, args.seed)
            runs.append((f"nrr batch, {args.lines:,} lines of 50 texts",
                         ["nrr", "--generated", str(generated), "--references", str(references)]))
            runs.append((f"bertscore batch, the same {args.lines:,} lines",
                         ["bertscore", "-c", str(generated), "-r", str(references)]))
        for name, argv in runs:
            status, mib, seconds, last = peak(args.python, argv)
            print(f"{name}: exit {status}, peak {mib} MiB, {seconds:.1f} s" + (f"  [{last[:160]}]" if status else ""),
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
