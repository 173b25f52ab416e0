"""Acceptance on the development split (PReMISE §3.4, App. C.1) and the Pareto frontier on (α, VFR).

A candidate r' of criterion r passes at tolerance δ iff VFR_dev(r') < VFR_dev(r) and
α_dev(r') ≥ α_dev(r) − δ. Among passing candidates the Pareto frontier (higher α, lower VFR) is kept;
the operating point takes its lowest-VFR member (ties: higher α, then the earlier candidate). δ = 0 is the
constrained point (no dev α loss), δ = ∞ the unconstrained one (VFR alone). No candidate passing: the
criterion is left unchanged.
"""

from __future__ import annotations

import math
from typing import Any

from rubriclab.errors import ArgumentError


def _num(x: Any) -> float | None:
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else x


def verdict(original: dict[str, Any], cand: dict[str, Any], delta: float) -> str:
    """``"pass"`` or the reason ``cand`` fails at ``delta``; ``original``/``cand`` hold ``alpha`` and ``vfr``."""
    v0, v1 = _num(original.get("vfr")), _num(cand.get("vfr"))
    if v0 is None or v1 is None:
        return "vfr_undefined"
    if not v1 < v0:
        return "vfr_not_lower"
    if math.isinf(delta):
        return "pass"
    a0, a1 = _num(original.get("alpha")), _num(cand.get("alpha"))
    if a0 is None or a1 is None:
        return "alpha_undefined"  # a finite δ needs α on both sides (a panel of >= 2 judges)
    return "pass" if a1 >= a0 - delta - 1e-12 else "alpha_loss_above_delta"


def pareto_front(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Points not dominated on (α higher, VFR lower); an undefined α counts as the worst α."""
    def a(p: dict[str, Any]) -> float:
        v = _num(p.get("alpha"))
        return -math.inf if v is None else v

    front = []
    for p in points:
        dominated = any(a(q) >= a(p) and q["vfr"] <= p["vfr"] and (a(q) > a(p) or q["vfr"] < p["vfr"])
                        for q in points if q is not p)
        if not dominated:
            front.append(p)
    return front


def select(original: dict[str, Any], candidates: list[dict[str, Any]], delta: float) -> dict[str, Any]:
    """``{"chosen": candidate | None, "frontier": [...], "verdicts": {index: "pass" | reason}}``."""
    if delta < 0:
        raise ArgumentError(f"delta must be >= 0 (a tolerance on the α loss); got {delta}")
    verdicts = {c["index"]: verdict(original, c, delta) for c in candidates}
    passing = [c for c in candidates if verdicts[c["index"]] == "pass"]
    front = pareto_front(passing)
    chosen = None
    if front:
        chosen = min(front, key=lambda c: (c["vfr"], -(_num(c.get("alpha")) or -math.inf), c["index"]))
    return {"chosen": chosen, "frontier": front, "verdicts": verdicts}
