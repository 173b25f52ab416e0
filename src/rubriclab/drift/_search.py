"""Biased rubric search (seed 003 Alg. 1, App. B.2) and its few-shot ICL initial population.

Round t: judge the seed R0 and every candidate of G_t on a fresh seeded ``subsample`` of both train splits;
keep the feasible ones (``a_bench,i − a_bench,0 ≥ −ε_train``), the top k by lowest target agreement, and give
each kept rubric ``children`` refined children, each from independently sampled asymmetric error cases (its
benchmark disagreements, and its target agreements shown as errors). G_{t+1} = kept ∪ children. Every
candidate goes to the archive. The final validation pool takes the same number of top-ranked rubrics from
each round, later rounds first (the last round's children, never scored on train, count as the latest), until
the validation budget is reached. When invalid or repeated proposals leave fewer distinct usable rubrics than
the budget, the last round's kept rubrics get further children (up to ``refill × val_budget`` more proposals;
the same rule refills every baseline), so every method validates the same number of candidates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rubriclab.data import stable_hash
from rubriclab.drift._engine import Candidate, DriftData, DriftSettings, Judging, Registry, rank_key, run_refiner
from rubriclab.drift._refine import error_cases, refine_request
from rubriclab.llm import Gateway, RoleSpec
from rubriclab.rubrics import JudgeTemplate


def icl_candidates(seed: JudgeTemplate, n: int, *, method: str, data: DriftData, judging: Judging,
                   registry: Registry, refiner: RoleSpec, settings: DriftSettings, gateway: Gateway,
                   templates_dir: str | None = None, start: int = 0) -> list[Candidate]:
    """Few-shot ICL: ``n`` refinements of the seed (numbered from ``start``), each from its own sample of
    asymmetric error cases taken from the seed's judgments on the round-0 train subsample."""
    cfg = settings.drift
    sub = data.subsample(cfg.search.subsample, 0, settings.seed)
    rows = judging.rows({"seed": seed}, sub, desc="seed on train subsample")
    by_id = data.by_id
    requests = []
    for i in range(start, start + n):
        cases = error_cases(rows, by_id, seed=stable_hash("icl-cases", settings.seed, i), data_seed=settings.seed,
                            n_bench=cfg.cases.bench, n_target=cfg.cases.target, bench_domain="bench")
        requests.append(refine_request(seed.text, cases, seed, refiner, sample_index=i, tag=i,
                                       templates_dir=templates_dir, max_chars=cfg.max_chars))
    results = run_refiner(gateway, requests, f"{method}: few-shot ICL refinements")
    return [registry.from_result(method, res, parent="seed", gen_step=0) for res in results]


