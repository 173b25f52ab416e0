"""Tests that kill mutants which survived `make mutate` on repair/ (docs/mutation.md names each one).

Known answers worked by hand from the acceptance rule (PReMISE §3.4): a candidate passes at δ iff
VFR' < VFR and α' ≥ α − δ; the Pareto frontier keeps points not dominated on (α higher, VFR lower).
"""

from __future__ import annotations

import math

import pytest

from rubriclab.errors import ConfigError
from rubriclab.repair import RepairSettings, delta_label, pareto_front, parse_delta, select, verdict
from rubriclab.repair._refinement import _subsets


def _front(points):
    return [p["index"] for p in pareto_front(points)]


def test_equal_alpha_lower_vfr_dominates():
    # kills _accept.x_pareto_front__mutmut_16 (a(q) > a(p)) and _23 (`or` -> `and`): same α, lower VFR dominates
    pts = [{"index": 0, "alpha": 0.5, "vfr": 0.1}, {"index": 1, "alpha": 0.5, "vfr": 0.2}]
    assert _front(pts) == [0]


def test_equal_vfr_higher_alpha_dominates():
    # kills _accept.x_pareto_front__mutmut_20 (q.vfr < p.vfr) and _23: same VFR, higher α dominates
    pts = [{"index": 0, "alpha": 0.4, "vfr": 0.2}, {"index": 1, "alpha": 0.6, "vfr": 0.2}]
    assert _front(pts) == [1]


def test_undefined_alpha_is_the_worst_alpha_on_the_front():
    pts = [{"index": 0, "alpha": None, "vfr": 0.2}, {"index": 1, "alpha": float("nan"), "vfr": 0.3},
           {"index": 2, "alpha": 0.0, "vfr": 0.2}]
    # 2 (α = 0) dominates 0 (α undefined, same VFR) and 1 (α NaN = undefined, higher VFR)
    assert _front(pts) == [2]


@pytest.mark.parametrize("orig_vfr,cand_vfr", [(None, 0.1), (0.3, None), (float("nan"), 0.1), (0.3, float("nan"))])
def test_one_sided_undefined_vfr_is_vfr_undefined(orig_vfr, cand_vfr):
    # kills _accept.x_verdict__mutmut_10 (`or` -> `and`: a None VFR on one side reaches `<` and raises),
    # _13/_14 (the reason's text) and, with NaN, _accept.x__num__mutmut_4 (NaN no longer read as undefined)
    assert verdict({"alpha": 0.5, "vfr": orig_vfr}, {"alpha": 0.5, "vfr": cand_vfr}, 0.0) == "vfr_undefined"
    assert verdict({"alpha": 0.5, "vfr": orig_vfr}, {"alpha": 0.5, "vfr": cand_vfr}, math.inf) == "vfr_undefined"


def test_nan_alpha_is_alpha_undefined_at_finite_delta():
    # _num turns NaN into None: a NaN α is undefined, not a failed comparison
    assert verdict({"alpha": float("nan"), "vfr": 0.3}, {"alpha": 0.5, "vfr": 0.1}, 0.1) == "alpha_undefined"
    assert verdict({"alpha": 0.5, "vfr": 0.3}, {"alpha": float("nan"), "vfr": 0.1}, 0.1) == "alpha_undefined"
    assert verdict({"alpha": 0.5, "vfr": 0.3}, {"alpha": float("nan"), "vfr": 0.1}, math.inf) == "pass"


def test_negative_delta_message_names_the_tolerance():
    # kills _accept.x_select__mutmut_3 (the ValueError without its message)
    with pytest.raises(ValueError, match=r"delta must be >= 0 .*got -0\.1"):
        select({"alpha": 0.5, "vfr": 0.3}, [], -0.1)


# ----- repair/_refinement.py: the δ parser and label, the operator subsets ---------------------------------

@pytest.mark.parametrize("given", ["inf", " INF ", ".inf", ".INF", "infinity", "+inf", math.inf])
def test_parse_delta_reads_every_spelling_of_infinity(given):
    # ".inf" (YAML's spelling) is the one float() does not read: kills _refinement.x_parse_delta__mutmut_2
    # (.upper()), _6 and _7 (the ".inf" entry); "inf"/"infinity"/"+inf" are read by float() anyway (docs)
    assert parse_delta(given) == math.inf


@pytest.mark.parametrize("given,expected", [(0, 0.0), ("0", 0.0), ("0.1", 0.1), (0.25, 0.25), (2, 2.0)])
def test_parse_delta_numbers(given, expected):
    # kills x_parse_delta__mutmut_3 (`not in`: "0.1" read as inf), _12/_13 (d lost), _17 (0 refused), _18 (d < 1)
    assert parse_delta(given) == expected


@pytest.mark.parametrize("given,message", [
    (-0.1, r"^repair: δ -0\.1; expected a tolerance >= 0 or inf$"),
    (float("nan"), r"^repair: δ nan; expected a tolerance >= 0 or inf$"),
    ("-inf", r"^repair: δ '-inf'; expected a tolerance >= 0 or inf$"),
    ("abc", r"^repair: δ 'abc' is not a number; expected a tolerance >= 0 or inf$"),
    (None, r"^repair: δ None is not a number; expected a tolerance >= 0 or inf$"),
])
def test_parse_delta_refuses_with_a_one_line_reason(given, message):
    # kills x_parse_delta__mutmut_1 (`or`: None.strip()), _14 and _19 (the messages), _15 (`and`: NaN passed)
    with pytest.raises(ConfigError, match=message):
        parse_delta(given)


def test_delta_label():
    # kills x_delta_label__mutmut_2 … _5 (_1, `isinf(d) and False`, is equivalent: f"{inf:g}" is "inf" too)
    assert [delta_label(d) for d in (math.inf, 0.0, 0.05, 1.0)] == ["inf", "0", "0.05", "1"]


def test_subsets_keep_only_the_allowed_operators_including_their_pair():
    # kills x__subsets__mutmut_5 (`<`: the subset equal to the allowed set was dropped) and _1 … _6
    s = RepairSettings.of({"max_operators": 2, "operators": ["do_not_reward", "max_score_cap"]})
    assert _subsets(s) == [("do_not_reward",), ("max_score_cap",), ("do_not_reward", "max_score_cap")]
    assert len(_subsets(RepairSettings.of({"max_operators": 2}))) == 28  # 7 single operators + 21 pairs
