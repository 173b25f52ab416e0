"""The audit card's rubric prior leakage column (seed 004), from the adversarial axis's genuine-response verdicts."""

from __future__ import annotations

from typing import Any

from rubriclab.audit._context import AuditContext, metric


def add_leakage(card: dict[str, dict[str, Any]], details: dict[str, Any], rubric_sets: dict[str, Any],
                ctx: AuditContext) -> None:
    """The card's "rubric prior leakage" column: a rubric-only probe's balanced accuracy over the majority
    baseline on the adversarial axis's genuine-response verdicts (``rubriclab.probe.rubric_prior_leakage``)."""
    from rubriclab.probe import rubric_prior_leakage

    for src, det in details.items():
        base = (det.get("adversarial") or {}).get("baseline_items") if isinstance(det, dict) else None
        if src not in card or src not in rubric_sets:
            continue
        if not base:
            card[src]["leakage"] = metric(None, reason="no adversarial baseline verdicts (the axis was not run)")
            continue
        lk = rubric_prior_leakage(base, rubric_sets[src], n_boot=ctx.n_boot, confidence=ctx.confidence, seed=ctx.seed)
        card[src]["leakage"] = metric(lk["value"], lk["low"], lk["high"], lk["n"], ci=lk["ci"],
                                      reason=lk.get("reason"), model=lk.get("model"), n_failed=lk.get("n_failed"))
