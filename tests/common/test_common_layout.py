"""The nrr subpackage keeps today's public names; lazy package namespaces resolve them."""

from __future__ import annotations

import importlib
import pkgutil

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


def test_shims_and_test_data_left_the_metric_packages() -> None:  # issue 27
    import rapidscore.encoder
    import rapidscore.encoder.encoder
    from rapidscore.testing import select_release

    for module in (rapidscore.encoder, rapidscore.encoder.encoder):
        assert not hasattr(module, "EncodedTexts") and "EncodedTexts" not in module.__all__
    assert callable(select_release.make_release)
    # The package's folders, not an import: an editable install keeps finding a deleted module's path.
    for package, gone in (("rapidscore.bertscore", "matching"), ("rapidscore.abstention", "synthetic")):
        assert gone not in {info.name for info in pkgutil.iter_modules(importlib.import_module(package).__path__)}
