"""Agreement statistics over categorical verdicts: Cohen's κ, macro precision / recall / F1, Fleiss' κ, and
Krippendorff's α (nominal) from per-unit category counts (so a bootstrap over pairs is a matrix product).

Conventions: categories are strings; ``none`` (no verdict) is a category of its own for κ and F1 against a label
(a reply that is no verdict is a wrong answer, never dropped); for agreement among raters it is a missing value.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from rubriclab.errors import InputError


def confusion(y1: Sequence[Any], y2: Sequence[Any], labels: Sequence[Any] | None = None) -> tuple[np.ndarray, list]:
    """Counts ``C[i, k] = #{y1 = labels[i], y2 = labels[k]}`` (``sklearn.metrics.confusion_matrix``; values outside
    ``labels`` are not counted); ``labels`` default: the sorted union."""
    from sklearn.metrics import confusion_matrix

    a, b = np.asarray(y1, dtype=object), np.asarray(y2, dtype=object)
    if a.shape != b.shape or a.ndim != 1:
        raise InputError(f"shapes {a.shape} and {b.shape}", field="y1, y2", expected="two 1-D sequences of one length")
    cats = sorted(set(a.tolist()) | set(b.tolist()), key=str) if labels is None else list(labels)
    if not len(a) or not cats:
        return np.zeros((len(cats), len(cats)), dtype=np.int64), cats
    return confusion_matrix(a, b, labels=np.asarray(cats, dtype=object)).astype(np.int64), cats


def kappa_from_confusion(cm: np.ndarray) -> float:
    """Cohen's κ of a confusion matrix, computed as ``sklearn.metrics.cohen_kappa_score`` computes it:
    ``1 − Σ w·C / Σ w·E`` with ``E = outer(col sums, row sums) / n`` and ``w = 1 − I``. NaN when E is all
    on the diagonal (both raters used one category)."""
    return float(kappa_batch(np.asarray(cm, dtype=float)))


def kappa_batch(cm: np.ndarray) -> np.ndarray:
    """``kappa_from_confusion`` over the last two axes of ``(..., K, K)`` confusion matrices."""
    cm = np.asarray(cm, dtype=float)
    k = cm.shape[-1]
    sum0, sum1 = cm.sum(axis=-2), cm.sum(axis=-1)
    total = sum0.sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = sum0[..., :, None] * sum1[..., None, :] / total[..., None, None]
        w = 1 - np.eye(k)
        denom = (w * expected).sum(axis=(-2, -1))
        out = 1 - (w * cm).sum(axis=(-2, -1)) / denom
    return np.where((total > 0) & (denom > 0), out, np.nan)


def cohen_kappa(y1: Sequence[Any], y2: Sequence[Any]) -> float:
    """Cohen's κ between two raters' categorical values: ``sklearn.metrics.cohen_kappa_score``, NaN (not a warning)
    where it is undefined (both raters used one category). ``kappa_batch`` is the same formula over bootstrap
    resamples."""
    from sklearn.metrics import cohen_kappa_score

    a, b = np.asarray(list(y1), dtype=object), np.asarray(list(y2), dtype=object)
    if a.shape != b.shape or a.ndim != 1:
        raise InputError(f"shapes {a.shape} and {b.shape}", field="y1, y2", expected="two 1-D sequences of one length")
    if not len(a):
        return float("nan")
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(cohen_kappa_score(a.astype(str), b.astype(str)))


def macro_prf_from_confusion(cm: np.ndarray, class_index: Sequence[int]) -> dict[str, Any]:
    """Macro precision, recall and F1 over the classes ``class_index`` of a (true × predicted) confusion matrix;
    a class never predicted has precision 0, never true recall 0, and F1 0 when both are 0 (sklearn's
    ``zero_division=0``). Predictions outside the classes (e.g. ``none``) count against the true class."""
    out = macro_prf_batch(np.asarray(cm, dtype=float), class_index)
    return {"precision": float(out["precision"]), "recall": float(out["recall"]), "f1": float(out["f1"]),
            "per_class_f1": [float(x) for x in out["per_class_f1"]]}


def macro_prf_batch(cm: np.ndarray, class_index: Sequence[int]) -> dict[str, np.ndarray]:
    """``macro_prf_from_confusion`` over the last two axes of ``(..., K, K)`` confusion matrices."""
    cm = np.asarray(cm, dtype=float)
    p, r, f = [], [], []
    with np.errstate(divide="ignore", invalid="ignore"):
        for c in class_index:
            tp = cm[..., c, c]
            pred, true = cm[..., :, c].sum(axis=-1), cm[..., c, :].sum(axis=-1)
            prec = np.where(pred > 0, tp / pred, 0.0)
            rec = np.where(true > 0, tp / true, 0.0)
            p.append(prec)
            r.append(rec)
            f.append(np.where(prec + rec > 0, 2 * prec * rec / (prec + rec), 0.0))
    return {"precision": np.mean(p, axis=0), "recall": np.mean(r, axis=0), "f1": np.mean(f, axis=0),
            "per_class_f1": np.stack(f, axis=-1)}


def fleiss_kappa(counts: Any) -> float:
    """Fleiss' κ of an items × categories count table (each row: how many raters chose each category; every
    row has the same number of raters m ≥ 2).

    ``P_i = (Σ_j n_ij² − m) / (m(m − 1))``, ``P̄ = mean P_i``, ``p_j = Σ_i n_ij / (N m)``, ``P_e = Σ_j p_j²``,
    ``κ = (P̄ − P_e) / (1 − P_e)`` (Fleiss 1971); NaN when P_e = 1 (one category used throughout)."""
    t = np.asarray(counts, dtype=float)
    if t.ndim != 2 or t.shape[0] == 0:
        raise InputError(f"has shape {t.shape}", field="counts", expected="an items × categories count table")
    m = t.sum(axis=1)
    if np.any(m != m[0]) or m[0] < 2:
        raise InputError("rows sum to different numbers of raters (or fewer than 2)", field="counts",
                         expected="the same number m ≥ 2 of ratings on every item")
    m0 = m[0]
    p_i = ((t**2).sum(axis=1) - m0) / (m0 * (m0 - 1))
    p_bar = p_i.mean()
    p_j = t.sum(axis=0) / t.sum()
    p_e = float((p_j**2).sum())
    if p_e >= 1:
        return float("nan")
    return float((p_bar - p_e) / (1 - p_e))


def fleiss_parts(counts: Any) -> np.ndarray:
    """Per unit (rows of an items × categories table with m raters each): ``[P_i, n_i1, …, n_iK]``, whose sums give
    Fleiss' κ (``fleiss_from_parts``)."""
    t = np.asarray(counts, dtype=float)
    m = t.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        p_i = ((t**2).sum(axis=1) - m) / (m * (m - 1))
    return np.column_stack([p_i, t])


