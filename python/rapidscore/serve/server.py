"""Running the service under uvicorn: a graceful shutdown that answers every accepted request,
time limits for slow clients, a cap on open connections, and an exit when the models cannot load."""

from __future__ import annotations

import re
import socket
import sys
import threading
from collections import OrderedDict
from typing import Any, cast

from rapidscore.serve.config import ServeConfig, is_loopback
from rapidscore.serve.disconnects import BODY_TIMED_OUT
from rapidscore.serve.process_tuning import tune_process

__all__ = ["serve", "make_server", "HEALTH_RESERVE"]

# Connections beyond ``max_connections`` kept for health probes while every connection holds a
# request in progress (none can be closed to make room): they answer /health, 503 otherwise.
HEALTH_RESERVE = 8
# File descriptors the process needs besides its connections (models, logs, threads' pipes).
_OTHER_FILES = 128
# How long a connection answered 431 may go on sending before it is closed (see _head_too_large).
_LINGER_SECONDS = 2.0


def make_server(config: ServeConfig, app: Any = None, *, max_connections: int | None = None,
                **uvicorn_options: Any) -> Any:
    """A ``uvicorn.Server`` for ``app`` (default: the app of ``config``), not started. On
    SIGINT/SIGTERM (or ``server.should_exit = True``) uvicorn stops accepting, waits for the
    requests in flight, then the app's shutdown drains the scoring queue. Its connections follow
    ``config``'s ``header_timeout``, ``body_timeout`` and ``max_connections`` (or
    ``max_connections`` given here); ``server.connection_guard`` keeps their count."""
    try:
        import uvicorn
    except ModuleNotFoundError as exc:
        raise ImportError(f"rapidscore serve needs the [serve] extra: pip install 'rapidscore[serve]' ({exc})") \
            from exc
    if app is None:
        from rapidscore.serve.app import create_app

        app = create_app(config)
    guard = ConnectionGuard(max_connections or config.max_connections, config.header_timeout, config.body_timeout,
                            config.max_header_bytes)
    options: dict[str, Any] = dict(host=config.host, port=config.port, log_level=config.log_level, access_log=False,
                                   lifespan="on", http=guarded_protocol(guard), ws="none")
    options.update(uvicorn_options)
    server: Any = uvicorn.Server(uvicorn.Config(app, **options))
    server.connection_guard = guard
    return server


class ConnectionGuard:
    """The open connections of one server: at most ``max_connections`` regular ones, plus
    :data:`HEALTH_RESERVE` that answer only /health.

    A connection is idle while it holds no request in progress (it has sent nothing yet, is still
    sending its request head, or waits between keep-alive requests). When a connection opens at
    the cap, the connection idle the longest is closed to make room: slow and idle clients hold
    no work, so they give way to new ones, and a health probe always gets in while any
    connection is idle. ``evicted``: connections closed that way."""

    def __init__(self, max_connections: int, header_timeout: float, body_timeout: float,
                 max_header_bytes: int = 65536):
        self.max_connections, self.header_timeout, self.body_timeout = max_connections, header_timeout, body_timeout
        self.max_header_bytes = max_header_bytes
        self.regular: set = set()
        self.idle: OrderedDict = OrderedDict()  # regular connections without a request, longest idle first
        self.reserve: set = set()
        self.evicted = 0

    def admit(self, connection: Any) -> str:
        """``"regular"``, ``"health"`` (a reserve connection) or ``"refused"``."""
        if len(self.regular) >= self.max_connections and self.idle:
            victim, _ = self.idle.popitem(last=False)
            self.regular.discard(victim)
            self.evicted += 1
            victim.evict()
        if len(self.regular) < self.max_connections:
            self.regular.add(connection)
            self.idle[connection] = None
            return "regular"
        if len(self.reserve) < HEALTH_RESERVE:
            self.reserve.add(connection)
            return "health"
        return "refused"

    def busy(self, connection: Any) -> None:
        self.idle.pop(connection, None)

    def rested(self, connection: Any) -> None:
        if connection in self.regular:
            self.idle[connection] = None
            self.idle.move_to_end(connection)

    def forget(self, connection: Any) -> None:
        self.regular.discard(connection)
        self.idle.pop(connection, None)
        self.reserve.discard(connection)


def _raw_response(status: str, detail: str, retry_after: bool = False) -> bytes:
    import json

    body = json.dumps({"detail": detail, "field": None}).encode()
    head = (f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
            + ("retry-after: 1\r\n" if retry_after else "") + "connection: close\r\n\r\n")
    return head.encode() + body


