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


def _paired_01(n10: int, n01: int, n11: int, n00: int) -> tuple[np.ndarray, np.ndarray]:
    """0/1 correctness of two rubric sets on the same items from a McNemar table: n10 items only a gets
    right, n01 only b, n11 both, n00 neither."""
    a = np.r_[np.ones(n10), np.zeros(n01), np.ones(n11), np.zeros(n00)]
    b = np.r_[np.zeros(n10), np.ones(n01), np.ones(n11), np.zeros(n00)]
    return a, b


def _null_datasets(rng, n_sim, n_items=60):
    """Paired 0/1 data with shared item difficulty and NO difference between a and b."""
    for _ in range(n_sim):
        ease = rng.uniform(0.3, 0.9, size=n_items)
        yield (rng.uniform(size=n_items) < ease).astype(float), (rng.uniform(size=n_items) < ease).astype(float)


def test_paired_p_value_is_calibrated_under_no_difference():
    # A valid test rejects a true H0 at most at its level: P(p <= α) <= α. 300 seeded null datasets;
    # the allowance is 3 binomial SEs of the rejection rate (at α = 0.05: 0.05 + 0.038). A one-sided
    # p-value (the factor 2 dropped) rejects about twice as often: ~0.10 at 0.05, ~0.4 at 0.2.
    rng = np.random.default_rng(20)
    n_sim = 300
    p = np.array([paired_bootstrap(a, b, n_resamples=200, seed=s)["p_value"]
                  for s, (a, b) in enumerate(_null_datasets(rng, n_sim))])
    for alpha in (0.05, 0.10, 0.20, 0.50):
        rate = np.mean(p <= alpha)
        assert rate <= alpha + 3 * np.sqrt(alpha * (1 - alpha) / n_sim), (alpha, rate)
    # ...and not vacuously: p is spread over (0, 1], not stuck at 1 (ties at 0 make it a bit conservative).
    assert np.mean(p <= 0.5) >= 0.3 and np.mean(p == 1.0) < 0.2


def test_paired_test_has_power_against_a_large_planted_difference():
    # a right on 80% of 80 items, b on 50%, independently: the exact McNemar test rejects at 0.05 in
    # well over 95% of such datasets (expected discordant split 32 vs 8 items), so should the bootstrap.
    rng = np.random.default_rng(21)
    rejected = 0
    for s in range(40):
        a = (rng.uniform(size=80) < 0.8).astype(float)
        b = (rng.uniform(size=80) < 0.5).astype(float)
        rejected += paired_bootstrap(a, b, n_resamples=200, seed=s)["p_value"] < 0.05
    assert rejected >= 36


@pytest.mark.parametrize("table", [(30, 15, 100, 55), (40, 25, 80, 55), (20, 8, 50, 22)])
def test_paired_p_value_agrees_with_mcnemar_on_a_paired_01_table(table):
    # For paired 0/1 data the difference in accuracy is (n10 - n01)/n and the large-sample test of it is
    # McNemar's χ² = (n10 - n01)² / (n10 + n01) on 1 df (no continuity correction). The bootstrap
    # p-value estimates the same normal-approximation tail: within 20% of McNemar's (B = 20000 gives a
    # Monte Carlo SE of ~6% of p at p ~ 0.025; the rest is the lattice of 0/1 data and the bootstrap's
    # unrestricted variance). Halving (one-sided) or doubling it is far outside.
    n10, n01 = table[:2]
    a, b = _paired_01(*table)
    r = paired_bootstrap(a, b, n_resamples=20000, seed=1)
    mcnemar = sps.chi2.sf((n10 - n01) ** 2 / (n10 + n01), df=1)
    assert r["diff"] == pytest.approx((n10 - n01) / len(a))
    assert r["p_value"] == pytest.approx(mcnemar, rel=0.2)
    # The exact (binomial) McNemar test is conservative; it bounds the bootstrap p from above here.
    assert r["p_value"] < sps.binomtest(n10, n10 + n01, 0.5).pvalue


def test_paired_p_value_is_symmetric_in_a_and_b():
    # Swapping the rubric sets negates every replicate: a two-sided p-value cannot change, the CI mirrors.
    rng = np.random.default_rng(22)
    ease = np.repeat(rng.uniform(0.3, 0.9, size=70), 2)
    a = (rng.uniform(size=140) < ease).astype(float)
    b = (rng.uniform(size=140) < ease - 0.1).astype(float)
    ids = np.repeat(np.arange(70), 2)
    ab = paired_bootstrap(a, b, ids, n_resamples=1000, seed=3)
    ba = paired_bootstrap(b, a, ids, n_resamples=1000, seed=3)
    assert 0 < ab["p_value"] < 1
    assert ba["p_value"] == pytest.approx(ab["p_value"])
    assert ba["diff"] == pytest.approx(-ab["diff"])
    assert (ba["low"], ba["high"]) == pytest.approx((-ab["high"], -ab["low"]))


