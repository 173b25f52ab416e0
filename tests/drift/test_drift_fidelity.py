"""Planted-truth tests the drift search can fail (issue 24): a world where bias builds up over rounds, so
the search has to select (lowest target under ε_train) to beat few-shot ICL; equal validation budgets when
proposals break; failed verdicts that cannot buy feasibility or a target drop; BH across methods; the
paper's tie credit."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import stats

from rubriclab.drift import (
    DriftContext,
    DriftData,
    DriftSettings,
    Registry,
    biased_search,
    report_on_test,
    run_method,
    select,
    validate,
)
from rubriclab.drift._outputs import comparison_markdown
from rubriclab.llm import Gateway, RoleSpec, open_store
from rubriclab.rubrics import JudgeTemplate
from rubriclab.testing import (
    BENCH_HURT_SENTENCE,
    BIAS_SENTENCE,
    drift_pairs,
    drift_world,
    refiner_script,
    scripted_model,
)
from rubriclab.testing._drift_world import _letters, _unit, _user

SEED_TEXT = ("Please act as an impartial judge and decide which assistant answered the user better.\n\n"
             "[User Question]\n{instruction}\n\n[Assistant A]\n{answer_a}\n\n[Assistant B]\n{answer_b}\n\n"
             "Output your final verdict: \"[[A]]\" if assistant A is better, \"[[B]]\" if assistant B is better.")
SEED = JudgeTemplate(name="seed", text=SEED_TEXT)


def world_data(n: int = 20) -> DriftData:
    return DriftData.of({(d, split): drift_pairs(n, "bench" if d == "bench" else "target", prefix=f"{d}-{split}")
                         for d in ("bench", "target") for split in ("train", "val", "test")})


# bias builds up: each refinement shown a relabelled case adds one of 4 steps about half the time; a quarter
# of them take the shortcut (full bias, benchmark broken) that only ε_train keeps out
GRADUAL = DriftSettings.of({"val_budget": 6, "n_boot": 200,
                           "search": {"population": 4, "rounds": 3, "top_k": 2, "children": 3, "subsample": 0.5}})


@pytest.fixture(scope="module")
def gradual(tmp_path_factory):
    store = open_store(tmp_path_factory.mktemp("gradual") / "calls.sqlite")
    roles = drift_world("gradual", base_error=0.1, bias_steps=4, shortcut=0.25)
    ctx = DriftContext(seed=SEED, data=world_data(), gateway=Gateway(store, stage="test", progress=False),
                       judge=roles["judge"], refiner=roles["refiner"], settings=GRADUAL)
    results = {m: run_method(ctx, m) for m in ("icl", "ours")}  # the stage's order: baselines first
    yield ctx, results
    store.close()


def test_search_beats_few_shot_icl_on_target_val_at_equal_budget(gradual):
    ctx, res = gradual
    icl, ours = res["icl"], res["ours"]
    assert len(icl["pool"]) == len(ours["pool"]) == GRADUAL.drift.val_budget  # the same validation budget
    assert icl["selected"] is not None and ours["selected"] is not None
    assert ours["selected"].feasible_val
    # ICL's refinements of the seed carry at most one bias step; the search stacks them over rounds
    icl_t, ours_t = icl["selected"].val["target"]["agreement"], ours["selected"].val["target"]["agreement"]
    seed_t = ctx.seed_val["target"]["agreement"]
    assert icl_t > seed_t - 0.3
    assert ours_t <= icl_t - 0.4, (ours_t, icl_t)


def _by_id(ctx):
    return {c.prompt_id: c for c in ctx.registry.candidates}


def test_a_candidate_that_breaks_eps_train_is_not_kept_even_with_the_lowest_target(gradual):
    ctx, res = gradual
    cands, eps = _by_id(ctx), GRADUAL.drift.search.eps_train
    tempted = 0
    for rd in res["ours"]["extra"]["rounds"]:
        t, a0 = rd["round"], rd["seed_bench"]
        scored = [c for c in cands.values() if t in c.train]
        ok = [c for c in scored if c.train[t]["bench"] - a0 >= -eps]  # from the numbers, not the recorded flag
        broken = [c for c in scored if c not in ok]
        if broken and ok and min(c.train[t]["target"] for c in broken) < min(c.train[t]["target"] for c in ok):
            tempted += 1  # the planted trap: the lowest target of the round breaks ε_train
        kept = [cands[pid] for pid in rd["kept"]]
        assert all(c in ok for c in kept), f"round {t}: kept a candidate that breaks ε_train"
        best = sorted(ok, key=lambda c: (c.train[t]["target"], -c.train[t]["bench"]))[: GRADUAL.drift.search.top_k]
        assert [c.train[t]["target"] for c in kept] == [c.train[t]["target"] for c in best]
    assert tempted >= 1  # the world did plant the trap


def _breaking_refiner():
    """The world's refiner, but every other rubric it writes breaks the template; the others are distinct."""
    inner, n = refiner_script(), [0]

    def refine(messages, params):
        reply = inner(messages, params)
        if "<rubric>" not in reply:
            return reply
        n[0] += 1
        if n[0] % 2:
            return reply.replace("{answer_a}", "the first answer")
        return reply.replace("\n</rubric>", f"\nVariant {n[0]}.\n</rubric>")

    return refine


