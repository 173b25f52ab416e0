"""Repeated draws at temperature > 0 must be distinct calls.

The call store is keyed by (model, endpoint, messages, params, sample index): two identical requests
with one sample index are one draw, served twice. That is right for a deterministic (T=0) request and
wrong for samples that a statistic treats as independent — an attack text the attacker happened to
write twice, two pairs sharing a prompt, a flip-rate run that equals a panel seat.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from rubriclab.llm._gateway import CallRequest
from rubriclab.llm._store import call_key


def draw_identity(req: CallRequest) -> str:
    """What makes two requests the same draw apart from their sample index (and its seed)."""
    params = {k: v for k, v in req.params(0).items() if k != "seed"}
    return call_key(req.role.model, req.messages, params, 0, 0, endpoint=req.role.api_base)


def distinct_draws(requests: Sequence[CallRequest], start: int = 0) -> list[CallRequest]:
    """The requests with sample indices ``start, start+1, …`` given to the repeats of each identical
    request at T > 0, in order, so every repeat is its own provider call. T = 0 requests are unchanged:
    a repeat of a deterministic request is the same measurement."""
    seen: Counter[str] = Counter()
    out = []
    for req in requests:
        if req.role.temperature <= 0:
            out.append(req)
            continue
        ident = draw_identity(req)
        out.append(replace(req, sample_index=start + seen[ident]))
        seen[ident] += 1
    return out
