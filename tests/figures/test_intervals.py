"""The Wilson score interval (common/figures.py) and the --levels text that prints it."""

from __future__ import annotations

import json
import math
import os
import re

import pytest

from rapidscore.cli import main
from rapidscore.common.intervals import wilson_interval

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "abstention")


@pytest.mark.parametrize(("successes", "n", "low", "high"), [
    # Newcombe (1998), "Two-sided confidence intervals for the single proportion: comparison of
    # seven methods", Statistics in Medicine 17:857-872, Table II, method 3 (score, no continuity correction)
    (81, 263, 0.2553, 0.3662),
    (15, 148, 0.0624, 0.1605),
    (0, 20, 0.0, 0.1611),
    (1, 29, 0.0061, 0.1718),
])
def test_wilson_interval_textbook_values(successes, n, low, high):
    got = wilson_interval(successes, n)
    assert got == pytest.approx((low, high), abs=5e-5)


def test_wilson_interval_is_bounded_and_symmetric():
    for n in (1, 2, 3, 10):
        for k in range(n + 1):
            low, high = wilson_interval(k, n)
            # inside [0, 1] and around k / n; at k = 0 or n the bound keeps the formula's rounding residue
            # (~1e-17), as the RGB rates have always reported it
            assert 0.0 <= low <= high <= 1.0 and low <= k / n + 1e-12 and high >= k / n - 1e-12
            mirrored = wilson_interval(n - k, n)
            assert (low, high) == pytest.approx((1 - mirrored[1], 1 - mirrored[0]))
    assert wilson_interval(2, 3) == pytest.approx((0.2077, 0.9385), abs=5e-5)
    assert wilson_interval(1.5, 2) == pytest.approx(wilson_interval(3, 4), abs=0.2)  # fractional counts work
    assert all(math.isnan(v) for v in wilson_interval(0, 0))
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(3, 2)
    with pytest.raises(ValueError, match="confidence"):
        wilson_interval(1, 2, confidence=1.0)


LEVEL = re.compile(r"^  depth (\d+): (\d+\.\d)% \[(\d+\.\d), (\d+\.\d)\] \(n=(\d+) concepts; (\d+) of (\d+) "
                   r"responses (refused|answered)\)$")


def test_levels_text_prints_bounded_wilson_intervals(tmp_path, capsys):
    results, taxonomy = os.path.join(EXAMPLE, "results"), os.path.join(EXAMPLE, "taxonomy.json")
    assert main(["abstention", results, "--taxonomy", taxonomy, "--levels", "--no-progress", "-q"]) == 0
    text = capsys.readouterr().out
    lines = [line for line in text.splitlines() if line.startswith("  depth ")]
    assert lines and all(LEVEL.match(line) for line in lines), [ln for ln in lines if not LEVEL.match(ln)]
    assert "+-" not in "\n".join(lines)
    for line in lines:
        _depth, mean, low, high, n, _k, _total, _word = LEVEL.match(line).groups()
        assert 0.0 <= float(low) <= float(mean) <= float(high) <= 100.0
        expected = wilson_interval(float(mean) / 100 * int(n), int(n))
        assert (float(low), float(high)) == pytest.approx((100 * expected[0], 100 * expected[1]), abs=0.11)
    # the example's Model-b / Prompt / generalization: 14 of 24 responses over 2 concepts
    block = text.split("Model-b / Prompt / generalization by depth (%):\n")[1]
    assert block.startswith("  depth 0: 58.3% [12.5, 93.2] (n=2 concepts; 14 of 24 responses refused)\n")
    assert "responses answered" in text.split("Model-b / Prompt / specificity by depth (%):\n")[1].split("\n\n")[0]
    # the JSON keeps its fields
    out = tmp_path / "table.json"
    assert main(["abstention", results, "--format", "json", "-o", str(out), "--no-progress", "-q"]) == 0
    row = json.loads(out.read_text())["rows"][0]
    assert {"mean", "half_width", "n_concepts"} <= set(row)
