"""The layer every metric shares: input normalisation, readers, signatures, results, CLI options."""

from __future__ import annotations