def test_ci_excludes_zero_iff_p_below_one_minus_confidence():
    # Documented duality: p is the smallest two-sided level at which the percentile CI excludes 0, so
    # at confidence 0.95 "CI excludes 0" and "p < 0.05" agree, up to the +1 correction and quantile
    # interpolation: datasets with p within 4/(B+1) of 0.05 are not judged. A one-sided p-value
    # (p < 0.05 while the 95% CI still covers 0) breaks it on the datasets with p in [0.025, 0.05).
    rng = np.random.default_rng(23)
    n_boot = 400
    judged = excluded = 0
    for s in range(200):
        ease = rng.uniform(0.3, 0.9, size=50)
        a = (rng.uniform(size=50) < ease).astype(float)
        b = (rng.uniform(size=50) < ease - rng.uniform(0, 0.3)).astype(float)
        r = paired_bootstrap(a, b, n_resamples=n_boot, seed=s, confidence=0.95)
        if abs(r["p_value"] - 0.05) <= 4 / (n_boot + 1):
            continue
        excludes = r["low"] > 0 or r["high"] < 0
        assert excludes == (r["p_value"] < 0.05), (s, r["p_value"], r["low"], r["high"])
        judged += 1
        excluded += excludes
    assert judged >= 150 and 30 <= excluded <= judged - 30  # both outcomes well represented


def test_paired_p_value_is_one_without_discordant_items_and_never_zero():
    # No item where a and b differ: no evidence at all (McNemar's exact p is 1), whatever the data.
    x = np.random.default_rng(5).integers(0, 2, 50).astype(float)
    assert paired_bootstrap(x, x, n_resamples=999)["p_value"] == 1.0
    # a right and b wrong on all 50 items: the evidence is overwhelming (exact McNemar p = 2^-49), yet
    # B resamples cannot certify a p below ~1/(B+1); a Monte Carlo p-value of 0 is invalid
    # (Phipson & Smyth 2010, "Permutation p-values should never be zero").
    n_boot = 999
    r = paired_bootstrap(np.ones(50), np.zeros(50), n_resamples=n_boot)
    assert 1 / (n_boot + 1) <= r["p_value"] <= 0.01 and r["degenerate"]


def test_paired_bootstrap_single_item_and_errors():
    r = paired_bootstrap([1.0, 1.0], [0.0, 1.0], item_ids=["x", "x"])
    assert r["diff"] == 0.5 and r["low"] == r["high"] == 0.5 and np.isnan(r["p_value"]) and r["degenerate"]
    with pytest.raises(InputError, match="'b'"):
        paired_bootstrap([1.0, 0.0], [1.0])
    with pytest.raises(InputError, match="empty"):
        paired_bootstrap([], [])


def test_two_sample_bootstrap_with_one_item_on_one_side_gives_no_interval():
    from rubriclab.stats import two_sample_bootstrap

    for a, b, side in (([1.0], [0.0, 1.0, 1.0, 0.0], "a"), ([1.0, 0.0, 1.0], [0.0], "b")):
        res = two_sample_bootstrap(a, b, n_resamples=200, seed=0)
        assert res["diff"] == pytest.approx(np.mean(a) - np.mean(b))
        assert np.isnan(res["low"]) and np.isnan(res["high"]) and np.isnan(res["se"])
        assert res["degenerate"].startswith(f"no interval: n=1 in {side}")
        assert res["n_a"] == len(a) and res["n_b"] == len(b) and res["method"] == "percentile"
        assert res["confidence"] == 0.95 and res["n_resamples"] == 200


def test_no_interval_reason_withholds_below_the_minimum_and_names_units_and_level():
    from rubriclab.stats import no_interval_reason

    note = "simulated coverage 86% at 5"
    assert no_interval_reason(30, "records", 0.95, minimum=30, coverage=note) is None
    assert no_interval_reason(29, "records", 0.9, minimum=30, coverage=note) == (
        "no interval: 29 records, fewer than the 30 a percentile bootstrap needs for its 90% to hold "
        "(simulated coverage 86% at 5)")
    assert no_interval_reason(1, "pairs", 0.95, minimum=10, coverage=note).startswith("no interval: 1 pair, ")
    assert no_interval_reason(0, "pairs", 0.95, minimum=10, coverage=note).startswith("no interval: 0 pairs, ")
