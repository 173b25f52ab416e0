"""The baselines of seed 003 (App. B.1) under the same validation budget as the search: random search
(guideline-constrained generation, no feedback), few-shot ICL, and a TextGrad-style optimiser of the
rewriting instruction.

TextGrad runs through the project's gateway (one door to models, call store, ledger) rather than the
``textgrad`` package, whose engines call providers themselves. Its loop, per step: rewrite the seed with the
current instruction (the optimised variable) → judge the rewrite on a mini-batch of ``tg_bench`` benchmark and
``tg_target`` target train pairs (not restricted to errors; target references shown flipped, the attack's
objective) → a critic's textual gradient on the instruction → the optimiser applies it. Each step's rubric is
validated; after ``tg_rollback`` consecutive steps that fail the benchmark constraint on val, the instruction
reverts to the best one so far (lowest target-val among feasible steps) and optimisation resumes.

Every method validates exactly ``val_budget`` distinct usable candidates: a proposal that breaks a hard
constraint or repeats a text costs no validation and is replaced, up to ``refill × val_budget`` extra proposals
(random search and ICL: more samples; TextGrad: more steps); a method left short by that cap says so.
"""

from __future__ import annotations

import random
from typing import Any

from rubriclab.data import stable_hash
from rubriclab.drift._engine import Candidate, DriftData, DriftSettings, Judging, Registry, run_refiner
from rubriclab.drift._refine import (
    INITIAL_INSTRUCTION,
    feedback_request,
    guidelines_request,
    minibatch_cases,
    random_request,
    rewrite_request,
    update_request,
)
from rubriclab.drift._search import _live, icl_candidates, refill_pool
from rubriclab.drift._select import validate
from rubriclab.llm import Gateway, RoleSpec
from rubriclab.rubrics import JudgeTemplate


def random_search(seed: JudgeTemplate, *, registry: Registry, refiner: RoleSpec, settings: DriftSettings,
                  gateway: Gateway, templates_dir: str | None = None) -> dict[str, Any]:
    """``val_budget`` guideline-constrained variants of the seed (guidelines distilled from it once)."""
    [g] = gateway.run([guidelines_request(seed, refiner, templates_dir=templates_dir)], desc="random: guidelines")
    if not g.ok:
        return {"pool": [], "note": f"guideline distillation failed: {g.parse_error or g.error}"}

    def variants(start: int, n: int) -> list[Candidate]:
        requests = [random_request(seed, g.value, refiner, sample_index=i, templates_dir=templates_dir)
                    for i in range(start, start + n)]
        results = run_refiner(gateway, requests, "random: variants")
        return [registry.from_result("random", res, parent="seed", gen_step=0) for res in results]

    first = variants(0, settings.drift.val_budget)
    pool, refill = refill_pool(first, lambda start, n: variants(settings.drift.val_budget + start, n), settings, registry)
    return {"pool": pool, "guidelines": g.value, "refill": refill}


def few_shot_icl(seed: JudgeTemplate, *, data: DriftData, judging: Judging, registry: Registry, refiner: RoleSpec,
                 settings: DriftSettings, gateway: Gateway, templates_dir: str | None = None) -> dict[str, Any]:
    """``val_budget`` few-shot ICL refinements of the seed (the search's first ``population`` are the same
    requests, so they come from the call store)."""

    def refinements(start: int, n: int) -> list[Candidate]:
        return icl_candidates(seed, n, method="icl", data=data, judging=judging, registry=registry, refiner=refiner,
                              settings=settings, gateway=gateway, templates_dir=templates_dir, start=start)

    first = refinements(0, settings.drift.val_budget)
    pool, refill = refill_pool(first, lambda start, n: refinements(settings.drift.val_budget + start, n), settings,
                               registry)
    return {"pool": pool, "refill": refill}


def textgrad(seed: JudgeTemplate, *, data: DriftData, judging: Judging, registry: Registry, refiner: RoleSpec,
             settings: DriftSettings, gateway: Gateway, seed_val: dict[str, Any],
             templates_dir: str | None = None) -> dict[str, Any]:
    """TextGrad-style optimisation of the rewriting instruction: a step per rewrite until ``val_budget``
    distinct usable rewrites were validated (at most ``refill × val_budget`` steps more)."""
    s = settings
    instruction = best_instruction = INITIAL_INSTRUCTION
    best_target = float("inf")
    streak = 0
    steps: list[dict[str, Any]] = []
    pool: list[Candidate] = []
    by_id = data.by_id
    cfg, tg = s.drift, s.drift.textgrad
    max_steps = cfg.val_budget * (1 + cfg.refill)
    step = -1
    while len(pool) < cfg.val_budget and step + 1 < max_steps:
        step += 1
        [res] = gateway.run([rewrite_request(seed, instruction, refiner, sample_index=step, tag=("rewrite", step),
                                             templates_dir=templates_dir)], desc=f"textgrad step {step + 1}: rewrite")
        cand = registry.from_result("textgrad", res, parent="seed", gen_step=step)
        live = _live([cand], registry)
        record = {"step": step, "prompt_id": cand.prompt_id, "status": cand.status, "instruction": instruction,
                  "rolled_back": False}
        feasible = False
        if live:
            c = live[0]
            if c not in pool:
                pool.append(c)
            validate([c], seed_val, data=data, judging=judging, settings=s)
            feasible = bool(c.feasible_val)
            if feasible and c.val["target"]["agreement"] < best_target:
                best_target, best_instruction = c.val["target"]["agreement"], instruction
            rubric_text = c.text
        else:
            rubric_text = seed.text
        record["feasible_val"] = feasible
        streak = 0 if feasible else streak + 1
        if streak >= tg.rollback:
            instruction, streak = best_instruction, 0
            record["rolled_back"] = True
            steps.append(record)
            continue
        rng = random.Random(stable_hash("textgrad-batch", s.seed, step))
        bench, target = data.get("bench", "train"), data.get("target", "train")
        batch = rng.sample(bench, min(tg.bench_batch, len(bench))) + rng.sample(target, min(tg.target_batch, len(target)))
        rows = judging.rows({"step": JudgeTemplate(name="step", text=rubric_text)}, batch,
                            desc=f"textgrad step {step + 1}: mini-batch")
        cases = minibatch_cases(rows, by_id, data_seed=s.seed, bench_domain="bench")
        [fb] = gateway.run([feedback_request(instruction, rubric_text, cases, refiner, sample_index=step,
                                             templates_dir=templates_dir, max_chars=cfg.max_chars)],
                           desc=f"textgrad step {step + 1}: feedback")
        if fb.ok:
            [up] = gateway.run([update_request(instruction, fb.value, refiner, sample_index=step,
                                               templates_dir=templates_dir)], desc=f"textgrad step {step + 1}: update")
            if up.ok:
                instruction = up.value
            else:
                record["update_failed"] = up.parse_error or up.error
        else:
            record["feedback_failed"] = fb.parse_error or fb.error
        steps.append(record)
    extra = max(0, step + 1 - cfg.val_budget)
    refill = {"extra_proposals": extra, "cap": cfg.refill * cfg.val_budget, "short": len(pool) < cfg.val_budget}
    return {"pool": pool, "steps": steps, "final_instruction": instruction, "refill": refill}
