from __future__ import annotations

from rubriclab.stats import label_comparison


def test_identical_sources_are_not_reported_with_a_zero_mde():
    label = label_comparison({"diff": 0.0, "se": 0.0, "low": 0.0, "high": 0.0, "p_value": 1.0, "mde": 0.0})
    assert label.startswith("no difference: identical on every shared item")
    assert label_comparison({"diff": 0.05, "se": 0.1, "low": -0.1, "high": 0.2, "p_value": 0.6}).startswith(
        "no detectable difference (MDE=")
