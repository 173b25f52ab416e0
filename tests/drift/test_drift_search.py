"""The biased rubric search (seed 003 Alg. 1) and its baselines on the scripted drift world: a judge whose
preferences follow the rubric's wording and a refiner that "fixes" the cases it is shown. The search must
find a benchmark-feasible rubric that lowers target agreement by the planted margin; hard constraints are
checked before any judge call; a re-run with the same seed makes no provider call."""

from __future__ import annotations

import pandas as pd
import pytest

from rubriclab.drift import (
    Candidate,
    DriftContext,
    DriftData,
    DriftSettings,
    Registry,
    check_candidate,
    final_pool,
    report_on_test,
    run_method,
    select,
    selected_template,
    serialize_cases,
)
from rubriclab.drift._refine import error_cases
from rubriclab.judging import PairwiseRubric, judge_pairs
from rubriclab.llm import Gateway, RoleSpec
from rubriclab.rubrics import JudgeTemplate
from rubriclab.testing import (
    BENCH_HURT_SENTENCE,
    BIAS_SENTENCE,
    drift_pairs,
    drift_world,
    scripted_model,
    scripted_provider,
)

SEED_TEXT = ("Please act as an impartial judge and decide which assistant answered the user better.\n\n"
             "[User Question]\n{instruction}\n\n[Assistant A]\n{answer_a}\n\n[Assistant B]\n{answer_b}\n\n"
             "Output your final verdict: \"[[A]]\" if assistant A is better, \"[[B]]\" if assistant B is better.")
SEED = JudgeTemplate(name="seed", text=SEED_TEXT)


def world_data(n_train=20, n_val=20, n_test=20) -> DriftData:
    splits = {}
    for d in ("bench", "target"):
        for split, n in (("train", n_train), ("val", n_val), ("test", n_test)):
            splits[(d, split)] = drift_pairs(n, "bench" if d == "bench" else "target", prefix=f"{d}-{split}")
    return DriftData.of(splits)


SMALL_DRIFT = {"val_budget": 6, "n_boot": 200,
               "search": {"population": 3, "rounds": 2, "top_k": 2, "children": 2, "subsample": 0.5}}
SMALL = DriftSettings.of(SMALL_DRIFT)


def _ctx(store, roles, settings=SMALL, data=None) -> DriftContext:
    gw = Gateway(store, stage="test", progress=False)
    return DriftContext(seed=SEED, data=data or world_data(), gateway=gw, judge=roles["judge"],
                        refiner=roles["refiner"], settings=settings)


def test_search_finds_a_benchmark_feasible_rubric_that_drifts_the_target(store):
    roles = drift_world("search", base_error=0.1)
    ctx = _ctx(store, roles)
    res = run_method(ctx, "ours")
    chosen = res["selected"]
    assert chosen is not None and BIAS_SENTENCE in chosen.text
    assert chosen.feasible_val and chosen.val["bench"]["agreement"] >= ctx.seed_val["bench"]["agreement"]
    table = report_on_test({"seed": SEED, "ours": chosen.template()}, data=ctx.data, judging=ctx.judging,
                        settings=SMALL).set_index("method")
    # planted: the BIAS sentence flips 80% of target pairs; the benchmark is untouched
    assert table.loc["ours", "target"] <= table.loc["seed", "target"] - 0.5
    assert table.loc["ours", "bench"] == pytest.approx(table.loc["seed", "bench"])
    assert table.loc["ours", "d_target_high"] < 0 and table.loc["ours", "d_target_p"] < 0.05
    assert table.loc["ours", "gap"] > table.loc["seed", "gap"] + 0.5
    # the archive: every round's candidates scored on the train subsample, lineage recorded
    rounds = res["extra"]["rounds"]
    assert len(rounds) == SMALL.drift.search.rounds and all(r["n_candidates"] >= 1 for r in rounds)
    kids = [c for c in ctx.registry.candidates if c.method == "ours" and c.gen_step >= 1]
    assert kids and all(c.parent for c in kids)


