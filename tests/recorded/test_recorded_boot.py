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
