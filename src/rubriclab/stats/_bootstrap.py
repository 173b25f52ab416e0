"""Item-level (cluster) bootstrap and paired bootstrap between two rubric sets judged on the same items.

Why items, not judgments: one item (a prompt or a pair) is judged many times (k samples, R re-runs,
several judges). Judgments of the same item are correlated, so resampling judgments pretends there are
n_items·k independent observations and gives intervals that are too narrow. Every interval here resamples
item ids with replacement and takes *all* rows of each drawn item.

All resampling is done by ``scipy.stats.bootstrap``; this module only decides what is resampled (item
indices, or per-item sufficient statistics) and handles the degenerate cases scipy refuses.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from rubriclab.errors import ConfigError, InputError
from rubriclab.stats._checks import as_float, item_codes, positive_int, probability

_METHODS = {"percentile": "percentile", "basic": "basic", "bca": "BCa"}
_VECTOR_STATISTICS = ("mean", "item_mean")


def item_bootstrap(
    data: Any,
    statistic: Callable[..., float] | str,
    item_ids: Any,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 42,
    method: str = "percentile",
) -> dict[str, Any]:
    """Point estimate and item-level bootstrap CI of ``statistic``.

    Resampling: draw G item ids with replacement from the G distinct ``item_ids`` and evaluate the
    statistic on all rows of the drawn items (an item drawn twice contributes its rows twice).
    Interval: ``method="percentile"`` (default) is the percentile interval
    ``[q_{(1-c)/2}, q_{(1+c)/2}]`` of the ``n_resamples`` bootstrap replicates; ``"BCa"`` and ``"basic"``
    are passed to ``scipy.stats.bootstrap`` as well. Percentile is the default because it is the same
    for the vectorised and the generic path and needs no jackknife (BCa re-evaluates the statistic
    G more times, which is costly for e.g. Krippendorff's α). ``se`` is the standard deviation (ddof=1)
    of the replicates.

    Parameters
    ----------
    data:
        What the statistic reads: a 1-D/2-D numpy array or a pd.Series/pd.DataFrame (rows =
        observations), or a *tuple* of aligned arrays (passed to the statistic as separate arguments).
    statistic:
        A callable over the selected rows (same type as ``data``; for a tuple, one argument per array)
        returning a scalar, or one of the vectorised shortcuts for a 1-D numeric ``data``:

        * ``"mean"``: mean over all observations, ``Σ_i s_i / Σ_i n_i`` with per-item sums ``s_i`` and
          counts ``n_i`` (equals the plain mean of the rows; e.g. accuracy over k judgments per item);
        * ``"item_mean"``: mean of per-item means, ``(1/G) Σ_i s_i / n_i`` (items weighted equally).

        Both aggregate per item first and let scipy resample the G per-item values (fast).
    item_ids:
        One id per row (or a column name when ``data`` is a DataFrame). ``None`` makes every row its own
        item, i.e. the naive judgment-level bootstrap (only right when rows are independent).

    Returns
    -------
    dict with ``estimate`` (statistic on the full data), ``low``, ``high``, ``se``, ``n_items``,
    ``n_obs``, ``n_resamples``, ``confidence``, ``method``, ``statistic`` (name), ``degenerate``
    (None, or why the interval collapsed / is NaN) and ``n_invalid_resamples`` (replicates where the
    statistic was NaN; the interval then uses the finite replicates only, percentile method).
    Degenerate inputs never raise: 0 items → all NaN with ``degenerate="no items"``; 1 item or
    constant values → ``low = high = estimate``, ``se = 0``.
    """
    n_resamples = positive_int(n_resamples, "n_resamples", minimum=1)
    conf = probability(confidence, "confidence")
    method_name = _method(method)
    if isinstance(data, pd.DataFrame) and isinstance(item_ids, str):
        if item_ids not in data.columns:
            raise InputError(f"column '{item_ids}' not found (columns: {list(data.columns)})", field="item_ids",
                             expected="a column of the frame or an array of ids")
        item_ids = data[item_ids].to_numpy()
    n_obs, take = _selector(data)
    codes, n_items = item_codes(item_ids, n_obs)
    out: dict[str, Any] = {
        "estimate": np.nan, "low": np.nan, "high": np.nan, "se": np.nan,
        "n_items": n_items, "n_obs": n_obs, "n_resamples": n_resamples, "confidence": conf,
        "method": method_name, "statistic": statistic if isinstance(statistic, str) else
        getattr(statistic, "__name__", "callable"), "degenerate": None, "n_invalid_resamples": 0,
    }
    if isinstance(statistic, str):
        return _vectorised(data, statistic, codes, n_items, out, seed)
    if not callable(statistic):
        raise InputError(f"is {type(statistic).__name__}", field="statistic",
                         expected=f"a callable over the selected rows or one of {_VECTOR_STATISTICS}")
    if n_items == 0:
        out["degenerate"] = "no items"
        return out

    gather = _row_gatherer(codes, n_items)

    def on_items(idx: np.ndarray) -> float:
        return _scalar(statistic(*take(gather(np.asarray(idx, dtype=np.intp)))))

    out["estimate"] = _scalar(statistic(*take(np.arange(n_obs))))
    if n_items == 1:
        return _collapse(out, "single item: no between-item variability to resample")
    res = _run_scipy((np.arange(n_items),), on_items, out, seed, vectorized=False, paired=False)
    return _finish(out, res)


def paired_bootstrap(
    a: Any,
    b: Any,
    item_ids: Any = None,
    n_resamples: int = 5000,
    seed: int = 42,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Difference of means ``mean(a) − mean(b)`` of two rubric sets scored on the SAME rows, item bootstrap.

    ``a[j]`` and ``b[j]`` are the two conditions' values (e.g. 0/1 correctness) for the same judgment
    slot j; rows sharing an ``item_ids`` value belong to one item (``None``: each row is an item).
    The statistic is ``d = (Σ_i Sa_i − Σ_i Sb_i) / Σ_i n_i`` over per-item sums; items are resampled
    *jointly* for a and b (``paired=True`` in ``scipy.stats.bootstrap``), which keeps the between-set
    correlation that makes the paired test sensitive. CI: percentile interval of the B replicates.

    Two-sided p-value (percentile-bootstrap test of H0: d = 0, with the +1 correction so p > 0):
    ``p = min(1, 2 · min((1 + #{d*_b ≤ 0}) / (B + 1), (1 + #{d*_b ≥ 0}) / (B + 1)))``.
    It is the smallest two-sided level at which the percentile CI excludes 0 (Davison & Hinkley 1997).

    Returns dict(diff, low, high, p_value, se, n_items, n_obs, mean_a, mean_b, n_resamples, confidence,
    degenerate). With a single item there is no sampling variability: ``low = high = diff`` and
    ``p_value`` is NaN with ``degenerate`` saying so.
    """
    n_resamples = positive_int(n_resamples, "n_resamples", minimum=1)
    conf = probability(confidence, "confidence")
    va = as_float(a, "a", ndim=1, expected="a 1-D numeric array, one value per judgment")
    vb = as_float(b, "b", ndim=1, expected="a 1-D numeric array aligned with 'a'")
    if len(va) != len(vb):
        raise InputError(f"has {len(vb)} values but 'a' has {len(va)}", field="b",
                         expected="the same rows (items × judgments) as 'a'")
    codes, n_items = item_codes(item_ids, len(va))
    if n_items == 0:
        raise InputError("is empty", field="a", expected="at least one item judged under both rubric sets")
    counts = np.bincount(codes, minlength=n_items).astype(float)
    sa = np.bincount(codes, weights=va, minlength=n_items)
    sb = np.bincount(codes, weights=vb, minlength=n_items)
    out: dict[str, Any] = {
        "diff": float((va.sum() - vb.sum()) / len(va)), "low": np.nan, "high": np.nan, "p_value": np.nan,
        "se": np.nan, "n_items": n_items, "n_obs": len(va), "mean_a": float(va.mean()),
        "mean_b": float(vb.mean()), "n_resamples": n_resamples, "confidence": conf, "degenerate": None,
        "method": "percentile",
    }
    if n_items == 1:
        out.update(low=out["diff"], high=out["diff"], se=0.0,
                   degenerate="single item: no sampling variability, so no CI or p-value")
        return out

    def diff_stat(xa: np.ndarray, xb: np.ndarray, n: np.ndarray, axis: int = -1) -> np.ndarray:
        return (xa.sum(axis=axis) - xb.sum(axis=axis)) / n.sum(axis=axis)

    boot = {"estimate": out["diff"], "n_resamples": n_resamples, "confidence": conf, "method": "percentile"}
    res = _run_scipy((sa, sb, counts), diff_stat, boot, seed, vectorized=True, paired=True)
    dist = np.asarray(res.bootstrap_distribution, dtype=float)
    b_count = dist.size
    p_le = (1 + np.count_nonzero(dist <= 0)) / (b_count + 1)
    p_ge = (1 + np.count_nonzero(dist >= 0)) / (b_count + 1)
    out.update(
        low=float(res.confidence_interval.low), high=float(res.confidence_interval.high),
        se=float(res.standard_error), p_value=float(min(1.0, 2.0 * min(p_le, p_ge))),
    )
    if np.ptp(dist) == 0:
        out["degenerate"] = "every item has the same difference: the bootstrap distribution is a point"
    return out


# -- internals -------------------------------------------------------------------------------------


def _method(method: str) -> str:
    key = str(method).lower()
    if key not in _METHODS:
        raise ConfigError(f"bootstrap method={method!r} is unknown; expected one of {sorted(_METHODS.values())}")
    return _METHODS[key]


def _selector(data: Any) -> tuple[int, Callable[[np.ndarray], tuple]]:
    """Number of rows and a function rows -> tuple of arguments for the statistic."""
    if isinstance(data, (pd.DataFrame, pd.Series)):
        return len(data), lambda rows: (data.iloc[rows],)
    if isinstance(data, tuple):
        arrays = [a if isinstance(a, (pd.DataFrame, pd.Series)) else np.asarray(a) for a in data]
        if not arrays:
            raise InputError("is an empty tuple", field="data", expected="one or more aligned arrays")
        n = len(arrays[0])
        for i, arr in enumerate(arrays[1:], start=1):
            if len(arr) != n:
                raise InputError(f"array {i} has {len(arr)} rows but array 0 has {n}", field="data",
                                 expected="aligned arrays with one row per observation")
        return n, lambda rows: tuple(
            x.iloc[rows] if isinstance(x, (pd.DataFrame, pd.Series)) else x[rows] for x in arrays
        )
    arr = np.asarray(data)
    if arr.ndim == 0:
        raise InputError("is a scalar", field="data", expected="an array with one row per observation")
    return len(arr), lambda rows: (arr[rows],)


def _row_gatherer(codes: np.ndarray, n_items: int) -> Callable[[np.ndarray], np.ndarray]:
    """idx (item indices, repeats allowed) -> row indices of all rows of those items, vectorised."""
    order = np.argsort(codes, kind="stable")
    counts = np.bincount(codes, minlength=n_items)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))

    def gather(idx: np.ndarray) -> np.ndarray:
        lens = counts[idx]
        before = np.concatenate(([0], np.cumsum(lens)[:-1]))
        return order[np.repeat(starts[idx] - before, lens) + np.arange(lens.sum())]

    return gather


