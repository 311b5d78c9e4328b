"""Paired significance tests and confidence intervals between systems scored on the same items.

- :func:`compare` (:mod:`.comparison`): each system's mean (or a ratio metric's corpus value)
  with a bootstrap interval; each system against a baseline: the difference, its interval,
  ``p_bootstrap`` (paired bootstrap) and ``p_randomization`` (paired approximate randomization),
  adjusted for the number of systems (Holm by default).
- :mod:`.statistics`: :class:`ItemStats`, the per-item statistics of a system:
  :func:`mean_of`, :func:`ratio_of`, :func:`precision_recall_f1_of`.
- :mod:`.resampling`: the resampling core (the splitmix64 kernel of
  :mod:`rapidscore.kernels.resampling` by default, numpy's streams on request). :mod:`.inputs`: systems from the
  result files the other commands write. :mod:`.tables`: markdown / LaTeX tables.
  :mod:`.cli`: ``rapidscore compare``.

Names load on first use, so that ``rapidscore.compare.cli`` (the argument parser) stays light.
"""

from __future__ import annotations

from rapidscore.common.lazy import lazy_exports

_EXPORTS = {
    "compare": "rapidscore.compare.comparison",
    "Comparison": "rapidscore.compare.comparison",
    "SystemInterval": "rapidscore.compare.comparison",
    "PairedResult": "rapidscore.compare.comparison",
    "ItemStats": "rapidscore.compare.statistics",
    "mean_of": "rapidscore.compare.statistics",
    "ratio_of": "rapidscore.compare.statistics",
    "precision_recall_f1_of": "rapidscore.compare.statistics",
    "adjust_p_values": "rapidscore.compare.resampling",
    "compare_files": "rapidscore.compare.inputs",
    "read_systems": "rapidscore.compare.inputs",
    "PairingError": "rapidscore.errors",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
