"""A percentile bootstrap over pairs for statistics that are a function of per-pair sums (a confusion matrix for κ
and F1, Krippendorff's α's disagreement and value counts, Fleiss' κ's agreement and category counts).

Same resampling as ``rubriclab.stats.item_bootstrap`` (draw pairs with replacement, every row of a drawn pair comes
along; ``scipy.stats.bootstrap``, percentile interval), but vectorised: each pair's rows are summed once, a
replicate is a sum of drawn pairs' parts, and the statistic is evaluated on all replicates at once.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import stats

_BATCH = 250


def additive_bootstrap(parts: np.ndarray, statistic: Callable[[np.ndarray], np.ndarray], item_ids: Any,
                       n_resamples: int, confidence: float, seed: int) -> dict[str, Any]:
    """``statistic`` (summed parts ``(..., D)`` → ``(...)``) on all rows, and its percentile interval resampling
    items. ``parts``: one row ``(D,)`` per observation; ``item_ids``: the observation's item.
    Returns dict(estimate, low, high, se, n_items, n_obs, n_resamples, confidence, method, degenerate,
    n_invalid_resamples) like ``item_bootstrap``."""
    parts = np.asarray(parts, dtype=float).reshape(len(parts), -1)
    ids = np.asarray(item_ids, dtype=object)
    _, codes = np.unique(ids.astype(str), return_inverse=True)
    n_items = int(codes.max()) + 1 if len(codes) else 0
    per_item = np.zeros((n_items, parts.shape[1]))
    np.add.at(per_item, codes, parts)
    out: dict[str, Any] = {"estimate": float(statistic(per_item.sum(axis=0))), "low": np.nan, "high": np.nan,
                           "se": np.nan, "n_items": n_items, "n_obs": len(parts), "n_resamples": n_resamples,
                           "confidence": confidence, "method": "percentile", "degenerate": None,
                           "n_invalid_resamples": 0}
    if n_items < 2:
        out.update(low=out["estimate"], high=out["estimate"], se=0.0,
                   degenerate="single item: no between-item variability to resample" if n_items else "no items")
        return out

    def on_items(idx: np.ndarray, axis: int = -1) -> np.ndarray:
        return statistic(per_item[np.asarray(idx, dtype=np.intp)].sum(axis=-2))

    with warnings.catch_warnings():  # a constant distribution is reported below, not warned about
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        res = stats.bootstrap((np.arange(n_items),), on_items, n_resamples=n_resamples, batch=_BATCH,
                              vectorized=True, method="percentile", confidence_level=confidence,
                              rng=np.random.default_rng(seed))
    dist = np.asarray(res.bootstrap_distribution, dtype=float)
    good = dist[np.isfinite(dist)]
    out["n_invalid_resamples"] = int(dist.size - good.size)
    if not good.size:
        out["degenerate"] = "the statistic was undefined (NaN) on every resample"
        return out
    tail = (1 - confidence) / 2
    low, high = (float(q) for q in np.quantile(good, [tail, 1 - tail]))
    out.update(low=low, high=high, se=float(np.std(good, ddof=1)) if good.size > 1 else 0.0)
    if np.ptp(good) == 0:
        out["degenerate"] = "constant bootstrap distribution"
    return out