def fleiss_from_parts(summed: np.ndarray, n_units: np.ndarray | float) -> np.ndarray:
    """Fleiss' κ from summed ``fleiss_parts`` (``(..., 1 + K)``) over ``n_units`` units."""
    summed = np.asarray(summed, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        p_bar = summed[..., 0] / n_units
        p_j = summed[..., 1:] / summed[..., 1:].sum(axis=-1, keepdims=True)
        p_e = (p_j**2).sum(axis=-1)
        out = (p_bar - p_e) / (1 - p_e)
    return np.where(p_e < 1, out, np.nan)


def category_counts(ratings: Any, categories: Sequence[str]) -> np.ndarray:
    """A raters × units matrix of category strings (None/NaN/``none`` = missing) as units × categories counts."""
    r = np.asarray(ratings, dtype=object)
    out = np.zeros((r.shape[1], len(categories)))
    for c, i in {c: i for i, c in enumerate(categories)}.items():  # one column per category (its last listing)
        out[:, i] = (r == c).sum(axis=0)
    return out


def alpha_parts(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per unit, what it adds to nominal Krippendorff's α: the observed disagreement
    ``d_u = (m_u² − Σ_c n_uc²) / (m_u − 1)`` and the pairable values per category ``n_uc`` (units with fewer
    than 2 values add nothing). ``α = 1 − (n − 1) Σ_u d_u / (n² − Σ_c n_c²)`` with ``n_c = Σ_u n_uc``."""
    counts = np.asarray(counts, dtype=float)
    m = counts.sum(axis=1)
    ok = m >= 2
    d = np.zeros(len(counts))
    d[ok] = (m[ok] ** 2 - (counts[ok] ** 2).sum(axis=1)) / (m[ok] - 1)
    n_c = np.where(ok[:, None], counts, 0.0)
    return d, n_c


def alpha_from_parts(d: np.ndarray, n_c: np.ndarray) -> np.ndarray | float:
    """Nominal α from summed parts: ``d`` (… ,) and ``n_c`` (…, categories), e.g. one row per bootstrap replicate."""
    n = n_c.sum(axis=-1)
    denom = n**2 - (n_c**2).sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = 1 - (n - 1) * d / denom
    out = np.where(denom > 0, out, np.nan)
    return float(out) if np.ndim(out) == 0 else out


def pairwise_agreement(ratings: Any) -> float:
    """Mean share of units on which two raters agree, over every pair of raters (units both rated)."""
    r = np.asarray(ratings, dtype=object)
    if r.ndim != 2 or not r.size:
        return float("nan")
    # values as codes (-1 missing), then each rater against every later one at once
    present = np.vectorize(_present, otypes=[bool])(r)
    codes = np.full(r.shape, -1)
    codes[present] = pd.factorize(r[present])[0]  # Python equality, as a == b
    shares = []
    for i in range(r.shape[0] - 1):
        both = present[i] & present[i + 1:]
        n = both.sum(axis=1)
        agree = (both & (codes[i] == codes[i + 1:])).sum(axis=1)
        shares += [a / m for a, m in zip(agree.astype(float), n, strict=True) if m]  # = np.mean of the 0/1 flags
    return float(np.mean(shares)) if shares else float("nan")


def _present(v: Any) -> bool:
    return v is not None and v != "none" and not (isinstance(v, float) and np.isnan(v))
