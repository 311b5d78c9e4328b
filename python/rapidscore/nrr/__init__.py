"""Semantic similarity and the Negative Rejection Rate (NRR).

- :mod:`.scoring`: :class:`SentenceSimilarity`, :func:`similarity`, :func:`negative_rejection`
  and its DataFrame / file entry points, :class:`NRRResult`.
- :mod:`.threshold`: :func:`nrr_curve`, :func:`calibrate_threshold`, :class:`ThresholdCalibration`.
- :mod:`.plot`: :func:`plot_similarities` (matplotlib). :mod:`.cli`: ``rapidscore nrr``.

The module is ``scoring``, not ``similarity``: a submodule of that name would shadow the
``similarity`` function on the package once imported. Names load on first use, so that
``rapidscore.nrr.cli`` (the argument parser) stays light.
"""

from __future__ import annotations

from rapidscore.common.lazy import lazy_exports

_EXPORTS = {
    "NRRResult": "rapidscore.nrr.scoring",
    "SentenceSimilarity": "rapidscore.nrr.scoring",
    "negative_rejection": "rapidscore.nrr.scoring",
    "negative_rejection_frame": "rapidscore.nrr.scoring",
    "negative_rejection_jsonl": "rapidscore.nrr.scoring",
    "similarity": "rapidscore.nrr.scoring",
    "nrr_curve": "rapidscore.nrr.threshold",
    "calibrate_threshold": "rapidscore.nrr.threshold",
    "ThresholdCalibration": "rapidscore.nrr.threshold",
    "plot_similarities": "rapidscore.nrr.plot",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
