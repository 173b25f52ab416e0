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
    assert res.exit_code == 1 and res.verdict.startswith("NOT ASSESSED")
    assert "no pair of 'target' was judged under both rubrics" in res.verdict
    # without --bench the one domain is the tested one: a real (if weak) pass with its MDE
    alone = compare_verdicts(*gate_rows({"bench": (80, 0, 0)}), Gate(n_boot=200, seed=0))
    assert alone.exit_code == 0 and alone.verdict.startswith("PASS: no detectable drift (MDE=")


def test_a_found_drop_outranks_not_assessed_in_the_verdict():
    rows, pairs = gate_rows({"bench": (60, 20, 0)})
    res = compare_verdicts(rows, pairs, Gate(n_boot=200, seed=0), bench_domain="bench")
    assert [f["kind"] for f in res.flags] == ["benchmark_drop", "not_assessed"]
    assert res.verdict.startswith("FLAGGED: 'bench' drops") and res.exit_code == 1


def test_a_domain_too_small_for_any_drop_says_so():
    res = compare_verdicts(*gate_rows({"bench": (40, 0, 0), "tiny": (3, 0, 0)}), Gate(n_boot=200, seed=0),
                           bench_domain="bench")
    d = res.domains.set_index("domain")
    assert d.loc["tiny", "mde"] == np.inf and d.loc["tiny", "mde_floor"] == pytest.approx(7 / 3)
    assert d.loc["tiny", "verdict"] == "no detectable drift (MDE=inf: too few pairs for any drop to reach the power)"
    assert res.exit_code == 0 and "the largest MDE is on 'tiny' (n=3)" in res.verdict
    assert res.to_dict()["domains"][1]["mde"] is None  # JSON has no inf
