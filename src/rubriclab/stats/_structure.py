"""Structural preference-fit diagnostics: effective dimensionality (000 B.3) and BT regression (000 B.1.3)."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
from scipy import stats
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_score
from threadpoolctl import threadpool_limits

from rubriclab.errors import ConfigError, InputError
from rubriclab.stats._checks import as_float, as_object_1d, missing_mask, positive_int, same_length


def effective_dimensionality(S: Any) -> dict[str, Any]:
    """Entropy-effective number of independent score directions of S (prompts × K criteria).

    ``λ`` = eigenvalues of ``cov(S)`` (columns = criteria, ddof=1) from ``np.linalg.eigvalsh``, tiny
    negatives from round-off clipped to 0; ``EffDim = exp(H(λ / Σλ))`` with H the Shannon entropy in nats
    (``scipy.stats.entropy``; 0·log 0 = 0). EffDim ranges from 1 (one axis carries all variance) to K
    (equal variance in K orthogonal directions). Also ``effdim_ratio = EffDim / K`` and
    ``mean_abs_corr = (2 / (K(K−1))) Σ_{i<j} |r(s_i, s_j)|`` (Pearson), over pairs where r is defined:
    pairs with a constant column are excluded and counted in ``n_undefined_corr_pairs``.
    Returns dict(effdim, effdim_ratio, mean_abs_corr, K, n, eigenvalues (descending),
    n_constant_columns, n_undefined_corr_pairs, reason).
    """
    m = as_float(S, "S", ndim=2, expected="a prompts × criteria score matrix")
    n, k = m.shape
    out: dict[str, Any] = {
        "effdim": np.nan, "effdim_ratio": np.nan, "mean_abs_corr": np.nan, "K": k, "n": n,
        "eigenvalues": np.array([]), "n_constant_columns": 0, "n_undefined_corr_pairs": 0, "reason": None,
    }
    if n < 2 or k < 1:
        out["reason"] = f"S is {n} × {k}: need at least 2 prompts and 1 criterion for a covariance"
        return out
    cov = np.atleast_2d(np.cov(m, rowvar=False))
    lam = np.linalg.eigvalsh(cov)[::-1]
    # eigvalsh of a PSD matrix can return −1e-16-sized negatives; they are zero variance, not signal.
    lam = np.clip(lam, 0.0, None)
    out["eigenvalues"] = lam
    constant = np.ptp(m, axis=0) == 0
    out["n_constant_columns"] = int(constant.sum())
    if lam.sum() <= 0:
        out["reason"] = "every criterion column is constant: total variance is 0, EffDim undefined"
    else:
        out["effdim"] = float(np.exp(stats.entropy(lam / lam.sum())))
        out["effdim_ratio"] = out["effdim"] / k
    n_pairs = k * (k - 1) // 2
    keep = np.flatnonzero(~constant)
    if n_pairs == 0:
        out["reason"] = out["reason"] or "K=1: no criterion pairs, mean |ρ| undefined"
    else:
        abs_r = []
        if len(keep) >= 2:
            r = np.atleast_2d(np.corrcoef(m[:, keep], rowvar=False))
            abs_r = np.abs(r[np.triu_indices(len(keep), k=1)])
        out["n_undefined_corr_pairs"] = n_pairs - len(abs_r)
        if len(abs_r):
            out["mean_abs_corr"] = float(np.mean(abs_r))
    return out


def bt_weight_entropy(beta: Any) -> dict[str, Any]:
    """Normalised BT-weight entropy ``H(|β| / Σ|β|) / log K`` (nats / nats, in [0, 1]).

    1 = every criterion carries the same weight; 0 = a single criterion carries all of it.
    Undefined (NaN with a reason) for K = 1 (log K = 0) or when every coefficient is 0.
    Returns dict(entropy, reason).
    """
    b = np.abs(as_float(beta, "beta", ndim=1, expected="a 1-D coefficient vector (one per criterion)"))
    if len(b) < 2:
        return {"entropy": np.nan, "reason": f"K={len(b)}: normalised entropy needs K ≥ 2 (log K = 0)"}
    if b.sum() == 0:
        return {"entropy": np.nan, "reason": "every coefficient is 0: no weight distribution"}
    return {"entropy": float(stats.entropy(b / b.sum()) / math.log(len(b))), "reason": None}


def bt_diagnostics(
    D: Any,
    y: Any,
    seed: int = 42,
    Cs: tuple[float, ...] = (0.01, 0.1, 1, 10, 100),
    folds: int = 5,
) -> dict[str, Any]:
    """Bradley–Terry preference fit: L2 logistic regression of the human label on score differences.

    ``D`` is n × K per-criterion score differences (the caller orients each pair, e.g. a random A/B side
    with y = 1 iff the human preferred that side; a single class in y is refused, see below); ``y`` is a
    binary label. Model ``P(y=1) = σ(β₀ + βᵀd)``, ``LogisticRegression(l1_ratio=0)`` (pure L2, lbfgs).
    Features are not standardised: all criteria share the 0–10 scale, so |β| is comparable across
    criteria as the entropy requires.

    * ``cv_accuracy``: mean accuracy over an outer ``StratifiedKFold(folds, shuffle, seed)``, where each
      outer training fold picks C from ``Cs`` by an inner ``GridSearchCV`` (nested CV:
      ``cross_val_score(GridSearchCV(...), D, y, cv=outer)``), so C never sees the outer test fold.
    * ``weight_entropy``: ``bt_weight_entropy(β)`` of a fit on all data with C chosen by CV on all data.

    Guards (never a crash): a single class in y → NaN with reason; fewer minority-class samples than
    folds → folds reduced to that count (noted); inner folds are reduced to what the smallest outer
    training fold allows; K = 1 → entropy NaN with reason.
    Returns dict(cv_accuracy, cv_accuracy_folds, weight_entropy, coef, C, folds, inner_folds, n, K,
    reason, notes, positive_class) — labels are sorted as strings; ``coef`` is for the larger one
    (1 for 0/1, True for bools, "B" for "A"/"B").
    """
    X = as_float(D, "D", ndim=2, expected="an n × K matrix of per-criterion score differences")
    labels = as_object_1d(y, "y")
    same_length("D", X, "y", labels)
    if missing_mask(labels).any():
        raise InputError(f"contains {int(missing_mask(labels).sum())} missing label(s)", field="y",
                         expected="a binary human label for every pair")
    folds = positive_int(folds, "folds", minimum=2)
    if not Cs or any(not (float(c) > 0) for c in Cs):
        raise ConfigError(f"Cs={Cs!r} is invalid; expected a non-empty sequence of positive regularisation strengths")
    classes, y_codes = np.unique(labels.astype(str), return_inverse=True)
    if len(classes) > 2:
        raise InputError(f"has {len(classes)} classes {list(classes)[:5]}", field="y", expected="a binary label")
    n, k = X.shape
    out: dict[str, Any] = {
        "cv_accuracy": np.nan, "cv_accuracy_folds": np.array([]), "weight_entropy": np.nan,
        "coef": np.full(k, np.nan), "C": np.nan, "folds": 0, "inner_folds": 0, "n": n, "K": k,
        "reason": None, "notes": [], "positive_class": str(classes[-1]) if len(classes) else None,
    }
    if len(classes) < 2:
        out["reason"] = (f"y has a single class ({classes[0] if len(classes) else 'empty'}): orient pairs "
                         "randomly (negate D and flip y for a random half) before calling")
        return out
    minority = int(np.bincount(y_codes).min())
    outer = min(folds, minority)
    # StratifiedKFold puts ≤ ceil(m/outer) minority samples in a test fold, so every outer training fold
    # keeps at least m − ceil(m/outer) of them; the inner CV cannot use more folds than that.
    inner = min(folds, minority - math.ceil(minority / max(outer, 1)))
    if outer < 2 or inner < 2:
        out["reason"] = (f"the minority class has {minority} sample(s): nested {folds}-fold CV needs at least 3 "
                         "(2 outer folds, each training fold with ≥ 2 for the inner CV)")
        return out
    if outer < folds:
        out["notes"].append(f"outer folds reduced from {folds} to {outer}: minority class has {minority} samples")
    if inner < folds:
        out["notes"].append(f"inner folds reduced from {folds} to {inner}")
    out.update(folds=outer, inner_folds=inner)

    def search(n_splits: int) -> GridSearchCV:
        return GridSearchCV(
            LogisticRegression(l1_ratio=0.0, max_iter=5000),
            {"C": [float(c) for c in Cs]},
            cv=StratifiedKFold(n_splits, shuffle=True, random_state=seed),
            scoring="accuracy",
        )

    # n × K here is tiny (K ≈ 20): multi-threaded BLAS only adds synchronisation cost — measured 50×
    # slower per lbfgs fit on a 2-core machine — so the ~150 nested-CV fits run with one BLAS thread.
    with warnings.catch_warnings(), threadpool_limits(limits=1, user_api="blas"):
        # Separable toy data makes lbfgs hit max_iter at large C; the CV accuracy is still meaningful.
        warnings.simplefilter("ignore", ConvergenceWarning)
        scores = cross_val_score(search(inner), X, y_codes, scoring="accuracy",
                                 cv=StratifiedKFold(outer, shuffle=True, random_state=seed))
        full = search(outer).fit(X, y_codes)
    coef = full.best_estimator_.coef_[0]
    ent = bt_weight_entropy(coef)
    out.update(cv_accuracy=float(scores.mean()), cv_accuracy_folds=scores, coef=coef,
               C=float(full.best_params_["C"]), weight_entropy=ent["entropy"], reason=ent["reason"])
    return out