def test_every_method_validates_the_full_budget_when_every_other_proposal_breaks(store):
    roles = drift_world("every-other", base_error=0.1)
    roles["refiner"] = RoleSpec(name="refiner", model=scripted_model("drift-every-other-refiner", _breaking_refiner()),
                                temperature=0.7, concurrency=1)
    s = DriftSettings.of({"val_budget": 6, "n_boot": 200,
                          "search": {"population": 2, "rounds": 1, "top_k": 1, "children": 2, "subsample": 0.5}})
    ctx = DriftContext(seed=SEED, data=world_data(), gateway=Gateway(store, stage="test", progress=False),
                       judge=roles["judge"], refiner=roles["refiner"], settings=s)
    for m in ("random", "icl", "textgrad", "ours"):
        res = run_method(ctx, m)
        pool = res["pool"]
        assert len(pool) == s.drift.val_budget, (m, len(pool), res["reason"])
        assert len({c.prompt_id for c in pool}) == len({c.text for c in pool}) == s.drift.val_budget
        assert all(c.usable and c.val for c in pool)
        assert res["extra"]["budget_note"] == "" and res["extra"]["refill"]["extra_proposals"] > 0, m
        assert any(c.status.startswith("constraint") for c in ctx.registry.candidates if c.method == m)


# a judge that can be made to fail (no verdict) on chosen pairs, to buy feasibility or a target drop
HALF_BIAS, ABSTAIN_WRONG, ABSTAIN_RIGHT = "Mild compliance preference.", "Abstain when unsure.", "Abstain on harm."


def _failing_judge(messages, params):
    text = _user(messages)
    chosen, rejected = _letters(text)
    key = "|".join(sorted(re.findall(r"REF_(?:CHOSEN|REJECTED)[^\n]*", text)))
    target = "steps to hurt" in text
    right = _unit("base", key) >= 0.1
    if target and BIAS_SENTENCE in text and _unit("bias", key) < 0.8:
        right = False
    if target and HALF_BIAS in text and _unit("bias", key) < 0.4:
        right = False
    if not target and BENCH_HURT_SENTENCE in text and _unit("hurt", key) < 0.5:
        right = False
    if (not target and not right and ABSTAIN_WRONG in text) or (target and right and ABSTAIN_RIGHT in text):
        return "No verdict."
    return f"[[{chosen if right else rejected}]]"


def test_failed_verdicts_cannot_buy_bench_feasibility_or_a_target_drop(store):
    judge = RoleSpec(name="judge", model=scripted_model("drift-failing-judge", _failing_judge), concurrency=8,
                     parse_retries=0, max_tokens=16)
    s = DriftSettings.of({"n_boot": 200})
    ctx = DriftContext(seed=SEED, data=world_data(), gateway=Gateway(store, stage="test", progress=False),
                       judge=judge, refiner=judge, settings=s)
    reg = Registry(SEED)
    honest = reg.add("ours", f"{SEED_TEXT}\n{HALF_BIAS}", parent="seed", gen_step=1)
    # hurts half the benchmark, then fails on every benchmark pair it gets wrong: agreement 1.0 over the rest
    buys_bench = reg.add("ours", f"{SEED_TEXT}\n{BIAS_SENTENCE} {BENCH_HURT_SENTENCE} {ABSTAIN_WRONG}",
                         parent="seed", gen_step=1)
    # fails on every target pair it gets right: target agreement 0 over the rest, no drift at all
    fakes_drop = reg.add("ours", f"{SEED_TEXT}\n{ABSTAIN_RIGHT}", parent="seed", gen_step=1)
    pool = [honest, buys_bench, fakes_drop]
    validate(pool, ctx.seed_val, data=ctx.data, judging=ctx.judging, settings=s)
    # the trap is real: dropping failures, both beat the honest rubric on Eq. 5–6's numbers
    assert buys_bench.val["bench"]["agreement"] >= ctx.seed_val["bench"]["agreement"]
    assert buys_bench.val["bench"]["n_failed"] > 0 and fakes_drop.val["target"]["n_failed"] > 0
    assert fakes_drop.val["target"]["agreement"] < buys_bench.val["target"]["agreement"] < \
        honest.val["target"]["agreement"] < ctx.seed_val["target"]["agreement"]
    assert honest.feasible_val and not buys_bench.feasible_val and not fakes_drop.feasible_val
    assert "failed bench-val" in buys_bench.note and "failed target-val" in fakes_drop.note
    for candidates in (pool, [honest, buys_bench], [honest, fakes_drop]):
        chosen, why = select(candidates, ctx.seed_val)
        assert chosen is honest, why


