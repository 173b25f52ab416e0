"""The drift gate's minimum detectable drop means what it says: a true drop of exactly the reported MDE is
flagged by the gate's own test (sign test, BH, bootstrap CI) in at least ``power`` of simulated edits."""

from __future__ import annotations

import numpy as np
import pytest

from rubriclab.drift import compare_verdicts
from rubriclab.settings import Gate
from rubriclab.stats import mde_drop, sign_test
from rubriclab.stats._inference import sign_test_cutoffs, sign_test_power
from rubriclab.testing import gate_rows

BENCH = (100, 1, 1)  # a quiet benchmark domain beside the target: m = 2 tested domains, alpha' = 0.025


def _gate(n: int, lost: int, gained: int):
    rows, pairs = gate_rows({"bench": BENCH, "target": (n, lost, gained)})
    return compare_verdicts(rows, pairs, Gate(n_boot=1000, seed=7), bench_domain="bench")


def _flags_target(n: int, lost: int, gained: int) -> bool:
    return bool(_gate(n, lost, gained).domains.set_index("domain").loc["target", "significant_drop"])


def _thresholds(n: int, gained: set[int], alpha: float) -> dict[int, int]:
    """Per number of gained pairs: the fewest lost pairs from which the gate flags the target. Fewer lost
    pairs than the sign test needs at ``alpha`` are counted as not flagged (the gate needs q < alpha; any
    error there only lowers the measured power); from there on the gate itself decides, and one more lost
    pair only lowers p, Δ and every bootstrap replicate, so the first flagged count is the threshold."""
    cut = sign_test_cutoffs(n, alpha)
    out = {}
    for g in sorted(gained):
        lost = np.arange(n - g + 1)
        t = int(np.argmax(cut[lost + g] <= lost)) if (cut[lost + g] <= lost).any() else n - g + 1
        while t <= n - g and not _flags_target(n, t, g):
            t += 1
        out[g] = t
    return out


# (n, discordant pairs without a drop); the first three are the review's settings (ψ0 = 0, ≈.03, .05)
SETTINGS = [(60, 0), (60, 2), (200, 10), (40, 0)]


