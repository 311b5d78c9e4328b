"""Serving benchmark: `rapidscore serve` (micro-batching) against naive servers, over loopback.

Three servers, each its own process, started one after the other on a free port:
  batching   `python -m rapidscore serve` (one queue, one encoder pass per batch; 2 workers with one
             runtime thread each, the default)
  batching-1w  the same with `--workers 1` (one worker, the runtime on every core)
  naive-rs   FastAPI, a plain `def` handler (FastAPI's thread pool) calling BERTScore.score per request
  naive-bs   the same around bert_score.BERTScorer.score (bert-score 0.3.13, torch)
The load generator is a separate process: an asyncio client over raw keep-alive HTTP/1.1 (cheap
per request, so that it does not starve the server), closed loop, C connections, each sending
one short (candidate, reference) pair at a time. Per level: throughput (requests/s and tokens/s),
p50/p99 latency, status codes, and for the batching server the batch sizes (from /metrics).
Bulk offline throughput: one BERTScore.score call over the same pairs, in process.
Model ceiling: the model alone as the batching server's workers run it (2 threads, each calling
the workers' one-thread session on unpadded batches of 20 distinct sentences, i.e. 10 requests:
no HTTP, no tokenising, no matching), in process: what a server of that design could reach here.
Memory: the batching server at the highest level for --memory-seconds, RSS sampled every second.

    python bench/bench_serving.py                      # recorded: under flock, see bench/README.md
    python bench/bench_serving.py --seconds 3 --levels 1 8 --memory-seconds 0 --servers batching
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import common

from rapidscore.testing import corpora

SERVERS = ("batching", "batching-1w", "naive-rs", "naive-bs")
DEFAULT_SERVERS = ("batching", "naive-rs", "naive-bs")


# -- naive servers (run as: bench_serving.py --naive-server KIND --port P) ----------------------

def naive_app(kind: str):
    from fastapi import Body, FastAPI

    if kind == "naive-rs":
        from rapidscore.bertscore import BERTScore

        scorer = BERTScore()

        def score(cands, refs):
            result = scorer.score(cands, refs)
            return result.precision.tolist(), result.recall.tolist(), result.f1.tolist()
    else:
        import bert_score

        from rapidscore.encoder.model_source import embedded_model_dir

        scorer = bert_score.BERTScorer(model_type=str(embedded_model_dir()), num_layers=6)

        def score(cands, refs):
            p, r, f = scorer.score(cands, refs)
            return p.tolist(), r.tolist(), f.tolist()

    for _ in range(3):
        score(["warm up"], ["the model"])

    app = FastAPI()

    @app.post("/v1/bertscore")
    def bertscore(body: dict = Body(...)) -> dict:  # a plain def: FastAPI runs it in its thread pool
        p, r, f = score(body["candidates"], body["references"])
        return {"precision": p, "recall": r, "f1": f}

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok"}

    return app


def run_naive_server(kind: str, port: int) -> None:
    import uvicorn

    uvicorn.run(naive_app(kind), host="127.0.0.1", port=port, log_level="warning", access_log=False)


# -- load generator (run as: bench_serving.py --client ...) --------------------------------------

async def _client(host: str, port: int, bodies: list[bytes], start: int, stop_at: float, warm_until: float,
                  latencies: list, statuses: dict) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    k = start
    try:
        while True:
            body = bodies[k % len(bodies)]
            k += 7
            request = (b"POST /v1/bertscore HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
                       b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            sent = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            await reader.readexactly(length)
            done = time.perf_counter()
            if sent >= warm_until:
                status = int(head[9:12])
                statuses[status] = statuses.get(status, 0) + 1
                latencies.append(done - sent)
            if done >= stop_at:
                return
    finally:
        writer.close()


async def _load(port: int, bodies: list[bytes], clients: int, seconds: float, warmup: float) -> dict:
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    started = time.perf_counter()
    warm_until, stop_at = started + warmup, started + warmup + seconds
    await asyncio.gather(*(_client("127.0.0.1", port, bodies, i * 101, stop_at, warm_until, latencies, statuses)
                           for i in range(clients)))
    # perf_counter is CLOCK_MONOTONIC on Linux, the clock of the driver's CPU samples.
    return {"latencies": latencies, "statuses": statuses, "seconds": time.perf_counter() - warm_until,
            "window": [warm_until, time.perf_counter()]}


def run_client(args) -> None:
    """Print one JSON line: latencies, statuses, measured seconds, client CPU seconds."""
    bodies = [line.encode() for line in Path(args.bodies).read_text().splitlines()]
    try:
        import uvloop  # a cheaper event loop: the load generator shares the cores with the server

        uvloop.install()
    except ImportError:
        pass
    cpu = time.process_time()
    result = asyncio.run(_load(args.port, bodies, args.clients, args.seconds, args.warmup))
    result["client_cpu_seconds"] = time.process_time() - cpu
    print(json.dumps(result))


# -- the driver ---------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_healthy(port: int, process: subprocess.Popen, timeout: float = 300) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise TimeoutError("server not healthy in time")


def start_server(kind: str, port: int, batching_args: list[str] = ()) -> subprocess.Popen:
    if kind.startswith("batching"):
        command = [sys.executable, "-m", "rapidscore", "serve", "--port", str(port), *batching_args]
        if kind == "batching-1w":
            command += ["--workers", "1"]
    else:
        command = [sys.executable, __file__, "--naive-server", kind, "--port", str(port)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def stop_server(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(60)
    except subprocess.TimeoutExpired:
        process.kill()


def metrics_snapshot(port: int) -> dict:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    values = {}
    for line in text.splitlines():
        if line.startswith(("rapidscore_batch_requests_sum", "rapidscore_batch_requests_count",
                            "rapidscore_batch_tokens_sum", "rapidscore_rejected_total")):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def thread_cpu_seconds(pid: int) -> tuple[float, float]:
    """CPU seconds (user + system) of a process's main thread (the server's event loop) and of
    its other threads together, from /proc (0, 0 where there is none)."""
    tick = os.sysconf("SC_CLK_TCK")
    main = other = 0.0
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # a thread that ended meanwhile
        seconds = (int(fields[11]) + int(fields[12])) / tick
        if task.name == str(pid):
            main += seconds
        else:
            other += seconds
    return main, other


def _at(samples: list, when: float) -> tuple[float, float]:
    """Linear interpolation of (time, (main, other)) samples at ``when``."""
    for (t0, v0), (t1, v1) in zip(samples, samples[1:]):
        if t0 <= when <= t1:
            w = (when - t0) / max(t1 - t0, 1e-9)
            return v0[0] + w * (v1[0] - v0[0]), v0[1] + w * (v1[1] - v0[1])
    return samples[0][1] if when < samples[0][0] else samples[-1][1]


def run_level(port: int, bodies_path: Path, clients: int, seconds: float, warmup: float,
              server_pid: int, *, sample_rss: bool = False) -> dict:
    """One level: the client's answer, the server's RSS each second (``sample_rss``), and the
    CPU of the server's main thread and other threads over the measured window."""
    command = [sys.executable, __file__, "--client", "--port", str(port), "--bodies", str(bodies_path),
               "--clients", str(clients), "--seconds", str(seconds), "--warmup", str(warmup)]
    import tempfile

    rss, cpu = [], [(time.monotonic(), thread_cpu_seconds(server_pid))]
    # The answer goes to a file: a pipe fills up (64 KiB) with a long run's latencies and blocks.
    with tempfile.TemporaryFile("w+") as answer:
        process = subprocess.Popen(command, stdout=answer, text=True)
        last_rss = 0.0
        while process.poll() is None:
            now = time.monotonic()
            cpu.append((now, thread_cpu_seconds(server_pid)))
            if sample_rss and now - last_rss >= 1.0:
                rss.append((now, rss_mib(server_pid)))
                last_rss = now
            time.sleep(0.2)
        cpu.append((time.monotonic(), thread_cpu_seconds(server_pid)))
        answer.seek(0)
        out = json.loads(answer.read().strip().splitlines()[-1])
    out["rss"] = rss
    start, end = out["window"]
    (main0, other0), (main1, other1) = _at(cpu, start), _at(cpu, end)
    out["server_cpu"] = {"main": (main1 - main0) / max(end - start, 1e-9),
                         "other": (other1 - other0) / max(end - start, 1e-9)}
    return out


