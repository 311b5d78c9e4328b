"""Python wrappers of the native kernels (``rapidscore._core``), and their other implementations.

- :mod:`rapidscore.kernels.matching`: BERTScore greedy matching; dispatches to the C++ kernel,
  :mod:`~rapidscore.kernels.matching_torch` (torch tensors, any device) or
  :mod:`~rapidscore.kernels.matching_ref` (the plain numpy specification).
- :mod:`rapidscore.kernels.alignment`: one-to-one alignment of gold and predicted spans.
- :mod:`rapidscore.kernels.phrases`: fuzzy refusal-phrase matching.

Only these modules call ``rapidscore._core``; the rest of rapidscore calls them. Nothing is
imported here, so ``import rapidscore.kernels.x`` loads only what x needs.
"""

from __future__ import annotations