def _scalar(value: Any) -> float:
    arr = np.asarray(value, dtype=float)
    if arr.size != 1:
        raise InputError(f"returned shape {arr.shape}", field="statistic", expected="a scalar")
    return float(arr.reshape(()))


def _vectorised(data: Any, name: str, codes: np.ndarray, n_items: int, out: dict, seed: int) -> dict:
    if name not in _VECTOR_STATISTICS:
        raise InputError(f"'{name}' is not a known shortcut", field="statistic",
                         expected=f"a callable or one of {_VECTOR_STATISTICS}")
    if isinstance(data, pd.DataFrame):
        raise InputError(f"is a DataFrame with columns {list(data.columns)}", field="data",
                         expected=f"a 1-D array or Series for statistic='{name}' (pass frame['column'])")
    values = as_float(data, "data", ndim=1, expected=f"a 1-D numeric array for statistic='{name}'")
    if n_items == 0:
        out["degenerate"] = "no items"
        return out
    counts = np.bincount(codes, minlength=n_items).astype(float)
    sums = np.bincount(codes, weights=values, minlength=n_items)
    means = sums / counts
    out["estimate"] = float(values.mean()) if name == "mean" else float(means.mean())
    if n_items == 1:
        return _collapse(out, "single item: no between-item variability to resample")
    if np.ptp(means) == 0:
        return _collapse(out, "constant values: every item has the same mean")
    if name == "mean":
        def ratio(s: np.ndarray, n: np.ndarray, axis: int = -1) -> np.ndarray:
            return s.sum(axis=axis) / n.sum(axis=axis)
        res = _run_scipy((sums, counts), ratio, out, seed, vectorized=True, paired=True)
    else:
        res = _run_scipy((means,), np.mean, out, seed, vectorized=True, paired=False)
    return _finish(out, res)


