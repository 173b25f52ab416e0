"""The source-level resampling (issue 60: one draw of the source's pairs per replicate, shared by every estimate)
holds its level where an estimate covers only some of the pairs — the case where its intervals moved from the
per-estimate draws: simulated coverage of the 95% percentile interval of a mean and of a paired difference over a
subset, and memory bounded as the source grows."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rubriclab.recorded._boot import Resampling, byte_counts, draws, mean_bootstrap, paired_differences

LEVEL, DATASETS, B = 0.95, 400, 400


@pytest.mark.parametrize("share", [0.3, 1.0])
def test_coverage_of_a_mean_and_a_paired_difference_over_a_subset_of_the_pairs(share: float) -> None:
    rng = np.random.default_rng(11)
    n_pairs, p_a, p_b = 240, 0.7, 0.6
    hit_mean = hit_diff = 0
    for k in range(DATASETS):
        subset = np.sort(rng.choice(n_pairs, int(share * n_pairs), replace=False))
        a = (rng.random(len(subset)) < p_a).astype(float)
        b = np.where(rng.random(len(subset)) < 0.5, a, (rng.random(len(subset)) < p_b).astype(float))  # correlated
        res = Resampling([f"p{i:03d}" for i in range(n_pairs)], B, k)
        m = mean_bootstrap(a, subset, res, LEVEL)
        (d,) = paired_differences([(subset, a, b)], res, LEVEL)
        res.run()
        hit_mean += m["low"] <= p_a <= m["high"]
        true_diff = 0.5 * (p_a - p_b)  # b is a half the time, else Bernoulli(p_b)
        hit_diff += d["low"] <= true_diff <= d["high"]
    tol = 3 * math.sqrt(LEVEL * (1 - LEVEL) / DATASETS)
    for name, hits in (("mean", hit_mean), ("paired difference", hit_diff)):
        coverage = hits / DATASETS
        assert LEVEL - tol - 0.01 <= coverage <= LEVEL + tol, (name, share, coverage)


def test_counts_are_scipys_draws_built_in_chunks_and_kept_as_bytes() -> None:
    idx = draws(1000, 600, 3)
    want = np.stack([np.bincount(row, minlength=1000) for row in idx])
    got = byte_counts(1000, 600, 3)
    assert got.dtype == np.uint8 and np.array_equal(got, want)
    assert byte_counts(3, 600, 3).dtype in (np.uint8, np.uint16)  # few items: a count may need more than a byte


def test_a_batched_run_equals_each_estimate_on_its_own() -> None:
    rng = np.random.default_rng(2)
    ids = [f"p{i}" for i in range(50)]
    batched, eager = Resampling(ids, 300, 5), Resampling(ids, 300, 5, eager=True)
    subsets = [np.sort(rng.choice(50, k, replace=False)) for k in (50, 20, 7)]
    values = [rng.choice([0.0, 0.5, 1.0], len(s)) for s in subsets]
    got = [mean_bootstrap(v, s, batched, 0.9) for s, v in zip(subsets, values, strict=True)]
    assert all(g.get("_pending") is batched for g in got)
    batched.run()
    want = [mean_bootstrap(v, s, eager, 0.9) for s, v in zip(subsets, values, strict=True)]
    for g, w in zip(got, want, strict=True):
        assert "_pending" not in g and (g["low"], g["high"], g["se"]) == (w["low"], w["high"], w["se"])


def test_a_paired_difference_over_a_few_pairs_leaves_out_and_counts_the_replicates_that_drew_none() -> None:
    """3 of 300 pairs: a replicate draws none of them with probability (1 - 3/300)^300 ≈ e^-3, and has no Δ there.
    Those replicates are left out and counted; the interval, SE and bootstrap p-value are the other replicates' (one
    NaN used to blank the whole interval, and the shipped LLMBar card had such an entry: value, no interval, no
    reason)."""
    from rubriclab.recorded._boot import dropped_note

    n_pairs, n_boot, seed = 300, 2000, 4
    subset = np.array([10, 150, 299])
    a, b = np.array([1.0, 1.0, 0.0]), np.array([0.0, 1.0, 1.0])
    res = Resampling([f"p{i:03d}" for i in range(n_pairs)], n_boot, seed)
    (d,) = paired_differences([(subset, a, b)], res, LEVEL)
    res.run()
    counts = byte_counts(n_pairs, n_boot, seed)[:, subset].astype(float)
    drawn = counts.sum(axis=1)
    none = drawn == 0
    assert 40 <= none.sum() <= 160  # ~e^-3 of 2000: the case is really exercised
    assert d["n_invalid_resamples"] == int(none.sum())
    want = (counts[~none] @ (a - b)) / drawn[~none]  # Δ of each replicate that drew one of the pairs
    low, high = np.quantile(want, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    assert (d["low"], d["high"]) == pytest.approx((low, high), abs=1e-12)
    assert d["se"] == pytest.approx(np.std(want, ddof=1), rel=1e-12)
    p = 2 * min(1 + np.sum(want <= 0), 1 + np.sum(want >= 0)) / (len(want) + 1)
    assert d["p_value"] == pytest.approx(min(1.0, p), rel=1e-12)
    assert d["degenerate"] is None
    note = dropped_note(d)
    assert note and f"{int(none.sum())} of {n_boot} resamples" in note and f"the other {n_boot - int(none.sum())}" in note
