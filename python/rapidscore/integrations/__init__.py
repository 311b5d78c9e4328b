"""Integrations with other frameworks, each behind its own extra and imported only when used:
``rapidscore.integrations.ray`` (Ray Data; ``pip install 'rapidscore[ray]'``)."""

from __future__ import annotations
