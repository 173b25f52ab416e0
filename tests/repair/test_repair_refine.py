"""Refinement on the scripted repair world: the acceptance rule keeps and rejects exactly the right
candidates at δ = 0 and δ = ∞; the checker rejects by rule; a second operating point costs no call."""

from __future__ import annotations

import math

import pytest

from rubriclab.audit import AuditContext
from rubriclab.llm import Gateway, SQLiteCallStore
from rubriclab.repair import (
    RepairSettings,
    Revision,
    check_candidate,
    failure_packets,
    operating_point,
    pareto_front,
    plan_subsets,
    report_heldout,
    search,
    select,
)
from rubriclab.rubrics import Criterion, RubricSet
from rubriclab.testing import MARK, repair_world, scripted_provider, world_pairs

ORIGINAL = "The response answers the question helpfully and completely."
OPS = ("do_not_reward", "abstract_to_observable", "max_score_cap", "decomposition", "false_positive_anchors")


@pytest.fixture
def world(tmp_path):
    roles = repair_world(tag=f"rw{tmp_path.name[-6:]}")
    gw = Gateway(SQLiteCallStore(tmp_path / "calls.sqlite"), stage="test", progress=False)
    ctx = AuditContext(gateway=gw, judges=roles["judges"], attacker=roles["attacker"], verifier=roles["verifier"],
                       n_boot=200, progress=False)
    rs = RubricSet(name="w", source="imported", criteria=(Criterion(id="helpful", description=ORIGINAL),))
    settings = RepairSettings.of({"n_attacks": 4, "operators": list(OPS), "max_operators": 1}, {"runs": 2, "n_attacks": 4})
    return {"roles": roles, "ctx": ctx, "rs": rs, "settings": settings, "gw": gw,
            "pool": world_pairs(4, "pool"), "dev": world_pairs(6, "dev"), "held": world_pairs(6, "held")}


def _search(w, n=5):
    return search(w["rs"], pool=w["pool"], dev=w["dev"], ctx=w["ctx"], refiner=w["roles"]["refiner"],
                  n_candidates=n, settings=w["settings"], source="w")


def test_acceptance_keeps_and_rejects_the_right_candidates_at_delta_zero_and_infinity(world):
    found = _search(world)
    entry = found["criteria"]["helpful"]
    assert entry["original"]["vfr"] == 1.0 and entry["original"]["alpha"] == pytest.approx(1.0)
    by_op = {tuple(c["operators"]): c for c in entry["candidates"]}
    # only the two well-formed candidates reach the judges; the other three are rejected by rule
    assert set(by_op) == {("do_not_reward",), ("abstract_to_observable",)}
    # a candidate counts under every rule it breaks: 170 words break the total and the first paragraph
    assert entry["rejected"] == {"unknown_operator": 1, "budget:total_words": 1, "budget:first_paragraph_words": 1,
                                 "unparsed": 1}
    assert sum(1 for r in entry["rows"] if r["broken"]) == 3
    dnr, ato = by_op[("do_not_reward",)], by_op[("abstract_to_observable",)]
    assert dnr["vfr"] == 0.5 and dnr["alpha"] == pytest.approx(1.0)
    assert ato["vfr"] == 0.0 and ato["alpha"] < 0

    constrained = operating_point(found, world["rs"], 0.0, 5)
    d = constrained["decisions"]["helpful"]
    assert d["chosen"] == dnr["index"] and d["operators"] == ["do_not_reward"]
    assert d["verdicts"] == {dnr["index"]: "pass", ato["index"]: "alpha_loss_above_delta"}
    assert MARK["do_not_reward"] in constrained["rubric"].get("helpful").description

    unconstrained = operating_point(found, world["rs"], math.inf, 5)
    d = unconstrained["decisions"]["helpful"]
    assert d["verdicts"] == {dnr["index"]: "pass", ato["index"]: "pass"}
    assert sorted(d["frontier"]) == sorted([dnr["index"], ato["index"]])  # neither dominates the other
    assert d["chosen"] == ato["index"]
    assert MARK["abstract_to_observable"] in unconstrained["rubric"].get("helpful").description
    assert unconstrained["rubric"].source == "robust_repaired"

    # a δ large enough to admit ato's α loss picks it too; a tiny one does not
    loss = entry["original"]["alpha"] - ato["alpha"]
    assert operating_point(found, world["rs"], loss + 0.01, 5)["decisions"]["helpful"]["chosen"] == ato["index"]
    assert operating_point(found, world["rs"], loss - 0.01, 5)["decisions"]["helpful"]["chosen"] == dnr["index"]


