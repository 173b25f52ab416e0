"""The δ sweep of one rubric set as a grid study (``rubriclab.studies``): the refinement search once, then one
operating point per grid point (δ × candidates), each measured on the held-out split with Δ against the original
(one paired bootstrap), the named points (δ = 0 constrained, δ = ∞ unconstrained) and the repaired sets."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pandas as pd

from rubriclab.audit import AuditContext, interval_label
from rubriclab.data import Pair
from rubriclab.errors import ConfigError
from rubriclab.llm import RoleSpec
from rubriclab.repair._outputs import candidates_table
from rubriclab.repair._paired import paired_deltas
from rubriclab.repair._refinement import (
    RepairSettings,
    delta_label,
    operating_point,
    parse_delta,
    report_heldout,
    search,
)
from rubriclab.rubrics import RubricSet
from rubriclab.settings import RepairSweep

NAMED = {"constrained": 0.0, "unconstrained": math.inf}  # the operating points written as rubric sets

# on_trial(point, row): called once per grid point this process measured (the stage logs it as a nested run)
OnTrial = Callable[[dict[str, Any], dict[str, Any]], None]


def sweep_grid(sweep: RepairSweep, deltas: list[Any] | None = None,
               candidates: list[int] | None = None) -> list[dict[str, Any]]:
    """Grid points (δ × candidates) of ``repair.sweep``, or of the given lists; δ = 0 and δ = ∞ are always in the
    sweep's (the named operating points)."""
    from rubriclab.studies import grid_of

    ds = sorted({parse_delta(d) for d in (deltas if deltas is not None else sweep.deltas)}
                | ({0.0, math.inf} if deltas is None else set()))
    ns = sorted({int(n) for n in (candidates or sweep.candidates)})
    if any(n < 1 for n in ns):
        raise ConfigError(f"repair.sweep.candidates: {ns}; expected integers >= 1")
    return [{"delta": p["delta"], "candidates": p["candidates"]} for p in grid_of({"candidates": ns, "delta": ds})]


def sweep_study_name(dataset: str, source: str, rs: RubricSet, settings: RepairSettings,
                     splits: dict[str, list[Pair]], models: list[str]) -> str:
    """The study of this rubric set, settings, models and splits: a re-run resumes it, a change starts another."""
    from rubriclab.studies import study_name

    return study_name(f"repair-{dataset}-{source}", {
        "rubric": rs.to_dict(), "settings": repr(settings), "models": models,
        "splits": {k: [p.id for p in v] for k, v in splits.items()}}, digits=10)


def metric_row(point: dict, res: dict, deltas: dict, changed: list[str]) -> dict[str, Any]:
    """One curve row: held-out α and VFR of the repaired set, and Δ (repaired − original) with its paired
    interval; every interval says its method, level and unit (``*_ci``) and its n."""
    row: dict[str, Any] = {"delta": point["delta"], "candidates": point["candidates"]}
    for name, col in (("alpha", "alpha_heldout"), ("vfr", "vfr_heldout")):
        row.update(_entry_columns(col, name, res[name]))
    for name in ("alpha", "vfr"):
        row.update(_entry_columns(f"delta_{name}", f"delta_{name}", deltas[name]))
    return {**row, "n_changed": len(changed), "changed": ",".join(changed)}


def _entry_columns(value_col: str, prefix: str, m: dict[str, Any]) -> dict[str, Any]:
    return {value_col: m.get("value"), f"{prefix}_low": m.get("low"), f"{prefix}_high": m.get("high"),
            f"{prefix}_n": m.get("n"), f"{prefix}_ci": interval_label(m.get("ci"))}


