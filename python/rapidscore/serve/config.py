"""The server's settings, fixed at start: from flags, a small JSON or TOML file, or both (flags win)."""

from __future__ import annotations

import ipaddress
import math
import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from rapidscore.common.readers import digits_error, load_json, read_text

__all__ = ["ServeConfig", "load_config", "read_api_key", "is_loopback", "API_KEY_ENV"]

# Where ``rapidscore serve`` reads its API key (or from the file of ``--api-key-file``); never from
# a command-line value, which shows in process listings and shell history.
API_KEY_ENV = "RAPIDSCORE_API_KEY"
MIN_API_KEY_LENGTH = 16
_ORIGIN = re.compile(r"^https?://[^/\s?#]+$")


@dataclass(frozen=True)
class ServeConfig:
    """Everything ``rapidscore serve`` fixes at start.

    Model: ``model`` (None: the embedded all-MiniLM-L6-v2), ``layer`` (BERTScore's; None: the
    model's tuned or last layer), ``backend``, ``device``, ``precision``, ``num_threads``.
    Metrics: ``similarity_method``, ``similarity_threshold`` (the default of requests that name
    none), ``refusal_method``, ``ner_label_similarity``, ``long_texts`` (BERTScore's texts longer
    than the model's maximum length: "truncate", or "window"; the responses' signature records
    ``long_texts:window``).
    Batching: ``batch_tokens`` (tokens per encoder pass at most), ``max_batch_requests``,
    ``max_queue`` (requests waiting before new ones get 503), ``workers`` (batches encoded at
    once; on a CPU each gets ``thread budget / workers`` runtime threads unless ``num_threads``
    is given: two single-threaded passes of small batches use two cores better than one pass
    over two threads), ``solo_threads`` (runtime threads of a batch that runs while the other
    workers are idle, so that a lone request gets every core; a second copy of the model's
    session. Default: the thread budget, on a CPU with 2+ workers and ``num_threads`` unset;
    0 turns it off).
    Limits per request: ``max_items`` (candidates, answers, responses or records; more: 413),
    ``max_body_bytes`` (more: 413), ``max_texts`` (texts sent: candidates and every reference,
    answers and references, or responses; more: 413), ``max_tokens`` (tokens of its distinct
    texts, special tokens included; more: 413). A request over ``batch_tokens`` is encoded in
    pieces between other requests' batches, so it does not hold the workers.
    Connections: ``header_timeout`` (seconds for a request head, from the connection opening or,
    on a keep-alive connection, from the request's first byte; later: 408 and closed),
    ``body_timeout`` (seconds for the body, from the end of the head), ``max_header_bytes`` (request
    line and headers; more: 431 and closed), ``max_connections`` (open
    connections at most; at the cap the longest idle one is closed to make room, and a few more
    answer /health only).
    Access: ``api_key`` (requests other than /health need it in ``Authorization: Bearer`` or
    ``X-API-Key``; never printed), ``insecure`` (allow a host other than loopback without an API
    key), ``cors_origins`` (browser origins allowed to call the API; none by default), ``docs``
    (serve the interactive page /docs, which loads Swagger UI from a CDN; off by default).
    """

    host: str = "127.0.0.1"
    port: int = 8000
    model: str | None = None
    layer: int | None = None
    backend: str | None = None
    device: str = "cpu"
    precision: str = "fp32"
    num_threads: int | None = None
    similarity_method: str = "embedding"
    similarity_threshold: float = 0.8
    refusal_method: str = "heuristic"
    ner_label_similarity: str = "embedding"
    long_texts: str = "truncate"
    batch_tokens: int = 8192
    max_batch_requests: int = 256
    max_queue: int = 1024
    workers: int = 2
    solo_threads: int | None = None
    max_items: int = 1024
    max_body_bytes: int = 1_000_000
    max_texts: int = 8192
    max_tokens: int = 65536
    warmup: bool = True
    log_level: str = "warning"
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    max_header_bytes: int = 65536
    max_connections: int = 1000
    api_key: str | None = field(default=None, repr=False)
    insecure: bool = False
    cors_origins: tuple[str, ...] = ()
    docs: bool = False
    metrics: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        from rapidscore.errors import check_positive_int

        for name in ("batch_tokens", "max_batch_requests", "max_queue", "workers", "max_items", "max_body_bytes",
                     "max_texts", "max_tokens", "max_header_bytes", "max_connections"):
            check_positive_int(getattr(self, name), name)
        for name in ("header_timeout", "body_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value <= 0:
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        for name in ("insecure", "docs", "warmup"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
        if self.api_key is not None:
            _check_api_key(self.api_key, "api_key")
        object.__setattr__(self, "cors_origins", _check_origins(self.cors_origins))
        if not isinstance(self.host, str) or not self.host:
            raise ValueError(f"host must be a non-empty string, got {self.host!r}")
        if self.api_key is None and not self.insecure and not is_loopback(self.host):
            raise ValueError(f"host {self.host} is reachable from other machines: set an API key (${API_KEY_ENV} "
                             "or --api-key-file), or pass --insecure to serve without one")
        if self.solo_threads is not None and self.solo_threads != 0:
            check_positive_int(self.solo_threads, "solo_threads")
        if isinstance(self.port, bool) or not isinstance(self.port, int) or not 0 <= self.port <= 65535:
            raise ValueError(f"port must be an int in [0, 65535], got {self.port!r}")
        from rapidscore.common.choices import LOG_LEVELS, LONG_TEXTS

        if self.log_level not in LOG_LEVELS:
            raise ValueError(f"log_level must be one of {LOG_LEVELS}, got {self.log_level!r}")
        if self.long_texts not in LONG_TEXTS:
            raise ValueError(f"long_texts must be one of {LONG_TEXTS}, got {self.long_texts!r}")
        if not -1.0 <= float(self.similarity_threshold) <= 1.0:
            raise ValueError(f"similarity_threshold must be in [-1, 1], got {self.similarity_threshold}")
        object.__setattr__(self, "metrics", _check_metrics(self.metrics))

    @property
    def encoder_options(self) -> dict:
        num_threads = self.num_threads
        if num_threads is None and self.device == "cpu":
            from rapidscore.threads import thread_budget

            num_threads = max(1, thread_budget() // self.workers)
        return dict(backend=self.backend, device=self.device, precision=self.precision, num_threads=num_threads)

    @property
    def solo_encoder_options(self) -> dict | None:
        """``encoder_options`` for the scorers of lone batches, or None when there are none."""
        solo = self.solo_threads
        if solo is None:
            if self.device != "cpu" or self.workers < 2 or self.num_threads is not None:
                return None
            from rapidscore.threads import thread_budget

            solo = thread_budget()
        if solo == 0 or solo == self.encoder_options["num_threads"]:
            return None
        return dict(self.encoder_options, num_threads=solo)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine only: localhost, 127.0.0.0/8 or ::1."""
    if host.lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False  # another name: it may resolve to any interface
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


def _check_api_key(key: Any, source: str) -> str:
    if not isinstance(key, str):
        raise ValueError(f"the API key ({source}) must be a string")
    if not key:
        raise ValueError(f"the API key ({source}) is empty")
    if any(not 0x21 <= ord(char) <= 0x7E for char in key):
        raise ValueError(f"the API key ({source}) must be printable ASCII without spaces (it is sent in a header)")
    if len(key) < MIN_API_KEY_LENGTH:
        raise ValueError(f"the API key ({source}) has {len(key)} characters; use at least {MIN_API_KEY_LENGTH}, e.g. "
                         "python -c 'import secrets; print(secrets.token_urlsafe(32))'")
    return key


# The metrics every server runs, each at its own route; ``metrics`` adds other registered ones.
SERVED_METRICS = ("bertscore", "nrr", "ner", "refusal")


def _check_metrics(names: Any) -> tuple[str, ...]:
    from rapidscore.metrics import get_metric

    if isinstance(names, str) or not isinstance(names, (list, tuple)):
        raise ValueError(f"metrics must be a list of metric names, got {names!r}")
    checked = []
    for name in names:
        metric = get_metric(name)  # ValueError listing the registered metrics
        if metric.name in SERVED_METRICS:
            raise ValueError(f"metrics: {name!r} is served by every server at /v1/{metric.name}; list only others")
        checked.append(metric.name)
    return tuple(dict.fromkeys(checked))


def _check_origins(origins: Any) -> tuple[str, ...]:
    if isinstance(origins, str) or not isinstance(origins, (list, tuple)):
        raise ValueError(f"cors_origins must be a list of origins, got {origins!r}")
    for origin in origins:
        if not isinstance(origin, str) or not (origin == "*" or _ORIGIN.match(origin)):
            raise ValueError(f"cors_origins: {origin!r} is not an origin: scheme://host[:port] without a path "
                             "(e.g. https://app.example.com), or *")
    return tuple(origins)


def read_api_key(path: str | os.PathLike | None, environ: Any = None) -> str | None:
    """The API key from the file ``path`` (surrounding whitespace removed), else from
    ``$RAPIDSCORE_API_KEY``, else None."""
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"API key file not found: {path}")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"{path}: the API key file is not UTF-8 text") from None
        return _check_api_key(text.strip(), str(path))
    environ = os.environ if environ is None else environ
    if API_KEY_ENV in environ:
        return _check_api_key(environ[API_KEY_ENV].strip(), f"${API_KEY_ENV}")
    return None


def load_config(path: str | os.PathLike | None = None, *, environ: Any = None, **overrides: Any) -> ServeConfig:
    """A config from a JSON or TOML file (keys: the field names of :class:`ServeConfig`, and
    ``api_key_file``) with ``overrides`` on top (None values are ignored: flags that were not
    given). The API key comes from ``api_key_file``, else ``$RAPIDSCORE_API_KEY`` (in
    ``environ``, default ``os.environ``); never from the settings file itself."""
    values: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"config file not found: {path}")
        if path.suffix.lower() == ".toml":
            import tomllib  # Python 3.11+

            text = read_text(path, "TOML")  # bounded as a whole document; errors name the file
            try:
                values = tomllib.loads(text)
            except tomllib.TOMLDecodeError as exc:
                raise ValueError(f"{path}: not valid TOML: {exc}") from None
            except ValueError as exc:  # an integer over Python's digit limit: a bare ValueError naming nothing
                raise digits_error(exc, str(path), text) or ValueError(f"{path}: not valid TOML: {exc}") from None
        else:
            values = load_json(path)  # a document over the bound, bad UTF-8, an integer of 5000 digits: named
        if not isinstance(values, dict):
            raise ValueError(f"{path}: expected a table of settings, got {type(values).__name__}")
        if "api_key" in values:
            raise ValueError(f"{path}: api_key is not read from a settings file (settings files get copied and "
                             f"committed): put the key in a file named by api_key_file, or in ${API_KEY_ENV}")
        known = {f.name for f in fields(ServeConfig)} - {"api_key"} | {"api_key_file"}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"{path}: unknown setting(s) {unknown}; known: {sorted(known)}")
    values.update({key: value for key, value in overrides.items() if value is not None})
    key_file = values.pop("api_key_file", None)
    if values.get("api_key") is None:
        values["api_key"] = read_api_key(key_file, environ)
    for name in ("cors_origins", "metrics"):
        if isinstance(values.get(name), list):
            values[name] = tuple(values[name])
    try:
        return ServeConfig(**values)
    except TypeError as exc:
        raise ValueError(f"bad server settings: {exc}") from None
