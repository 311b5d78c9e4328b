"""Access to the HTTP service: the API key check and CORS (``create_app`` installs both from
the :class:`~rapidscore.serve.config.ServeConfig`)."""

from __future__ import annotations

import hmac
import json
from typing import Any

__all__ = ["ApiKeyMiddleware", "install_access_control", "OPEN_PATHS"]

# Paths answered without the key: health probes (load balancers, orchestrators) carry no secret.
OPEN_PATHS = frozenset({"/health"})


class ApiKeyMiddleware:
    """ASGI middleware: a request to anything but :data:`OPEN_PATHS` must carry the key as
    ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``; otherwise 401 JSON. The key is
    compared with :func:`hmac.compare_digest` (its time does not depend on where a guess first
    differs)."""

    def __init__(self, app: Any, api_key: str):
        self.app = app
        self.key = api_key.encode("ascii")

    def authorized(self, headers: Any) -> bool:
        offered = []
        for name, value in headers:
            if name == b"x-api-key":
                offered.append(value.strip())
            elif name == b"authorization":
                scheme, _, credentials = value.strip().partition(b" ")
                if scheme.lower() == b"bearer":
                    offered.append(credentials.strip())
        # Every offered value is compared (no early exit), each in constant time.
        return sum(hmac.compare_digest(value, self.key) for value in offered) > 0

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket") or scope.get("path") in OPEN_PATHS \
                or self.authorized(scope.get("headers") or ()):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        body = json.dumps({"detail": "missing or wrong API key: send it as 'Authorization: Bearer <key>' or "
                                     "'X-API-Key: <key>'", "field": "authorization"}).encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"www-authenticate", b"Bearer")]})
        await send({"type": "http.response.body", "body": body})


def install_access_control(app: Any, config: Any) -> None:
    """Add the API key check (when ``config.api_key`` is set) and CORS (when
    ``config.cors_origins`` names origins) around everything ``app`` has. CORS goes outermost:
    browsers send preflight requests without credentials, and a 401 needs CORS headers for the
    page to read it."""
    if config.api_key is not None:
        app.add_middleware(ApiKeyMiddleware, api_key=config.api_key)
    if config.cors_origins:
        from starlette.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(config.cors_origins), allow_methods=["GET", "POST"],
                           allow_headers=["authorization", "x-api-key", "content-type"], allow_credentials=False,
                           max_age=600)