def _run_scipy(samples: tuple, fn: Callable, out: dict, seed: int, *, vectorized: bool, paired: bool):
    with warnings.catch_warnings():
        # A constant bootstrap distribution makes BCa warn and return NaN; _finish reports it instead.
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        return stats.bootstrap(
            samples, fn, n_resamples=out["n_resamples"], vectorized=vectorized, paired=paired,
            confidence_level=out["confidence"], method=out["method"], rng=np.random.default_rng(seed),
        )


def _finish(out: dict, res: Any) -> dict:
    return finish_distribution(out, np.asarray(res.bootstrap_distribution, dtype=float),
                               lambda: (float(res.confidence_interval.low), float(res.confidence_interval.high)))


def finish_distribution(out: dict, dist: np.ndarray, interval: Callable[[], tuple[float, float]]) -> dict:
    """Fill ``out``'s low, high and se from a bootstrap distribution ``dist`` and the method's ``interval``
    (asked only when the distribution is finite and varies); say why when it cannot (``degenerate``)."""
    finite = np.isfinite(dist)
    out["n_invalid_resamples"] = int((~finite).sum())
    if not finite.any():
        out["degenerate"] = "the statistic was undefined (NaN) on every resample"
        return out
    good = dist[finite]
    if np.ptp(good) == 0:
        out.update(low=float(good[0]), high=float(good[0]), se=0.0,
                   degenerate="constant bootstrap distribution")
        return out
    low, high = interval()
    if out["n_invalid_resamples"] or not (np.isfinite(low) and np.isfinite(high)):
        # scipy's interval is NaN as soon as one replicate is; fall back to the percentile interval of
        # the finite replicates and say how many were dropped (never a silent NaN).
        tail = (1 - out["confidence"]) / 2
        low, high = (float(q) for q in np.quantile(good, [tail, 1 - tail]))
        out["method"] = "percentile"
    out.update(low=low, high=high, se=float(np.std(good, ddof=1)))
    if not np.isfinite(out["estimate"]):
        out["degenerate"] = "the statistic is undefined (NaN) on the full data"
    return out


