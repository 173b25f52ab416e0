"""Reliability-constrained refinement of one rubric set (PReMISE §3.4, App. C.1).

``search`` does everything that does not depend on the operating point, once: failure packets from the
audit pool, α_dev/VFR_dev of the original criteria, refiner candidates and their α_dev/VFR_dev.
``operating_point`` then applies the acceptance rule at (δ, n candidates) — no model call — and
``report_heldout`` measures the repaired set on the held-out split, where only criteria not seen before
cost calls. A δ sweep therefore costs one search plus the held-out calls of the distinct repaired
criteria it selects.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from tqdm.auto import tqdm

from rubriclab.audit import AuditContext, audit_adversarial, audit_reliability
from rubriclab.data import Pair
from rubriclab.errors import ConfigError
from rubriclab.llm import RoleSpec
from rubriclab.repair._accept import select
from rubriclab.repair._evaluate import evaluate_criterion, evaluate_set
from rubriclab.repair._operators import operator_subsets
from rubriclab.repair._packets import failure_packets, plan_subsets
from rubriclab.repair._refine import propose
from rubriclab.rubrics import RubricSet
from rubriclab.settings import INF_WORDS, Audit, Repair, as_section


def parse_delta(value: Any) -> float:
    """A tolerance δ ≥ 0 from params: a number, or inf / .inf / "inf" / "infinity" for the unconstrained point."""
    if isinstance(value, str) and value.strip().lower() in INF_WORDS:
        return math.inf
    try:
        d = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"repair: δ {value!r} is not a number; expected a tolerance >= 0 or inf") from None
    if math.isnan(d) or d < 0:
        raise ConfigError(f"repair: δ {value!r}; expected a tolerance >= 0 or inf")
    return d


def delta_label(d: float) -> str:
    return "inf" if math.isinf(d) else f"{d:g}"


@dataclass(frozen=True)
class RepairSettings:
    """One refinement's settings: the ``repair`` section, and the ``audit`` section whose pool settings (runs, run
    temperature, attacks, τ, baseline reference, attack check) the failure packets use, so that they reuse the
    audit stage's calls. Defaults, ranges and docs: rubriclab.settings.Repair and Audit."""

    repair: Repair = field(default_factory=Repair)
    audit: Audit = field(default_factory=Audit)

    @classmethod
    def of(cls, repair: Repair | dict[str, Any] | None = None, audit: Audit | dict[str, Any] | None = None
           ) -> RepairSettings:
        """The two sections, typed or mappings validated as params.yaml's."""
        return cls(as_section("repair", repair), as_section("audit", audit))

    @property
    def tau(self) -> float:
        return float(self.audit.tau)

    @property
    def attack_bounds(self) -> dict[str, float] | None:
        """``audit.attack_check`` as the user set it, as the audit passes it (None: its defaults)."""
        return dict(sorted(self.audit.attack_check.model_dump(exclude_unset=True).items())) or None


def _subsets(settings: RepairSettings) -> list[tuple[str, ...]]:
    subsets = operator_subsets(settings.repair.max_operators)
    if settings.repair.operators:  # [] or null: all seven
        subsets = [s for s in subsets if set(s) <= set(settings.repair.operators)]
    return subsets


