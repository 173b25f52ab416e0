"""Saying why a rubric source has fewer criteria than asked.

A source that falls short is still written; its ``provenance["shortfall"]`` is
``{"asked": k, "got": K, "reason": "<one sentence>"}``. The audit stage reads exactly that key to
explain a missing or small source, so keep the shape.
"""

from __future__ import annotations

from typing import Any

from rubriclab.discover._validate import format_counts


def shortfall(asked: int, got: int, reason: str) -> dict[str, Any]:
    """The ``provenance["shortfall"]`` record."""
    return {"asked": int(asked), "got": int(got), "reason": reason}


def model_clause(model: str, verb: str) -> str:
    """'; the embedded model (...) cannot <verb>' for the embedded ``local/`` models, else ''."""
    if model.startswith("local/"):
        return f"; the embedded model ({model}) cannot {verb} — configure a real model for this role"
    return ""


def discovered_reason(*, asked: int, got: int, extraction: dict[str, Any], pool_final: int, kept: int,
                      n_min: int, min_pairs: int, extractor: str) -> str:
    """Why discovery selected ``got`` < ``asked`` criteria: rejected replies and criteria by reason,
    then how many candidates, consolidated criteria and filtered criteria were left."""
    parts = []
    rejected = sum(extraction.get("rejected", {}).values())
    failed = extraction.get("pairs_failed", 0)
    if failed or rejected:
        s = f"{failed} of {extraction.get('pairs', 0)} extraction replies were rejected"
        if rejected:
            s += f" and {rejected} extracted criteria failed validation ({format_counts(extraction['rejected'])})"
        parts.append(s)
    candidates = extraction.get("candidates", 0)
    if candidates == 0:
        parts.append("no usable candidate criterion remained")
    else:
        parts.append(f"{candidates} usable candidates consolidated into {pool_final} criteria, {kept} of which passed "
                     f"the support (n_min={n_min}) and genericity (min_pairs={min_pairs}) filters")
    reason = "; ".join(parts) + f"; {got} of the {asked} asked were selected"
    if failed or rejected:
        reason += model_clause(extractor, "extract criteria")
    return reason


def pref_reason(*, asked: int, got: int, pool: int, pool_limit: int, kept: int, unscored: int,
                discovered: dict[str, Any] | None) -> str:
    """Why preference-rank selection kept ``got`` < ``asked`` criteria."""
    if pool == 0:
        why = f": {discovered['reason']}" if discovered else ""
        return "no discovered criterion was left to rank by preference fit" + why
    parts = []
    if pool < asked:
        parts.append(f"the high-impact pool held {pool} criteria (discover.pref_rank.pool={pool_limit}; {kept} "
                     "passed discovery's filters)")
    if unscored:
        parts.append(f"{unscored} of them could not be scored (every judge reply failed)")
    return "; ".join(parts or [f"only {got} criteria could be ranked"]) + f"; {got} of the {asked} asked were kept"
