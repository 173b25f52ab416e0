"""Multiple-comparison adjustment and minimum detectable effects for the audit's paired comparisons.

An audit compares many (rubric set, judge, template, source) cells. A non-significant difference means
either "no difference" or "this audit could not have seen one"; the MDE says which, and BH keeps the
share of false discoveries among the reported differences at the nominal level.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from rubriclab.errors import InputError
from rubriclab.stats._checks import as_float, probability


def bh_adjust(pvalues: Any) -> np.ndarray | pd.Series:
    """Benjamini–Hochberg adjusted p-values via ``scipy.stats.false_discovery_control(method="bh")``.

    Formula over the m finite p-values sorted ascending ``p_(1) ≤ … ≤ p_(m)``:
    ``q_(i) = min_{j ≥ i} min(1, m · p_(j) / j)``.
    NaN-safe: NaN entries (comparisons that could not be run) stay NaN and do NOT count toward m —
    they are not hypotheses that were tested, and counting them would make every other q larger.
    A pd.Series keeps its index; anything else comes back as a float ndarray of the input's shape.
    """
    index = pvalues.index if isinstance(pvalues, pd.Series) else None
    p = as_float(pvalues, "pvalues", ndim=1,
                 expected="p-values in [0, 1] (NaN allowed)", allow_nan=True)
    finite = ~np.isnan(p)
    bad = finite & ((p < 0) | (p > 1))
    if bad.any():
        raise InputError(f"contains {int(bad.sum())} value(s) outside [0, 1], e.g. {p[bad][0]!r}",
                         field="pvalues", expected="p-values in [0, 1] (NaN allowed)")
    adjusted = np.full(p.shape, np.nan)
    if finite.any():
        adjusted[finite] = stats.false_discovery_control(p[finite], method="bh")
    return pd.Series(adjusted, index=index, name="p_adjusted") if index is not None else adjusted


def mde_paired(
    se_diff: float | None = None,
    *,
    sd: float | None = None,
    n: int | None = None,
    alpha: float = 0.05,
    power: float = 0.8,
) -> float:
    """Minimum detectable effect of a two-sided paired comparison (normal approximation).

    ``MDE = (z_{1−α/2} + z_{power}) · SE`` with ``SE = se_diff`` (e.g. the paired bootstrap ``se``) or
    ``SE = sd / √n`` (sd of the per-item differences, n items). z are standard-normal quantiles
    (``scipy.stats.norm.ppf``). At α=0.05, power=0.8 the multiplier is 2.8016.
    """
    alpha = probability(alpha, "alpha")
    power = probability(power, "power")
    if (se_diff is None) == (sd is None and n is None):
        raise InputError("got both or neither of se_diff and (sd, n)", field="se_diff",
                         expected="either se_diff, or sd together with n")
    if se_diff is None:
        if sd is None or n is None:
            raise InputError("needs both sd and n", field="sd", expected="sd (of per-item differences) and n")
        if not float(n) >= 1:
            raise InputError(f"n={n!r}", field="n", expected="n >= 1 items")
        if not float(sd) >= 0:
            raise InputError(f"sd={sd!r}", field="sd", expected="a standard deviation >= 0")
        se = float(sd) / math.sqrt(float(n))
    else:
        se = float(se_diff)
        if not se >= 0:
            raise InputError(f"se_diff={se_diff!r}", field="se_diff", expected="a standard error >= 0")
    return float((stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)) * se)


def mde_paired_proportions(n: int, discordant_rate: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """MDE for a difference of paired proportions (e.g. accuracy of two rubric sets on the same n items).

    Per item the difference D ∈ {−1, 0, +1}; with discordance rate ψ = P(the two sets disagree on
    correctness) = p10 + p01, Var(D) = ψ − (p10 − p01)² = ψ under H0 (McNemar's null), so
    ``MDE = (z_{1−α/2} + z_{power}) · √(ψ / n)``. Using the null variance makes it slightly
    conservative (the exact Connor 1987 variance under the alternative is ψ − d², smaller).
    """
    rate = float(discordant_rate)
    if not 0.0 <= rate <= 1.0:
        raise InputError(f"discordant_rate={discordant_rate!r}", field="discordant_rate",
                         expected="a rate in [0, 1] (share of items where the two sets disagree)")
    return mde_paired(sd=math.sqrt(rate), n=n, alpha=alpha, power=power)


def label_comparison(comparison: dict[str, Any], alpha: float = 0.05, power: float = 0.8) -> str:
    """Label a comparison dict (e.g. from ``paired_bootstrap``) as a difference or not.

    Rule: significant if ``p_adjusted`` (BH, when present) else ``p_value`` is < α; with neither, if the
    CI ``[low, high]`` excludes 0. Significant → ``"difference"``; otherwise
    ``"no detectable difference (MDE=<mde>)"`` with the MDE from ``comparison["mde"]`` or
    ``mde_paired(comparison["se"], alpha, power)``, so a null result states what the audit could have seen.
    Without a usable p-value or CI: ``"undetermined (<reason>)"``.
    """
    alpha = probability(alpha, "alpha")
    se, diff = comparison.get("se"), comparison.get("diff")
    if se is not None and diff is not None and np.isfinite(se) and se == 0 and diff == 0:
        # no variation at all: the two sources agree on every shared item, and an MDE of 0 would mislead
        return "no difference: identical on every shared item (no variation, MDE undefined)"
    p = comparison.get("p_adjusted", comparison.get("p_value"))
    if p is not None and np.isfinite(p):
        significant = float(p) < alpha
    elif all(np.isfinite(comparison.get(k, np.nan)) for k in ("low", "high")):
        significant = comparison["low"] > 0 or comparison["high"] < 0
    else:
        return f"undetermined ({comparison.get('degenerate') or 'no p-value or CI'})"
    if significant:
        return "difference"
    mde = comparison.get("mde")
    if mde is None and comparison.get("se") is not None and np.isfinite(comparison["se"]):
        mde = mde_paired(comparison["se"], alpha=alpha, power=power)
    return f"no detectable difference (MDE={mde:.3g})" if mde is not None else "no detectable difference (MDE=?)"


# -- the drift gate's per-domain test and MDE -----------------------------------------------------------


def exact_k_min(alpha: float) -> int:
    """Fewest discordant pairs (all one way) for which the exact two-sided sign test reaches ``p ≤ alpha``:
    ``ceil(log2(2 / alpha))``."""
    if not 0 < alpha < 1:
        raise InputError(f"alpha={alpha!r}", field="alpha", expected="a level in (0, 1)")
    return math.ceil(math.log2(2.0 / alpha) - 1e-12)


def mde_drop(n: int, discordance: float, alpha: float, power: float = 0.8) -> dict[str, float]:
    """The minimum detectable drop of a domain of ``n`` pairs (``rubriclab.drift._gate`` states the formula):
    ``{"mde", "mde_normal", "mde_exact"}``; NaN when n = 0."""
    if n <= 0:
        return {"mde": np.nan, "mde_normal": np.nan, "mde_exact": np.nan}
    normal = mde_paired_proportions(n, min(1.0, max(0.0, float(discordance))), alpha=alpha, power=power)
    exact = exact_k_min(alpha) / n
    return {"mde": float(max(normal, exact)), "mde_normal": float(normal), "mde_exact": float(exact)}


def sign_test(n_lost: int, n_gained: int) -> float:
    """Exact two-sided sign test of ``n_lost`` vs ``n_gained`` discordant pairs (1.0 when there are none)."""
    k = n_lost + n_gained
    if k == 0:
        return 1.0
    return float(stats.binomtest(n_lost, k, 0.5, alternative="two-sided").pvalue)
