"""``rapidscore serve``: the HTTP scoring service (argument definitions only; FastAPI and uvicorn
load when the command runs)."""

from __future__ import annotations

import argparse
from typing import Any

from rapidscore.common.choices import LOG_LEVELS
from rapidscore.common.cli_options import add_common_options, add_long_texts_option
from rapidscore.common.file_options import input_option, model_option

API_KEY_ENV = "RAPIDSCORE_API_KEY"  # rapidscore.serve.config.API_KEY_ENV (not imported: --help stays light)


class _RefuseKeyOnCommandLine(argparse.Action):
    """``--api-key VALUE`` is an error that does not repeat the value (it would otherwise be read as
    an abbreviation of --api-key-file and echoed in a "file not found" message)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        parser.error(f"--api-key: the key is never taken from the command line (process listings and shell "
                     f"history show it): set ${API_KEY_ENV} or use --api-key-file FILE")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    input_option(parser.add_argument("--config", metavar="FILE", help="settings file (JSON or TOML; keys as the "
                                     "flags, with underscores); flags given on the command line win"))
    parser.add_argument("--host", help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, help="port (default 8000; 0 picks a free one)")
    model_option(parser.add_argument("--model", action="append", default=None, metavar="MODEL",
                        help="a model to serve (repeatable: requests choose one with \"model\"; the first is the "
                             "default; default: the embedded all-MiniLM-L6-v2)"))
    parser.add_argument("--layer", type=int, action="append", default=None, metavar="N",
                        help="BERTScore's layer, loaded for each model (repeatable: requests choose one with "
                             "\"num_layers\"; the first is the default; default: each model's tuned or last layer)")
    add_long_texts_option(parser, default=None)  # None: from --config, else truncate
    _add_metric_settings(parser)
    parser.add_argument("--batch-tokens", type=int, default=None,
                        help="tokens per batched encoder pass at most (default 8192)")
    parser.add_argument("--max-batch-requests", type=int, default=None, help="requests per batch at most (default 256)")
    parser.add_argument("--max-queue", type=int, default=None,
                        help="requests waiting before new ones get 503 (default 1024)")
    parser.add_argument("--workers", type=int, default=None,
                        help="batches encoded at once (default 2; on a CPU each gets threads / workers)")
    parser.add_argument("--runtime-memory", type=int, default=None, metavar="MIB",
                        help="MiB of runtime memory reserved for the batches and kept, so that the server's memory "
                             "stays flat (default 1024; 0: none kept, each batch's memory given back)")
    parser.add_argument("--solo-threads", type=int, default=None,
                        help="runtime threads of a batch that runs while the other workers are idle (default: "
                             "every core, on a CPU with 2+ workers; 0: off)")
    parser.add_argument("--max-items", type=int, default=None, help="items per request at most (default 1024)")
    parser.add_argument("--max-body-bytes", type=int, default=None, help="request body size at most (default 1000000)")
    parser.add_argument("--max-texts", type=int, default=None,
                        help="texts per request at most, every reference counted (default 8192; more: 413)")
    parser.add_argument("--max-tokens", type=int, default=None,
                        help="tokens of a request's distinct texts at most (default 65536; more: 413)")
    parser.add_argument("--no-warmup", dest="warmup", action="store_const", const=False, default=None,
                        help="skip the warm-up calls before /health turns ready")
    parser.add_argument("--log-level", default=None, choices=LOG_LEVELS, type=str.lower,
                        help="uvicorn's log level (default warning)")
    parser.add_argument("--header-timeout", type=float, default=None,
                        help="seconds a client has to send its request head (default 10; later: 408, closed)")
    parser.add_argument("--body-timeout", type=float, default=None,
                        help="seconds a client has to send its request body after the head (default 30)")
    parser.add_argument("--max-header-bytes", type=int, default=None,
                        help="request line and headers size at most (default 65536; more: 431, closed)")
    parser.add_argument("--max-connections", type=int, default=None,
                        help="open connections at most (default 1000); at the cap the longest idle one is closed "
                             "to make room, and /health still answers")
    input_option(parser.add_argument("--api-key-file", metavar="FILE", default=None,
                        help=f"require the API key held in FILE (default: ${API_KEY_ENV} if set) as "
                             "'Authorization: Bearer KEY' or 'X-API-Key: KEY' on every request but /health"))
    parser.add_argument("--api-key", nargs="?", action=_RefuseKeyOnCommandLine, help=argparse.SUPPRESS)
    parser.add_argument("--insecure", action="store_const", const=True, default=None,
                        help="allow a --host other than loopback without an API key")
    parser.add_argument("--cors-origin", dest="cors_origins", action="append", metavar="ORIGIN", default=None,
                        help="browser origin allowed to call the API (repeatable; default: none)")
    parser.add_argument("--docs", action="store_const", const=True, default=None,
                        help="serve the interactive API page /docs (it loads Swagger UI from a CDN); "
                             "/openapi.json is always served")
    parser.add_argument("--metric", dest="metrics", action="append", metavar="NAME", default=None,
                        help="serve this registered metric at POST /v1/NAME (repeatable; default: every registered "
                             "metric, the built-in ones and those added with rapidscore.metrics.register)")
    add_common_options(parser, progress_default=False,
                       json_help="announce the listening address as one JSON line (with the port picked for --port 0)")
    # None: a setting not given on the command line comes from --config, else ServeConfig's default.
    parser.set_defaults(device=None, precision=None)


def _add_metric_settings(parser: argparse.ArgumentParser) -> None:
    """One flag per server setting a metric declares (its options declared ``start``): ``--NAME``
    with dashes; None when not given (then from --config, else the declared default)."""
    from rapidscore.common.metric import server_settings
    from rapidscore.metrics import all_metrics

    for metric in all_metrics():
        for setting in server_settings(metric):
            kind: Any = setting.type if setting.type in (int, float) else None
            default = f" (default {setting.default})" if setting.default is not None else ""
            parser.add_argument(f"--{setting.name.replace('_', '-')}", dest=setting.name, type=kind,
                                choices=setting.choices, default=None,
                                action="append" if setting.repeated else "store",
                                help=f"{metric.name}: {setting.help}{default}")


def _metric_settings(args: argparse.Namespace) -> dict:
    from rapidscore.common.metric import server_settings
    from rapidscore.metrics import all_metrics

    return {setting.name: getattr(args, setting.name, None)
            for metric in all_metrics() for setting in server_settings(metric)}


def run(args: argparse.Namespace) -> int:
    from rapidscore.serve.config import load_config
    from rapidscore.serve.server import serve

    config = load_config(
        args.config, host=args.host, port=args.port, model=args.model, layer=args.layer, backend=args.backend,
        device=args.device, precision=args.precision, num_threads=args.threads, long_texts=args.long_texts,
        batch_tokens=args.batch_tokens, max_batch_requests=args.max_batch_requests,
        max_queue=args.max_queue, workers=args.workers, runtime_memory=args.runtime_memory,
        solo_threads=args.solo_threads, max_items=args.max_items,
        max_body_bytes=args.max_body_bytes, max_texts=args.max_texts, max_tokens=args.max_tokens, warmup=args.warmup,
        log_level=args.log_level, header_timeout=args.header_timeout, body_timeout=args.body_timeout,
        max_header_bytes=args.max_header_bytes, max_connections=args.max_connections,
        api_key_file=args.api_key_file, insecure=args.insecure, cors_origins=args.cors_origins, docs=args.docs,
        metrics=args.metrics, **_metric_settings(args))
    serve(config, announce="json" if args.json else ("none" if args.quiet else "text"))
    return 0
