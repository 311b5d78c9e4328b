"""Running the service under uvicorn, with a graceful shutdown that answers every accepted request."""

from __future__ import annotations

import gc
import socket
import sys
import threading
from typing import Any

from rapidscore.serve.config import ServeConfig

__all__ = ["serve", "make_server"]


def make_server(config: ServeConfig, **uvicorn_options: Any) -> Any:
    """A ``uvicorn.Server`` for the app of ``config`` (not started). On SIGINT/SIGTERM (or
    ``server.should_exit = True``) uvicorn stops accepting, waits for the requests in flight,
    then the app's shutdown drains the scoring queue."""
    try:
        import uvicorn
    except ModuleNotFoundError as exc:
        raise ImportError(f"rapidscore serve needs the [serve] extra: pip install 'rapidscore[serve]' ({exc})") \
            from exc
    from rapidscore.serve.app import create_app

    options: dict[str, Any] = dict(host=config.host, port=config.port, log_level=config.log_level, access_log=False,
                   lifespan="on")
    options.update(uvicorn_options)
    return uvicorn.Server(uvicorn.Config(create_app(config), **options))


def serve(config: ServeConfig, announce: str = "text") -> None:
    """Run the server until interrupted (blocking). ``announce``: print the address once bound as
    ``"text"``, ``"json"`` (one line) or ``"none"``."""
    import json

    server = make_server(config)
    _tune_process(server.config.app.state.service)
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
    server.run(sockets=[sock])


def _tune_process(service: Any) -> None:
    """Process-wide settings for a process that only serves (never done for an embedded scorer).

    On 2 cores at 32 clients, p99 went from 166 ms to 120 ms with both: a 1 ms GIL switch interval
    (the event loop waits less behind a worker's Python between runtime calls) and, once the
    models are loaded, ``gc.freeze()`` (collections stop rescanning the models' objects)."""
    sys.setswitchinterval(0.001)

    def freeze_when_ready() -> None:
        service.ready.wait()
        gc.freeze()

    threading.Thread(target=freeze_when_ready, name="rapidscore-gc-freeze", daemon=True).start()
