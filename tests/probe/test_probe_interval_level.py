"""The probe's intervals hold their level where they are given, and are not given where they would not: a
percentile bootstrap over a few clusters covers far less than 95% (the default demo's held-out sets have 1-2
clusters, and their cells read ``1.000 [1.00, 1.00]`` as 95% intervals)."""

from __future__ import annotations

import numpy as np
import pytest

from rubriclab.probe import MIN_INTERVAL_UNITS, _metrics, classification_metrics, paired_metric_difference

DRAWS = 600


def _coverage(n_clusters: int, draws: int = DRAWS) -> float:
    """Per-cluster accuracy ~ Beta(2, 2) (population accuracy 0.5), 4 items per cluster: how often the accuracy's
    interval covers 0.5."""
    hit = tot = 0
    for s in range(draws):
        rng = np.random.default_rng(s)
        p = rng.beta(2, 2, size=n_clusters)
        g = np.repeat(np.arange(n_clusters), 4)
        yt = rng.integers(0, 2, len(g))
        yp = np.where(rng.random(len(g)) < p[g], yt, 1 - yt)
        m = classification_metrics(yt, yp, groups=g, n_boot=1000, seed=s)["accuracy"]
        if np.isfinite(m["low"]):
            tot += 1
            hit += m["low"] <= 0.5 <= m["high"]
    assert tot == draws
    return hit / tot


def test_at_the_minimum_the_interval_holds_its_level():
    se = np.sqrt(0.95 * 0.05 / DRAWS)
    assert MIN_INTERVAL_UNITS == 30 and _coverage(MIN_INTERVAL_UNITS) >= 0.95 - 2 * se


@pytest.mark.parametrize(("n_clusters", "printed"), [(5, 0.86), (10, 0.92)])
def test_below_it_the_coverage_is_what_the_reason_prints(monkeypatch, n_clusters, printed):
    monkeypatch.setattr(_metrics, "MIN_INTERVAL_UNITS", 1)  # measure the interval the probe no longer gives
    se = np.sqrt(printed * (1 - printed) / 400)
    assert abs(_coverage(n_clusters, 400) - printed) <= 2.5 * se


def test_fewer_units_give_the_estimate_and_say_why_there_is_no_interval():
    rng = np.random.default_rng(0)
    g = np.repeat(np.arange(29), 3)
    yt = rng.integers(0, 2, len(g))
    yp = np.where(rng.random(len(g)) < 0.7, yt, 1 - yt)
    m = classification_metrics(yt, yp, groups=g, n_boot=200, seed=0, unit="clusters")["accuracy"]
    assert np.isfinite(m["estimate"]) and np.isnan(m["low"]) and np.isnan(m["high"])
    assert m["reason"].startswith("no interval: 29 clusters, fewer than the 30 a percentile bootstrap needs")
    d = paired_metric_difference(yt, yp, np.ones_like(yt), groups=g, n_boot=200, seed=0, unit="clusters")
    assert np.isfinite(d["estimate"]) and np.isnan(d["low"]) and np.isnan(d["p_value"])
    assert d["reason"].startswith("no interval: 29 clusters")
    g30 = np.repeat(np.arange(30), 3)
    m30 = classification_metrics(rng.integers(0, 2, 90), rng.integers(0, 2, 90), groups=g30, n_boot=200)["accuracy"]
    assert np.isfinite(m30["low"]) and m30["reason"] is None