def search(rubric: RubricSet, *, pool: list[Pair], dev: list[Pair], ctx: AuditContext, refiner: RoleSpec,
           n_candidates: int, settings: RepairSettings, source: str = "") -> dict[str, Any]:
    """Packets, original and candidate dev scores for every criterion chosen for repair (see module doc)."""
    if n_candidates < 1:
        raise ConfigError(f"repair: number of candidates {n_candidates!r}; expected an integer >= 1")
    if not dev:
        raise ConfigError("repair: the dev split is empty; set data.premise.dev (and run `dvc repro data`)")
    ids, a, r, pk = list(rubric.criterion_ids), settings.audit, settings.repair, settings.repair.packet
    # 1. failure packets from the audit's functions on the audit pool (the calls the audit stage makes)
    rel = audit_reliability(rubric, pool, ctx, runs=a.runs, temperature=float(a.run_temperature),
                            axes=("alpha", "flip"), source=f"{source}:pool")
    adv = audit_adversarial(rubric, pool, ctx, n_attacks=a.n_attacks, tau=settings.tau, baseline=True,
                            baseline_reference=a.baseline_reference, source=f"{source}:pool",
                            attack_bounds=settings.attack_bounds)
    packets = failure_packets(ids, rel, adv, pool, per_kind=pk.per_kind, tau=settings.tau, margin=float(pk.margin),
                              unstable_spread=float(pk.unstable_spread), max_chars=pk.max_chars)
    pool_vfr = {row["criterion"]: row.get("vfr") for row in adv["per_criterion"]}
    # 2. triage: highest pool VFR first; max_criteria bounds the repair's cost
    order = sorted(ids, key=lambda c: (-(pool_vfr.get(c) if pool_vfr.get(c) is not None else -1.0), ids.index(c)))
    targets = order if r.max_criteria is None else order[: int(r.max_criteria)]
    criteria: dict[str, dict[str, Any]] = {}
    for cid in ids:
        criteria[cid] = {"criterion": rubric.get(cid), "packet": packets[cid], "pool_vfr": pool_vfr.get(cid),
                         "original": None, "candidates": [], "rows": [], "rejected": {}, "skipped": None}
        if cid not in targets:
            criteria[cid]["skipped"] = _not_triaged(pool_vfr.get(cid), [pool_vfr.get(t) for t in targets],
                                                    r.max_criteria)
    subsets = _subsets(settings)
    for cid in tqdm(targets, desc="repair: criteria", leave=False):
        entry = criteria[cid]
        c = entry["criterion"]
        entry["original"] = evaluate_criterion(c, dev, ctx, n_attacks=r.n_attacks, tau=settings.tau,
                                               source=f"{source}:dev", attack_bounds=settings.attack_bounds)
        v0 = entry["original"]["vfr"]
        if v0 is None or v0 == 0:
            scored, tried = entry["original"].get("n_attacks"), entry["original"].get("n_attacks_attempted")
            of = f"{scored or 0} of {tried} attacks on dev scored, the rest left out (attacker failures, no score)"
            entry["skipped"] = (f"VFR_dev undefined ({of})" if v0 is None else
                                f"VFR_dev = 0 ({of}): no verified false accept on dev, so no candidate can lower it")
            continue
        plan = plan_subsets(packets[cid], subsets)[:n_candidates]
        proposed = propose(ctx.gateway, c, packets[cid], plan, refiner, limits=settings.repair.budget,
                           templates_dir=ctx.templates_dir)
        entry["rows"], entry["rejected"] = proposed["rows"], dict(proposed["rejected"])
        for cand in proposed["candidates"]:
            cand.update(evaluate_criterion(cand["criterion"], dev, ctx, n_attacks=r.n_attacks,
                                           tau=settings.tau, source=f"{source}:dev",
                                           attack_bounds=settings.attack_bounds))
            entry["candidates"].append(cand)
    return {"criteria": criteria, "pool": {"reliability": rel["metrics"], "adversarial": adv["metrics"]},
            "n_candidates": n_candidates, "targets": targets}


def operating_point(found: dict[str, Any], rubric: RubricSet, delta: float, n_candidates: int) -> dict[str, Any]:
    """The repaired set at (δ, first ``n_candidates`` candidates) and, per criterion, what was decided."""
    if n_candidates > found["n_candidates"]:
        raise ConfigError(f"repair: {n_candidates} candidates asked, the search made {found['n_candidates']}")
    new, decisions = [], {}
    for c in rubric.criteria:
        entry = found["criteria"][c.id]
        if entry["skipped"] is not None or entry["original"] is None:
            new.append(c)
            decisions[c.id] = {"changed": False, "why": entry["skipped"] or "not evaluated"}
            continue
        cands = [x for x in entry["candidates"] if x["index"] < n_candidates]
        sel = select(entry["original"], cands, delta)
        chosen = sel["chosen"]
        decisions[c.id] = {"changed": chosen is not None, "verdicts": sel["verdicts"],
                           "frontier": [x["index"] for x in sel["frontier"]],
                           "chosen": None if chosen is None else chosen["index"],
                           "operators": None if chosen is None else chosen["operators"],
                           "original_dev": {"alpha": entry["original"]["alpha"], "vfr": entry["original"]["vfr"]},
                           "chosen_dev": None if chosen is None else {"alpha": chosen["alpha"], "vfr": chosen["vfr"]},
                           "why": ("accepted" if chosen else
                                   "no candidate passed" if cands else "no candidate survived the checker")}
        new.append(chosen["criterion"] if chosen else c)
    repaired = rubric.with_criteria(tuple(new), source="robust_repaired")
    return {"rubric": repaired, "decisions": decisions,
            "changed": [cid for cid, d in decisions.items() if d["changed"]]}


def report_heldout(rubric: RubricSet, heldout: list[Pair], ctx: AuditContext, settings: RepairSettings,
                   source: str = "") -> dict[str, Any]:
    """Held-out α and VFR of a (repaired) set, each with its interval and n."""
    return evaluate_set(rubric, heldout, ctx, n_attacks=settings.repair.n_attacks, tau=settings.tau,
                        source=f"{source}:heldout", baseline_reference=settings.audit.baseline_reference,
                        attack_bounds=settings.attack_bounds)


def _not_triaged(vfr: float | None, taken: list[float | None], max_criteria: int | None) -> str:
    """Why a criterion was not repaired at triage, as the pool VFRs show it: below the cutoff, tied with it (file
    order decided), or undefined (no attack on the pool was scored)."""
    head = f"repair.max_criteria={max_criteria} took {len(taken)} criteria by pool VFR"
    defined = [v for v in taken if v is not None]
    if vfr is None:
        return f"{head}; this one's pool VFR is undefined (no attack on the pool was scored), ranked after the rest"
    cutoff = min(defined) if defined else None
    if cutoff is not None and vfr == cutoff:
        return (f"{head}; tied with them at pool VFR {vfr:.3f}: the order in the rubric file decided, not the VFR")
    return f"{head}; this one's pool VFR {vfr:.3f} is below theirs" + (f" (the lowest taken: {cutoff:.3f})"
                                                                        if cutoff is not None else "")