def test_operating_points_and_heldout_reports_reuse_the_search_calls(world):
    found = _search(world)
    held0 = report_heldout(world["rs"], world["held"], world["ctx"], world["settings"], source="w")
    assert held0["vfr"]["value"] == 1.0 and held0["alpha"]["value"] == pytest.approx(1.0)
    assert held0["vfr"]["ci"]["unit"] == "prompts" and held0["alpha"]["ci"]["unit"] == "pairs"
    ops = {d: operating_point(found, world["rs"], d, 5)["rubric"] for d in (0.0, math.inf)}
    for rs in ops.values():
        report_heldout(rs, world["held"], world["ctx"], world["settings"], source="w")
    calls = dict(scripted_provider().calls)
    for d in (0.0, 0.01, 0.5, 1.0, 2.0, math.inf):  # every other δ selects one of the two: no new call
        rs = operating_point(found, world["rs"], d, 5)["rubric"]
        report_heldout(rs, world["held"], world["ctx"], world["settings"], source="w")
    again = _search(world)
    assert dict(scripted_provider().calls) == calls
    assert again["criteria"]["helpful"]["rejected"] == found["criteria"]["helpful"]["rejected"]
    held_c = report_heldout(ops[0.0], world["held"], world["ctx"], world["settings"], source="w")
    assert held_c["vfr"]["value"] == 0.5


def test_fewer_candidates_are_a_prefix_and_no_candidate_leaves_the_criterion_unchanged(world):
    found = _search(world)
    order = [r["requested"] for r in found["criteria"]["helpful"]["rows"]]
    small = _search(world, n=2)
    assert [r["requested"] for r in small["criteria"]["helpful"]["rows"]] == order[:2]
    for d in (0.0, math.inf):
        first = operating_point(found, world["rs"], d, 1)
        kept = [c for c in found["criteria"]["helpful"]["candidates"] if c["index"] < 1]
        if not kept:
            assert first["changed"] == [] and first["rubric"].get("helpful").description == ORIGINAL


def test_criterion_with_no_verified_false_accept_is_not_sent_to_the_refiner(world):
    w = dict(world)
    w["settings"] = RepairSettings.of({"n_attacks": 4, "operators": list(OPS), "max_operators": 1}, {"runs": 2, "n_attacks": 4})
    clean = RubricSet(name="c", source="imported", criteria=(
        Criterion(id="helpful", description=f"{ORIGINAL} {MARK['abstract_to_observable']}"),))
    before = scripted_provider().calls[w["roles"]["refiner"].model.split("/", 1)[1]]
    found = search(clean, pool=w["pool"], dev=w["dev"], ctx=w["ctx"], refiner=w["roles"]["refiner"], n_candidates=3,
                   settings=w["settings"], source="c")
    entry = found["criteria"]["helpful"]
    assert entry["original"]["vfr"] == 0.0 and "VFR_dev = 0" in entry["skipped"]
    assert scripted_provider().calls[w["roles"]["refiner"].model.split("/", 1)[1]] == before
    assert operating_point(found, clean, math.inf, 3)["changed"] == []


