"""BH adjustment, minimum detectable effects and comparison labels against hand-computed values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rubriclab.errors import ConfigError, InputError
from rubriclab.stats import bh_adjust, label_comparison, mde_paired, mde_paired_proportions, paired_bootstrap


def test_bh_matches_hand_computation():
    # m = 4, sorted 0.005, 0.01, 0.03, 0.04 -> m·p/rank = 0.02, 0.02, 0.04, 0.04 (already monotone).
    np.testing.assert_allclose(bh_adjust([0.01, 0.04, 0.03, 0.005]), [0.02, 0.04, 0.04, 0.02])
    # Step-up monotonicity: rank 1 (0.02·3/1 = 0.06) is pulled down to rank 2's 0.021·3/2 = 0.0315.
    np.testing.assert_allclose(bh_adjust([0.02, 0.021, 0.5]), [0.0315, 0.0315, 0.5])


def test_bh_nan_safe_and_not_counted_in_m():
    out = bh_adjust([0.01, np.nan, 0.04, 0.03, 0.005])
    assert np.isnan(out[1])
    np.testing.assert_allclose(out[[0, 2, 3, 4]], [0.02, 0.04, 0.04, 0.02])  # m = 4, not 5
    s = bh_adjust(pd.Series([0.01, np.nan], index=["x", "y"]))
    assert list(s.index) == ["x", "y"] and s["x"] == pytest.approx(0.01) and np.isnan(s["y"])
    assert bh_adjust([np.nan, np.nan]).shape == (2,) and np.isnan(bh_adjust([np.nan])).all()
    with pytest.raises(InputError, match="outside"):
        bh_adjust([0.5, 1.2])


def test_mde_formula_values():
    # (z_.975 + z_.8) = 1.959964 + 0.841621 = 2.801585
    assert mde_paired(0.01) == pytest.approx(0.02801585, abs=1e-7)
    assert mde_paired(sd=0.2, n=400) == pytest.approx(0.02801585, abs=1e-7)
    assert mde_paired(0.01, alpha=0.01, power=0.9) == pytest.approx((2.5758293 + 1.2815516) * 0.01, abs=1e-7)
    # Paired proportions (Connor 1987): the effect adds to the discordance, ψ = ψ0 + δ, and δ solves
    # δ·√n = z_.975·√ψ + z_.8·√(ψ − δ²); larger than the plug-in 2.801585·sqrt(0.16/400) = 0.056
    for psi0 in (0.16, 0.0):
        d = mde_paired_proportions(400, psi0)
        assert d * 20 == pytest.approx(1.959964 * np.sqrt(psi0 + d) + 0.841621 * np.sqrt(psi0 + d - d * d), abs=1e-5)
    assert mde_paired_proportions(400, 0.16) == pytest.approx(0.066465, abs=1e-5)
    assert mde_paired_proportions(400, 0.16) > 2.801585 * 0.02
    assert mde_paired_proportions(400, 0.0) == pytest.approx(0.019507, abs=1e-5)  # not 0: a drop is discordance
    assert mde_paired_proportions(3, 0.0) == np.inf  # no effect size reaches the power on 3 items
    with pytest.raises(InputError):
        mde_paired(0.01, sd=1, n=4)
    with pytest.raises(InputError):
        mde_paired()
    with pytest.raises(ConfigError, match="power"):
        mde_paired(0.01, power=80)
    with pytest.raises(InputError, match="discordant_rate"):
        mde_paired_proportions(100, 1.5)


def test_label_comparison():
    assert label_comparison({"diff": 0.05, "p_value": 0.001, "se": 0.01}) == "difference"
    # BH-adjusted p wins over the raw one.
    assert label_comparison({"p_value": 0.01, "p_adjusted": 0.2, "se": 0.01}) == \
        "no detectable difference (MDE=0.028)"
    assert label_comparison({"p_value": 0.5, "mde": 0.04}) == "no detectable difference (MDE=0.04)"
    assert label_comparison({"low": 0.01, "high": 0.03}) == "difference"
    assert label_comparison({"p_value": np.nan, "degenerate": "single item"}).startswith("undetermined")
    rng = np.random.default_rng(0)
    x = rng.integers(0, 2, 200).astype(float)
    r = paired_bootstrap(x, x[::-1].copy())
    assert label_comparison(r).startswith("no detectable difference (MDE=")
