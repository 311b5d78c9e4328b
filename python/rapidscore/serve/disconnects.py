"""Clients that go away before their answer: an ASGI middleware that notices the closed
connection while a scoring request waits, cancels the request (work not yet computed is dropped:
a queued request is skipped, a request encoded in pieces stops between pieces) and counts it
apart, as status 499 in ``rapidscore_requests_total`` and in ``rapidscore_client_disconnects_total``
(it used to count as a 500, and its work was computed for nobody). A request whose body did not
arrive within ``body_timeout`` is cancelled the same way but counted as the server's 408, not as a
disconnect."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from rapidscore.serve.prometheus import CLIENT_CLOSED_REQUEST, REQUEST_TIMEOUT, endpoint_label

__all__ = ["ClientDisconnects", "CLIENT_GONE", "BODY_TIMED_OUT"]

CLIENT_GONE = "rapidscore.client_gone"  # scope key: set once the client closed the connection
# Scope key set by the server's protocol (serve/server.py) when it answered 408 for a body that did
# not arrive in time: the application then sees http.disconnect, but the client did not leave.
BODY_TIMED_OUT = "rapidscore.body_timed_out"


class ClientDisconnects:
    """ASGI middleware over the requests whose path starts with ``prefix``.

    Once the application has read the whole body, one task waits on the connection: the server
    says ``http.disconnect`` when the client closes it (or when the answer is complete). A
    disconnect before the answer cancels the application's task; cancelling the awaiting
    coroutine cancels the batcher's future (``asyncio.wrap_future``), which drops the request's
    remaining work. A client that leaves while still sending the body is counted the same way.
    ``scope[CLIENT_GONE]`` is set for the middlewares inside, so that they do not count the
    request again."""

    def __init__(self, app: Any, service: Any, prefix: str = "/v1/"):
        self.app, self.service, self.prefix = app, service, prefix

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope.get("path", "").startswith(self.prefix):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        gone = asyncio.get_running_loop().create_future()
        answered = False
        watcher: asyncio.Future | None = None

        def client_left() -> None:
            if not answered and not gone.done():
                scope[CLIENT_GONE] = True
                gone.set_result(None)

        async def watch() -> None:
            message = await receive()  # returns when the client leaves or the answer is complete
            if message["type"] == "http.disconnect":
                client_left()

        async def receive_watched() -> dict:
            nonlocal watcher
            if watcher is not None:  # the body is in: only a disconnect can come
                await asyncio.shield(gone)
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.disconnect":
                client_left()
            elif not message.get("more_body", False):
                watcher = asyncio.ensure_future(watch())
            return message

        async def send_watched(message: dict) -> None:
            nonlocal answered
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                answered = True
            await send(message)

        task = asyncio.ensure_future(self.app(scope, receive_watched, send_watched))
        gone.add_done_callback(lambda _: None if answered else task.cancel())
        try:
            await task
        except asyncio.CancelledError:
            if not gone.done() or answered:
                raise  # the server is stopping, not the client leaving
        finally:
            if watcher is not None:
                watcher.cancel()
        if gone.done() and not answered:
            status = REQUEST_TIMEOUT if scope.get(BODY_TIMED_OUT) else CLIENT_CLOSED_REQUEST
            self.service.metrics.observe_request(endpoint_label(scope["path"], self.service.paths), status,
                                                 time.perf_counter() - started)
