"""Binary classification metrics of a rubric-only probe with vectorised (cluster) bootstrap CIs.

Why not ``rubriclab.stats.item_bootstrap``: its vectorised shortcuts cover a single ratio of sums
(``"mean"``), while precision, recall, F1 and balanced accuracy need several confusion counts per
replicate; with a callable statistic it evaluates the metric once per resample in Python, which is
~10⁴ sklearn calls (seconds to minutes, see ``benchmarks/probe_bootstrap.py``). Here every count-based
metric is derived from summed confusion counts instead:

1. per resampling unit (a record when ``groups`` is given — the cluster bootstrap — else an item) the
   confusion counts ``(tp, fp, fn, tn)`` are computed once;
2. units with identical count vectors are pooled into *types*. Drawing G units uniformly with replacement
   is the same as drawing the number of units of each type from ``Multinomial(G, type frequencies)``, so
   one ``rng.multinomial(G, p, size=B)`` call gives all B resamples exactly (not an approximation);
3. the summed counts of every replicate are ``draws @ type_counts`` (B × 4), and every metric is computed
   from those columns at once.

A replicate where a metric is undefined (e.g. no positive in the resample for recall / balanced accuracy,
no predicted positive for precision) is NaN, counted in ``n_invalid_resamples``, and the percentile
interval is taken over the finite replicates.

ROC-AUC needs the scores, not just counts. It uses the same percentile bootstrap over the same units but
with explicit per-unit weights: each chunk of resamples draws unit indices (``rng.integers``), turns them
into weights with one ``bincount``, and evaluates the weighted Mann–Whitney statistic of all replicates of
the chunk at once (items sorted by score once; ties count ½). All ``n_boot`` resamples are used; chunking
keeps memory at about ``chunk × n_items`` floats.

No interval below ``MIN_INTERVAL_UNITS`` (30) resampling units: a percentile bootstrap over a handful of clusters
covers far less than its level (simulated, per-cluster accuracy varying as Beta(2, 2): 71% of nominal 95% at 2
clusters, 86% at 5, 92% at 10, 95% at 30; ``tests/probe/test_probe_interval_level.py``). The estimate stays, and
``reason`` says why the interval is missing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from rubriclab.errors import InputError
from rubriclab.stats import item_codes, no_interval_reason, positive_int, probability

METRICS = ("accuracy", "precision", "recall", "f1", "balanced_accuracy", "roc_auc")
COUNT_METRICS = METRICS[:-1]
_CHUNK_CELLS = 4_000_000  # floats per chunk of the AUC bootstrap (~32 MB)
MIN_INTERVAL_UNITS = 30  # fewer resampling units: no interval (see the module docstring)


def too_few_units(n_units: int, unit: str, level: float) -> str | None:
    """Why there is no interval over ``n_units`` resampling units, or None when there are enough."""
    return no_interval_reason(n_units, unit, level, minimum=MIN_INTERVAL_UNITS,
                              coverage="simulated coverage 86% at 5, 92% at 10")

_UNDEFINED = {
    "precision": "undefined: no predicted positives",
    "recall": "undefined: no positive labels",
    "f1": "undefined: no positive labels and no predicted positives",
    "balanced_accuracy": "undefined: only one class among the labels",
    "accuracy": "undefined: no items",
}


def metrics_from_counts(tp: Any, fp: Any, fn: Any, tn: Any) -> dict[str, np.ndarray]:
    """Count-based metrics from (arrays of) confusion counts; NaN where a metric is undefined."""
    tp, fp, fn, tn = (np.asarray(x, dtype=float) for x in (tp, fp, fn, tn))
    pos, neg, n = tp + fn, tn + fp, tp + fp + fn + tn
    with np.errstate(divide="ignore", invalid="ignore"):
        acc = np.where(n > 0, (tp + tn) / n, np.nan)
        prec = np.where(tp + fp > 0, tp / (tp + fp), np.nan)
        rec = np.where(pos > 0, tp / pos, np.nan)
        f1 = np.where(2 * tp + fp + fn > 0, 2 * tp / (2 * tp + fp + fn), np.nan)
        spec = np.where(neg > 0, tn / neg, np.nan)
        bal = (rec + spec) / 2  # NaN unless both classes are present
    return {"accuracy": acc, "precision": prec, "recall": rec, "f1": f1, "balanced_accuracy": bal}


def confusion_counts(y_true: np.ndarray, y_pred: np.ndarray, codes: np.ndarray, n_units: int) -> np.ndarray:
    """(n_units, 4) matrix of (tp, fp, fn, tn) per resampling unit."""
    cell = np.select(
        [(y_true == 1) & (y_pred == 1), (y_true == 0) & (y_pred == 1), (y_true == 1) & (y_pred == 0)],
        [0, 1, 2], default=3,
    )
    return np.bincount(codes * 4 + cell, minlength=n_units * 4).reshape(n_units, 4).astype(float)


def classification_metrics(
    y_true: Any,
    y_pred: Any,
    y_score: Any = None,
    *,
    groups: Any = None,
    n_boot: int = 10000,
    confidence: float = 0.95,
    seed: int = 0,
    unit: str | None = None,
) -> dict[str, dict[str, Any]]:
    """Accuracy, precision, recall, F1, balanced accuracy and ROC-AUC with percentile bootstrap CIs.

    ``y_true`` / ``y_pred`` are 0/1 (1 = the judge says the rubric item is satisfied); ``y_score`` is the
    score of class 1 (AUC only when given and both classes are present). ``groups`` (e.g. record ids) makes
    it a cluster bootstrap over records — items of one record are correlated and are resampled together;
    ``None`` resamples items. ``unit`` names what one group is (default "records"; the probe's groups are
    clusters of records that share criterion text). Failed judge labels (NaN) must be excluded by the caller.

    Returns ``{metric: {estimate, low, high, n, n_groups, n_invalid_resamples, ci: {method, level, unit,
    resamples}, reason}}``; ``reason`` is None or says why a value is NaN / the interval degenerate. The
    estimates equal sklearn's on the full sample wherever the metric is defined (sklearn returns 0 with a
    warning where precision/recall are undefined; here they are NaN with a reason).
    """
    n_boot = positive_int(n_boot, "n_boot", minimum=1)
    conf = probability(confidence, "confidence")
    yt = _binary(y_true, "y_true")
    yp = _binary(y_pred, "y_pred")
    _same_length(yt, yp, "y_pred")
    ys = None
    if y_score is not None:
        ys = np.asarray(y_score, dtype=float).ravel()
        _same_length(yt, ys, "y_score")
        if not np.isfinite(ys).all():
            raise InputError("holds NaN or inf", field="y_score", expected="finite scores of class 1")
    codes, n_groups = item_codes(groups, len(yt))
    unit = (unit or "records") if groups is not None else "items"
    ci = {"method": f"percentile bootstrap over {unit}", "level": conf, "unit": unit, "resamples": n_boot}
    out: dict[str, dict[str, Any]] = {}
    if len(yt) == 0:
        for m in METRICS:
            out[m] = _entry(np.nan, None, 0, 0, ci, "no items")
        return out

    unit_counts = confusion_counts(yt, yp, codes, n_groups)
    estimates = metrics_from_counts(*unit_counts.sum(axis=0))
    replicates = metrics_from_counts(*_resampled_sums(unit_counts, n_boot, seed).T)
    for m in COUNT_METRICS:
        est = float(estimates[m])
        out[m] = _entry(est, replicates[m], len(yt), n_groups, ci, None if np.isfinite(est) else _UNDEFINED[m])

    if ys is None:
        out["roc_auc"] = _entry(np.nan, None, len(yt), n_groups, ci, "no scores given (y_score=None)")
    elif yt.min() == yt.max():
        out["roc_auc"] = _entry(np.nan, None, len(yt), n_groups, ci, "undefined: only one class among the labels")
    else:
        est = float(_weighted_auc(yt, ys, np.ones((1, len(yt))))[0])
        reps = _auc_replicates(yt, ys, codes, n_groups, n_boot, seed)
        out["roc_auc"] = _entry(est, reps, len(yt), n_groups, ci, None)
    return out


def paired_metric_difference(
    y_true: Any,
    pred_a: Any,
    pred_b: Any,
    *,
    metric: str = "balanced_accuracy",
    groups: Any = None,
    n_boot: int = 10000,
    confidence: float = 0.95,
    seed: int = 0,
    unit: str | None = None,
) -> dict[str, Any]:
    """``metric(a) − metric(b)`` of two classifiers' predictions on the SAME items, paired (cluster) bootstrap.

    Each replicate resamples units (records when ``groups`` is given, else items) once and evaluates both
    classifiers on the same resample (per-unit confusion counts of a and b side by side, pooled into types
    and drawn with one multinomial, as in ``classification_metrics``). CI: percentile interval of the finite
    replicates. Two-sided p-value of H0: difference = 0 (percentile-bootstrap test, +1 correction, as in
    ``rubriclab.stats.paired_bootstrap``): ``p = min(1, 2·min((1+#{d*≤0})/(B+1), (1+#{d*≥0})/(B+1)))``
    with B the number of finite replicates.

    Returns dict(metric, estimate, low, high, p_value, metric_a, metric_b, n, n_groups, n_invalid_resamples,
    ci, reason).
    """
    if metric not in COUNT_METRICS:
        raise InputError(f"is {metric!r}", field="metric", expected=f"one of {list(COUNT_METRICS)}")
    n_boot = positive_int(n_boot, "n_boot", minimum=1)
    conf = probability(confidence, "confidence")
    yt = _binary(y_true, "y_true")
    pa = _binary(pred_a, "pred_a")
    pb = _binary(pred_b, "pred_b")
    _same_length(yt, pa, "pred_a")
    _same_length(yt, pb, "pred_b")
    codes, n_groups = item_codes(groups, len(yt))
    unit = (unit or "records") if groups is not None else "items"
    out: dict[str, Any] = {
        "metric": metric, "estimate": np.nan, "low": np.nan, "high": np.nan, "p_value": np.nan,
        "metric_a": np.nan, "metric_b": np.nan, "n": len(yt), "n_groups": n_groups, "n_invalid_resamples": 0,
        "ci": {"method": f"paired percentile bootstrap over {unit}", "level": conf, "unit": unit,
               "resamples": n_boot},
        "reason": None,
    }
    if len(yt) == 0:
        out["reason"] = "no items"
        return out
    both = np.hstack([confusion_counts(yt, pa, codes, n_groups), confusion_counts(yt, pb, codes, n_groups)])
    tot = both.sum(axis=0)
    ma = float(metrics_from_counts(*tot[:4])[metric])
    mb = float(metrics_from_counts(*tot[4:])[metric])
    out.update(metric_a=ma, metric_b=mb, estimate=ma - mb)
    if not np.isfinite(ma - mb):
        out["reason"] = _UNDEFINED[metric]
        return out
    sums = _resampled_sums(both, n_boot, seed)
    dist = metrics_from_counts(*sums[:, :4].T)[metric] - metrics_from_counts(*sums[:, 4:].T)[metric]
    finite = np.isfinite(dist)
    out["n_invalid_resamples"] = int((~finite).sum())
    good = dist[finite]
    if good.size == 0:
        out["reason"] = "the difference was undefined on every resample"
        return out
    few = too_few_units(n_groups, unit, conf)
    if few:
        out["reason"] = few
        return out
    tail = (1 - conf) / 2
    low, high = np.quantile(good, [tail, 1 - tail])
    b = good.size
    p = min(1.0, 2.0 * min((1 + np.count_nonzero(good <= 0)) / (b + 1), (1 + np.count_nonzero(good >= 0)) / (b + 1)))
    out.update(low=float(low), high=float(high), p_value=float(p))
    if n_groups == 1:
        out["reason"] = "single resampling unit: no sampling variability"
    elif np.ptp(good) == 0:
        out["reason"] = "constant bootstrap distribution (both classifiers agree on every unit's contribution)"
    return out


def metrics_table(metrics: dict[str, dict[str, Any]], **columns: Any) -> pd.DataFrame:
    """Flatten ``classification_metrics`` output to rows (metric, estimate, low, high, n, ..., ci_*)."""
    rows = []
    for name, e in metrics.items():
        rows.append({**columns, "metric": name, "estimate": e["estimate"], "low": e["low"], "high": e["high"],
                     "n": e["n"], "n_groups": e["n_groups"], "n_invalid_resamples": e["n_invalid_resamples"],
                     "ci_method": e["ci"]["method"], "ci_level": e["ci"]["level"], "ci_unit": e["ci"]["unit"],
                     "ci_resamples": e["ci"]["resamples"], "reason": e["reason"]})
    return pd.DataFrame(rows)


# -- internals -------------------------------------------------------------------------------------------


def _binary(values: Any, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float).ravel()
    bad = ~np.isin(arr, (0.0, 1.0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"holds {arr[i]!r} at position {i} ({int(bad.sum())} such values)", field=name,
                         expected="0/1 labels (exclude failed judge labels, NaN, before calling)")
    return arr.astype(np.int64)


def _same_length(a: np.ndarray, b: np.ndarray, name: str) -> None:
    if len(a) != len(b):
        raise InputError(f"has {len(b)} values but y_true has {len(a)}", field=name,
                         expected="one value per item, aligned with y_true")


def _resampled_sums(unit_counts: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, k) sums of per-unit count vectors over n_boot resamples of the units (with replacement)."""
    n_units = unit_counts.shape[0]
    types, inverse = np.unique(unit_counts, axis=0, return_inverse=True)
    freq = np.bincount(inverse.ravel(), minlength=len(types)) / n_units
    draws = np.random.default_rng(seed).multinomial(n_units, freq, size=n_boot)
    return draws.astype(float) @ types


def _weighted_auc(y: np.ndarray, s: np.ndarray, w: np.ndarray) -> np.ndarray:
    """AUC of every row of item weights ``w`` (R × n): weighted Mann–Whitney, ties counted ½."""
    order = np.argsort(s, kind="mergesort")
    s_sorted, y_sorted, w = s[order], y[order], w[:, order]
    starts = np.flatnonzero(np.r_[True, s_sorted[1:] != s_sorted[:-1]])  # first item of each score level
    wpos = np.where(y_sorted == 1, w, 0.0)
    wneg = w - wpos
    neg_level = np.add.reduceat(wneg, starts, axis=1)  # R × L negative weight at each score level
    pos_level = np.add.reduceat(wpos, starts, axis=1)
    neg_below = np.cumsum(neg_level, axis=1) - neg_level
    num = (pos_level * (neg_below + 0.5 * neg_level)).sum(axis=1)
    den = pos_level.sum(axis=1) * neg_level.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / den, np.nan)


def _auc_replicates(y: np.ndarray, s: np.ndarray, codes: np.ndarray, n_units: int, n_boot: int,
                    seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed + 1)
    chunk = max(1, min(n_boot, _CHUNK_CELLS // max(len(y), n_units)))
    out = np.empty(n_boot)
    for start in range(0, n_boot, chunk):
        r = min(chunk, n_boot - start)
        idx = rng.integers(0, n_units, size=(r, n_units))
        unit_w = np.bincount((idx + (np.arange(r) * n_units)[:, None]).ravel(),
                             minlength=r * n_units).reshape(r, n_units).astype(float)
        out[start:start + r] = _weighted_auc(y, s, unit_w[:, codes])
    return out


def _entry(estimate: float, replicates: np.ndarray | None, n: int, n_groups: int, ci: dict,
           reason: str | None) -> dict[str, Any]:
    e: dict[str, Any] = {"estimate": estimate, "low": np.nan, "high": np.nan, "n": n, "n_groups": n_groups,
                         "n_invalid_resamples": 0, "ci": dict(ci), "reason": reason}
    if replicates is None or not np.isfinite(estimate):
        if replicates is not None:
            e["n_invalid_resamples"] = int((~np.isfinite(replicates)).sum())
        return e
    finite = np.isfinite(replicates)
    e["n_invalid_resamples"] = int((~finite).sum())
    good = replicates[finite]
    if good.size == 0:
        e["reason"] = "undefined on every resample"
        return e
    few = too_few_units(n_groups, ci["unit"], ci["level"])
    if few:
        e["reason"] = few + (f"; {e['n_invalid_resamples']} of {replicates.size} resamples undefined (a class absent)"
                             if e["n_invalid_resamples"] else "")
        return e
    tail = (1 - ci["level"]) / 2
    low, high = np.quantile(good, [tail, 1 - tail])
    e.update(low=float(low), high=float(high))
    if n_groups == 1:
        e["reason"] = "single resampling unit: no sampling variability"
    elif e["n_invalid_resamples"]:
        e["reason"] = (f"{e['n_invalid_resamples']} of {replicates.size} resamples undefined (a class absent); "
                       "interval from the finite ones")
    return e
