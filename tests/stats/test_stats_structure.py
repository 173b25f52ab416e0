"""Effective dimensionality and BT diagnostics against hand-computed matrices and seeded simulations."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from rubriclab.errors import ConfigError, InputError
from rubriclab.stats import bt_diagnostics, bt_weight_entropy, effective_dimensionality

H4 = np.array([[1, 1, 1], [-1, 1, -1], [1, -1, -1], [-1, -1, 1]], dtype=float)  # centred, orthogonal columns


def test_effdim_identical_columns_is_one():
    col = np.array([1.0, 4, 2, 8, 5])
    out = effective_dimensionality(np.column_stack([col, col]))
    assert out["effdim"] == pytest.approx(1.0) and out["effdim_ratio"] == pytest.approx(0.5)
    assert out["mean_abs_corr"] == pytest.approx(1.0)
    assert out["eigenvalues"].min() >= 0  # the zero eigenvalue is clipped, never negative


def test_effdim_orthogonal_equal_variance_is_k():
    out = effective_dimensionality(H4 * 3 + 5)
    assert out["effdim"] == pytest.approx(3.0) and out["effdim_ratio"] == pytest.approx(1.0)
    assert out["mean_abs_corr"] == pytest.approx(0.0, abs=1e-12)


def test_effdim_hand_computed_unequal_spectrum():
    # Variances 3:1 on orthogonal axes -> p = (.75, .25), H = .75 ln(4/3) + .25 ln 4 = 0.562335 -> e^H = 1.754765
    S = np.column_stack([math.sqrt(3) * H4[:, 0], H4[:, 1]])
    assert effective_dimensionality(S)["effdim"] == pytest.approx(1.754765, abs=1e-6)


def test_effdim_constant_column_and_degenerate():
    S = np.column_stack([H4[:, 0], H4[:, 1], np.full(4, 7.0)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = effective_dimensionality(S)
    assert out["effdim"] == pytest.approx(2.0) and out["effdim_ratio"] == pytest.approx(2 / 3)
    assert out["n_constant_columns"] == 1 and out["n_undefined_corr_pairs"] == 2
    assert out["mean_abs_corr"] == pytest.approx(0.0, abs=1e-12)
    flat = effective_dimensionality(np.ones((5, 3)))
    assert np.isnan(flat["effdim"]) and "constant" in flat["reason"]
    assert np.isnan(effective_dimensionality(np.ones((1, 3)))["effdim"])
    with pytest.raises(InputError, match="NaN"):
        effective_dimensionality(np.array([[1.0, nan_] for nan_ in (np.nan, 2.0)]))


def test_bt_weight_entropy_hand_values():
    assert bt_weight_entropy([1, 1])["entropy"] == pytest.approx(1.0)
    assert bt_weight_entropy([1, 0])["entropy"] == pytest.approx(0.0)
    assert bt_weight_entropy([-2, 2])["entropy"] == pytest.approx(1.0)  # absolute values
    # p = (.25, .25, .5): H = 0.5 ln4 + 0.5 ln2 = 1.039721; / ln3 = 0.946395
    assert bt_weight_entropy([1, 1, 2])["entropy"] == pytest.approx(0.946395, abs=1e-6)
    for beta in ([3.0], [0.0, 0.0]):
        r = bt_weight_entropy(beta)
        assert np.isnan(r["entropy"]) and r["reason"]


def test_bt_cv_accuracy_clean_signal_vs_noise():
    rng = np.random.default_rng(0)
    D = rng.normal(size=(200, 5))
    clean = bt_diagnostics(D, (D[:, 0] > 0).astype(int))
    assert clean["cv_accuracy"] > 0.9 and len(clean["cv_accuracy_folds"]) == 5
    assert np.argmax(np.abs(clean["coef"])) == 0 and clean["weight_entropy"] < 0.6
    assert clean["C"] in (0.01, 0.1, 1, 10, 100) and clean["folds"] == 5 and clean["notes"] == []
    noise = bt_diagnostics(D, rng.integers(0, 2, 200))
    assert 0.35 < noise["cv_accuracy"] < 0.65
    # Deterministic under the seed.
    assert bt_diagnostics(D, (D[:, 0] > 0).astype(int))["cv_accuracy"] == clean["cv_accuracy"]


def test_bt_guards():
    rng = np.random.default_rng(1)
    D = rng.normal(size=(30, 3))
    one_class = bt_diagnostics(D, np.ones(30))
    assert np.isnan(one_class["cv_accuracy"]) and "single class" in one_class["reason"]
    y = np.zeros(30, dtype=int)
    y[:4] = 1  # 4 minority samples < 5 folds
    few = bt_diagnostics(D, y)
    assert few["folds"] == 4 and few["inner_folds"] == 3 and np.isfinite(few["cv_accuracy"])
    assert any("reduced from 5 to 4" in n for n in few["notes"])
    y2 = np.zeros(30, dtype=int)
    y2[:2] = 1
    assert np.isnan(bt_diagnostics(D, y2)["cv_accuracy"])
    k1 = bt_diagnostics(D[:, :1], (D[:, 0] > 0).astype(int))
    assert k1["cv_accuracy"] > 0.8 and np.isnan(k1["weight_entropy"]) and "K=1" in k1["reason"]
    with pytest.raises(InputError, match="binary"):
        bt_diagnostics(D, np.arange(30) % 3)
    with pytest.raises(InputError, match="'y'"):
        bt_diagnostics(D, np.ones(29))
    with pytest.raises(ConfigError, match="Cs"):
        bt_diagnostics(D, (D[:, 0] > 0).astype(int), Cs=(0, 1))
