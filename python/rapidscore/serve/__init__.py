"""Serving: a micro-batching scorer for concurrent callers, and the ``rapidscore serve`` HTTP service.

- :mod:`.micro_batcher`: :class:`MicroBatcher` (bounded queue + workers); :mod:`.batching`:
  :class:`BatchingScorer` (``submit`` -> Future, ``await ascore``, ``score``), usable inside any
  service.
- :mod:`.service`: :class:`ScoringService` (the served metrics, one table of scorers);
  :mod:`.prometheus`: the /metrics text.
- :mod:`.config`: :class:`ServeConfig` (flags or a JSON/TOML file).
- :mod:`.app`: :func:`create_app`, the FastAPI application (the ``[serve]`` extra).
- :mod:`.cli`: ``rapidscore serve``.

Names load on first use: ``import rapidscore.serve`` imports neither FastAPI nor uvicorn.
"""

from __future__ import annotations

from rapidscore.common.lazy import lazy_exports

_EXPORTS = {
    "MicroBatcher": "rapidscore.serve.micro_batcher",
    "BatchingScorer": "rapidscore.serve.batching",
    "BatchStats": "rapidscore.serve.micro_batcher",
    "ServeConfig": "rapidscore.serve.config",
    "ScoringService": "rapidscore.serve.service",
    "create_app": "rapidscore.serve.app",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
