"""Pointwise Yes/No-logit scoring: the one mode in which the embedded model separates good from bad."""

from __future__ import annotations

import math
from typing import Any

_YES = {"yes"}
_NO = {"no"}


def _logsumexp(values: list[float]) -> float:
    m = max(values)
    return m + math.log(sum(math.exp(v - m) for v in values))


def yes_no_gap(extra: dict[str, Any]) -> float | None:
    """log P(yes) − log P(no) for the first reply token, from a result's stored top logprobs.

    Variants ("Yes", " yes", "YES") are pooled. A side missing from the top-k is bounded by the
    smallest listed logprob (so the gap is a lower bound in magnitude). None when neither appears.
    """
    content = ((extra or {}).get("logprobs") or {}).get("content") or []
    if not content:
        return None
    top = content[0].get("top_logprobs") or []
    yes = [t["logprob"] for t in top if t["token"].strip().lower() in _YES]
    no = [t["logprob"] for t in top if t["token"].strip().lower() in _NO]
    if not yes and not no:
        return None
    floor = min(t["logprob"] for t in top)
    return (_logsumexp(yes) if yes else floor) - (_logsumexp(no) if no else floor)
