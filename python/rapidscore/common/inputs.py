"""Input normalisation shared by every metric: one error style for every caller."""

from __future__ import annotations

from typing import Sequence

__all__ = ["normalize_inputs"]


def normalize_inputs(cands, refs) -> tuple[list[str], list[list[str]]]:
    """Validate candidates and references; references become one list per candidate."""
    if isinstance(cands, str) or not isinstance(cands, Sequence):
        raise TypeError(f"cands must be a list of strings, got {type(cands).__name__}")
    if isinstance(refs, str) or not isinstance(refs, Sequence):
        raise TypeError(f"refs must be a list of strings or of lists of strings, got {type(refs).__name__}")
    if len(cands) != len(refs):
        raise ValueError(f"Different number of candidates and references: {len(cands)} != {len(refs)}")
    for i, cand in enumerate(cands):
        if not isinstance(cand, str):
            raise TypeError(f"cands[{i}] must be a str, got {type(cand).__name__}: {cand!r}")
    groups = []
    for i, ref in enumerate(refs):
        group = [ref] if isinstance(ref, str) else ref
        if not isinstance(group, Sequence) or isinstance(group, (bytes, bytearray)):
            raise TypeError(f"refs[{i}] must be a str or a list of str, got {type(ref).__name__}: {ref!r}")
        if len(group) == 0:
            raise ValueError(f"refs[{i}] is an empty list of references")
        for j, text in enumerate(group):
            if not isinstance(text, str):
                raise TypeError(f"refs[{i}][{j}] must be a str, got {type(text).__name__}: {text!r}")
        groups.append(list(group))
    return list(cands), groups
