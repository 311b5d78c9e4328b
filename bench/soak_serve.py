"""Soak of `rapidscore serve`: does the server's memory stay flat under mixed concurrent traffic
with `long_texts: "window"` requests?

Starts `rapidscore serve` (the embedded MiniLM) on a free loopback port, then runs `--clients`
threads (default 32), each posting to /v1/bertscore in a closed loop, one request after another
on a keep-alive connection. The requests cycle through three kinds: short sentence pairs;
paragraphs over the model's maximum length with `"long_texts": "window"`; the same paragraphs
truncated (no option). Paragraph lengths vary from request to request, so that every batch has
another shape. The server's RSS (VmRSS of its process) is sampled every `--sample-seconds`.

Writes the series and the summary as JSON (`--out`) and prints: RSS at start (once the server is
warm, before any load), the peak, and the band of the last `--band-minutes` (default 20) of the
run: max/min of that window's samples, flat when max <= 1.10 * min (`--band`).

    python bench/soak_serve.py --minutes 30
    # the same load against another tree's server (its interpreter imports that tree):
    python bench/soak_serve.py --minutes 5 --python /work/base-venv/bin/python --out /tmp/base.json
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from rapidscore.testing import corpora

# Runs `rapidscore serve` from --source: that tree first on PYTHONPATH, this environment's
# editable finder (which points `rapidscore` at this checkout) removed.
_FROM_SOURCE = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower() "
                "and 'skbc' not in repr(f).lower()]; "
                "import rapidscore.cli; sys.exit(rapidscore.cli.main(sys.argv[1:]))")


def rss_bytes(pid: int) -> int:
    """The resident set size of process ``pid`` (VmRSS), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def request_bodies(count: int, seed: int) -> list[bytes]:
    """``count`` request bodies cycling short / window / truncated long, of varying sizes."""
    rng = random.Random(seed)
    short_c, short_r = corpora.sentence_pairs(400, min_words=5, max_words=30, seed=seed)
    long_c, long_r = corpora.long_text_pairs(120, min_words=150, max_words=900, seed=seed + 1)
    bodies = []
    for k in range(count):
        kind = k % 3
        if kind == 0:
            n = rng.randint(1, 8)
            start = rng.randrange(len(short_c) - n)
            body: dict = {"candidates": short_c[start:start + n], "references": short_r[start:start + n]}
        else:
            n = rng.randint(1, 3)
            start = rng.randrange(len(long_c) - n)
            body = {"candidates": long_c[start:start + n], "references": long_r[start:start + n]}
            if kind == 1:
                body["long_texts"] = "window"
        bodies.append(json.dumps(body).encode())
    return bodies


class Load:
    """``clients`` threads posting ``bodies`` until ``stop`` is set; counts answers and errors."""

    def __init__(self, port: int, bodies: list[bytes], clients: int):
        self.port, self.bodies = port, bodies
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.served = 0
        self.errors: dict[str, int] = {}
        self.threads = [threading.Thread(target=self._client, args=(k,), daemon=True) for k in range(clients)]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def finish(self, timeout: float = 120) -> None:
        """Stop posting; wait (``timeout`` seconds in all) for the requests in flight."""
        self.stop.set()
        deadline = time.monotonic() + timeout
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _error(self, what: str) -> None:
        with self.lock:
            self.errors[what] = self.errors.get(what, 0) + 1

    def _client(self, slot: int) -> None:
        index = slot * 7919
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        headers = {"Content-Type": "application/json"}
        while not self.stop.is_set():
            body = self.bodies[index % len(self.bodies)]
            index += 1
            try:
                connection.request("POST", "/v1/bertscore", body=body, headers=headers)
                answer = connection.getresponse()
                content = answer.read()
            except (OSError, http.client.HTTPException) as exc:
                if self.stop.is_set():  # the server stopping at the end of the soak
                    break
                self._error(type(exc).__name__)
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
                continue
            if answer.status != 200:
                self._error(f"HTTP {answer.status}: {content[:200].decode(errors='replace')}")
                continue
            with self.lock:
                self.served += 1
        connection.close()


def wait_healthy(port: int, process: subprocess.Popen, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            connection.request("GET", "/health")
            if connection.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"the server was not healthy within {timeout:.0f} s")


