"""The nrr subpackage keeps today's public names; lazy package namespaces resolve them."""

from __future__ import annotations

import importlib

import pytest

import rapidscore

NRR_NAMES = ["NRRResult", "negative_rejection", "similarity", "nrr_curve", "calibrate_threshold",
             "ThresholdCalibration", "negative_rejection_frame", "negative_rejection_jsonl", "SentenceSimilarity",
             "plot_similarities"]


def test_nrr_public_names_survive_the_split():
    import rapidscore.nrr.scoring  # noqa: F401  (importing the module must not shadow the function)
    from rapidscore import nrr
    from rapidscore.nrr import negative_rejection, similarity

    assert callable(similarity) and similarity.__name__ == "similarity"
    assert rapidscore.negative_rejection is negative_rejection
    for name in NRR_NAMES:
        assert getattr(nrr, name).__name__ == name
    assert sorted(nrr.__all__) == sorted(NRR_NAMES) and set(NRR_NAMES) <= set(dir(nrr))
    for gone in ("rapidscore.nrr_cli",):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(gone)


@pytest.mark.parametrize("package", ["rapidscore.bertscore", "rapidscore.nrr", "rapidscore.abstention",
                                     "rapidscore.ner"])
def test_every_exported_name_resolves(package):
    module = importlib.import_module(package)
    for name in module.__all__:
        assert getattr(module, name) is not None
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        module.no_such_name  # noqa: B018