def biased_search(seed: JudgeTemplate, *, data: DriftData, judging: Judging, registry: Registry, refiner: RoleSpec,
                  settings: DriftSettings, gateway: Gateway, templates_dir: str | None = None,
                  method: str = "ours") -> dict[str, Any]:
    """Run Alg. 1; return ``{"rounds": [...], "pool": [Candidate, ...]}`` (pool: the validation candidates)."""
    s, cfg, q = settings, settings.drift, settings.drift.search
    population = icl_candidates(seed, q.population, method=method, data=data, judging=judging, registry=registry,
                                refiner=refiner, settings=s, gateway=gateway, templates_dir=templates_dir)
    current = _live(population, registry)
    rounds: list[dict[str, Any]] = []
    ranked_by_round: list[list[Candidate]] = []
    by_id = data.by_id
    for t in range(q.rounds):
        sub = data.subsample(q.subsample, t, s.seed)
        named = {"seed": seed, **{c.prompt_id: c.template() for c in current}}
        rows = judging.rows(named, sub, desc=f"{method}: round {t + 1}/{q.rounds} on train subsample")
        base = judging.scores(rows[rows["rubric"] == "seed"])
        a0 = base["bench"]["agreement"]
        for c in current:
            sc = judging.scores(rows[rows["rubric"] == c.prompt_id])
            # ε_train (Alg. 1) and, as at validation, no more failed verdicts than the seed's on these pairs:
            # agreement leaves failures out, so failing would otherwise buy feasibility or a target drop
            fails_more = any(sc[d]["n_failed"] > base[d]["n_failed"] for d in ("bench", "target"))
            c.train[t] = {"bench": sc["bench"]["agreement"], "target": sc["target"]["agreement"],
                          "n_bench": sc["bench"]["n"], "n_target": sc["target"]["n"],
                          "failed_bench": sc["bench"]["n_failed"], "failed_target": sc["target"]["n_failed"],
                          "feasible": bool(sc["bench"]["agreement"] - a0 >= -q.eps_train and not fails_more)}
        feasible = [c for c in current if c.train[t]["feasible"]]
        kept = sorted(feasible, key=lambda c: rank_key(c, t))[: q.top_k]
        ranked_by_round.append(kept + sorted([c for c in current if c not in kept], key=lambda c: rank_key(c, t)))
        requests, parents = [], []
        for c in kept:
            c_rows = rows[rows["rubric"] == c.prompt_id]
            for j in range(q.children):
                cases = error_cases(c_rows, by_id, seed=stable_hash("children", s.seed, t, c.prompt_id, j),
                                    data_seed=s.seed, n_bench=cfg.cases.bench, n_target=cfg.cases.target,
                                    bench_domain="bench")
                requests.append(refine_request(c.text, cases, seed, refiner, sample_index=j, tag=(c.prompt_id, j),
                                               templates_dir=templates_dir, max_chars=cfg.max_chars))
                parents.append(c.prompt_id)
        results = run_refiner(gateway, requests, f"{method}: round {t + 1} refinements")
        children = [registry.from_result(method, res, parent=p, gen_step=t + 1) for res, p in zip(results, parents)]
        rounds.append({"round": t, "n_subsample": len(sub), "seed_bench": a0,
                       "seed_target": base["target"]["agreement"], "n_candidates": len(current),
                       "n_feasible": len(feasible), "kept": [c.prompt_id for c in kept],
                       "n_children": len(children), "n_children_usable": sum(c.usable for c in children)})
        current = kept + [c for c in _live(children, registry) if c not in kept]
    last = [c for c in current if not c.train.get(q.rounds - 1)]  # the last round's children
    if last:
        ranked_by_round.append(last)
    pool = final_pool(ranked_by_round, cfg.val_budget)

    def more_children(start: int, n: int) -> list[Candidate]:
        # further children of the last round's kept rubrics (the seed's ICL refinements if none was kept)
        if not kept:
            return icl_candidates(seed, n, method=method, data=data, judging=judging, registry=registry,
                                  refiner=refiner, settings=s, gateway=gateway, templates_dir=templates_dir,
                                  start=q.population + start)
        requests, parents = [], []
        for i in range(start, start + n):
            c, j = kept[i % len(kept)], q.children + i // len(kept)
            cases = error_cases(rows[rows["rubric"] == c.prompt_id], by_id, seed=stable_hash("children", s.seed,
                                q.rounds - 1, c.prompt_id, j), data_seed=s.seed, n_bench=cfg.cases.bench,
                                n_target=cfg.cases.target, bench_domain="bench")
            requests.append(refine_request(c.text, cases, seed, refiner, sample_index=j, tag=(c.prompt_id, j),
                                           templates_dir=templates_dir, max_chars=cfg.max_chars))
            parents.append(c.prompt_id)
        results = run_refiner(gateway, requests, f"{method}: refill refinements")
        return [registry.from_result(method, res, parent=p, gen_step=q.rounds)
                for res, p in zip(results, parents)]

    pool, refill = refill_pool(pool, more_children, s, registry)
    return {"rounds": rounds, "pool": pool, "refill": refill}


def refill_pool(pool: list[Candidate], propose: Callable[[int, int], list[Candidate]], settings: DriftSettings,
                registry: Registry) -> tuple[list[Candidate], dict[str, Any]]:
    """Top ``pool`` up to ``val_budget`` distinct usable candidates with ``propose(start, n)`` batches (RIPD:
    "until the validation budget is reached"), at most ``refill × val_budget`` extra proposals; the record
    says how many were made and whether the cap left the pool short."""
    budget, cap = settings.drift.val_budget, settings.drift.refill * settings.drift.val_budget
    pool = _live(pool, registry)[:budget]
    made = 0
    while len(pool) < budget and made < cap:
        n = min(budget - len(pool), cap - made)
        pool = _live(pool + propose(made, n), registry)[:budget]
        made += n
    return pool, {"extra_proposals": made, "cap": cap, "short": len(pool) < budget}


def _live(cands: list[Candidate], registry: Registry) -> list[Candidate]:
    """Usable candidates, a duplicate standing for its first occurrence (so it is judged once); the seed is
    never a candidate of its own search."""
    out: list[Candidate] = []
    for c in cands:
        if c.status == "duplicate":
            c = registry.canonical(c)
            if c.prompt_id == "seed":
                continue
        if c.usable and c not in out:
            out.append(c)
    return out


def final_pool(ranked_by_round: list[list[Candidate]], budget: int) -> list[Candidate]:
    """Round-robin over rounds (latest first) by rank, skipping ones already taken, until ``budget``."""
    pool: list[Candidate] = []
    depth = max((len(r) for r in ranked_by_round), default=0)
    for rank in range(depth):
        for ranked in reversed(ranked_by_round):
            if rank < len(ranked) and ranked[rank] not in pool:
                pool.append(ranked[rank])
                if len(pool) >= budget:
                    return pool
    return pool