def summarize(samples: list[dict], band_minutes: float, band: float) -> dict:
    """Start, peak and the last ``band_minutes``' band: max/min of those samples, of each
    minute's highest sample and of each minute's mean. The working set of the batches in flight
    (two workers' attention tensors, tens of MiB each, returned when a batch ends) comes and goes
    between samples; a leak or a growing cache raises the minutes' means and peaks minute after
    minute."""
    end = samples[-1]["seconds"]
    last = [s for s in samples if s["seconds"] >= end - band_minutes * 60]
    low, high = min(s["rss"] for s in last), max(s["rss"] for s in last)
    minutes: dict[int, list[int]] = {}
    for s in last:
        minute = int((end - s["seconds"]) // 60)  # counted back from the end: every minute whole
        minutes.setdefault(minute, []).append(s["rss"])
    whole = [minutes[m] for m in sorted(minutes, reverse=True) if m < band_minutes]
    peaks = [max(rss) for rss in whole]
    means = [sum(rss) / len(rss) for rss in whole]
    return {"start_rss": samples[0]["rss"], "peak_rss": max(s["rss"] for s in samples), "end_rss": samples[-1]["rss"],
            "band_minutes": band_minutes, "band_min_rss": low, "band_max_rss": high, "band_ratio": high / low,
            "flat": high <= (1 + band) * low, "minute_peaks": peaks,
            "minute_peak_ratio": max(peaks) / min(peaks), "minute_peaks_flat": max(peaks) <= (1 + band) * min(peaks),
            "minute_means": means, "minute_mean_ratio": max(means) / min(means),
            "minute_means_flat": max(means) <= (1 + band) * min(means)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30.0, help="minutes of load (default 30)")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--sample-seconds", type=float, default=5.0)
    parser.add_argument("--band-minutes", type=float, default=20.0,
                        help="the closing window whose RSS must stay within the band (default 20)")
    parser.add_argument("--band", type=float, default=0.10, help="max/min - 1 allowed in that window (default 0.10)")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter that runs the server (another tree's, to compare)")
    parser.add_argument("--source", help="run the server from this source tree's python/ (its _core built), not "
                        "the installed rapidscore: another revision, or a copy that later edits cannot reach")
    parser.add_argument("--serve-arg", action="append", default=[], help="an extra argument of rapidscore serve")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "soak_serve.json"))
    args = parser.parse_args()

    bodies = request_bodies(600, args.seed)
    port = free_port()
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    if args.source:
        command = [args.python, "-c", _FROM_SOURCE, "serve"]
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(Path(args.source) / "python"), env.get("PYTHONPATH"))))
    else:
        command = [args.python, "-m", "rapidscore", "serve"]
    command += ["--port", str(port), *args.serve_arg]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    samples: list[dict] = []
    load = Load(port, bodies, args.clients)
    try:
        wait_healthy(port, server)
        began = time.monotonic()
        samples.append({"seconds": 0.0, "rss": rss_bytes(server.pid), "served": 0})
        load.start()
        stop_at = began + args.minutes * 60
        while time.monotonic() < stop_at:
            time.sleep(min(args.sample_seconds, max(0.0, stop_at - time.monotonic())))
            if server.poll() is not None:
                raise RuntimeError(f"the server exited with {server.returncode} during the soak")
            with load.lock:
                served = load.served
            samples.append({"seconds": round(time.monotonic() - began, 1), "rss": rss_bytes(server.pid),
                            "served": served})
            print(f"{samples[-1]['seconds']:8.0f} s  RSS {samples[-1]['rss'] / 2**30:6.3f} GiB  "
                  f"served {served}  errors {sum(load.errors.values())}", flush=True)
    finally:
        load.finish()
        server.terminate()
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
    summary = summarize(samples, min(args.band_minutes, args.minutes), args.band)
    summary.update(command=command, clients=args.clients, minutes=args.minutes, served=load.served,
                   errors=load.errors)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"summary": summary, "samples": samples}, indent=1))
    gib = 2 ** 30
    print(f"start {summary['start_rss'] / gib:.3f} GiB, peak {summary['peak_rss'] / gib:.3f} GiB, "
          f"end {summary['end_rss'] / gib:.3f} GiB")
    print(f"last {summary['band_minutes']:g} min: {summary['band_min_rss'] / gib:.3f}-"
          f"{summary['band_max_rss'] / gib:.3f} GiB (max/min {summary['band_ratio']:.3f}): "
          f"{'flat' if summary['flat'] else 'NOT flat'} within {args.band:.0%}")
    print(f"per-minute peaks of the last {summary['band_minutes']:g} min: {min(summary['minute_peaks']) / gib:.3f}-"
          f"{max(summary['minute_peaks']) / gib:.3f} GiB (max/min {summary['minute_peak_ratio']:.3f}): "
          f"{'flat' if summary['minute_peaks_flat'] else 'NOT flat'} within {args.band:.0%}")
    print(f"per-minute means of the last {summary['band_minutes']:g} min: {min(summary['minute_means']) / gib:.3f}-"
          f"{max(summary['minute_means']) / gib:.3f} GiB (max/min {summary['minute_mean_ratio']:.3f}): "
          f"{'flat' if summary['minute_means_flat'] else 'NOT flat'} within {args.band:.0%}")
    print(f"requests served {load.served}, errors {sum(load.errors.values())} {load.errors or ''}")
    print(f"series: {args.out}")


if __name__ == "__main__":
    main()
