"""The stated MDE of the recorded comparisons holds its power: simulated families of m paired comparisons (one with
a true effect equal to the MDE the card states, m − 1 without), tested as the card tests them (two-sided paired
t-tests, BH over the family at α), reject the effect with probability ≈ the stated power — for small and large
families (m = 66 and 105 are LLMBar Natural's ChatGPT and GPT-4 families, where a bootstrap p-value with B = 2000
could not go below 2/2001 > α/m, so the power at the stated MDE was 0)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, stats

from rubriclab.recorded import Judgment, RecordedPair, RecordedSet, Settings, analyze
from rubriclab.stats import bh_adjust, mde_paired_t, paired_t_tests, t_mde_factor

ALPHA, POWER, N, PSI, FAMILIES = 0.05, 0.8, 100, 0.3, 4000


def _true_effect(m: int) -> float:
    """The δ that equals the MDE the card states for data with this truth: δ = factor · sd(δ)/√n, where the
    per-pair difference is +1 / −1 with probabilities (ψ + δ)/2, (ψ − δ)/2 (sd² = ψ − δ²)."""
    f = t_mde_factor(N - 1, ALPHA / m, POWER)
    return optimize.brentq(lambda d: d - f * math.sqrt((PSI - d * d) / N), 1e-9, PSI - 1e-9)


@pytest.mark.parametrize("m", [1, 15, 66, 105])
def test_power_at_the_stated_mde_is_the_stated_power(m: int) -> None:
    rng = np.random.default_rng(m)
    delta = _true_effect(m)
    hits, stated = 0, []
    for start in range(0, FAMILIES, 250):
        r = min(250, FAMILIES - start)
        # column 0 of each family: the effect; the rest: no effect, the same discordance
        p_eff = np.array([(PSI + delta) / 2, 1 - PSI, (PSI - delta) / 2])
        p_null = np.array([PSI / 2, 1 - PSI, PSI / 2])
        eff = rng.choice([1.0, 0.0, -1.0], size=(N, r), p=p_eff)
        null = rng.choice([1.0, 0.0, -1.0], size=(N, r * (m - 1)), p=p_null)
        d = np.concatenate([eff, null], axis=1)
        res = paired_t_tests(d, np.zeros_like(d))
        p = np.concatenate([res["p_value"][:r, None], res["p_value"][r:].reshape(r, m - 1)], axis=1)
        q = np.stack([bh_adjust(row) for row in p])
        hits += int((q[:, 0] < ALPHA).sum())
        stated += [mde_paired_t(se, N, ALPHA / m, POWER) for se in res["se"][:r]]
    power = hits / FAMILIES
    tol = 3 * math.sqrt(POWER * (1 - POWER) / FAMILIES)
    # the truth is the MDE the card states (on average over the simulated data)
    assert abs(np.mean(stated) - delta) < 0.01 * delta
    # BH rejects at least what Bonferroni at α/m does: the power may sit a little above the stated one
    assert POWER - tol <= power <= POWER + 0.03 + tol, (m, power)


def test_paired_t_tests_are_scipys_and_handle_constant_differences() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 2, (40, 3)).astype(float), rng.integers(0, 2, (40, 3)).astype(float)
    res = paired_t_tests(a, b)
    for c in range(3):
        want = stats.ttest_rel(a[:, c], b[:, c])
        assert res["p_value"][c] == pytest.approx(want.pvalue, rel=1e-12)
        assert res["se"][c] == pytest.approx(np.std(a[:, c] - b[:, c], ddof=1) / math.sqrt(40), rel=1e-12)
    same = paired_t_tests(np.ones(5), np.ones(5))
    moved = paired_t_tests(np.ones(5), np.zeros(5))
    assert (same["p_value"][0], same["se"][0]) == (1.0, 0.0)
    assert (moved["p_value"][0], moved["se"][0]) == (0.0, 0.0)


def test_the_mde_factor_is_the_noncentral_t_power() -> None:
    f = t_mde_factor(99, ALPHA / 66, POWER)
    crit = stats.t.ppf(1 - ALPHA / 132, 99)
    assert stats.nct.sf(crit, 99, f) + stats.nct.cdf(-crit, 99, f) == pytest.approx(POWER, abs=1e-8)
    assert f > stats.norm.ppf(1 - ALPHA / 132) + stats.norm.ppf(POWER)  # t's heavier tails: a larger MDE than z's


def _family_set(m: int) -> RecordedSet:
    """One judge under a baseline and m other conditions on 100 labelled pairs (one order). The baseline is right
    on a random half; ``c000`` is right on every pair (Δ ≈ 0.5: one large effect); every other condition is the
    baseline with 4 pairs flipped (no real effect)."""
    rng = np.random.default_rng(0)
    pairs = {str(i): RecordedPair(id=str(i), labels=(("gold", "1"),), prompt=f"p{i}", output_1="a", output_2="b")
             for i in range(100)}
    base = rng.random(100) < 0.5
    cells = {"base": base, "c000": np.ones(100, bool)}
    for k in range(1, m):
        flipped = base.copy()
        flipped[rng.choice(100, 4, replace=False)] ^= True
        cells[f"c{k:03d}"] = flipped
    judgments = [Judgment(pair_id=str(i), judge="J", condition=name, order="original",
                          verdict="first" if right[i] else "second")
                 for name, right in cells.items() for i in range(100)]
    return RecordedSet(name="family", format="table", path="-", pairs=pairs, judgments=judgments)


def test_a_large_family_can_still_find_a_large_effect() -> None:
    """105 conditions each against a baseline: one family of 105 comparisons, one of them a large effect (Δ ≈ 0.5
    on 100 pairs). A bootstrap p-value (B = 2000) is at least 2/2001, so BH over 105 gave it q ≥ 0.1: 'no
    detectable difference' for the one real effect in the family."""
    res = analyze(_family_set(105), Settings(n_boot=2000, baseline="base"))
    family = [r for r in res.comparisons if r["family"] == "judge:J" and r["metric"] == "accuracy"]
    assert len(family) == 105 and all(r["family_size"] == 105 for r in family)
    strong = next(r for r in family if r["a"] == "c000")
    assert strong["label"] == "difference", strong["p_adjusted"]
    assert sum(r["label"] == "difference" for r in family) == 1
    for r in family:  # the stated MDE is the t-test's at α/m, on the row's own SE and n
        assert r["mde"] == pytest.approx(mde_paired_t(r["se"], r["n_pairs"], ALPHA / 105, POWER), rel=1e-12)
        assert r["test"].startswith("paired t-test")