def summarize(run: dict, tokens_per_request: float) -> dict:
    latencies = sorted(run["latencies"])
    ok = run["statuses"].get("200", 0)
    seconds = run["seconds"]
    return {"requests": len(latencies), "ok": ok, "statuses": run["statuses"], "seconds": seconds,
            "rps": ok / seconds, "tokens_per_s": ok * tokens_per_request / seconds,
            "p50_ms": 1000 * common.percentile(latencies, 50) if latencies else float("nan"),
            "p99_ms": 1000 * common.percentile(latencies, 99) if latencies else float("nan"),
            "client_cpu_share": run["client_cpu_seconds"] / max(seconds, 1e-9),
            "server_main_cpu_share": run["server_cpu"]["main"], "server_other_cpu_share": run["server_cpu"]["other"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--naive-server", choices=SERVERS[2:], help=argparse.SUPPRESS)
    parser.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--bodies", help=argparse.SUPPRESS)
    parser.add_argument("--clients", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds per level before measuring")
    parser.add_argument("--seconds", type=float, default=8.0, help="measured seconds per level")
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 8, 32, 128], help="concurrent clients")
    parser.add_argument("--servers", nargs="+", choices=SERVERS, default=list(DEFAULT_SERVERS))
    parser.add_argument("--pairs", type=int, default=4000, help="distinct short pairs the clients cycle through")
    parser.add_argument("--batching-args", default="", help="more `rapidscore serve` flags for the batching servers")
    parser.add_argument("--memory-seconds", type=float, default=60.0,
                        help="batching server at the highest level, RSS sampled each second (0: skip)")
    common.add_cache_and_out_arguments(parser)
    args = parser.parse_args()
    if args.client:
        run_client(args)
        return
    if args.naive_server:
        run_naive_server(args.naive_server, args.port)
        return
    common.offline_cache(args.cache_dir)

    import numpy as np

    from rapidscore.bertscore import BERTScore

    cands, refs = corpora.sentence_pairs(args.pairs, min_words=5, max_words=12, seed=13)
    bodies_path = Path(args.cache_dir).expanduser() / "serving_bodies.jsonl"
    bodies_path.write_text("\n".join(json.dumps({"candidates": [c], "references": [r]}) for c, r in zip(cands, refs)))
    scorer = BERTScore()
    ids = scorer.encoder.tokenize(cands + refs)
    tokens_per_request = sum(len(i) for i in ids) / len(cands)

    # In process: bulk offline throughput (one call) and the single-pair latency.
    def best_seconds(model: BERTScore, reps: int = 3) -> float:
        model.score(cands[:64], refs[:64])  # warm-up
        times = []
        for _ in range(reps):
            started = time.perf_counter()
            model.score(cands, refs)
            times.append(time.perf_counter() - started)
        return min(times)

    bulk_seconds = best_seconds(scorer)
    bulk_tps = tokens_per_request * len(cands) / bulk_seconds
    # The same with one runtime thread: on a loaded 2-core machine it can beat two (no spinning
    # second thread); the batching server runs its two workers with one thread each.
    bulk_t1_tps = tokens_per_request * len(cands) / best_seconds(BERTScore(num_threads=1))
    def single_pair_p50_ms() -> float:
        single = []
        for k in range(min(300, len(cands))):
            started = time.perf_counter()
            scorer.score([cands[k]], [refs[k]])
            single.append(time.perf_counter() - started)
        return 1000 * float(np.median(single[len(single) // 6:]))  # after a warm-up sixth

    single_p50_ms = single_pair_p50_ms()

    def workers_model_tps(seconds: float = 6.0, sentences: int = 20) -> float:
        """Real tokens/s of the model alone in the batching server's worker configuration."""
        import threading

        from rapidscore.serve.config import ServeConfig

        config = ServeConfig()
        encoder = BERTScore(**config.encoder_options).encoder  # the workers' scorer's encoder
        texts = list(dict.fromkeys(cands + refs))
        batches = [encoder.tokenize(texts[k:k + sentences]) for k in range(0, len(texts) - sentences, sentences)]
        for batch in batches[:3]:
            encoder.embed_ids(batch, unpadded=True)  # warm-up
        stop, counts = threading.Event(), [0] * config.workers

        def worker(slot: int) -> None:
            k = slot * len(batches) // config.workers  # the workers on different batches
            while not stop.is_set():
                batch = batches[k % len(batches)]
                encoder.embed_ids(batch, unpadded=True)
                counts[slot] += sum(len(ids) for ids in batch)
                k += 1

        threads = [threading.Thread(target=worker, args=(slot,)) for slot in range(config.workers)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        time.sleep(seconds)
        stop.set()
        for thread in threads:
            thread.join()
        return sum(counts) / (time.perf_counter() - started)

    ceiling_before = workers_model_tps()

    results: dict = {"machine": common.machine_info(), "versions": common.package_versions(), "date": common.now(),
                     "commit": common.git_commit(), "command": common.command_line(),
                     "tokens_per_request": tokens_per_request, "bulk_tokens_per_s": bulk_tps,
                     "bulk_seconds": bulk_seconds, "bulk_1_thread_tokens_per_s": bulk_t1_tps,
                     "single_pair_p50_ms": single_p50_ms, "levels": {}}
    for kind in args.servers:
        port = free_port()
        server = start_server(kind, port, args.batching_args.split())
        try:
            wait_healthy(port, server)
            for clients in args.levels:
                # The single-pair call in process right before and after the 1-client level (the
                # server idle meanwhile): the machine's speed drifts by +-10% over minutes.
                in_process = [single_pair_p50_ms()] if clients == 1 else []
                before = metrics_snapshot(port) if kind.startswith("batching") else {}
                run = run_level(port, bodies_path, clients, args.seconds, args.warmup, server.pid)
                row = summarize(run, tokens_per_request)
                if clients == 1:
                    in_process.append(single_pair_p50_ms())
                    # The faster of the two: the stricter comparison.
                    row["in_process_p50_ms"], row["in_process_p50_ms_around"] = min(in_process), in_process
                if kind.startswith("batching"):
                    after = metrics_snapshot(port)
                    batches = after["rapidscore_batch_requests_count"] - before["rapidscore_batch_requests_count"]
                    row["mean_batch_requests"] = (after["rapidscore_batch_requests_sum"]
                                                  - before["rapidscore_batch_requests_sum"]) / max(batches, 1)
                    row["mean_batch_tokens"] = (after["rapidscore_batch_tokens_sum"]
                                                - before["rapidscore_batch_tokens_sum"]) / max(batches, 1)
                results["levels"].setdefault(kind, {})[clients] = row
                print(kind, clients, {k: v for k, v in row.items() if k != "statuses"}, row["statuses"], flush=True)
            if kind == "batching" and args.memory_seconds > 0:
                clients = max(args.levels)
                run = run_level(port, bodies_path, clients, args.memory_seconds, 0.0, server.pid, sample_rss=True)
                row = summarize(run, tokens_per_request)
                rss = [value for _, value in run["rss"]]
                tenth = max(1, len(rss) // 6)
                row.update({"clients": clients, "rss_first_mib": max(rss[:tenth]), "rss_last_mib": max(rss[-tenth:]),
                            "rss_max_mib": max(rss), "rss_samples": rss})
                results["memory"] = row
                print("memory", {k: v for k, v in row.items() if k != "rss_samples"}, flush=True)
        finally:
            stop_server(server)
    # Bulk again after the servers: the machine drifts (other tenants), and "% of bulk" takes the
    # faster of the two measurements (the stricter ratio).
    results["bulk_tokens_per_s_after"] = tokens_per_request * len(cands) / best_seconds(scorer)
    results["bulk_tokens_per_s_before"] = bulk_tps
    results["bulk_tokens_per_s"] = max(bulk_tps, results["bulk_tokens_per_s_after"])
    results["model_ceiling_tokens_per_s_around"] = [ceiling_before, workers_model_tps()]
    results["model_ceiling_tokens_per_s"] = max(results["model_ceiling_tokens_per_s_around"])
    md = render(results)
    md_path, _ = common.write_results("serving", md, results, Path(args.out))
    print(md)
    print(f"written: {md_path}")


def server_cpu(row: dict) -> str:
    if "server_main_cpu_share" not in row:
        return "-"
    per_request = 1000 * row["server_main_cpu_share"] / max(row["rps"], 1e-9)
    return f"{row['server_main_cpu_share']:.2f} ({per_request:.2f}) / {row['server_other_cpu_share']:.2f}"


def render(results: dict) -> str:
    machine = common.machine_line(results["machine"])
    lines = ["## Serving: `rapidscore serve` vs naive servers (loopback)", "",
             f"{results['date']}, {machine}. {common.versions_line(results['versions'])}. "
             f"Commit {results['commit']}. Command: `{results['command']}`.", "",
             f"Requests: one short pair each (5-12 words a side, {results['tokens_per_request']:.1f} tokens per "
             f"request with special tokens), all-MiniLM-L6-v2 fp32 (ONNX Runtime, CPU). Server and load generator "
             f"are separate processes sharing the machine's cores (no pinning); `client CPU` is the load "
             f"generator's CPU time per second of the run; `server CPU` the server's, in cores, main thread (the "
             f"event loop: HTTP, validation, tokenising, JSON; in ms per answered request) / other threads "
             f"(workers, runtime threads), from /proc over the measured window.", "",
             f"In process: bulk offline `BERTScore.score` over the same pairs: "
             f"**{results['bulk_tokens_per_s']:,.0f} tokens/s** (the faster of "
             f"{results.get('bulk_tokens_per_s_before', results['bulk_tokens_per_s']):,.0f} before the servers and "
             f"{results.get('bulk_tokens_per_s_after', results['bulk_tokens_per_s']):,.0f} after; default threads; "
             f"with one runtime thread "
             f"{results['bulk_1_thread_tokens_per_s']:,.0f} tokens/s); one pair per call: p50 "
             f"**{results['single_pair_p50_ms']:.2f} ms**.", ""]
    ceiling = results.get("model_ceiling_tokens_per_s")
    if ceiling:
        before, after = results["model_ceiling_tokens_per_s_around"]
        lines += [f"Model ceiling: the model alone as the batching server's workers run it (2 threads sharing "
                  f"the workers' one-thread session, unpadded batches of 20 distinct sentences; no HTTP, "
                  f"tokenising or matching): **{ceiling:,.0f} tokens/s** (the faster of {before:,.0f} before "
                  f"the servers and {after:,.0f} after). `% of model` is each row's share of it.", ""]
    lines += ["| server | clients | requests/s | tokens/s | % of bulk | % of model | p50 ms | p99 ms "
              "| mean batch (requests / tokens) | statuses | client CPU | server CPU: main (ms/request) / other |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---|"]
    for kind, levels in results["levels"].items():
        for clients, row in levels.items():
            batch = (f"{row['mean_batch_requests']:.1f} / {row['mean_batch_tokens']:.0f}"
                     if "mean_batch_requests" in row else "-")
            of_model = f"{100 * row['tokens_per_s'] / ceiling:.0f}%" if ceiling else "-"
            lines.append(f"| {kind} | {clients} | {row['rps']:.0f} | {row['tokens_per_s']:,.0f} | "
                         f"{100 * row['tokens_per_s'] / results['bulk_tokens_per_s']:.0f}% | {of_model} | "
                         f"{row['p50_ms']:.1f} | "
                         f"{row['p99_ms']:.1f} | {batch} | {row['statuses']} | {row['client_cpu_share']:.2f} | "
                         f"{server_cpu(row)} |")
    around = [(kind, levels[1]) for kind, levels in results["levels"].items()
              if 1 in levels and "in_process_p50_ms" in levels[1]]
    if around:
        lines += ["", "1 client against the single-pair call in process, measured right before and after that level "
                      "(the faster of the two):", ""]
        for kind, row in around:
            before, after = row["in_process_p50_ms_around"]
            lines.append(f"- {kind}: p50 {row['p50_ms']:.2f} ms against {row['in_process_p50_ms']:.2f} ms "
                         f"({before:.2f} before, {after:.2f} after): "
                         f"{row['p50_ms'] - row['in_process_p50_ms']:+.2f} ms")
    if "memory" in results:
        m = results["memory"]
        lines += ["", f"Memory: batching server, {m['clients']} clients for {m['seconds']:.0f} s: "
                      f"{m['rps']:.0f} requests/s, statuses {m['statuses']}; RSS max over the first sixth "
                      f"{m['rss_first_mib']:.0f} MiB, over the last sixth {m['rss_last_mib']:.0f} MiB, "
                      f"max {m['rss_max_mib']:.0f} MiB."]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
