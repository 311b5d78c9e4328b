"""Integrations with other frameworks, each behind its own extra and imported only when used:
``rapidscore.integrations.ray`` (Ray Data; ``pip install 'rapidscore[ray]'``),
``rapidscore.integrations.deepeval`` (deepeval metrics) and ``rapidscore.integrations.ragas``
(ragas metrics; both ``pip install 'rapidscore[integrations]'``)."""

from __future__ import annotations
