"""Prometheus text exposition of the server's counters and histograms, written by hand (no
client library): requests by endpoint and status, request latency, batch sizes, queue depth,
clients that went away before their answer. Requests are labelled by route (:func:`endpoint_label`),
so that the text stays bounded whatever paths clients send."""

from __future__ import annotations

import bisect
import threading
from collections.abc import Collection, Sequence

__all__ = ["Histogram", "ServerMetrics", "endpoint_label", "OTHER_ENDPOINT"]

CLIENT_CLOSED_REQUEST = 499  # nginx's status for a client that closed the connection before the answer
REQUEST_TIMEOUT = 408  # the server's own answer to a client too slow to send its request: not a disconnect
OTHER_ENDPOINT = "other"  # the one label of every path that no route serves
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
BATCH_REQUEST_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
BATCH_TOKEN_BUCKETS = (32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536)


class Histogram:
    """Cumulative-bucket histogram (Prometheus semantics). Not locked: ServerMetrics locks it."""

    def __init__(self, buckets: Sequence[float]):
        self.buckets = tuple(buckets)
        self.counts = [0] * (len(self.buckets) + 1)  # the last one is +Inf
        self.total = 0.0
        self.n = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value
        self.n += 1

    def lines(self, name: str, labels: str = "") -> list[str]:
        out, running = [], 0
        sep = "," if labels else ""
        for bound, count in zip((*self.buckets, float("inf")), self.counts):
            running += count
            le = "+Inf" if bound == float("inf") else repr(float(bound)) if isinstance(bound, float) else str(bound)
            out.append(f'{name}_bucket{{{labels}{sep}le="{le}"}} {running}')
        braces = f"{{{labels}}}" if labels else ""
        out.append(f"{name}_sum{braces} {self.total!r}")
        out.append(f"{name}_count{braces} {self.n}")
        return out


def endpoint_label(path: str, served: Collection[str]) -> str:
    """The ``endpoint`` label of a request to ``path``: the path itself where a route serves it
    (``/v1/NAME``, NAME a served metric's name or alias: ``ScoringService.paths``), else
    :data:`OTHER_ENDPOINT`. A label per path sent let 5,000 random paths grow /metrics from
    11 KB to 10.3 MB; the served paths are finite."""
    name = path[4:] if path.startswith("/v1/") else ""
    return path if name in served else OTHER_ENDPOINT


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class ServerMetrics:
    """The server's metrics. Thread-safe (one lock): HTTP handlers and the batching worker
    record into it at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: dict[tuple[str, int], int] = {}
        self.disconnects: dict[str, int] = {}
        self.latency: dict[str, Histogram] = {}
        self.batch_requests = Histogram(BATCH_REQUEST_BUCKETS)
        self.batch_tokens = Histogram(BATCH_TOKEN_BUCKETS)
        self.batch_seconds = Histogram(LATENCY_BUCKETS)

    def observe_request(self, endpoint: str, status: int, seconds: float) -> None:
        """One answered request; status 499 (CLIENT_CLOSED_REQUEST): its client went away first,
        counted in ``rapidscore_client_disconnects_total`` too. ``endpoint``: a bounded label
        (:func:`endpoint_label`), never a path as sent."""
        with self._lock:
            key = (endpoint, status)
            self.requests[key] = self.requests.get(key, 0) + 1
            if status == CLIENT_CLOSED_REQUEST:
                self.disconnects[endpoint] = self.disconnects.get(endpoint, 0) + 1
            histogram = self.latency.get(endpoint)
            if histogram is None:
                histogram = self.latency[endpoint] = Histogram(LATENCY_BUCKETS)
            histogram.observe(seconds)

    def observe_batch(self, n_requests: int, n_tokens: int, seconds: float) -> None:
        with self._lock:
            self.batch_requests.observe(n_requests)
            self.batch_tokens.observe(n_tokens)
            self.batch_seconds.observe(seconds)

    def render(self, *, queue_depth: int, max_queue: int, rejected: int, ready: bool, dropped: int = 0) -> str:
        """The Prometheus text format (version 0.0.4)."""
        with self._lock:
            lines = ["# HELP rapidscore_requests_total HTTP requests by endpoint and status code.",
                     "# TYPE rapidscore_requests_total counter"]
            for (endpoint, status), count in sorted(self.requests.items()):
                lines.append(f'rapidscore_requests_total{{endpoint="{_escape(endpoint)}",status="{status}"}} {count}')
            lines += ["# HELP rapidscore_client_disconnects_total Requests whose client closed the connection "
                      "before the answer (status 499 above).",
                      "# TYPE rapidscore_client_disconnects_total counter"]
            for endpoint, count in sorted(self.disconnects.items()):
                lines.append(f'rapidscore_client_disconnects_total{{endpoint="{_escape(endpoint)}"}} {count}')
            lines += ["# HELP rapidscore_request_duration_seconds Request latency, from the first byte to the answer.",
                      "# TYPE rapidscore_request_duration_seconds histogram"]
            for endpoint, histogram in sorted(self.latency.items()):
                lines += histogram.lines("rapidscore_request_duration_seconds", f'endpoint="{_escape(endpoint)}"')
            lines += ["# HELP rapidscore_batch_requests Requests per encoder batch.",
                      "# TYPE rapidscore_batch_requests histogram",
                      *self.batch_requests.lines("rapidscore_batch_requests"),
                      "# HELP rapidscore_batch_tokens Tokens per encoder batch.",
                      "# TYPE rapidscore_batch_tokens histogram",
                      *self.batch_tokens.lines("rapidscore_batch_tokens"),
                      "# HELP rapidscore_batch_duration_seconds Time the worker spent on one batch.",
                      "# TYPE rapidscore_batch_duration_seconds histogram",
                      *self.batch_seconds.lines("rapidscore_batch_duration_seconds")]
        lines += ["# HELP rapidscore_queue_depth Requests waiting for the worker.",
                  "# TYPE rapidscore_queue_depth gauge", f"rapidscore_queue_depth {queue_depth}",
                  "# HELP rapidscore_queue_capacity Requests that may wait before new ones get 503.",
                  "# TYPE rapidscore_queue_capacity gauge", f"rapidscore_queue_capacity {max_queue}",
                  "# HELP rapidscore_rejected_total Requests refused because the queue was full or closing.",
                  "# TYPE rapidscore_rejected_total counter", f"rapidscore_rejected_total {rejected}",
                  "# HELP rapidscore_dropped_total Accepted requests dropped before they were computed "
                  "(their client went away).",
                  "# TYPE rapidscore_dropped_total counter", f"rapidscore_dropped_total {dropped}",
                  "# HELP rapidscore_ready 1 once the models are loaded and warm.",
                  "# TYPE rapidscore_ready gauge", f"rapidscore_ready {int(ready)}"]
        return "\n".join(lines) + "\n"
