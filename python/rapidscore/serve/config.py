"""The server's settings, fixed at start: from flags, a small JSON or TOML file, or both (flags win)."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from rapidscore.common.io import iter_lines, load_json

__all__ = ["ServeConfig", "load_config"]


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
    ``max_body_bytes`` (more: 413).
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
    warmup: bool = True
    log_level: str = "warning"

    def __post_init__(self) -> None:
        from rapidscore.errors import check_positive_int

        for name in ("batch_tokens", "max_batch_requests", "max_queue", "workers", "max_items", "max_body_bytes"):
            check_positive_int(getattr(self, name), name)
        if self.solo_threads is not None and self.solo_threads != 0:
            check_positive_int(self.solo_threads, "solo_threads")
        if isinstance(self.port, bool) or not isinstance(self.port, int) or not 0 <= self.port <= 65535:
            raise ValueError(f"port must be an int in [0, 65535], got {self.port!r}")
        from rapidscore.common.choices import LONG_TEXTS

        if self.long_texts not in LONG_TEXTS:
            raise ValueError(f"long_texts must be one of {LONG_TEXTS}, got {self.long_texts!r}")
        if not -1.0 <= float(self.similarity_threshold) <= 1.0:
            raise ValueError(f"similarity_threshold must be in [-1, 1], got {self.similarity_threshold}")

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


def load_config(path: str | os.PathLike | None = None, **overrides: Any) -> ServeConfig:
    """A config from a JSON or TOML file (keys: the field names of :class:`ServeConfig`) with
    ``overrides`` on top (None values are ignored: flags that were not given)."""
    values: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"config file not found: {path}")
        if path.suffix.lower() == ".toml":
            import tomllib  # Python 3.11+

            try:
                values = tomllib.loads("".join(iter_lines(str(path))))
            except tomllib.TOMLDecodeError as exc:
                raise ValueError(f"{path}: not valid TOML: {exc}") from None
        else:
            values = load_json(path)
        if not isinstance(values, dict):
            raise ValueError(f"{path}: expected a table of settings, got {type(values).__name__}")
        known = {f.name for f in fields(ServeConfig)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"{path}: unknown setting(s) {unknown}; known: {sorted(known)}")
    values.update({key: value for key, value in overrides.items() if value is not None})
    try:
        return ServeConfig(**values)
    except TypeError as exc:
        raise ValueError(f"bad server settings: {exc}") from None
