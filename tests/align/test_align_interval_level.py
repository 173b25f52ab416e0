"""The align stage's win-rate and label-agreement intervals hold their level where they are given, and are not given
over fewer than 10 items, where they would not (the default run's cells have n = 2: printed as 95% intervals, they
covered 67% of the time)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rubriclab.align import win_rates
from rubriclab.align._intervals import MIN_INTERVAL_N
from rubriclab.stats import item_bootstrap


def _coverage(n: int, draws: int) -> float:
    hit = 0
    for s in range(draws):
        v = np.random.default_rng(s).choice([0.0, 0.5, 1.0], size=n, p=(0.4, 0.2, 0.4))  # mean 0.5
        b = item_bootstrap(v, "mean", None, n_resamples=1000, confidence=0.95, seed=s)
        hit += b["low"] <= 0.5 <= b["high"]
    return hit / draws


def test_from_the_minimum_the_interval_holds_its_level():
    assert MIN_INTERVAL_N == 10
    assert _coverage(MIN_INTERVAL_N, 600) >= 0.95 - 2 * np.sqrt(0.95 * 0.05 / 600)


@pytest.mark.parametrize(("n", "printed"), [(2, 0.67), (5, 0.88)])
def test_below_it_the_coverage_is_what_the_reason_prints(n, printed):
    assert abs(_coverage(n, 600) - printed) <= 2 * np.sqrt(printed * (1 - printed) / 600)


def test_a_win_rate_over_few_prompts_has_its_estimate_and_says_why_there_is_no_interval():
    rows = [{"left": "biased@target", "right": "seed@target", "regime": "target", "domain": "target",
             "outcome": o, "status": "win" if o == 1 else "loss"} for o in (1.0, 0.0)]
    few = win_rates(pd.DataFrame(rows), n_boot=200).iloc[0]
    assert few["estimate"] == 0.5 and np.isnan(few["low"]) and np.isnan(few["high"])
    assert few["reason"].startswith("no interval: 2 prompts, fewer than the 10")
    many = win_rates(pd.DataFrame(rows * 5), n_boot=200).iloc[0]
    assert many["n"] == 10 and np.isfinite(many["low"]) and many["low"] < 0.5 < many["high"]