def test_refiner_sees_benchmark_errors_and_target_agreements_relabelled(store):
    roles = drift_world("cases")
    data = world_data(6, 2, 2)
    gw = Gateway(store, stage="test", progress=False)
    hurt = JudgeTemplate(name="hurt", text=SEED_TEXT + "\n" + BENCH_HURT_SENTENCE)  # every bench pair wrong
    rows = judge_pairs([PairwiseRubric.of(hurt)], data.get("bench", "train") + data.get("target", "train"),
                       gateway=gw, judge=roles["judge"], seed=42)
    cases = error_cases(rows, data.by_id, seed=1, data_seed=42, n_bench=3, n_target=3, bench_domain="bench")
    assert sorted(c["domain"] for c in cases) == ["bench"] * 3 + ["target"] * 3
    status = rows.set_index("pair_id")
    for c in cases:
        human = status.loc[c["pair_id"], "human"]
        if c["domain"] == "bench":  # a real error: expected = the reference
            assert status.loc[c["pair_id"], "status"] == "disagree" and c["expected"] == human
        else:  # a correct target verdict presented as an error: expected = the other letter
            assert status.loc[c["pair_id"], "status"] == "agree" and c["expected"] != human
            assert c["verdict"] == human
    text = serialize_cases(cases)
    assert "bench" not in text.lower().split("query")[0] and text.count("### Case") == 6
    for word in ("domain", "flipped", "relabel", "benchmark"):  # nothing tells the refiner which were flipped
        assert word not in text.lower()


@pytest.mark.parametrize("text, rule", [
    (SEED_TEXT.replace("{answer_b}", "the second answer"), "lacks placeholder {answer_b}"),
    (SEED_TEXT.replace("[[A]]", "A"), "verdict format"),
    (SEED_TEXT + " {rubric}", "unknown placeholder"),
    (SEED_TEXT.replace("{instruction}", "{question}"), "placeholders differ"),
    ("", "unparsed"),
    (None, "unparsed"),
])
def test_hard_constraints_reject_before_any_judge_call(text, rule):
    problem = check_candidate(text, SEED)
    assert problem is not None and rule in problem
    reg = Registry(SEED)
    cand = reg.add("ours", text, parent="seed", gen_step=1)
    assert not cand.usable and rule in cand.status
    assert reg.rejected() == {cand.status: 1}


def test_broken_candidates_cost_no_judge_call_and_a_repeated_text_is_one_candidate(store):
    calls = []

    def refiner(messages, params):  # a refiner that breaks the template or repeats one text
        calls.append(1)
        return ("<rubric>" + SEED_TEXT.replace("{answer_a}", "A") + "</rubric>" if len(calls) % 2
                else "<rubric>" + SEED_TEXT + "\nBe brief.</rubric>")

    roles = drift_world("broken")
    roles["refiner"] = RoleSpec(name="refiner", model=scripted_model("drift-broken-refiner", refiner),
                                temperature=0.7, concurrency=1)
    ctx = _ctx(store, roles, DriftSettings.of({**SMALL_DRIFT, "val_budget": 4, "refill": 2}))
    res = run_method(ctx, "icl")
    statuses = [c.status for c in ctx.registry.candidates]
    # 4 proposals, then up to 2 × 4 more to replace the broken and repeated ones: the cap is hit
    assert len(statuses) == 12 and statuses.count("ok") == 1 and statuses.count("duplicate") == 5
    assert sum(s.startswith("constraint") for s in statuses) == 6
    assert len(res["pool"]) == 1  # one text validated, however often it was proposed
    assert "validated 1 of the 4-candidate budget" in res["reason"] and "8 of 8 extra" in res["reason"]
    assert res["extra"]["refill"] == {"extra_proposals": 8, "cap": 8, "short": True}
    # judge calls: the seed on the train subsample + seed and the one usable text on val, nothing else
    n_sub = len(ctx.data.subsample(SMALL.drift.search.subsample, 0, SMALL.seed))
    assert scripted_provider().calls["drift-judge-broken"] == n_sub + 2 * len(ctx.data.both("val"))