def sweep_source(name: str, rs: RubricSet, *, pool: list[Pair], dev: list[Pair], heldout: list[Pair],
                 ctx: AuditContext, refiner: RoleSpec, settings: RepairSettings, grid: list[dict[str, Any]],
                 storage: Any, study_name: str, on_trial: OnTrial | None = None) -> dict[str, Any]:
    """Refine ``rs`` and sweep its operating points as study ``study_name`` on ``storage``
    (``rubriclab.studies.study_storage``). Returns ``found`` (the search), ``before`` (the original on held-out),
    ``curve`` (one row per grid point, ``point`` naming the constrained / unconstrained one), ``study``, ``table``
    (``grid_results``), ``named`` (label -> the repaired set, its operating point and row), ``rejected`` (checker
    rejections by rule) and ``candidates`` (every proposal)."""
    import optuna

    from rubriclab.studies import grid_results, run_grid

    max_n = max(p["candidates"] for p in grid)
    found = search(rs, pool=pool, dev=dev, ctx=ctx, refiner=refiner, n_candidates=max_n, settings=settings,
                   source=name)
    points: dict[tuple, dict[str, Any]] = {}
    reports: dict[tuple, dict[str, Any]] = {}

    def heldout_of(repaired: RubricSet) -> dict[str, Any]:
        # operating points that select the same texts are one measurement (calls and bootstrap alike)
        key = tuple(c.description for c in repaired.criteria)
        if key not in reports:
            res = report_heldout(repaired, heldout, ctx, settings, source=name)
            # Δ against the original on the same held-out units, resampled together (one paired bootstrap);
            # the original itself is measured first, so it is its own baseline (Δ = 0)
            base = res if key == original else before
            res["deltas"] = paired_deltas(base, res, n_boot=ctx.n_boot, confidence=ctx.confidence, seed=ctx.seed)
            reports[key] = res
        return reports[key]

    original = tuple(c.description for c in rs.criteria)
    before = heldout_of(rs)

    def row_of(point: dict, op: dict) -> dict[str, Any]:
        res = heldout_of(op["rubric"])
        return metric_row(point, res, res["deltas"], op["changed"])

    def objective(trial, point):
        op = operating_point(found, rs, point["delta"], point["candidates"])
        row = row_of(point, op)
        points[(point["delta"], point["candidates"])] = {"op": op, "row": row}
        for k, val in row.items():
            trial.set_user_attr(k, None if isinstance(val, float) and not math.isfinite(val) else val)
        if on_trial is not None:
            on_trial(point, row)
        if row["alpha_heldout"] is None or row["vfr_heldout"] is None:  # measured, but undefined: not a failure
            res = heldout_of(op["rubric"])
            why = "; ".join(f"{k}: {res[k].get('reason', 'undefined')}" for k in ("alpha", "vfr")
                            if res[k].get("value") is None)
            raise optuna.TrialPruned(f"held-out {why}")
        return row["alpha_heldout"], row["vfr_heldout"]

    study = run_grid(study_name, storage, grid, objective)
    table = grid_results(study)  # every trial's state, worker and, when pruned or failed, why
    # points another worker ran, and the named points (δ = 0, ∞) when the grid lacks them: their calls come
    # from the call store when it is shared (on one machine it is), else they are bought here
    for point in [*grid, *({"delta": d, "candidates": max_n} for d in NAMED.values())]:
        key = (point["delta"], point["candidates"])
        if key not in points:
            op = operating_point(found, rs, point["delta"], point["candidates"])
            points[key] = {"op": op, "row": row_of(point, op)}
    curve = pd.DataFrame([points[(p["delta"], p["candidates"])]["row"] for p in grid])
    curve.insert(0, "point", ["constrained" if r["delta"] == 0 and r["candidates"] == max_n else
                              "unconstrained" if math.isinf(r["delta"]) and r["candidates"] == max_n else ""
                              for _, r in curve.iterrows()])
    named = {label: _named_set(name, rs, label, delta, max_n, points[(delta, max_n)]) for label, delta in NAMED.items()}
    rejected: dict[str, int] = {}
    for e in found["criteria"].values():
        for rule, n in e["rejected"].items():
            rejected[rule] = rejected.get(rule, 0) + n
    return {"found": found, "before": before, "curve": curve, "study": study, "table": table, "named": named,
            "max_n": max_n, "rejected": rejected, "candidates": candidates_table(found)}


def _named_set(name: str, rs: RubricSet, label: str, delta: float, max_n: int, point: dict[str, Any]
               ) -> dict[str, Any]:
    op = point["op"]
    repaired = op["rubric"].with_criteria(op["rubric"].criteria, name=f"{rs.name}.robust_{label}",
                                          provenance={**dict(rs.provenance or {}), "repaired_from": name,
                                                      "operating_point": label, "delta": delta_label(delta),
                                                      "candidates": max_n, "changed": op["changed"],
                                                      "heldout": point["row"]})
    return {"rubric": repaired, "delta": delta, "decisions": op["decisions"]}


def unrepaired_sets(name: str, rs: RubricSet) -> dict[str, RubricSet]:
    """The named sets of a rubric set with no criteria: empty, saying why nothing was repaired."""
    why = unrepaired_reason(rs)
    return {label: rs.with_criteria((), name=f"{rs.name}.robust_{label}", source="robust_repaired",
                                    provenance={"repaired_from": name, "operating_point": label,
                                                "shortfall": {"asked": 0, "got": 0,
                                                              "reason": f"nothing to repair: {why}"}})
            for label in NAMED}


def unrepaired_reason(rs: RubricSet) -> str:
    return (rs.provenance or {}).get("shortfall", {}).get("reason", "the rubric set has no criteria")
