"""A percentile bootstrap over pairs for statistics that are a function of per-pair sums (a confusion matrix for κ
and F1, Krippendorff's α's disagreement and value counts, Fleiss' κ's agreement and category counts), and the
same resampling for the analysis' means and paired differences, many at a time.

Same resampling as ``rubriclab.stats.item_bootstrap`` / ``paired_bootstrap`` (``scipy.stats.bootstrap``: draw
pairs with replacement, every row of a drawn pair comes along, percentile interval), but vectorised: each pair's
rows are summed once and a replicate is a sum of drawn pairs' parts. scipy's draws depend only on the number of
items, the number of resamples and the seed, so they are drawn once (``draws``) and shared by every estimate with
that many items; a replicate's sums are then one matrix product with the draw counts, which is exact (so equal to
scipy's gathered sums bit for bit) when the parts are integers or halves, quarters, … — for other values the
gathered sums are added in scipy's own order.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np

from rubriclab.stats._bootstrap import finish_distribution

_BATCH = 250
_EXACT_SCALE = 2.0**12  # parts that are multiples of 1/4096 ...
_EXACT_LIMIT = 2.0**52  # ... and whose replicate sums (and a difference of two) stay below 2^53 of those units
# add up exactly in any order: then a matrix product gives scipy's gathered sums bit for bit


@lru_cache(maxsize=32)
def draws(n_items: int, n_resamples: int, seed: int) -> np.ndarray:
    """The ``(n_resamples, n_items)`` item indices ``scipy.stats.bootstrap`` draws with ``rng=default_rng(seed)``
    (one sample, or paired samples: its batches continue one stream, so the batch size does not matter)."""
    out = np.random.default_rng(seed).integers(0, n_items, (n_resamples, n_items))
    out.setflags(write=False)
    return out


@lru_cache(maxsize=32)
def draw_counts(n_items: int, n_resamples: int, seed: int) -> np.ndarray:
    """How often each replicate drew each item: ``(n_resamples, n_items)``, float (for a matrix product)."""
    idx = draws(n_items, n_resamples, seed)
    flat = (np.arange(n_resamples)[:, None] * n_items + idx).ravel()
    out = np.bincount(flat, minlength=n_resamples * n_items).reshape(n_resamples, n_items).astype(float)
    out.setflags(write=False)
    return out


def _exact(x: np.ndarray) -> bool:
    """Whether sums of ``len(x)`` drawn rows of ``x`` (a replicate draws at most that many) are exact."""
    scaled = x * _EXACT_SCALE
    return bool(np.all(scaled == np.round(scaled)) and np.abs(scaled).max(initial=0) * len(x) < _EXACT_LIMIT)


def replicate_sums(x: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """Per replicate, the sum of the drawn items' values: ``x`` ``(n_items,)`` → ``(B,)``, ``(n_items, D)`` →
    ``(B, D)``; the same numbers as summing ``x[idx]`` over the items as scipy's statistics do."""
    x = np.asarray(x, dtype=float)
    n = len(x)
    if _exact(x):
        return draw_counts(n, n_resamples, seed) @ x
    idx = draws(n, n_resamples, seed)
    if x.ndim == 1:
        return x[idx].sum(axis=-1)
    return np.concatenate([x[idx[k:k + _BATCH]].sum(axis=-2) for k in range(0, n_resamples, _BATCH)])


def percentile_interval(dist: np.ndarray, confidence: float) -> tuple[float, float]:
    """``scipy.stats.quantile(dist, [α, 1 − α])`` (its default 'linear' method, α = (1 − confidence)/2), as
    ``scipy.stats.bootstrap`` takes its percentile interval, without its per-call input checks; NaN when a
    replicate is NaN."""
    low, high = percentile_intervals(np.asarray(dist, dtype=float)[None, :], confidence)
    return float(low[0]), float(high[0])


