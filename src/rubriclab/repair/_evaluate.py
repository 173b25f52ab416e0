"""α and VFR of criterion versions on a split, through the audit's own functions: a criterion's calls are
keyed by its text and the split's pairs, so an edit re-buys only that criterion's calls and an unchanged
criterion is served from the call store, whichever set or trial it appears in."""

from __future__ import annotations

from typing import Any

from rubriclab.audit import ALPHA_COLUMN, AuditContext, audit_adversarial, audit_reliability
from rubriclab.data import Pair
from rubriclab.rubrics import Criterion, RubricSet


def _one(c: Criterion) -> RubricSet:
    return RubricSet(name=c.id, source="robust_repaired", criteria=(c,))


def _entry(m: dict[str, Any] | None) -> dict[str, Any]:
    m = m or {}
    return {k: m.get(k) for k in ("value", "low", "high", "n", "ci", "reason", "degenerate") if m.get(k) is not None}


def evaluate_set(rubric: RubricSet, pairs: list[Pair], ctx: AuditContext, *, n_attacks: int, tau: float,
                 source: str, baseline_reference: str = "other",
                 attack_bounds: dict[str, float] | None = None) -> dict[str, Any]:
    """α (panel, over pairs) and VFR / fool rate (attacks, over prompts) of ``rubric`` on ``pairs``, each an
    audit-card entry with its interval, and per criterion ``{id: {"alpha", "vfr", "fool_rate"}}``; ``units``
    keeps the panel ratings and attack rows behind them, for paired intervals against another version.
    ``attack_bounds`` is ``audit.attack_check``: without it an attack the audit rejects would count here."""
    if not rubric.criteria:
        return {"alpha": {"reason": "K=0"}, "vfr": {"reason": "K=0"}, "per_criterion": {}}
    rel = audit_reliability(rubric, pairs, ctx, axes=("alpha",), source=source)
    adv = audit_adversarial(rubric, pairs, ctx, n_attacks=n_attacks, tau=tau, baseline=False, source=source,
                            baseline_reference=baseline_reference, attack_bounds=attack_bounds)
    per = {c.id: {"alpha": None, "vfr": None, "fool_rate": None} for c in rubric.criteria}
    for row in rel["per_criterion"]:
        a = row.get("alpha")
        per[row["criterion"]]["alpha"] = None if a is None or a != a else float(a)  # NaN: α undefined
    for row in adv["per_criterion"]:
        per[row["criterion"]].update(vfr=row.get("vfr"), fool_rate=row.get("fool_rate"), n_attacks=row["n_attacks"],
                                     n_scored=row["n_scored"], n_exploiting=row["n_exploiting"])
    scores = rel["scores"]
    units = {"criteria": [c.id for c in rubric.criteria], "alpha_column": ALPHA_COLUMN[ctx.alpha_orientation],
             "alpha": scores[scores["who"].str.startswith("rater")].reset_index(drop=True), "vfr": adv["items"]}
    return {"alpha": _entry(rel["metrics"].get("alpha")), "vfr": _entry(adv["metrics"].get("vfr")),
            "fool_rate": _entry(adv["metrics"].get("fool_rate")), "per_criterion": per,
            "counts": {**rel["counts"], **adv["counts"]}, "units": units}


def evaluate_criterion(c: Criterion, pairs: list[Pair], ctx: AuditContext, *, n_attacks: int, tau: float,
                       source: str, baseline_reference: str = "other",
                       attack_bounds: dict[str, float] | None = None) -> dict[str, Any]:
    """``{"alpha", "vfr", "fool_rate", "alpha_ci", "vfr_ci", "n_pairs", "n_attacks", "n_attacks_attempted"}`` of one
    criterion version: ``n_attacks`` the scored attacks VFR is over, of ``n_attacks_attempted`` (the attacker's
    failures and unscored replies are the difference)."""
    res = evaluate_set(_one(c), pairs, ctx, n_attacks=n_attacks, tau=tau, source=source,
                       baseline_reference=baseline_reference, attack_bounds=attack_bounds)
    per = res["per_criterion"][c.id]
    return {"alpha": per["alpha"], "vfr": per["vfr"], "fool_rate": per["fool_rate"],
            "alpha_ci": [res["alpha"].get("low"), res["alpha"].get("high")],
            "vfr_ci": [res["vfr"].get("low"), res["vfr"].get("high")],
            "n_pairs": res["alpha"].get("n"), "n_attacks": per.get("n_scored"),
            "n_attacks_attempted": per.get("n_attacks")}