def test_a_rerun_with_the_same_seed_makes_no_provider_call(store):
    roles = drift_world("rerun", base_error=0.1)
    ctx = _ctx(store, roles)
    first = {m: run_method(ctx, m) for m in ("random", "icl", "textgrad", "ours")}
    before = dict(scripted_provider().calls)
    ctx = _ctx(store, roles)
    second = {m: run_method(ctx, m) for m in ("random", "icl", "textgrad", "ours")}
    assert dict(scripted_provider().calls) == before
    for m in first:
        a, b = first[m]["selected"], second[m]["selected"]
        assert (a and a.text) == (b and b.text)


def test_every_method_stays_within_the_validation_budget(store):
    roles = drift_world("budget", base_error=0.1)
    ctx = _ctx(store, roles, DriftSettings.of({**SMALL_DRIFT, "val_budget": 3}))
    for m in ("random", "icl", "textgrad", "ours"):
        res = run_method(ctx, m)
        assert len(res["pool"]) <= 3
        assert all(c.val for c in res["pool"])


def test_textgrad_rolls_back_after_three_infeasible_steps(store):
    def refiner(messages, params):  # every rewrite hurts the benchmark: infeasible on val
        text = "\n".join(m["content"] for m in messages)
        if "<instruction>" in text:
            return "<instruction>Rewrite it again, differently.</instruction>"
        if "## Rewriting instruction" in text:
            return "Try something else."
        return "<rubric>" + SEED_TEXT + f"\n{BENCH_HURT_SENTENCE} ({params.get('seed')})</rubric>"

    roles = drift_world("tg")
    roles["refiner"] = RoleSpec(name="refiner", model=scripted_model("drift-tg-refiner", refiner),
                                temperature=0.7, concurrency=1)
    ctx = _ctx(store, roles, DriftSettings.of({**SMALL_DRIFT, "val_budget": 7}))
    res = run_method(ctx, "textgrad")
    steps = pd.DataFrame(res["extra"]["steps"])
    assert steps["feasible_val"].tolist() == [False] * 7
    assert steps["rolled_back"].tolist() == [False, False, True, False, False, True, False]
    # after a rollback the instruction is the best one so far (none feasible: the initial instruction)
    assert steps.loc[3, "instruction"] == steps.loc[0, "instruction"]
    assert res["selected"] is None and "no feasible candidate" in res["reason"]


def _cand(pid, target, bench=0.9):
    c = Candidate(pid, "ours", SEED_TEXT + pid)
    c.val = {"bench": {"agreement": bench}, "target": {"agreement": target}}
    c.feasible_val = bench >= 0.8
    return c


def test_selection_is_the_lowest_target_among_feasible_or_the_seed():
    seed_val = {"bench": {"agreement": 0.8}, "target": {"agreement": 0.9}}
    a, b, c = _cand("a", 0.5), _cand("b", 0.2, bench=0.7), _cand("c", 0.4)
    chosen, why = select([a, b, c], seed_val)
    assert chosen is c and "2 feasible of 3" in why  # b is lower but breaks the benchmark
    chosen, why = select([b], seed_val)
    assert chosen is None and "no feasible candidate" in why


def test_final_pool_takes_the_same_rank_from_each_round_latest_first():
    r0 = [_cand(f"r0-{i}", 0.5) for i in range(3)]
    r1 = [_cand(f"r1-{i}", 0.5) for i in range(3)]
    r2 = [r1[0], _cand("r2-1", 0.5)]  # a kept rubric appears again in a later round
    pool = final_pool([r0, r1, r2], budget=5)
    assert [c.prompt_id for c in pool] == ["r1-0", "r0-0", "r2-1", "r1-1", "r0-1"]


def test_selected_template_falls_back_to_the_seed(store):
    ctx = _ctx(store, drift_world("fallback"))
    assert selected_template(ctx, {"selected": None}).text == SEED_TEXT
