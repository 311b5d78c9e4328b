"""The digest a command's ``--json`` output records of its references, so that ``rapidscore
compare`` can refuse systems scored against different references (their candidates differ by
design; their references must not). Imports nothing heavy: the writers call it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence

__all__ = ["references_sha256"]


def references_sha256(references: Iterable[str | Sequence[str]]) -> str:
    """SHA-256 (hex) of every item's references in order, an item's one reference or list of
    references alike (one JSON list a line)."""
    digest = hashlib.sha256()
    for refs in references:
        refs_list = [refs] if isinstance(refs, str) else list(refs)
        digest.update(json.dumps(refs_list, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass"))
        digest.update(b"\n")
    return digest.hexdigest()
