"""Phase 1 of a BERTScore call: what it scores, before any model runs. The inputs validated and
normalised once (``common/inputs.py``), each distinct stripped sentence kept once, the
(candidate, reference) pairs as indices into them. The scorer's ``plan`` and the service's
``BERTScoreTask.prepare`` (in the caller's thread) both make plans here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rapidscore.common.inputs import normalize_inputs

__all__ = ["ScoringPlan", "make_plan"]


@dataclass(frozen=True)
class ScoringPlan:
    """What one BERTScore call scores, before any model runs.

    ``texts``: the unique stripped sentences to encode. ``pairs``: (m, 2) int64, (candidate,
    reference) as indices into ``texts``, candidate by candidate. ``owners``: (m,) the candidate
    number of each pair (sorted). ``n_candidates``: N, the length of the results.
    """

    texts: list
    pairs: np.ndarray
    owners: np.ndarray
    n_candidates: int

    @classmethod
    def from_normalized(cls, cands: list, groups: list) -> ScoringPlan:
        """The plan of validated inputs (``normalize_inputs``' output): one list of references
        per candidate."""
        unique: dict = {}
        cand_index = [unique.setdefault(c.strip(), len(unique)) for c in cands]
        ref_index = [unique.setdefault(r.strip(), len(unique)) for group in groups for r in group]
        owners = np.repeat(np.arange(len(groups), dtype=np.int64), [len(g) for g in groups])
        pairs = np.empty((len(ref_index), 2), dtype=np.int64)
        pairs[:, 0] = np.asarray(cand_index, dtype=np.int64)[owners] if len(owners) else 0
        pairs[:, 1] = ref_index
        return cls(texts=list(unique), pairs=pairs, owners=owners, n_candidates=len(cands))


def make_plan(cands: Sequence[str], refs, long_texts: str | None = None) -> ScoringPlan:
    """Validate (once), strip, deduplicate (once); no model runs. ``long_texts="window"``: texts
    too long even for windows are refused here, named by the caller's index, before anything is
    tokenised."""
    cands, groups = normalize_inputs(cands, refs)
    if long_texts == "window":
        from rapidscore.encoder.tokens.windows import check_window_texts

        check_window_texts(cands, "cands", stripped=True)
        for i, group in enumerate(groups):
            check_window_texts(group, f"refs[{i}]", stripped=True)
    return ScoringPlan.from_normalized(cands, groups)