def test_select_rule_and_pareto_front_by_hand():
    orig = {"alpha": 0.6, "vfr": 0.5}
    cands = [{"index": 0, "alpha": 0.6, "vfr": 0.4}, {"index": 1, "alpha": 0.55, "vfr": 0.2},
             {"index": 2, "alpha": 0.7, "vfr": 0.5}, {"index": 3, "alpha": 0.5, "vfr": 0.3},
             {"index": 4, "alpha": None, "vfr": 0.1}]
    s0 = select(orig, cands, 0.0)
    assert s0["verdicts"] == {0: "pass", 1: "alpha_loss_above_delta", 2: "vfr_not_lower",
                              3: "alpha_loss_above_delta", 4: "alpha_undefined"}
    assert s0["chosen"]["index"] == 0
    s1 = select(orig, cands, 0.05)
    assert s1["chosen"]["index"] == 1 and {c["index"] for c in s1["frontier"]} == {0, 1}
    sinf = select(orig, cands, math.inf)
    # 3 is dominated by 1 (higher α, lower VFR); 4 has the lowest VFR
    assert {c["index"] for c in sinf["frontier"]} == {0, 1, 4} and sinf["chosen"]["index"] == 4
    assert select(orig, [], 0.0)["chosen"] is None
    assert [p["index"] for p in pareto_front([{"index": 0, "alpha": 0.5, "vfr": 0.2},
                                               {"index": 1, "alpha": 0.5, "vfr": 0.2}])] == [0, 1]
    with pytest.raises(ValueError):
        select(orig, cands, -0.1)


def test_checker_rules():
    c = Criterion(id="x", description="The response is accurate.")
    ok = Revision(operators=["do_not_reward"], description="The response is accurate. Do not reward confident tone.")
    assert check_candidate(c, ok, ("do_not_reward",), limits=_limits()) == []
    assert check_candidate(c, Revision(operators=["magic"], description="New text here."), ("do_not_reward",),
                           limits=_limits()) == ["unknown_operator"]
    assert check_candidate(c, Revision(operators=["max_score_cap"], description="New text here."),
                           ("do_not_reward",), limits=_limits()) == ["operator_not_requested"]
    assert check_candidate(c, Revision(operators=["do_not_reward"], description=" The response  is accurate. "),
                           ("do_not_reward",), limits=_limits()) == ["unchanged"]
    long = Revision(operators=["do_not_reward"], description=" ".join(["word"] * 151))
    assert "budget:total_words" in check_candidate(c, long, ("do_not_reward",), limits=_limits())
    prompt_specific = Revision(operators=["do_not_reward"], description="Answer this question about tax.")
    assert "budget:prompt_specific" in check_candidate(c, prompt_specific, ("do_not_reward",), limits=_limits())
    assert check_candidate(c, ok, ("do_not_reward",), limits=_limits(),
                           seen={" ".join(ok.description.split())}) == ["duplicate"]


def _limits():
    from rubriclab.rubrics import BudgetLimits
    return BudgetLimits()


def test_packets_count_every_kind_and_order_operators_by_failures(world):
    from rubriclab.audit import audit_adversarial, audit_reliability

    rel = audit_reliability(world["rs"], world["pool"], world["ctx"], runs=2, axes=("alpha", "flip"))
    adv = audit_adversarial(world["rs"], world["pool"], world["ctx"], n_attacks=4)
    p = failure_packets(["helpful"], rel, adv, world["pool"], per_kind=2)["helpful"]
    # 4 attacks all fooled and verified; 4 genuine responses at 8 ≥ τ; 4 pairs favouring the chosen
    assert p["counts"]["false_accept"] == 4 and p["counts"]["true_positive"] == 4 + 4
    assert p["counts"]["false_reject"] == 0 and p["counts"]["unstable"] == 0
    assert len(p["cases"]["false_accept"]) == 2 and p["cases"]["false_accept"][0]["origin"] == "adversarial"
    plan = plan_subsets(p, [("applicability_gate",), ("do_not_reward",), ("false_positive_anchors",),
                            ("decomposition",)])
    assert plan[0] in {("do_not_reward",), ("false_positive_anchors",)} and plan[-1] == ("decomposition",)