@pytest.mark.parametrize(("n", "k0"), SETTINGS)
def test_a_drop_of_the_reported_mde_is_flagged_with_the_stated_power(n, k0):
    null = _gate(n, k0 // 2, k0 // 2)
    t = null.domains.set_index("domain").loc["target"]
    assert not null.flagged and np.isfinite(t["mde"]) and null.settings["power"] == 0.8
    psi0, delta = k0 / n, float(t["mde"])
    # each pair loses credit with probability ψ0/2 + δ, gains it with ψ0/2: the drop adds to the discordance
    rng = np.random.default_rng(n * 1000 + k0)
    draws = rng.multinomial(n, [psi0 / 2 + delta, psi0 / 2, 1 - psi0 - delta], size=1000)
    need = _thresholds(n, {int(g) for g in draws[:, 1]}, null.settings["alpha_mde"])
    rate = float(np.mean([lost >= need[gained] for lost, gained, _ in draws]))
    assert rate >= 0.75, f"n={n}, ψ0={psi0:.3f}: a drop of the reported MDE {delta:.3f} flagged in {rate:.0%}"


def test_sign_test_cutoffs_match_the_gates_sign_test():
    for alpha in (0.05, 0.025, 0.01):
        for n in (0, 1, 7, 25):
            c = sign_test_cutoffs(n, alpha)
            for k in range(n + 1):
                brute = next((x for x in range(k + 1) if 2 * x > k and sign_test(x, k - x) < alpha), k + 1)
                assert c[k] == brute


def test_exact_power_equals_enumeration_and_the_mde_reaches_it():
    # n = 8, ψ0 = 0, δ = 0.5: all discordant pairs are lost; p = 2·0.5^k < 0.05 needs k >= 6 lost
    from scipy import stats

    assert sign_test_power(8, 0.5, 0.0, 0.05) == pytest.approx(stats.binom.sf(5, 8, 0.5))
    m = mde_drop(60, 0.05, 0.025)
    assert sign_test_power(60, m["mde"], 0.05, 0.025) == pytest.approx(0.8, abs=1e-4)
    assert m["mde"] > m["mde_floor"] == pytest.approx(7 / 60)
    assert mde_drop(3, 0.0, 0.05)["mde"] == np.inf  # 3 pairs all lost: p = 0.25, no drop is detectable
    assert np.isnan(mde_drop(0, 0.0, 0.05)["mde"])


# -- nothing besides the benchmark tested: not assessed, never a pass ------------------------------------------


def test_benchmark_only_data_is_not_assessed_and_fails_the_gate():
    rows, pairs = gate_rows({"bench": (80, 0, 0)})
    res = compare_verdicts(rows, pairs, Gate(n_boot=200, seed=0), bench_domain="bench")
    assert not res.assessed and res.exit_code == 1 and [f["kind"] for f in res.flags] == ["not_assessed"]
    assert res.verdict.startswith("NOT ASSESSED: drift not assessed: only the benchmark 'bench' was compared")
    assert "add pairs from the domains to check" in res.verdict and "\n" not in res.verdict
    assert res.bench["assessed"] and res.bench["preserved"]  # the benchmark itself was still checked


def test_other_domains_without_a_verdict_under_both_rubrics_are_not_assessed_either():
    rows, pairs = gate_rows({"bench": (40, 0, 0), "target": (30, 0, 0)})
    rows.loc[(rows["domain"] == "target") & (rows["rubric"] == "new"), "status"] = "failed"
    res = compare_verdicts(rows, pairs, Gate(n_boot=200, seed=0), bench_domain="bench")
    # every target pair lost its verdict under the new rubric: that is flagged itself, and nothing else was tested
    assert res.exit_code == 1 and [f["kind"] for f in res.flags] == ["more_failures", "not_assessed"]
    assert res.verdict.startswith("FLAGGED: 'target': the new rubric left 30 pair(s) without a verdict")
    assert "no pair of 'target' was judged under both rubrics" in res.verdict
    # without --bench the one domain is the tested one: a real (if weak) pass with its MDE
    alone = compare_verdicts(*gate_rows({"bench": (80, 0, 0)}), Gate(n_boot=200, seed=0))
    assert alone.exit_code == 0 and alone.verdict.startswith("PASS: no detectable drift (MDE=")


def test_a_found_drop_outranks_not_assessed_in_the_verdict():
    rows, pairs = gate_rows({"bench": (60, 20, 0)})
    res = compare_verdicts(rows, pairs, Gate(n_boot=200, seed=0), bench_domain="bench")
    assert [f["kind"] for f in res.flags] == ["benchmark_drop", "not_assessed"]
    assert res.verdict.startswith("FLAGGED: 'bench' drops") and res.exit_code == 1


def test_a_domain_too_small_for_any_drop_is_not_assessed_and_fails_the_gate():
    """Fewer pairs than the k_min lost ones the exact test needs: no drop there could be flagged, all 5 lost
    included, so the domain was not tested (before: exit 0, PASS, with 'MDE=inf')."""
    for lost in (0, 5):
        res = compare_verdicts(*gate_rows({"bench": (100, 0, 0), "tiny": (5, lost, 0)}), Gate(n_boot=200, seed=0),
                               bench_domain="bench")
        d = res.domains.set_index("domain")
        assert d.loc["tiny", "mde"] == np.inf and d.loc["tiny", "mde_floor"] == pytest.approx(7 / 5)
        assert not d.loc["tiny", "testable"] and d.loc["bench", "testable"]
        assert d.loc["tiny", "verdict"] == ("undetermined (n=5: the exact test needs at least 7 lost pairs to flag a "
                                            "drop at α'=0.025)")
        assert res.exit_code == 1 and [f["kind"] for f in res.flags] == ["not_assessed"]
        assert "too few pairs judged under both rubrics: 'tiny' n=5 (< 7" in res.verdict
        assert res.to_dict()["domains"][1]["mde"] is None  # JSON has no inf
    # a testable domain beside it: a pass that names the undetermined one
    res = compare_verdicts(*gate_rows({"bench": (100, 0, 0), "target": (60, 0, 0), "tiny": (5, 0, 0)}),
                           Gate(n_boot=200, seed=0), bench_domain="bench")
    assert res.exit_code == 0 and "the largest MDE is on 'target' (n=60)" in res.verdict
    assert res.verdict.endswith("1 domain(s) undetermined (too few pairs judged under both: 'tiny' n=5)")
    # without a benchmark, a lone domain too small is not assessed either
    alone = compare_verdicts(*gate_rows({"tiny": (5, 5, 0)}), Gate(n_boot=200, seed=0))
    assert alone.exit_code == 1 and alone.verdict.startswith("NOT ASSESSED: drift not assessed: no domain has enough")


def test_one_pair_has_no_interval_and_a_degenerate_one_says_so():
    res = compare_verdicts(*gate_rows({"bench": (100, 0, 0), "one": (1, 1, 0), "same": (20, 0, 0)}),
                           Gate(n_boot=200, seed=0), bench_domain="bench")
    d = res.domains.set_index("domain")
    assert np.isnan(d.loc["one", "ci_low"]) and np.isnan(d.loc["one", "ci_high"])  # was [-1, -1], "95%"
    assert d.loc["one", "ci_note"] == "one pair: no sampling variability, so no interval"
    assert d.loc["same", "ci_low"] == d.loc["same", "ci_high"] == 0.0 and "same" in str(d.loc["same", "ci_note"])
    assert res.to_dict()["domains"][1]["ci"]["note"] == d.loc["one", "ci_note"]


def test_the_benchmark_reason_gives_n_and_the_interval_and_says_when_it_does_not_show_preservation():
    res = compare_verdicts(*gate_rows({"bench": (8, 0, 0), "target": (200, 40, 0)}), Gate(n_boot=500, seed=0),
                           bench_domain="bench")
    assert res.bench["preserved"] and res.bench["noninferior"] and res.bench["n"] == 8
    assert "n=8" in res.bench["reason"] and "[+0.000, +0.000]" in res.bench["reason"]
    wide = compare_verdicts(*gate_rows({"bench": (8, 1, 1), "target": (200, 40, 0)}), Gate(n_boot=500, seed=0),
                            bench_domain="bench")
    assert wide.bench["preserved"] and not wide.bench["noninferior"] and wide.bench["ci_low"] < -0.05
    assert wide.bench["reason"].endswith("the interval's lower end is not ≥ −ε, so the data do not show it")
    assert [f["kind"] for f in wide.flags] == ["directional_drift"] and "n=8" in wide.flags[0]["message"]


@pytest.mark.parametrize(("n", "psi0", "low"), [(60, 0.05, 0.78), (40, 0.10, 0.78), (200, 0.05, 0.78)])
def test_the_power_with_the_observed_discordance_plugged_in_is_what_the_docs_say(n, psi0, low):
    """The gate computes the MDE at the observed share of changed pairs ψ̂0 = k/n, not the true ψ0. Averaged exactly
    over k ~ Binom(n, ψ0), the sign test's power at the MDE the gate prints: 0.78-0.79 for 0.8 asked, as
    docs/explanation/statistics.md and the report's ``mde_formula`` say (0.8 exactly with ψ0 known)."""
    from scipy import stats

    alpha = 0.025
    assert sign_test_power(n, mde_drop(n, psi0, alpha)["mde"], psi0, alpha) == pytest.approx(0.8, abs=1e-3)
    k = np.arange(n + 1)
    weight = stats.binom.pmf(k, n, psi0)
    keep = weight > 1e-12
    power = []
    for kk in k[keep]:
        mde = mde_drop(n, kk / n, alpha)["mde"]  # what compare_verdicts prints for that draw
        power.append(sign_test_power(n, mde, psi0, alpha) if np.isfinite(mde) else 0.0)
    mean = float(np.dot(power, weight[keep] / weight[keep].sum()))
    assert low <= mean < 0.8, f"n={n}, ψ0={psi0}: mean power {mean:.3f} at the printed MDE"
