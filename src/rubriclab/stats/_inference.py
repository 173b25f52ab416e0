"""Multiple-comparison adjustment and minimum detectable effects for the audit's paired comparisons.

An audit compares many (rubric set, judge, template, source) cells. A non-significant difference means
either "no difference" or "this audit could not have seen one"; the MDE says which, and BH keeps the
share of false discoveries among the reported differences at the nominal level.
"""

from __future__ import annotations

import math
import warnings
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd
from scipy import optimize, stats

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
        raise InputError(f"contains {int(bad.sum())} value(s) outside [0, 1], e.g. {float(p[bad][0])!r}",
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


def paired_t_tests(a: Any, b: Any) -> dict[str, np.ndarray]:
    """Two-sided paired t-tests of the columns of ``a`` and ``b`` (``(n, K)``, or ``(n,)`` for one), each column
    on its own ``n`` items (``scipy.stats.ttest_rel``). Returns arrays of ``diff`` (mean of a − b), ``se`` (sd of
    the per-item differences, ddof 1, over √n: the test's standard error), ``p_value`` and ``df`` (n − 1).
    A column whose differences are all equal has ``se`` 0 and no t statistic: its ``p_value`` is 1 when they are
    all 0 and 0 otherwise (every item moved the same way; there is nothing left to test)."""
    a2 = np.asarray(a, dtype=float)
    b2 = np.asarray(b, dtype=float)
    if a2.shape != b2.shape or a2.ndim not in (1, 2):
        raise InputError(f"shapes {a2.shape} and {b2.shape}", field="a, b",
                         expected="two arrays of the same shape (n,) or (n, K): paired items in rows")
    if a2.ndim == 1:
        a2, b2 = a2[:, None], b2[:, None]
    n = a2.shape[0]
    if n < 2:
        raise InputError(f"{n} item(s)", field="a, b", expected="at least 2 paired items for a t-test")
    d = a2 - b2
    diff = d.mean(axis=0)
    se = d.std(axis=0, ddof=1) / math.sqrt(n)
    constant = np.ptp(d, axis=0) == 0
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # constant columns: handled just below
        p = np.asarray(stats.ttest_rel(a2, b2, axis=0).pvalue, dtype=float).reshape(-1)
    p = np.where(constant, np.where(diff == 0, 1.0, 0.0), p)
    se = np.where(constant, 0.0, se)
    return {"diff": diff, "se": se, "p_value": p, "df": np.full(diff.shape, n - 1)}


@lru_cache(maxsize=256)
def t_mde_factor(df: int, alpha: float, power: float) -> float:
    """The noncentrality δ/SE at which a two-sided t-test with ``df`` degrees of freedom at level ``alpha``
    rejects with probability ``power`` (``scipy.stats.nct``): the MDE of a paired t-test is this × its SE."""
    alpha = probability(alpha, "alpha")
    power = probability(power, "power")
    if not df >= 1:
        raise InputError(f"df={df!r}", field="df", expected="degrees of freedom >= 1 (at least 2 paired items)")
    crit = stats.t.ppf(1 - alpha / 2, df)

    def short(ncp: float) -> float:  # the lower tail's share underflows to NaN far from 0: it is 0 there
        return float(stats.nct.sf(crit, df, ncp) + np.nan_to_num(stats.nct.cdf(-crit, df, ncp)) - power)

    if short(0.0) >= 0:
        return 0.0
    top = crit + stats.norm.ppf(power) + 1.0
    while short(top) < 0:
        top *= 2
    return float(optimize.brentq(short, 0.0, top, xtol=1e-10))


def mde_paired_t(se: float, n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """Minimum detectable effect of the two-sided paired t-test (``paired_t_tests``) on ``n`` items whose
    difference has standard error ``se``: the true mean difference it detects with probability ``power`` at
    level ``alpha`` (exact for normal differences: noncentral t, ``t_mde_factor``). For a family tested with
    BH at α, pass the Bonferroni level α/m: BH rejects at least what Bonferroni does, so the power holds.
    Checked by simulation in tests/stats/test_stats_power.py (m ∈ {1, 15, 66, 105})."""
    if not float(se) >= 0:
        raise InputError(f"se={se!r}", field="se", expected="a standard error >= 0")
    return float(t_mde_factor(int(n) - 1, float(alpha), float(power)) * float(se))


def mde_paired_proportions(n: int, discordant_rate: float, alpha: float = 0.05, power: float = 0.8) -> float:
    """MDE for a difference of paired proportions (e.g. accuracy of two rubric sets on the same n items),
    normal approximation (Connor 1987).

    Per item the difference D ∈ {−1, 0, +1}. ``discordant_rate`` ψ0 is the share of items on which the two
    sets disagree about correctness *without* the effect; an effect δ moves δ·n more items to one side, so
    under the alternative ψ = ψ0 + δ and Var(D) = ψ − δ². The MDE is the δ that solves
    ``δ·√n = z_{1−α/2}·√ψ + z_{power}·√(ψ − δ²)`` (``scipy.optimize.brentq``); ``inf`` when even
    δ = 1 − ψ0 falls short. Plugging the observed ψ in as if the effect did not add to it understates
    the MDE (to 0 when ψ0 = 0).
    """
    rate = float(discordant_rate)
    if not 0.0 <= rate <= 1.0:
        raise InputError(f"discordant_rate={discordant_rate!r}", field="discordant_rate",
                         expected="a rate in [0, 1] (share of items where the two sets disagree)")
    if not float(n) >= 1:
        raise InputError(f"n={n!r}", field="n", expected="n >= 1 items")
    z_a = stats.norm.ppf(1 - probability(alpha, "alpha") / 2)
    z_b = stats.norm.ppf(probability(power, "power"))

    def gap(d: float) -> float:  # δ·√n − (z_a·√ψ + z_b·√(ψ − δ²)), divided by √ψ so δ → 0 is finite
        psi = rate + d
        return d * math.sqrt(n / psi) - z_a - z_b * math.sqrt(max(0.0, 1 - d * d / psi))

    if gap(1e-12) >= 0:  # z_a + z_b <= 0 (power below one half at this alpha): any drop is 'detectable'
        return 0.0
    top = 1.0 - rate
    if top <= 0 or gap(top) < 0:
        return math.inf
    return float(optimize.brentq(gap, 1e-12, top, xtol=1e-9))


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


PAIRED_TEST = "paired t-test (scipy.stats.ttest_rel), two-sided, on per-item differences"


def paired_test(a: Any, b: Any) -> dict[str, float]:
    """``paired_t_tests`` of one comparison as plain floats: ``p_value``, ``se`` (the test's), ``n_test`` (items)."""
    res = paired_t_tests(a, b)
    return {"p_value": float(res["p_value"][0]), "se": float(res["se"][0]), "n_test": int(len(np.asarray(a)))}


def adjust_family(rows: list[dict[str, Any]], alpha: float = 0.05, power: float = 0.8) -> list[dict[str, Any]]:
    """One family of paired comparisons, tested as every card states: BH over the rows' paired t-test p-values
    at ``alpha``; each row's MDE that of its t-test (``mde_paired_t`` on its ``se`` and ``n_test`` items) at the
    family's Bonferroni level α/m (m = the rows that could be tested), power ``power`` — BH rejects at least what
    Bonferroni does, so the power holds (tests/stats/test_stats_power.py simulates it); each row labelled
    (``label_comparison``). Rows need ``p_value`` (None/NaN when untestable), ``se`` and ``n_test``."""
    p = np.array([np.nan if r.get("p_value") is None else r["p_value"] for r in rows], dtype=float)
    adjusted = bh_adjust(p) if rows else []
    m = int(np.isfinite(p).sum())
    level = alpha / max(m, 1)
    for row, q in zip(rows, adjusted, strict=True):
        se, n = row.get("se"), row.get("n_test") or 0
        ok = se is not None and np.isfinite(se) and n >= 2
        row["mde"] = mde_paired_t(se, n, alpha=level, power=power) if ok else None
        row["mde_alpha"] = level
        row["mde_method"] = f"{PAIRED_TEST}; α={alpha:g}/{m} (Bonferroni over the family), power {power:g}"
        row["test"] = PAIRED_TEST + "; BH over the family"
        as_nan = {k: (np.nan if row.get(k) is None else row[k]) for k in ("low", "high", "se")}
        label = label_comparison({**row, **as_nan, "p_adjusted": q}, alpha=alpha, power=power)
        if label.startswith("no detectable difference") and row["mde"] is not None:
            label = f"no detectable difference (MDE={row['mde']:.3g}: paired t-test at α={alpha:g}/{m}, power {power:g})"
        row["label"] = label
        row["p_adjusted"] = None if not np.isfinite(q) else float(q)
        pv = row.get("p_value")
        row["p_value"] = None if pv is None or not np.isfinite(pv) else float(pv)
        row["family_size"] = m
    return rows


# -- the drift gate's per-domain test and MDE -----------------------------------------------------------


def exact_k_min(alpha: float) -> int:
    """Fewest discordant pairs (all one way) for which the exact two-sided sign test reaches ``p ≤ alpha``:
    ``ceil(log2(2 / alpha))``."""
    if not 0 < alpha < 1:
        raise InputError(f"alpha={alpha!r}", field="alpha", expected="a level in (0, 1)")
    return math.ceil(math.log2(2.0 / alpha) - 1e-12)


def sign_test_cutoffs(n: int, alpha: float) -> np.ndarray:
    """For k = 0..n discordant pairs: the fewest of them that must lose credit for the gate's exact two-sided
    sign test to reject, ``p < alpha`` (the gate's strict rule); k + 1 where no split of k pairs rejects."""
    k = np.arange(n + 1)

    def rejects(c: np.ndarray) -> np.ndarray:
        return (2 * c > k) & (c <= k) & (2 * stats.binom.sf(c - 1, k, 0.5) < alpha)

    # start near the answer (scipy's inverse survival function), then step to the exact cutoff
    start = np.nan_to_num(stats.binom.isf(alpha / 2, k, 0.5), nan=0.0)
    c = np.clip(np.maximum(start, k // 2 + 1), 0, k + 1).astype(int)
    for _ in range(n + 2):
        down = rejects(c - 1)
        up = ~rejects(c) & (c <= k)
        if not (down.any() or up.any()):
            break
        c = c - down + up
    return c


def sign_test_power(n: int, drop: float, discordance: float, alpha: float,
                    cutoffs: np.ndarray | None = None) -> float:
    """Exact power of the gate's sign test against a drop ``drop`` on ``n`` pairs.

    Model: without the drop a share ``discordance`` (ψ0) of pairs change credit, half each way; the drop
    makes another δ·n pairs lose it. Per pair: lose with probability ψ0/2 + δ, gain with ψ0/2, so
    K ~ Binom(n, ψ0 + δ) discordant pairs and L | K=k ~ Binom(k, (ψ0/2 + δ)/(ψ0 + δ)) of them lost;
    power = Σ_k P(K=k) · P(L ≥ c_k | k) with ``sign_test_cutoffs``. Full-credit changes: with ties credited
    0.5 a drop δ needs more lost pairs, so this is the conservative case.
    """
    psi = min(1.0, discordance + drop)
    if psi <= 0:
        return 0.0
    c = sign_test_cutoffs(n, alpha) if cutoffs is None else cutoffs
    k = np.arange(n + 1)
    lose = min(1.0, (discordance / 2 + drop) / psi)
    return float(np.sum(stats.binom.pmf(k, n, psi) * stats.binom.sf(c - 1, k, lose)))


def mde_sign_test(n: int, discordance: float, alpha: float, power: float = 0.8) -> float:
    """Smallest drop δ with ``sign_test_power(n, δ, discordance, alpha) >= power`` (``scipy.optimize.brentq``;
    the power grows with δ); ``inf`` when even δ = 1 − ψ0 (every other pair lost) falls short."""
    power = probability(power, "power")
    c = sign_test_cutoffs(n, alpha)

    def short(d: float) -> float:
        return sign_test_power(n, d, discordance, alpha, c) - power

    top = 1.0 - discordance
    if top <= 0 or short(top) < 0:
        return math.inf
    if short(0.0) >= 0:
        return 0.0
    return float(optimize.brentq(short, 0.0, top, xtol=1e-6))


def mde_drop(n: int, discordance: float, alpha: float, power: float = 0.8) -> dict[str, float]:
    """The minimum detectable drop of a domain of ``n`` pairs whose share ``discordance`` (ψ0) of pairs
    changed credit (``rubriclab.drift._gate`` states the method): ``mde`` from the exact power of the sign
    test (``mde_sign_test``), ``mde_normal`` the normal approximation with ψ0 + δ
    (``mde_paired_proportions``, for comparison), ``mde_floor`` = k_min / n the smallest drop the exact test
    could flag at all. NaN when n = 0; ``inf`` when no drop reaches the power at this n."""
    if n <= 0:
        return {"mde": np.nan, "mde_normal": np.nan, "mde_floor": np.nan}
    psi0 = min(1.0, max(0.0, float(discordance)))
    return {"mde": mde_sign_test(n, psi0, alpha, power),
            "mde_normal": mde_paired_proportions(n, psi0, alpha=alpha, power=power),
            "mde_floor": exact_k_min(alpha) / n}


def sign_test(n_lost: int, n_gained: int) -> float:
    """Exact two-sided sign test of ``n_lost`` vs ``n_gained`` discordant pairs (1.0 when there are none)."""
    k = n_lost + n_gained
    if k == 0:
        return 1.0
    return float(stats.binomtest(n_lost, k, 0.5, alternative="two-sided").pvalue)