def _collapse(out: dict, reason: str) -> dict:
    out.update(low=out["estimate"], high=out["estimate"], se=0.0, degenerate=reason)
    return out


def two_sample_bootstrap(
    a: Any,
    b: Any,
    n_resamples: int = 2000,
    seed: int = 42,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Difference of means ``mean(a) − mean(b)`` of two INDEPENDENT samples (e.g. benchmark agreement minus
    target agreement: different pairs), with a two-sample percentile bootstrap CI.

    Each replicate resamples a and b separately with replacement (``scipy.stats.bootstrap`` with
    ``paired=False``) and takes the difference of the resampled means. NaN values (failed items) must be
    removed by the caller. Returns dict(diff, low, high, se, n_a, n_b, n_resamples, confidence, method,
    degenerate); with an empty sample everything is NaN and ``degenerate`` says which; with one item on one
    side only ``diff`` is given (interval and se NaN, ``degenerate`` "no interval: n=1 in …").
    """
    n_resamples = positive_int(n_resamples, "n_resamples", minimum=1)
    conf = probability(confidence, "confidence")
    va = as_float(a, "a", ndim=1, expected="a 1-D numeric array (one value per item)")
    vb = as_float(b, "b", ndim=1, expected="a 1-D numeric array (one value per item)")
    out: dict[str, Any] = {"diff": np.nan, "estimate": np.nan, "low": np.nan, "high": np.nan, "se": np.nan,
                           "n_a": len(va), "n_b": len(vb), "n_resamples": n_resamples, "confidence": conf,
                           "method": "percentile", "degenerate": None, "n_invalid_resamples": 0}
    if not len(va) or not len(vb):
        out["degenerate"] = "no items in " + ("a" if not len(va) else "b")
        return out
    out["diff"] = out["estimate"] = float(va.mean() - vb.mean())
    if len(va) == 1 and len(vb) == 1:
        return _collapse(out, "one item per sample: no sampling variability")
    if len(va) == 1 or len(vb) == 1:
        # resampling a single item would treat that side as exact and give an interval that looks valid
        side = "a" if len(va) == 1 else "b"
        out["degenerate"] = (f"no interval: n=1 in {side} (n_a={len(va)}, n_b={len(vb)}); one item shows no "
                             "sampling variability, at least 2 per side are needed")
        return out

    def diff(xa: np.ndarray, xb: np.ndarray, axis: int = -1) -> np.ndarray:
        return xa.mean(axis=axis) - xb.mean(axis=axis)

    res = _run_scipy((va, vb), diff, out, seed, vectorized=True, paired=False)
    return _finish(out, res)
