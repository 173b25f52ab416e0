"""The four estimates of the human mean, each with its interval (``ppi_py``'s functions: no re-derivation).

Y: human values on the n labelled pairs; Yhat: the judge's verdicts on the same pairs; Yhat_u: its verdicts on
the N unlabelled pairs. Every interval is a normal (z) interval at ``confidence``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache

import numpy as np


@dataclass(frozen=True)
class Estimate:
    """One estimate of the human mean: ``value`` in [``low``, ``high``] at ``confidence``; ``n`` human labels and
    ``n_judge`` judge verdicts it used; ``method`` its name; ``interval`` how the interval is made."""

    method: str
    value: float
    low: float
    high: float
    n: int
    n_judge: int
    confidence: float
    interval: str

    @property
    def width(self) -> float:
        return self.high - self.low

    def covers(self, truth: float) -> bool:
        return self.low <= truth <= self.high

    def to_dict(self) -> dict:
        return {**asdict(self), "width": self.width}


def _ci(lo_hi) -> tuple[float, float]:
    """A normal interval for a rate, intersected with [0, 1]: the rate cannot leave it, so the cut loses no
    coverage (a PPI interval of a near-0 or near-1 rate reaches past the bounds)."""
    lo, hi = lo_hi
    return max(0.0, float(np.squeeze(lo))), min(1.0, float(np.squeeze(hi)))


def labels_only(Y: np.ndarray, confidence: float) -> Estimate:
    """The labelled pairs alone: their mean, CLT interval (``ppi_py.classical_mean_ci``)."""
    from ppi_py import classical_mean_ci

    lo, hi = _ci(classical_mean_ci(Y, alpha=1 - confidence))
    return Estimate("labels_only", float(Y.mean()), lo, hi, len(Y), 0, confidence,
                    "normal (CLT) over the labelled pairs: ppi_py.classical_mean_ci")


def judge_only(Yhat_all: np.ndarray, confidence: float) -> Estimate:
    """The judge's mean over every pair, no label used. Its interval covers sampling noise only, not the judge's
    errors: it is an interval for the judge's rate, not the humans'."""
    from ppi_py import classical_mean_ci

    lo, hi = _ci(classical_mean_ci(Yhat_all, alpha=1 - confidence))
    return Estimate("judge_only", float(Yhat_all.mean()), lo, hi, 0, len(Yhat_all), confidence,
                    "normal (CLT) over the judge's verdicts: ppi_py.classical_mean_ci; sampling noise only, "
                    "blind to the judge's bias")


def ppi(Y: np.ndarray, Yhat: np.ndarray, Yhat_u: np.ndarray, confidence: float, lam: float | None) -> Estimate:
    """Prediction-powered inference: the judge's mean on the unlabelled pairs corrected by the labelled pairs'
    mean human − judge difference (the rectifier). ``lam`` None: power-tuned (PPI++), 1: plain PPI."""
    from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

    value = float(np.squeeze(ppi_mean_pointestimate(Y, Yhat, Yhat_u, lam=lam)))
    lo, hi = _ci(ppi_mean_ci(Y, Yhat, Yhat_u, alpha=1 - confidence, lam=lam))
    name = "PPI++ (power-tuned λ)" if lam is None else f"PPI (λ = {lam:g})"
    return Estimate("ppi", value, lo, hi, len(Y), len(Yhat) + len(Yhat_u), confidence,
                    f"{name}, normal: ppi_py.ppi_mean_ci")


def isotonic_map(x: np.ndarray, y: np.ndarray, x_new: np.ndarray) -> np.ndarray:
    """``sklearn.isotonic.IsotonicRegression(y_min=0, y_max=1, increasing=True, out_of_bounds="clip")`` fitted on
    ``(x, y)`` and predicting ``x_new``, through ``scipy.optimize.isotonic_regression`` (100× faster on a handful of
    labels, which the coverage simulation fits thousands of times): equal x are pooled by their mean y, weighted
    by their count, as sklearn does; predictions interpolate linearly and clip at the ends
    (tests/calibrate/test_calibrate_coverage.py checks it equals sklearn's)."""
    from scipy.optimize import isotonic_regression

    ux, inv = np.unique(np.asarray(x, dtype=float), return_inverse=True)
    counts = np.bincount(inv, minlength=len(ux)).astype(float)
    means = np.bincount(inv, weights=np.asarray(y, dtype=float), minlength=len(ux)) / counts
    fitted = np.clip(isotonic_regression(means, weights=counts, increasing=True).x, 0.0, 1.0)
    return np.interp(np.asarray(x_new, dtype=float), ux, fitted)


@lru_cache(maxsize=4096)
def kfold_splits(n: int, folds: int, seed: int) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """``sklearn.model_selection.KFold(folds, shuffle=True, random_state=seed).split`` of ``n`` items, made once per
    (n, folds, seed): the splits depend on nothing else, and the coverage simulation asks for the same ones in every
    cell of a source (the same draw seeds over cells of one size). Read-only arrays."""
    from sklearn.model_selection import KFold

    splits = tuple(KFold(folds, shuffle=True, random_state=seed).split(np.empty((n, 1))))
    for fit, held in splits:
        fit.flags.writeable = held.flags.writeable = False
    return splits


def isotonic(Y: np.ndarray, Yhat: np.ndarray, Yhat_u: np.ndarray, confidence: float, folds: int,
             seed: int) -> Estimate:
    """Judge → human calibration by isotonic regression (increasing, clipped to [0, 1]: ``isotonic_map``),
    cross-fitted so the labels that fit the map are not the ones that correct it: each fold's map is fitted on the
    other folds' labels and predicts its own labelled pairs; every fold's map predicts the unlabelled pairs. The
    estimate and its interval are cross-prediction-powered (``ppi_py.crossppi_mean_ci``)."""
    from ppi_py import crossppi_mean_ci, crossppi_mean_pointestimate

    oof = np.empty_like(Y, dtype=float)
    per_fold = np.empty((len(Yhat_u), folds))
    for k, (fit, held) in enumerate(kfold_splits(len(Y), folds, seed)):
        both = isotonic_map(Yhat[fit], Y[fit], np.concatenate([Yhat[held], Yhat_u]))
        oof[held], per_fold[:, k] = both[:len(held)], both[len(held):]
    value = float(np.squeeze(crossppi_mean_pointestimate(Y, oof, per_fold)))
    lo, hi = _ci(crossppi_mean_ci(Y, oof, per_fold, alpha=1 - confidence))
    return Estimate("isotonic", value, lo, hi, len(Y), len(Yhat) + len(Yhat_u), confidence,
                    f"isotonic judge→human map cross-fitted over {folds} folds, cross-PPI normal interval: "
                    "ppi_py.crossppi_mean_ci")
