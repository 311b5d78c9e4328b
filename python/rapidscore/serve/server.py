"""Running the service under uvicorn, with a graceful shutdown that answers every accepted request."""

from __future__ import annotations

import socket
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


def serve(config: ServeConfig) -> None:
    """Run the server until interrupted (blocking)."""
    server = make_server(config)
    if config.port == 0:  # a free port: bind here to print it
        sock = socket.socket(socket.AF_INET6 if ":" in config.host else socket.AF_INET)
        sock.bind((config.host, 0))
        print(f"rapidscore serve: listening on http://{config.host}:{sock.getsockname()[1]}", flush=True)
        server.run(sockets=[sock])
        return
    print(f"rapidscore serve: listening on http://{config.host}:{config.port}", flush=True)
    server.run()