def percentile_intervals(dist: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """``percentile_interval`` of each row of ``dist`` ``(K, B)``: only the four order statistics it needs are
    placed (``np.partition``), which gives the same values as sorting."""
    n = dist.shape[-1]
    alpha = (1 - confidence) / 2
    p = np.array([alpha, 1 - alpha])
    jg = p * n + (1 - p)
    jp1 = jg // 1
    j = jp1 - 1
    g = jg % 1
    g[j < 0] = 0
    j = np.clip(j, 0.0, n - 1).astype(np.int64)
    jp1 = np.clip(jp1, 0.0, n - 1).astype(np.int64)
    y = np.partition(dist, np.unique(np.r_[j, jp1]), axis=-1)
    q = (1 - g) * y[:, j] + g * y[:, jp1]
    q[np.isnan(dist).any(axis=-1)] = np.nan
    return q[:, 0], q[:, 1]


def additive_bootstrap(parts: np.ndarray, statistic: Callable[[np.ndarray], np.ndarray], item_ids: Any,
                       n_resamples: int, confidence: float, seed: int) -> dict[str, Any]:
    """``statistic`` (summed parts ``(..., D)`` → ``(...)``) on all rows, and its percentile interval resampling
    items. ``parts``: one row ``(D,)`` per observation; ``item_ids``: the observation's item.
    Returns dict(estimate, low, high, se, n_items, n_obs, n_resamples, confidence, method, degenerate,
    n_invalid_resamples) like ``item_bootstrap``."""
    return additive_bootstraps(parts, {"": statistic}, item_ids, n_resamples, confidence, seed)[""]


def additive_bootstraps(parts: np.ndarray, statistics: dict[str, Callable[[np.ndarray], np.ndarray]],
                        item_ids: Any, n_resamples: int, confidence: float, seed: int) -> dict[str, dict[str, Any]]:
    """``additive_bootstrap`` of several statistics of the same parts: the replicates' sums are formed once."""
    parts = np.asarray(parts, dtype=float).reshape(len(parts), -1)
    ids = np.asarray(item_ids, dtype=object)
    _, codes = np.unique(ids.astype(str), return_inverse=True)
    n_items = int(codes.max()) + 1 if len(codes) else 0
    per_item = np.zeros((n_items, parts.shape[1]))
    np.add.at(per_item, codes, parts)
    total = per_item.sum(axis=0)
    summed = replicate_sums(per_item, n_resamples, seed) if n_items >= 2 else None
    out = {}
    for name, statistic in statistics.items():
        res: dict[str, Any] = {"estimate": float(statistic(total)), "low": np.nan, "high": np.nan, "se": np.nan,
                               "n_items": n_items, "n_obs": len(parts), "n_resamples": n_resamples,
                               "confidence": confidence, "method": "percentile", "degenerate": None,
                               "n_invalid_resamples": 0}
        if summed is None:
            res.update(low=res["estimate"], high=res["estimate"], se=0.0,
                       degenerate="single item: no between-item variability to resample" if n_items else "no items")
        else:
            with warnings.catch_warnings():  # NaN replicates are counted below, not warned about
                warnings.simplefilter("ignore", RuntimeWarning)
                _summarise(res, np.asarray(statistic(summed), dtype=float), confidence)
        out[name] = res
    return out


def _summarise(out: dict[str, Any], dist: np.ndarray, confidence: float) -> None:
    good = dist[np.isfinite(dist)]
    out["n_invalid_resamples"] = int(dist.size - good.size)
    if not good.size:
        out["degenerate"] = "the statistic was undefined (NaN) on every resample"
        return
    tail = (1 - confidence) / 2
    low, high = (float(q) for q in np.quantile(good, [tail, 1 - tail]))
    out.update(low=low, high=high, se=float(np.std(good, ddof=1)) if good.size > 1 else 0.0)
    if np.ptp(good) == 0:
        out["degenerate"] = "constant bootstrap distribution"


def mean_bootstrap(values: np.ndarray, codes: np.ndarray, n_items: int, n_resamples: int, confidence: float,
                   seed: int) -> dict[str, Any]:
    """``rubriclab.stats.item_bootstrap(values, "mean", ids, method="percentile")`` for ``codes`` = the ids'
    first-appearance codes (``pd.factorize(ids, sort=False)``): the same keys and numbers."""
    values = np.asarray(values, dtype=float)
    out: dict[str, Any] = {"estimate": np.nan, "low": np.nan, "high": np.nan, "se": np.nan, "n_items": n_items,
                           "n_obs": len(values), "n_resamples": n_resamples, "confidence": confidence,
                           "method": "percentile", "statistic": "mean", "degenerate": None,
                           "n_invalid_resamples": 0}
    if n_items == 0:
        out["degenerate"] = "no items"
        return out
    counts = np.bincount(codes, minlength=n_items).astype(float)
    sums = np.bincount(codes, weights=values, minlength=n_items)
    out["estimate"] = float(values.mean())
    if n_items == 1:
        return _collapse(out, "single item: no between-item variability to resample")
    if np.ptp(sums / counts) == 0:
        return _collapse(out, "constant values: every item has the same mean")
    with np.errstate(divide="ignore", invalid="ignore"):
        dist = replicate_sums(sums, n_resamples, seed) / replicate_sums(counts, n_resamples, seed)
    return _finish(out, dist, confidence)


def _collapse(out: dict[str, Any], reason: str) -> dict[str, Any]:
    out.update(low=out["estimate"], high=out["estimate"], se=0.0, degenerate=reason)
    return out


def _finish(out: dict[str, Any], dist: np.ndarray, confidence: float) -> dict[str, Any]:
    return finish_distribution(out, dist, lambda: percentile_interval(dist, confidence))


def paired_difference(a: np.ndarray, b: np.ndarray, n_resamples: int, confidence: float,
                      seed: int) -> dict[str, Any]:
    """``rubriclab.stats.paired_bootstrap(a, b)`` (each row its own item): the same keys and numbers."""
    return paired_differences([(a, b)], n_resamples, confidence, seed)[0]


def paired_differences(compared: list[tuple[np.ndarray, np.ndarray]], n_resamples: int, confidence: float,
                       seed: int, chunk: int = 512) -> list[dict[str, Any]]:
    """``paired_difference`` of each ``(a, b)``: comparisons on the same number of pairs share their draws, and
    their replicate sums are one matrix product (exact parts) per chunk."""
    out: list[dict[str, Any]] = [{} for _ in compared]
    by_n: dict[int, list[int]] = {}
    for i, (a, _) in enumerate(compared):
        by_n.setdefault(len(a), []).append(i)
    for which in by_n.values():
        for k in range(0, len(which), chunk):
            part = which[k:k + chunk]
            a = np.column_stack([np.asarray(compared[i][0], dtype=float) for i in part])
            b = np.column_stack([np.asarray(compared[i][1], dtype=float) for i in part])
            for i, res in zip(part, _paired_block(a, b, n_resamples, confidence, seed), strict=True):
                out[i] = res
    return out


def _paired_block(a: np.ndarray, b: np.ndarray, n_resamples: int, confidence: float,
                  seed: int) -> list[dict[str, Any]]:
    """Paired differences of the columns of ``a`` and ``b`` ``(n, K)``, all on ``n`` pairs."""
    n, k = a.shape
    at, bt = np.ascontiguousarray(a.T), np.ascontiguousarray(b.T)  # rows: each a 1-D array's sum, bit for bit
    sa, sb, ma, mb = at.sum(axis=1), bt.sum(axis=1), at.mean(axis=1), bt.mean(axis=1)
    out = [{"diff": float((sa[c] - sb[c]) / n), "low": np.nan, "high": np.nan, "p_value": np.nan, "se": np.nan,
            "n_items": n, "n_obs": n, "mean_a": float(ma[c]), "mean_b": float(mb[c]), "n_resamples": n_resamples,
            "confidence": confidence, "degenerate": None, "method": "percentile"} for c in range(k)]
    if n == 1:
        for res in out:
            res.update(low=res["diff"], high=res["diff"], se=0.0,
                       degenerate="single item: no sampling variability, so no CI or p-value")
        return out
    # scipy's statistic: (Σ a − Σ b) / Σ n over the drawn items (n = 1 per item, so Σ n = n exactly)
    if _exact(a) and _exact(b):  # then Σ a − Σ b = Σ (a − b) exactly: one product, already (K, B)
        dist = ((at - bt) @ draw_counts(n, n_resamples, seed).T) / float(n)
    else:
        dist = np.stack([(replicate_sums(a[:, c], n_resamples, seed) - replicate_sums(b[:, c], n_resamples, seed))
                         / float(n) for c in range(k)])
    p_le = (1 + np.count_nonzero(dist <= 0, axis=-1)) / (n_resamples + 1)
    p_ge = (1 + np.count_nonzero(dist >= 0, axis=-1)) / (n_resamples + 1)
    p_value = np.minimum(1.0, 2.0 * np.minimum(p_le, p_ge))
    low, high = percentile_intervals(dist, confidence)
    se = np.std(dist, ddof=1, axis=-1)
    point = np.ptp(dist, axis=-1) == 0
    for c, res in enumerate(out):
        res.update(low=float(low[c]), high=float(high[c]), se=float(se[c]), p_value=float(p_value[c]))
        if point[c]:
            res["degenerate"] = "every item has the same difference: the bootstrap distribution is a point"
    return out
