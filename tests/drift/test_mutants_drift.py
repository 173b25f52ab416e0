"""Tests that kill mutants which survived `make mutate` on drift/ (docs/mutation.md names each one).

Known answers on hand-built verdicts (``gate_rows``: per domain n pairs, the first ``lost`` lose credit under
the new rubric, the next ``gained`` gain it). The p-values are exact sign tests (e.g. 20 lost of 20
discordant: p = 2 · 2⁻²⁰ = 1.91e-06; BH over two domains: q = 3.81e-06), so every flag, the benchmark
assessment and each message are fixed by hand; only the bootstrap CI's ends are left to a pattern.
"""

from __future__ import annotations

import math
import re

import pytest

from rubriclab.drift import Candidate, compare_verdicts, final_pool, select
from rubriclab.drift._select import adjust_across_methods, infeasible_because
from rubriclab.settings import Gate
from rubriclab.testing import gate_rows

CI = r"\[-?\d\.\d{3}, -?\d\.\d{3}\]"
TARGET_DROP = rf"'target' drops -0\.333 {CI} \(n=60, q=3\.81e-06\)"
SIGNED_CI = r"\[[-+]\d\.\d{3}, [-+]\d\.\d{3}\]"  # the benchmark's interval, in its reason and the flags


def _gate(spec, bench="bench", failed=(), **kw):
    rows, pairs = gate_rows(spec)
    for dom in failed:  # every new verdict of the domain failed: none of its pairs is judged under both
        rows.loc[(rows["domain"] == dom) & (rows["rubric"] == "new"), "status"] = "failed"
    return compare_verdicts(rows, pairs, Gate(**{"seed": 0, "n_boot": 200, **kw}), bench_domain=bench)


def _kinds(res):
    return [(f["kind"], f["domain"]) for f in res.flags]


@pytest.mark.parametrize("bench", ["bench", None])
def test_every_verdict_failed_is_not_assessed_and_fails_the_gate(bench):
    # kills _gate.x__flags__mutmut_5 (n >= 0: the all-failed table went on to a PASS-like path) and the
    # mutants of the early return's benchmark record (_7 … the "nothing judged" dict's keys and values)
    res = _gate({"bench": (40, 0, 0), "target": (60, 0, 0)}, bench=bench, failed=("bench", "target"))
    assert res.bench == {"domain": bench, "assessed": False, "preserved": None, "reason": "nothing judged"}
    # every failure is the new rubric's: flagged per domain, beside the "nothing checked" flag
    assert _kinds(res) == [("more_failures", "bench"), ("more_failures", "target"), ("not_assessed", None)]
    assert res.flags[-1] == {"kind": "not_assessed", "domain": None, "message": "no pair was judged under both "
                             "rubrics (every verdict failed): nothing was checked"}
    assert res.exit_code == 1 and not res.assessed
    assert res.verdict.startswith("FLAGGED: 'bench': the new rubric left 40 pair(s) without a verdict")
    assert res.verdict.endswith("; no pair was judged under both rubrics (every verdict failed): nothing was checked")
    assert set(res.domains["verdict"]) == {"undetermined (no pair judged under both rubrics); more failed verdicts "
                                           "under the new rubric"}
    # failed under both rubrics: no failure is the edit's, so "nothing checked" alone
    rows, pairs = gate_rows({"bench": (40, 0, 0), "target": (60, 0, 0)})
    rows["status"] = "failed"
    both = compare_verdicts(rows, pairs, Gate(seed=0, n_boot=200), bench_domain=bench)
    assert both.verdict == ("NOT ASSESSED: no pair was judged under both rubrics (every verdict failed): "
                            "nothing was checked")


def test_a_single_pair_domain_is_assessed():
    # kills _gate.x__flags__mutmut_6 (n > 1: a table whose domains have one pair each read as nothing judged)
    res = _gate({"x": (1, 0, 0)}, bench=None)
    # judged, so not "nothing judged"; but one pair cannot show any drop, so not testable either: not assessed
    assert _kinds(res) == [("not_assessed", None)] and res.exit_code == 1 and not res.assessed
    assert res.flags[0]["message"].startswith("drift not assessed: no domain has enough pairs judged under both "
                                              "rubrics for the exact test to flag any drop ('x' n=1 (< 6")
    assert res.bench == {"domain": None, "assessed": False, "preserved": None,
                         "reason": "benchmark preservation not assessed (no benchmark domain given)"}


