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

__all__ = ["ServeConfig", "load_config", "read_api_key", "is_loopback", "metric_settings", "API_KEY_ENV"]

# Where ``rapidscore serve`` reads its API key (or from the file of ``--api-key-file``); never from
# a command-line value, which shows in process listings and shell history.
API_KEY_ENV = "RAPIDSCORE_API_KEY"
MIN_API_KEY_LENGTH = 16
_ORIGIN = re.compile(r"^https?://[^/\s?#]+$")


def metric_settings() -> dict[str, Any]:
    """Every registered metric's server settings (its options declared ``start``) by name."""
    from rapidscore.common.metric import server_settings
    from rapidscore.metrics import all_metrics

    return {setting.name: setting for metric in all_metrics() for setting in server_settings(metric)}


@dataclass(frozen=True, init=False)
class ServeConfig:
    """Everything ``rapidscore serve`` fixes at start.

    Models: ``model`` (a name or path, or several: requests choose among them with ``model``;
    the first is the default; None: the embedded all-MiniLM-L6-v2), ``layer`` (BERTScore's
    layer, or several: requests choose with ``num_layers``; the first is the default; None: the
    model's tuned or last layer), ``backend``, ``device``, ``precision``, ``num_threads``,
    ``long_texts`` (texts longer than the model's maximum length: "truncate", or "window"; the
    default of requests that name none).
    Metrics: ``metrics`` (the served metrics by name; default: every registered one) and each
    served metric's own settings (its options declared ``start``, e.g. ``similarity_threshold``,
    ``refusal_method``, ``ner_label_similarity``, ``idf_file``), given as keywords or
    ``settings``; read with :meth:`setting` or as attributes.
    Batching: ``batch_tokens`` (tokens per encoder pass at most), ``max_batch_requests``,
    ``max_queue`` (requests waiting before new ones get 503), ``workers`` (batches encoded at
    once; on a CPU each gets ``thread budget / workers`` runtime threads unless ``num_threads``
    is given: two single-threaded passes of small batches use two cores better than one pass
    over two threads), ``solo_threads`` (runtime threads of a batch that runs while the other
    workers are idle, so that a lone request gets every core; a second copy of the model's
    session. Default: the thread budget, on a CPU with 2+ workers and ``num_threads`` unset;
    0 turns it off).
    Memory: ``runtime_memory`` (MiB: the ONNX Runtime memory that ``rapidscore serve`` reserves
    for its batches in one arena of the process, kept for its life so that its memory stays flat;
    what a batch needs past it is given back when it ends; 0: no arena, every batch's memory given
    back when it ends. A process that embeds the service never gets the arena.)
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
    model: str | tuple[str, ...] | None = None
    layer: int | tuple[int, ...] | None = None
    backend: str | None = None
    device: str = "cpu"
    precision: str = "fp32"
    num_threads: int | None = None
    long_texts: str = "truncate"
    batch_tokens: int = 8192
    max_batch_requests: int = 256
    max_queue: int = 1024
    workers: int = 2
    runtime_memory: int = 1024
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
    settings: dict = field(default_factory=dict)

    def __init__(self, **values: Any):
        declared = metric_settings()
        settings = dict(values.pop("settings", None) or {})
        for name in [name for name in values if name in declared]:
            settings[name] = values.pop(name)
        own = {f.name: f for f in fields(self)}
        unknown = sorted(set(values) - set(own))
        if unknown:
            raise TypeError(f"ServeConfig got unknown setting(s) {unknown}; the metrics' settings: {sorted(declared)}")
        for name, spec in own.items():
            if name == "settings":
                continue
            default = spec.default_factory() if callable(spec.default_factory) else spec.default
            object.__setattr__(self, name, values.get(name, default))
        unknown = sorted(set(settings) - set(declared))
        if unknown:
            raise ValueError(f"unknown metric setting(s) {unknown}; the metrics' settings: {sorted(declared)}")
        # every declared setting resolved once here (given, else its default): a request reads
        # one dict entry, not the registry's declarations
        checked = {name: spec.default for name, spec in declared.items()}
        checked.update({name: declared[name].check(value) for name, value in settings.items()})
        object.__setattr__(self, "settings", checked)
        self.__post_init__()

    def __getattr__(self, name: str) -> Any:  # a metric's setting read as an attribute
        if name.startswith("_") or name == "settings":
            raise AttributeError(name)
        return self.setting(name)

    def setting(self, name: str) -> Any:
        """The value of a server setting: a field of this config, or a metric's setting as
        given, else its declared default."""
        if name in self.__dataclass_fields__ and name != "settings":
            return getattr(self, name)
        if name in self.settings:
            return self.settings[name]
        declared = metric_settings()
        if name not in declared:
            raise AttributeError(f"no server setting {name!r}; the metrics' settings: {sorted(declared)}")
        return declared[name].default

    @property
    def models(self) -> tuple[str, ...]:
        """The served models, the default first."""
        from rapidscore.encoder.model_source import DEFAULT_MODEL

        return self.model if isinstance(self.model, tuple) else (self.model or DEFAULT_MODEL,)

    @property
    def layers(self) -> tuple[int | None, ...]:
        """BERTScore's served layers, the default first (None: each model's own)."""
        return self.layer if isinstance(self.layer, tuple) else (self.layer,)

    def values(self, name: str) -> tuple:
        """The values of a server setting that requests choose among, the default first: the
        served models, the served layers, or a repeated setting's values."""
        if name == "model":
            return self.models
        if name == "layer":
            return self.layers
        value = self.setting(name)
        if isinstance(value, tuple):
            return value
        return () if value is None else (value,)

    def server_value(self, name: str, solo: bool = False) -> Any:
        """The value a request that names none gets from the server setting ``name`` (the
        default of :meth:`values`; an engine keyword of the lone batches' engines if ``solo``)."""
        engine = (self.solo_encoder_options if solo else None) or self.encoder_options
        if name in engine:
            return engine[name]
        if name in ("model", "layer"):
            return self.values(name)[0]
        return self.setting(name)

    def is_file_table(self, name: str) -> bool:
        """Whether the setting ``name`` holds files that requests name by file name (loaded on
        first use, not at start)."""
        declared = metric_settings().get(name)
        return declared is not None and declared.files

    def named(self, name: str, value: Any) -> Any:
        """The value of the setting ``name`` that ``value`` names, or None: the value itself, a
        file by its name without the extension, the embedded model by any of its spellings."""
        from rapidscore.encoder.model_source import is_embedded_model

        served = self.values(name)
        if value in served:
            return value
        if self.is_file_table(name):
            return next((path for path in served if Path(path).stem == value), None)
        embedded = isinstance(value, str) and is_embedded_model(value)
        return next((item for item in served if embedded and isinstance(item, str) and is_embedded_model(item)), None)

    def not_served(self, name: str, value: Any) -> str:
        """Why a request's ``value`` for the setting ``name`` is refused (it names none of its values)."""
        flag = "--" + name.replace("_", "-")
        if name == "model":
            return f"{value!r} is not served here; the served models: {list(self.models)}"
        if name == "layer":
            return (f"{value!r} is not a layer served for {', '.join(map(repr, self.models))}; served: "
                    f"{list(self.layers)} (rapidscore serve {flag})")
        if self.is_file_table(name):
            noun = name.replace("_", " ")
            article = "an" if noun[:1] in "aeiou" else "a"
            return (f"{value!r} is not {article} {noun} this server loaded; loaded: "
                    f"{sorted(Path(path).stem for path in self.values(name))} (rapidscore serve {flag})")
        return f"{value!r} is not one of this server's {name} values: {list(self.values(name))}"

    def __post_init__(self) -> None:
        from rapidscore.errors import check_positive_int

        for name in ("batch_tokens", "max_batch_requests", "max_queue", "workers", "max_items", "max_body_bytes",
                     "max_texts", "max_tokens", "max_header_bytes", "max_connections"):
            check_positive_int(getattr(self, name), name)
        if isinstance(self.runtime_memory, bool) or not isinstance(self.runtime_memory, int) \
                or not 0 <= self.runtime_memory < 2048:
            raise ValueError(f"runtime_memory must be a whole number of MiB from 0 (no arena) to 2047, "
                             f"got {self.runtime_memory!r}")
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
        object.__setattr__(self, "metrics", _check_metrics(self.metrics))
        object.__setattr__(self, "model", _check_several(self.model, "model", str))
        object.__setattr__(self, "layer", _check_several(self.layer, "layer", int))

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


