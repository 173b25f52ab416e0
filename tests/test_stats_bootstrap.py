"""Item-level bootstrap and paired bootstrap: coverage, clustering, p-value estimator, degenerate inputs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from rubriclab.errors import ConfigError, InputError
from rubriclab.stats import item_bootstrap, krippendorff_alpha, paired_bootstrap


def _clustered(rng, n_items=60, k=5):
    """k Bernoulli judgments per item with item-level p ~ U(0,1): ICC = 1/3, true mean 0.5."""
    p = rng.uniform(size=n_items)
    ids = np.repeat(np.arange(n_items), k)
    return (rng.uniform(size=n_items * k) < np.repeat(p, k)).astype(float), ids


def test_item_ci_covers_truth_at_nominal_rate_and_is_wider_than_judgment_level():
    rng = np.random.default_rng(0)
    cover_item = cover_naive = 0
    width_item, width_naive = [], []
    n_sim = 200
    for s in range(n_sim):
        x, ids = _clustered(rng)
        item = item_bootstrap(x, "mean", ids, n_resamples=500, seed=s)
        naive = item_bootstrap(x, "mean", None, n_resamples=500, seed=s)
        cover_item += item["low"] <= 0.5 <= item["high"]
        cover_naive += naive["low"] <= 0.5 <= naive["high"]
        width_item.append(item["high"] - item["low"])
        width_naive.append(naive["high"] - naive["low"])
    # Nominal 95%; 200 sims give a binomial SE of ~1.5 points, the percentile CI with 60 items slightly undercovers.
    assert 0.88 <= cover_item / n_sim <= 0.995
    # Design effect 1 + (k-1)·ICC = 7/3 -> item CI about sqrt(7/3) ≈ 1.53x wider; the naive CI undercovers.
    ratio = np.mean(width_item) / np.mean(width_naive)
    assert 1.35 < ratio < 1.75
    assert cover_naive / n_sim < cover_item / n_sim - 0.05


def test_generic_path_matches_vectorised_mean_and_reports_counts():
    rng = np.random.default_rng(1)
    x, ids = _clustered(rng, n_items=40, k=3)
    fast = item_bootstrap(x, "mean", ids, n_resamples=400, seed=7)
    slow = item_bootstrap(x, np.mean, ids, n_resamples=400, seed=7)
    frame = item_bootstrap(pd.DataFrame({"x": x, "item": ids}), lambda f: f["x"].mean(), "item",
                           n_resamples=400, seed=7)
    for r in (slow, frame):
        assert r["estimate"] == pytest.approx(fast["estimate"])
        assert (r["low"], r["high"]) == pytest.approx((fast["low"], fast["high"]))
    assert fast["n_items"] == 40 and fast["n_obs"] == 120 and fast["degenerate"] is None
    assert fast["se"] > 0 and fast["method"] == "percentile"


def test_ratio_mean_vs_item_mean_with_unequal_cluster_sizes():
    x = np.array([1.0, 1, 1, 1, 0])  # item 0 has four 1s, item 1 one 0
    ids = np.array([0, 0, 0, 0, 1])
    assert item_bootstrap(x, "mean", ids, n_resamples=200)["estimate"] == pytest.approx(0.8)
    assert item_bootstrap(x, "item_mean", ids, n_resamples=200)["estimate"] == pytest.approx(0.5)


def test_resampling_takes_whole_items():
    # Each item's rows are (+1, -1): any resample of whole items has sum exactly 0.
    x = np.tile([1.0, -1.0], 25)
    ids = np.repeat(np.arange(25), 2)
    seen = []
    r = item_bootstrap(x, lambda v: (seen.append(v.sum()), v.sum())[1], ids, n_resamples=100)
    assert r["low"] == r["high"] == 0 and np.allclose(seen, 0)
    assert r["degenerate"] == "constant bootstrap distribution"


def test_bootstrap_of_krippendorff_alpha_over_items():
    rng = np.random.default_rng(2)
    truth = rng.integers(0, 11, size=80)
    ratings = np.clip(truth + rng.integers(-1, 2, size=(3, 80)), 0, 10).astype(float)  # raters × items
    r = item_bootstrap(ratings.T, lambda rows: krippendorff_alpha(rows.T)["alpha"], np.arange(80), n_resamples=200)
    assert r["estimate"] == pytest.approx(krippendorff_alpha(ratings)["alpha"])
    assert r["low"] < r["estimate"] < r["high"] and r["high"] - r["low"] < 0.2


@pytest.mark.parametrize("values, ids, reason", [
    ([], [], "no items"),
    ([1.0, 0.0, 1.0], [7, 7, 7], "single item"),
    ([1.0, 1.0, 1.0, 1.0], [0, 0, 1, 2], "constant values"),
])
def test_degenerate_inputs_collapse_with_flag(values, ids, reason):
    for stat in ("mean", np.mean):
        r = item_bootstrap(np.asarray(values), stat, np.asarray(ids), n_resamples=100)
        assert r["degenerate"] is not None and reason.split()[0] in r["degenerate"]
        if reason == "no items":
            assert np.isnan(r["estimate"]) and np.isnan(r["low"])
        else:
            assert r["low"] == r["high"] == r["estimate"] and r["se"] == 0


def test_bca_constant_and_nan_resamples_do_not_crash():
    r = item_bootstrap(np.ones(10), np.mean, np.arange(10), n_resamples=100, method="BCa")
    assert r["low"] == r["high"] == 1.0 and r["degenerate"]
    x = np.arange(20, dtype=float)

    def sometimes_nan(v):
        return np.nan if v.max() < 19 else v.mean()

    r = item_bootstrap(x, sometimes_nan, np.arange(20), n_resamples=300)
    assert 0 < r["n_invalid_resamples"] < 300 and np.isfinite(r["low"]) and np.isfinite(r["high"])


def test_input_errors_name_the_problem():
    with pytest.raises(InputError, match="item_ids"):
        item_bootstrap(np.ones(4), "mean", [1, 2, 3])
    with pytest.raises(InputError, match="NaN"):
        item_bootstrap(np.array([1.0, np.nan]), "mean", [0, 1])
    with pytest.raises(InputError, match="statistic"):
        item_bootstrap(np.ones(4), "median", [0, 1, 2, 3])
    with pytest.raises(ConfigError, match="confidence"):
        item_bootstrap(np.ones(4), "mean", [0, 1, 2, 3], confidence=95)
    with pytest.raises(ConfigError, match="method"):
        item_bootstrap(np.ones(4), "mean", [0, 1, 2, 3], method="studentized")


def test_paired_bootstrap_detects_planted_difference():
    rng = np.random.default_rng(3)
    n_items, k = 300, 3
    ease = np.repeat(rng.uniform(0.3, 0.9, size=n_items), k)  # shared item difficulty -> correlated a, b
    u = rng.uniform(size=n_items * k)
    a = (u < ease).astype(float)
    b = (u < ease - 0.08).astype(float)  # planted: b is 8 points worse on the same items
    ids = np.repeat(np.arange(n_items), k)
    r = paired_bootstrap(a, b, ids)
    assert r["diff"] == pytest.approx(a.mean() - b.mean())
    assert r["low"] > 0 and r["p_value"] < 0.001 and r["low"] < r["diff"] < r["high"]
    assert r["n_items"] == n_items and r["n_obs"] == n_items * k


def test_paired_bootstrap_no_difference_gives_large_p():
    rng = np.random.default_rng(4)
    ease = rng.uniform(0.3, 0.9, size=400)
    a = (rng.uniform(size=400) < ease).astype(float)
    b = (rng.uniform(size=400) < ease).astype(float)
    r = paired_bootstrap(a, b)
    assert r["p_value"] > 0.2 and r["low"] < 0 < r["high"]


def test_paired_bootstrap_p_value_estimator_plus_one_correction():
    # Identical sets: every replicate is exactly 0 -> both tails count all B -> p capped at 1.
    x = np.random.default_rng(5).integers(0, 2, 50).astype(float)
    assert paired_bootstrap(x, x, n_resamples=999)["p_value"] == 1.0
    # a always right, b always wrong: all replicates are 1 -> p = 2 (1 + 0) / (B + 1).
    r = paired_bootstrap(np.ones(50), np.zeros(50), n_resamples=999)
    assert r["p_value"] == pytest.approx(2 / 1000) and r["degenerate"]
    # Against a direct computation on scipy's own bootstrap distribution.
    rng = np.random.default_rng(6)
    a, b = rng.normal(0.1, 1, 80), rng.normal(0, 1, 80)
    r = paired_bootstrap(a, b, n_resamples=2000, seed=11)
    dist = sps.bootstrap((a, b, np.ones(80)), lambda x, y, n, axis=-1: (x.sum(axis) - y.sum(axis)) / n.sum(axis),
                         paired=True, vectorized=True, n_resamples=2000, method="percentile",
                         rng=np.random.default_rng(11)).bootstrap_distribution
    expected = min(1, 2 * min((1 + (dist <= 0).sum()) / 2001, (1 + (dist >= 0).sum()) / 2001))
    assert r["p_value"] == pytest.approx(expected)


def test_paired_bootstrap_single_item_and_errors():
    r = paired_bootstrap([1.0, 1.0], [0.0, 1.0], item_ids=["x", "x"])
    assert r["diff"] == 0.5 and r["low"] == r["high"] == 0.5 and np.isnan(r["p_value"]) and r["degenerate"]
    with pytest.raises(InputError, match="'b'"):
        paired_bootstrap([1.0, 0.0], [1.0])
    with pytest.raises(InputError, match="empty"):
        paired_bootstrap([], [])
