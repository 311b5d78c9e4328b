"""The registry of metrics: one entry per metric, found by its name or an older alias.

Every front end that runs "a metric" asks here: ``rapidscore.streaming.score_stream``, the Ray
batch classes and ``score_dataset``, the service's batching, and the CLI (each registered metric
has a command). A metric is added in its own package (a :class:`~rapidscore.common.metric.Metric`
subclass) plus one line in ``BUILTIN`` below, or at run time with :func:`register`; see
docs/architecture.md ("Adding a metric").

Thread-safe: registering takes a lock; lookups read a dict.
"""

from __future__ import annotations

import threading
from importlib import import_module

from rapidscore.common.metric import Metric

__all__ = ["BUILTIN", "get_metric", "metric_names", "register", "unregister", "all_metrics"]

# name -> the module whose METRIC attribute defines it (loaded on first lookup: the modules import
# nothing heavy, but the CLI's --help should not pay for four of them)
BUILTIN = {
    "bertscore": "rapidscore.bertscore.metric",
    "nrr": "rapidscore.nrr.metric",
    "ner": "rapidscore.ner.metric",
    "refusal": "rapidscore.abstention.refusal",
}

_lock = threading.Lock()
_metrics: dict[str, Metric] = {}
_aliases: dict[str, str] = {}
_loaded = False


def _load_builtin() -> None:
    global _loaded
    if _loaded:
        return
    with _lock:
        if _loaded:
            return
        for name, module in BUILTIN.items():
            metric = import_module(module).METRIC
            if metric.name != name:
                raise RuntimeError(f"{module}.METRIC is named {metric.name!r}, registered as {name!r}")
            _add(metric, replace=False)
        _loaded = True


def _add(metric: Metric, replace: bool) -> None:
    if not isinstance(metric, Metric):
        raise TypeError(f"a metric must be a rapidscore.common.metric.Metric instance, got {type(metric).__name__}")
    for name in (metric.name, *metric.front_ends.aliases):
        owner = _metrics.get(name) or _metrics.get(_aliases.get(name, ""))
        if owner is not None and owner.name != metric.name and not replace:
            raise ValueError(f"the metric name {name!r} is taken by {owner!r}")
    _metrics[metric.name] = metric
    for alias in metric.front_ends.aliases:
        _aliases[alias] = metric.name


def register(metric: Metric, *, replace: bool = False) -> Metric:
    """Add ``metric`` (its name and aliases must be free unless ``replace``); returns it."""
    _load_builtin()
    with _lock:
        _add(metric, replace)
    return metric


def unregister(name: str) -> None:
    """Remove a metric registered with :func:`register` (KeyError if unknown)."""
    _load_builtin()
    with _lock:
        metric = _metrics.pop(_aliases.get(name, name))
        for alias in metric.front_ends.aliases:
            _aliases.pop(alias, None)


def get_metric(name: str | Metric) -> Metric:
    """The metric called ``name`` (or an alias of it); a Metric is returned as it is.
    ValueError listing the known names otherwise."""
    if isinstance(name, Metric):
        return name
    _load_builtin()
    metric = _metrics.get(_aliases.get(name, name)) if isinstance(name, str) else None
    if metric is None:
        known = ", ".join(repr(n) for n in metric_names())
        aliases = ", ".join(f"{a!r} ({m})" for a, m in sorted(_aliases.items()))
        also = f"; aliases {aliases}" if aliases else ""
        raise ValueError(f"unknown metric {name!r}: the metrics are {known}{also}")
    return metric


def metric_names() -> list[str]:
    """The registered metrics' names, in registration order."""
    _load_builtin()
    return list(_metrics)


def all_metrics() -> list[Metric]:
    _load_builtin()
    return list(_metrics.values())