def guarded_protocol(guard: ConnectionGuard) -> type:
    """uvicorn's httptools protocol with ``guard``'s limits.

    uvicorn bounds neither the time a client takes to send its request head (it arms only a
    keep-alive timer after a response) nor its body, and accepts connections without limit: about
    20,000 sockets that sent only a request line exhausted the process's file descriptors. Here a
    request head must arrive within ``header_timeout`` of the connection opening (on a keep-alive
    connection: of the request's first byte), its body within ``body_timeout`` of the head; a late
    client gets 408 and the connection closes (one that sent nothing is just closed). Nor does it
    bound the head's size (100 MB of headers were held in memory): a head (request line, headers,
    blank line) of more than ``max_header_bytes`` gets 431 and the connection closes; one of at
    most that many is served, however the bytes are split into reads or follow a pipelined body."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ModuleNotFoundError as exc:  # httptools is part of the [serve] extra
        raise ImportError(f"rapidscore serve needs the [serve] extra (httptools): pip install "
                          f"'rapidscore[serve]' ({exc})") from exc

    class GuardedHttpToolsProtocol(HttpToolsProtocol):
        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self.deadline: Any = None
            self.reading_head = False  # a request head has begun and is not complete (a late one gets 408)
            self.head_bytes = 0  # bytes of the current request head fed to the parser so far
            self.parsing_body = False  # the parser is between a head's end and its message's end
            self.body_left: int | None = None  # Content-Length bytes still to parse; None: chunked
            self.chunks = _ChunkedFraming()  # where a chunked body ends
            self.fed_tail = b""  # the last bytes fed of the current head (its CRLF CRLF may straddle reads)
            self.phase_changes = 0  # heads and bodies begun: the tail is dropped when a piece changes phase
            self.lingering = False  # answered 431: later bytes are read and dropped until the close
            self.in_request = False  # head complete, response not yet complete
            kind = guard.admit(self)
            if kind == "refused":
                transport.write(_raw_response("503 Service Unavailable",
                                              "too many open connections; retry later", retry_after=True))
                transport.close()
                return
            if kind == "health":
                self.app = _health_only(self.app)
            self._arm(guard.header_timeout, self._head_timed_out)

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            guard.forget(self)
            super().connection_lost(exc)

        def evict(self) -> None:
            self._disarm()
            if not self.transport.is_closing():
                self.transport.close()

        def data_received(self, data: bytes) -> None:
            """The parser is fed in pieces cut where a request head or body ends, so that each
            head is measured from its first byte to its blank line: measured as the bytes of one
            read after parsing, a head that arrived whole (70,000 bytes on loopback) was never
            counted, and one that followed a body in the same read was counted with it."""
            if self.lingering:
                return
            if not self.in_request and self.deadline is None:  # a new request starts (after a keep-alive wait)
                self._arm(guard.header_timeout, self._head_timed_out)
            start, end = 0, len(data)
            while start < end and not self.transport.is_closing():
                if self.parsing_body:
                    stop = self._body_piece_end(data, start)
                elif not self.reading_head and data[start] in b"\r\n":
                    # Blank lines before a request: skipped by the parser, not part of its head.
                    stop = start + 1
                    while stop < end and data[stop] in b"\r\n":
                        stop += 1
                else:
                    blank = self._after_blank_line(data, start)
                    stop = end if blank < 0 else blank
                    if self.head_bytes + stop - start > guard.max_header_bytes:
                        self._head_too_large()
                        return
                    self.head_bytes += stop - start
                self._feed(data, start, stop)
                start = stop

        def _feed(self, data: bytes, start: int, stop: int) -> None:
            piece = data if start == 0 and stop == len(data) else memoryview(data)[start:stop]
            phase = self.phase_changes
            super().data_received(piece)  # type: ignore[arg-type]  # httptools takes any buffer
            self.fed_tail = b"" if self.phase_changes != phase else (self.fed_tail + bytes(piece[-3:]))[-3:]

        def _after_blank_line(self, data: bytes, start: int) -> int:
            """The index in ``data`` just past the first CRLF CRLF that ends after ``start`` (with
            the bytes of this head fed before it); -1: none. The parser ends a head only there: it
            takes no bare LF."""
            joint = self.fed_tail + data[start:start + 3]
            found = joint.find(b"\r\n\r\n")
            if found >= 0:
                return start + found + 4 - len(self.fed_tail)
            found = data.find(b"\r\n\r\n", start)
            return -1 if found < 0 else found + 4

        def _body_piece_end(self, data: bytes, start: int) -> int:
            """Where to cut ``data`` so that a piece ends where the body ends (then what follows,
            a pipelined request, is measured as a head)."""
            if self.body_left is not None:
                return len(data) if self.body_left <= 0 else min(len(data), start + self.body_left)
            end = self.chunks.end(data, start)
            return len(data) if end < 0 else end

        def _head_too_large(self) -> None:
            self._disarm()
            if self.in_request:  # a response of ours is under way (pipelining): only a close can say it
                self.transport.close()
                return
            self.transport.write(_raw_response("431 Request Header Fields Too Large",
                                               f"request head over {guard.max_header_bytes} bytes"))
            # Closing with the rest of the head unread would reset the connection, which may discard
            # the answer before the client reads it: end our side, drop what still comes, then close.
            self.lingering = True
            if self.transport.can_write_eof():
                self.transport.write_eof()
            self._arm(min(guard.header_timeout, _LINGER_SECONDS), self.evict)

        def on_message_begin(self) -> None:
            self.reading_head = True
            super().on_message_begin()

        def on_headers_complete(self) -> None:
            self.in_request, self.reading_head, self.head_bytes = True, False, 0
            self.parsing_body, self.phase_changes = True, self.phase_changes + 1
            self.body_left = _content_length(self.headers)
            if self.body_left is None:
                self.chunks = _ChunkedFraming()
            guard.busy(self)
            self._arm(guard.body_timeout, self._body_timed_out)
            super().on_headers_complete()

        def on_body(self, body: bytes) -> None:
            if self.body_left is not None:
                self.body_left -= len(body)
            super().on_body(body)

        def on_message_complete(self) -> None:
            self.parsing_body, self.phase_changes = False, self.phase_changes + 1
            self._disarm()
            super().on_message_complete()
            if not self.in_request:
                # Answered before its body ended (413 from Content-Length): the body's bytes
                # cancelled uvicorn's keep-alive timer, so this one closes the idle connection.
                self._arm(guard.header_timeout, self._head_timed_out)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self.cycle is None or self.cycle.response_complete:  # no pipelined request started
                self.in_request = False
                guard.rested(self)

        def _arm(self, seconds: float, callback: Any) -> None:
            self._disarm()
            self.deadline = self.loop.call_later(seconds, callback)

        def _disarm(self) -> None:
            if self.deadline is not None:
                self.deadline.cancel()
                self.deadline = None

        def _head_timed_out(self) -> None:
            self.deadline = None
            if self.transport.is_closing():
                return
            if self.reading_head and not self.in_request:  # no response of ours under way
                self.transport.write(_raw_response(
                    "408 Request Timeout", f"request head not received within {guard.header_timeout:g} s"))
            self.transport.close()

        def _body_timed_out(self) -> None:
            self.deadline = None
            if self.transport.is_closing():
                return
            cycle = self.cycle
            if cycle is not None and not cycle.response_started and not self.pipeline:
                self.transport.write(_raw_response(
                    "408 Request Timeout", f"request body not received within {guard.body_timeout:g} s"))
                cast(dict, cycle.scope)[BODY_TIMED_OUT] = True  # counted as this 408, not as a client that left
                cycle.disconnected = True  # the application's receive() now says http.disconnect
                cycle.message_event.set()
            self.transport.close()

    return GuardedHttpToolsProtocol


def _content_length(headers: list) -> int | None:
    """The body's length from a request head the parser accepted (it refuses Content-Length with
    Transfer-Encoding, and any Transfer-Encoding not ending in chunked); None: chunked."""
    length = 0
    for name, value in headers:
        if name == b"transfer-encoding":
            return None
        if name == b"content-length":
            length = int(value) if value.strip().isdigit() else 0
    return length


# A chunk's size line as llhttp takes it: hex size, optional whitespace and extensions, CRLF.
_CHUNK_SIZE_LINE = re.compile(rb"([0-9a-fA-F]+)[ \t]*(?:;[^\r\n]*)?\r\n")


class _ChunkedFraming:
    """Finds where a chunked request body ends, from its framing (chunk sizes, the trailer
    section's blank line), across reads: the parser (llhttp) says that a message ended, not where
    in the bytes given to it. A scan for CRLF CRLF instead would stop at every one inside the
    chunks' data (a body made of them took 35 times as long to parse); this takes one regular
    expression match per chunk, skipping the data. Framing the parser refuses (it answers 400)
    ends the search: ``end`` returns -1 from then on."""

    _LONGEST_LINE = 4096  # a size or trailer line split across reads is kept up to this length

    def __init__(self) -> None:
        self.left = 0  # bytes of chunk data, and its CRLF, still to come
        self.pending = b""  # the start of a line whose end is in a later read
        self.trailers = False  # after the last (zero-size) chunk
        self.done = False  # the end was found, or the framing was not understood

    def end(self, data: bytes, start: int) -> int:
        """The index in ``data`` just past the body's end, scanning from ``start`` (the bytes
        after those of the previous call); -1: not in ``data``."""
        position, size = start, len(data)
        while position < size and not self.done:
            if self.left:  # the rest of a chunk's data (and its CRLF), begun in an earlier read
                step = min(self.left, size - position)
                self.left -= step
                position += step
            elif self.pending or self.trailers:
                newline = data.find(b"\n", position)
                if newline < 0:
                    self._keep(data, position)
                    return -1
                line, position = self.pending + data[position:newline + 1], newline + 1
                self.pending = b""
                if not self.trailers:
                    match = _CHUNK_SIZE_LINE.fullmatch(line)
                    self.done = match is None
                    self.trailers = match is not None and int(match.group(1), 16) == 0
                    self.left = 0 if match is None or self.trailers else int(match.group(1), 16) + 2
                elif line == b"\r\n":  # the blank line after the trailers: the message's end
                    self.done = True
                    return position
            else:  # a size line, then the chunk's data, skipped
                match = _CHUNK_SIZE_LINE.match(data, position)
                if match is None:
                    if data.find(b"\n", position) < 0:
                        self._keep(data, position)
                    else:
                        self.done = True
                    return -1
                chunk = int(match.group(1), 16)
                if chunk == 0:
                    self.trailers, position = True, match.end()
                else:
                    position = match.end() + chunk + 2
                    if position > size:
                        self.left, position = position - size, size
        return -1

    def _keep(self, data: bytes, position: int) -> None:
        """Keep the start of a line that ends in a later read."""
        self.pending += data[position:]
        self.done = len(self.pending) > self._LONGEST_LINE


def _health_only(app: Any) -> Any:
    """The application for a reserve connection: /health, then the connection closes; anything
    else 503."""

    async def answer(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("path") != "/health":
            await send({"type": "http.response.start", "status": 503,
                        "headers": [(b"content-type", b"application/json"), (b"retry-after", b"1"),
                                    (b"connection", b"close")]})
            await send({"type": "http.response.body",
                        "body": b'{"detail":"too many open connections; retry later","field":null}'})
            return

        async def send_closing(message: dict) -> None:
            if message["type"] == "http.response.start":
                message = dict(message, headers=[*message.get("headers", ()), (b"connection", b"close")])
            await send(message)

        await app(scope, receive, send_closing)

    return answer


def serve(config: ServeConfig, announce: str = "text") -> None:
    """Run the server until interrupted (blocking). ``announce``: print the address once bound as
    ``"text"``, ``"json"`` (one line) or ``"none"``. Raises ``RuntimeError`` (after a clean
    shutdown) when the models fail to load: a server that can never answer does not keep running."""
    import json

    if config.insecure and config.api_key is None and not is_loopback(config.host):
        print(f"rapidscore serve: warning: serving on {config.host} without an API key (--insecure): anyone who "
              "can reach this port can use it", file=sys.stderr, flush=True)
    server = make_server(config, max_connections=_connections_within_file_limit(config.max_connections))
    service = server.config.app.state.service
    tune_process(service)
    sock = socket.socket(socket.AF_INET6 if ":" in config.host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((config.host, config.port))  # bound here, so that port 0 can be announced
    except OSError as exc:
        sock.close()
        raise ValueError(f"cannot listen on {config.host}:{config.port}: {exc.strerror or exc}") from None
    port = sock.getsockname()[1]
    url = f"http://{config.host}:{port}"
    if announce == "json":
        print(json.dumps({"url": url, "host": config.host, "port": port}), flush=True)
    elif announce == "text":
        print(f"rapidscore serve: listening on {url} (ready once GET /health answers 200)", flush=True)
    threading.Thread(target=_stop_if_loading_fails, args=(server, service), name="rapidscore-load-watch",
                     daemon=True).start()
    server.run(sockets=[sock])
    if service.load_error is not None:
        raise RuntimeError(f"the models failed to load: {service.load_error}")


def _stop_if_loading_fails(server: Any, service: Any) -> None:
    """Shut the server down once loading has failed (every request would get 503 forever)."""
    while not service.ready.wait(0.1):
        if service.load_error is not None:
            server.should_exit = True
            return
        if server.should_exit:
            return


def _connections_within_file_limit(wanted: int) -> int:
    """``wanted``, raising the soft limit of open files if it is too low for that many
    connections (up to the hard limit); a lower cap, with a warning, where the hard limit is
    lower (connections beyond it would fail to open with EMFILE, health probes included)."""
    try:
        import resource
    except ModuleNotFoundError:  # not on Windows
        return wanted
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = wanted + HEALTH_RESERVE + _OTHER_FILES
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    if soft != resource.RLIM_INFINITY and soft < needed:
        fitting = max(1, soft - HEALTH_RESERVE - _OTHER_FILES)
        print(f"rapidscore serve: warning: max_connections {wanted} needs about {needed} open files, the limit "
              f"is {soft} (ulimit -n): capping connections at {fitting}", file=sys.stderr, flush=True)
        return fitting
    return wanted
