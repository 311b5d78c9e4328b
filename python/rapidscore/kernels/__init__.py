"""The kernels: wrappers of the native extension ``rapidscore._core`` and their pure-Python twins.

- :mod:`rapidscore.kernels.matching`: BERTScore greedy matching; dispatches to the C++ kernel,
  :mod:`~rapidscore.device.matching_torch` (torch tensors, any device) or
  :mod:`~rapidscore.kernels.matching_ref` (the plain numpy specification, the Python twin).
- :mod:`rapidscore.kernels.alignment`: one-to-one alignment of gold and predicted spans; twin
  :mod:`~rapidscore.kernels.alignment_py`.
- :mod:`rapidscore.kernels.phrases`: fuzzy refusal-phrase matching; twin
  :mod:`~rapidscore.kernels.phrases_py`.

Each native kernel has a pure-Python twin with the same contract (arguments, checks and
messages, results; BERTScore's reference computes similarities in float64 rather than float32),
as RapidFuzz keeps a ``*_py`` twin of each C++ module. :mod:`~rapidscore.kernels._native` is the
one loader of ``rapidscore._core`` (lazily, once) and says which implementation runs:
``RAPIDSCORE_IMPLEMENTATION=auto`` (default: native, the twins with one RapidscoreWarning when
the extension cannot be imported), ``native`` (ImportError then) or ``python``.

Only this package imports ``rapidscore._core`` (tests/kernels/test_native_loader.py checks it);
the rest of rapidscore calls the wrappers. Nothing is imported here, so
``import rapidscore.kernels.x`` loads only what x needs.
"""

from __future__ import annotations