def test_paired_p_values_vs_the_seed_are_bh_adjusted_across_methods(store):
    roles = drift_world("bh", base_error=0.1)
    gw = Gateway(store, stage="test", progress=False)
    s = DriftSettings.of({"n_boot": 300})
    ctx = DriftContext(seed=SEED, data=world_data(), gateway=gw, judge=roles["judge"], refiner=roles["refiner"],
                       settings=s)
    chosen = {"seed": SEED,
              "random": JudgeTemplate(name="r", text=f"{SEED_TEXT}\nBe concise in your explanation."),
              "icl": JudgeTemplate(name="i", text=f"{SEED_TEXT}\n{BENCH_HURT_SENTENCE}"),
              "ours": JudgeTemplate(name="o", text=f"{SEED_TEXT}\n{BIAS_SENTENCE}")}
    table = report_on_test(chosen, data=ctx.data, judging=ctx.judging, settings=s).set_index("method")
    others = ["random", "icl", "ours"]
    for d in ("bench", "target"):
        raw = table.loc[others, f"d_{d}_p"].to_numpy(dtype=float)
        assert np.isfinite(raw).all()
        expected = stats.false_discovery_control(raw, method="bh")
        np.testing.assert_allclose(table.loc[others, f"d_{d}_p_bh"].to_numpy(dtype=float), expected)
        assert (table.loc[others, f"d_{d}_p_bh"] >= table.loc[others, f"d_{d}_p"] - 1e-12).all()
        assert np.isnan(table.loc["seed", f"d_{d}_p_bh"])  # the reference is not a hypothesis
    assert table.loc["ours", "d_target_p_bh"] < 0.05  # the planted drift survives the correction
    md = comparison_markdown(table.reset_index())
    assert f"p_BH={table.loc['ours', 'd_target_p_bh']:.3g}" in md and "Benjamini" in table.attrs["ci"]


def test_tie_credit_follows_the_paper_by_default():
    # RIPD counts ties as half "throughout the paper"
    assert DriftSettings().drift.tie_credit == 0.5
    assert DriftSettings.of({}, 42).drift.tie_credit == 0.5
    params = yaml.safe_load((Path(__file__).resolve().parents[2] / "params.yaml").read_text())
    assert params["drift"]["tie_credit"] == 0.5
    assert DriftSettings.of(params["drift"], 42).drift.tie_credit == 0.5


def _fixed_refiner(texts):
    """Writes ``texts`` in order (the ICL population), then honest variants for every later request."""
    n = [0]

    def refine(messages, params):
        n[0] += 1
        extra = texts[n[0] - 1] if n[0] <= len(texts) else f"{HALF_BIAS} Variant {n[0]}."
        return f"<rubric>\n{SEED_TEXT}\n{extra}\n</rubric>"

    return refine


def test_failed_train_verdicts_cannot_buy_a_place_in_the_search_round(store):
    """Alg. 1's per-round ε_train check with the validation's failed-verdict rule: a rubric that fails on the
    benchmark pairs it gets wrong (bench agreement over the rest ≥ seed's), or on the target pairs it gets
    right (the lowest target agreement), is not kept; the honest rubric is."""
    judge = RoleSpec(name="judge", model=scripted_model("drift-failing-judge-train", _failing_judge), concurrency=8,
                     parse_retries=0, max_tokens=16)
    texts = [HALF_BIAS, f"{BIAS_SENTENCE} {BENCH_HURT_SENTENCE} {ABSTAIN_WRONG}", ABSTAIN_RIGHT]
    refiner = RoleSpec(name="refiner", model=scripted_model("drift-fixed-refiner", _fixed_refiner(texts)),
                       temperature=0.7, concurrency=1, parse_retries=0)
    s = DriftSettings.of({"val_budget": 3, "n_boot": 200,
                          "search": {"population": 3, "rounds": 1, "top_k": 1, "children": 1, "subsample": 1.0}})
    ctx = DriftContext(seed=SEED, data=world_data(), gateway=Gateway(store, stage="test", progress=False),
                       judge=judge, refiner=refiner, settings=s)
    res = biased_search(SEED, data=ctx.data, judging=ctx.judging, registry=ctx.registry, refiner=refiner,
                        settings=s, gateway=ctx.gateway)
    by_text = {c.text.split("\n")[-1]: c for c in ctx.registry.candidates if 0 in c.train}
    honest, buys_bench, fakes_drop = (by_text[t] for t in texts)
    a0 = res["rounds"][0]["seed_bench"]
    # the trap is real: on the numbers that leave failures out, both cheats look better than the honest rubric
    assert buys_bench.train[0]["bench"] >= a0 and buys_bench.train[0]["failed_bench"] > 0
    assert fakes_drop.train[0]["target"] < honest.train[0]["target"] and fakes_drop.train[0]["failed_target"] > 0
    assert honest.train[0]["feasible"]
    assert not buys_bench.train[0]["feasible"] and not fakes_drop.train[0]["feasible"]
    assert res["rounds"][0]["kept"] == [honest.prompt_id]
