"""SELECT techniques compared on the same concepts (rapidscore.compare.select_systems): paired
by concept, SELECT's own means, and concepts one cell lacks named."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rapidscore.compare import PairingError, compare
from rapidscore.compare.inputs import select_systems

RESULTS = Path(__file__).resolve().parents[2] / "examples" / "abstention" / "results"


def test_the_examples_techniques_paired_by_concept() -> None:
    from rapidscore.abstention import rates
    from rapidscore.abstention.detectors import get_detector
    from rapidscore.abstention.pipeline import evaluate, find_experiments

    files = [f for experiment in find_experiments(str(RESULTS)) for f in experiment.files]
    counts = evaluate(files, get_detector("heuristic"), method="heuristic", workers=1).counts
    scores = rates.concept_scores_from_counts(counts)
    summary = rates.summarize_scores(scores)
    cells = [("model-a", "prompt"), ("model-a", "sft"), ("model-b", "prompt")]
    systems = select_systems(scores, "abstention", cells)
    result = compare(systems, "model-a/prompt", metric="abstention", resamples=2000, trials=2000)
    for model, technique in cells:
        # each system's value is SELECT's mean over concepts
        expected = summary[(model, technique)]["abstention"].mean
        assert result.system(f"{model}/{technique}").mean == pytest.approx(expected)
    concepts = scores[("model-a", "prompt", "abstention")]
    assert result.systems[0].n_items == len(concepts)
    # paired: the difference is the mean of per-concept differences
    per_concept = [scores[("model-a", "sft", "abstention")][c] - concepts[c] for c in concepts]
    assert result.pair("model-a/sft").difference == pytest.approx(np.mean(per_concept))


def test_concepts_unmatched_between_cells_are_named() -> None:
    scores = {("m", "a", "abstention"): {(None, "ex:River"): 1.0, (None, "ex:Lake"): 0.5},
              ("m", "b", "abstention"): {(None, "ex:River"): 0.5, (None, "ex:Sea"): 0.0}}
    with pytest.raises(PairingError, match=r"m/b lacks 1 of m/a's concepts \(ex:Lake\) and has 1 concepts m/a "
                                           r"lacks \(ex:Sea\)"):
        select_systems(scores, "abstention", [("m", "a"), ("m", "b")])
    with pytest.raises(PairingError, match="no specificity scores for m/a"):
        select_systems(scores, "specificity", [("m", "a"), ("m", "b")])
