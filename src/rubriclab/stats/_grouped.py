"""Set-level statistics over groups (a rubric's criteria), shaped for ``item_bootstrap``: each factory returns the
statistic of one (resampled) set of rows. Shared by the audit card and the paired deltas of a repair, so both compute
one definition."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd


def macro_rate(n_groups: int) -> Callable[[np.ndarray, np.ndarray, np.ndarray], float]:
    """Statistic of rows ``(group, num, den)`` (group: an index in ``range(n_groups)``; num, den: booleans): per group
    Σ(num ∧ den) / Σden, then the mean over the groups where it is defined (a group with no denominator rows in a
    resample is left out; NaN when none is defined)."""

    def macro_mean(k: np.ndarray, num: np.ndarray, den: np.ndarray) -> float:
        d = np.bincount(k, weights=den.astype(float), minlength=n_groups)
        n = np.bincount(k, weights=(num & den).astype(float), minlength=n_groups)
        with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            return float(np.nanmean(np.where(d > 0, n / np.where(d > 0, d, 1), np.nan)))

    return macro_mean


def by_group(rows: pd.DataFrame, fn: Callable[[pd.DataFrame], Any], by: str = "criterion") -> dict[Any, Any]:
    """``fn`` of each group of ``rows`` (grouped by column ``by``), by group."""
    return {key: fn(group) for key, group in rows.groupby(by)}


def mean_over_groups(fn: Callable[[pd.DataFrame], float], by: str = "criterion") -> Callable[[pd.DataFrame], float]:
    """Statistic of a frame: the mean over its groups (column ``by``) of ``fn``, groups where ``fn`` is NaN left out
    (NaN when none is defined)."""

    def statistic(rows: pd.DataFrame) -> float:
        vals = [v for v in by_group(rows, fn, by).values() if not np.isnan(v)]
        return float(np.mean(vals)) if vals else np.nan

    return statistic