def test_drop_without_a_benchmark_is_drift():
    res = _gate({"bench": (40, 0, 0), "target": (60, 20, 0)}, bench=None)
    assert _kinds(res) == [("drift", "target")]
    assert re.fullmatch(TARGET_DROP + r" \(benchmark preservation not assessed\)", res.flags[0]["message"])
    assert res.bench == {"domain": None, "assessed": False, "preserved": None,
                         "reason": "benchmark preservation not assessed (no benchmark domain given)"}


def test_drop_with_an_unjudged_benchmark_is_drift_and_says_why():
    res = _gate({"bench": (40, 0, 0), "target": (60, 20, 0)}, failed=("bench",))
    assert _kinds(res) == [("more_failures", "bench"), ("drift", "target")]  # every bench verdict lost: flagged too
    assert re.fullmatch(TARGET_DROP.replace("3\\.81e-06", "1\\.91e-06")
                        + r" \(benchmark preservation not assessed: no benchmark verdicts\)", res.flags[1]["message"])
    assert res.bench == {"domain": "bench", "assessed": False, "preserved": None,
                         "reason": "no benchmark pair was judged under both rubrics"}
    assert res.domains.set_index("domain").loc["bench", "verdict"] == (
        "undetermined (no pair judged under both rubrics); more failed verdicts under the new rubric")


def test_benchmark_drop_of_exactly_epsilon_is_preserved_directional_drift():
    # bench: 5 of 100 lost, Δ = −0.05 = −ε exactly, p = 2/32 = 0.0625 (not significant, though its CI is below 0)
    res = _gate({"bench": (100, 5, 0), "target": (60, 20, 0)})
    assert _kinds(res) == [("directional_drift", "target")]
    assert re.fullmatch(TARGET_DROP + rf" while the benchmark 'bench' is preserved \(Δ=-0\.050 {SIGNED_CI}, n=100, "
                        r"ε=0\.05\)", res.flags[0]["message"])
    reason = res.bench.pop("reason")
    assert res.bench.pop("ci_low") < -0.05 and res.bench.pop("ci_high") <= 0  # 5 of 100 lost: the CI reaches past −ε
    assert res.bench == {"domain": "bench", "assessed": True, "preserved": True, "noninferior": False, "diff": -0.05,
                         "n": 100, "epsilon": 0.05}
    assert re.fullmatch(rf"benchmark 'bench': Δ=-0\.050 {SIGNED_CI}, n=100, ε=0\.05; preserved by RIPD's criterion "
                        r"\(Δ ≥ −ε\); the interval's lower end is not ≥ −ε, so the data do not show it", reason)


def test_benchmark_drop_beyond_epsilon_without_significance_is_a_regression():
    # bench: 7 lost, 1 gained of 100: Δ = −0.06 < −ε, p = 2 · 9/256 = 0.0703 (no significant drop)
    res = _gate({"bench": (100, 7, 1), "target": (60, 20, 0)})
    assert _kinds(res) == [("regression", "target")]
    assert re.fullmatch(TARGET_DROP + rf" and the benchmark 'bench' is not preserved \(Δ=-0\.060 {SIGNED_CI}, "
                        r"n=100, ε=0\.05\)", res.flags[0]["message"])
    reason = res.bench.pop("reason")
    res.bench.pop("ci_low"), res.bench.pop("ci_high")
    assert res.bench == {"domain": "bench", "assessed": True, "preserved": False, "noninferior": False, "diff": -0.06,
                         "n": 100, "epsilon": 0.05}
    assert re.fullmatch(rf"benchmark 'bench': Δ=-0\.060 {SIGNED_CI}, n=100, ε=0\.05; not preserved", reason)


def test_a_significant_benchmark_drop_is_flagged_beside_the_regression():
    res = _gate({"bench": (100, 30, 0), "target": (60, 20, 0)})
    assert _kinds(res) == [("regression", "target"), ("benchmark_drop", "bench")]
    assert re.fullmatch(rf"'bench' drops -0\.300 {CI} \(n=100, q=3\.73e-09\)", res.flags[1]["message"])
    assert res.bench["preserved"] is False and re.fullmatch(
        rf"benchmark 'bench': Δ=-0\.300 {SIGNED_CI}, n=100, ε=0\.05; significant drop; not preserved",
        res.bench["reason"])
    d = res.domains.set_index("domain")
    assert d.loc["bench", "verdict"] == "significant drop (benchmark)" and d.loc["target", "verdict"] == (
        "significant drop")


def test_a_benchmark_gain_preserves_it_and_nothing_is_flagged():
    res = _gate({"bench": (60, 0, 20), "target": (60, 0, 0)})
    assert res.flags == [] and res.exit_code == 0
    assert res.bench["preserved"] is True and res.bench["noninferior"] is True
    assert re.fullmatch(rf"benchmark 'bench': Δ=\+0\.333 {SIGNED_CI}, n=60, ε=0\.05; preserved", res.bench["reason"])
    assert res.domains.set_index("domain").loc["bench", "verdict"] == "significant gain"