def _check_metrics(names: Any) -> tuple[str, ...]:
    from rapidscore.metrics import get_metric

    if isinstance(names, str) or not isinstance(names, (list, tuple)):
        raise ValueError(f"metrics must be a list of metric names, got {names!r}")
    return tuple(dict.fromkeys(get_metric(name).name for name in names))  # ValueError listing the registered


def _check_several(value: Any, name: str, kind: type) -> Any:
    """``value`` (one, None, or a non-empty list of distinct values of ``kind``): one value as
    it is, a list as a tuple (one element: that element)."""
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if value is None:
        return None
    for item in values:
        if not isinstance(item, kind) or isinstance(item, bool):
            raise ValueError(f"{name} must be a {kind.__name__} or a list of them, got {item!r}")
    if not values or len(set(values)) != len(values):
        raise ValueError(f"{name}: expected distinct values, got {values}")
    return values[0] if len(values) == 1 else tuple(values)


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
        known = ({f.name for f in fields(ServeConfig)} - {"api_key", "settings"}) | {"api_key_file"} \
            | set(metric_settings())
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"{path}: unknown setting(s) {unknown}; known: {sorted(known)}")
    values.update({key: value for key, value in overrides.items() if value is not None})
    key_file = values.pop("api_key_file", None)
    if values.get("api_key") is None:
        values["api_key"] = read_api_key(key_file, environ)
    for name in ("cors_origins", "metrics", "model", "layer"):
        if isinstance(values.get(name), list):
            values[name] = tuple(values[name])
    try:
        return ServeConfig(**values)
    except TypeError as exc:
        raise ValueError(f"bad server settings: {exc}") from None