# ----- drift/_select.py and drift/_search.py -------------------------------------------------------------


def _cand(pid, bench, target, *, failed_bench=0, failed_target=0, feasible=True):
    c = Candidate(pid, "ours", f"text {pid}")
    c.val = {"bench": {"agreement": bench, "n_failed": failed_bench},
             "target": {"agreement": target, "n_failed": failed_target}}
    c.feasible_val = feasible
    return c


SEED_VAL = {"bench": {"agreement": 0.8, "n_failed": 1}, "target": {"agreement": 0.7, "n_failed": 2}}


def test_final_pool_round_robin_latest_round_first():
    a, b, c, d, e = (Candidate(x, "ours", x) for x in "abcde")
    assert final_pool([[a, b, c], [d, a], [e]], budget=4) == [e, d, a, b]
    assert final_pool([[a, b, c], [d, a], [e]], budget=10) == [e, d, a, b, c]
    assert final_pool([], budget=3) == [] and final_pool([[a, b]], budget=1) == [a]


def test_select_lowest_target_then_higher_bench_then_pool_order():
    pool = [_cand("p0", 0.85, 0.5), _cand("p1", 0.90, 0.5), _cand("p2", 0.95, 0.4, feasible=False),
            _cand("p3", 0.90, 0.5), _cand("p4", 0.99, math.nan)]
    best, why = select(pool, SEED_VAL)
    assert best.prompt_id == "p1"
    assert why == "lowest target-val agreement among 3 feasible of 5 validated"
    assert select([], SEED_VAL) == (None, "no usable candidate")
    none, why = select([_cand("q", 0.9, 0.1, feasible=False)], SEED_VAL)
    assert none is None and why == ("no feasible candidate: none of 1 reached the seed's benchmark-val agreement "
                                    "(0.800) with no more failed val verdicts than the seed's")


def test_infeasible_because_names_the_broken_rule():
    ok = {"bench": {"agreement": 0.8, "n_failed": 1}, "target": {"agreement": 0.2, "n_failed": 2}}
    assert infeasible_because(ok, SEED_VAL) is None  # equal bench agreement and equal failures are feasible
    low = {**ok, "bench": {"agreement": 0.79, "n_failed": 0}}
    assert infeasible_because(low, SEED_VAL) == "bench-val 0.790 < seed's 0.800"
    nan = {**ok, "bench": {"agreement": math.nan, "n_failed": 0}}
    assert infeasible_because(nan, SEED_VAL) == "bench-val nan < seed's 0.800"
    more_b = {**ok, "bench": {"agreement": 0.9, "n_failed": 2}}
    assert infeasible_because(more_b, SEED_VAL) == "2 failed bench-val verdicts > seed's 1"
    more_t = {**ok, "target": {"agreement": 0.2, "n_failed": 3}}
    assert infeasible_because(more_t, SEED_VAL) == "3 failed target-val verdicts > seed's 2"
    no_counts = {"bench": {"agreement": 0.9}, "target": {"agreement": 0.2}}  # missing n_failed counts as 0
    assert infeasible_because(no_counts, {"bench": {"agreement": 0.8}, "target": {"agreement": 0.7}}) is None


def test_adjust_across_methods_leaves_the_seed_and_nan_out_of_the_family():
    import pandas as pd

    table = pd.DataFrame({"method": ["seed", "ours", "icl", "random"], "d_target_p": [0.001, 0.01, 0.04, math.nan],
                          "d_bench_p": [math.nan, 0.5, 0.2, 0.3], "after": 0})
    out = adjust_across_methods(table.copy())
    assert list(out.columns) == ["method", "d_target_p", "d_target_p_bh", "d_bench_p", "d_bench_p_bh", "after"]
    # target: m = 2 (seed and NaN not counted): q = (0.02, 0.04); bench: m = 3, q_(i) = min_j≥i 3 p_(j) / j
    assert out["d_target_p_bh"].tolist()[1:3] == pytest.approx([0.02, 0.04])
    assert math.isnan(out["d_target_p_bh"][0]) and math.isnan(out["d_target_p_bh"][3])
    assert out["d_bench_p_bh"].tolist()[1:] == pytest.approx([0.5, 0.45, 0.45])
    no_method = adjust_across_methods(pd.DataFrame({"d_target_p": [0.01, 0.04]}))
    assert no_method["d_target_p_bh"].tolist() == pytest.approx([0.02, 0.04])
