"""The refiner role (PReMISE §3.4): candidate revisions of one criterion for a chosen operator subset,
conditioned on its failure packet, and the deterministic checker every candidate must pass before any
judge sees it.

Checker rules (rejections are counted by rule): ``unparsed`` (no JSON with operators and a description
after the re-asks), ``call_failed``, ``no_operator``, ``unknown_operator`` (a name outside the library),
``operator_not_requested`` (a library operator outside the subset asked for), ``unchanged`` (the
original text back), ``duplicate`` (the same text as an earlier candidate), and ``budget:<rule>`` for each
structural-budget rule (rubrics/_budget.py) the text breaks.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import BaseModel, Field

from rubriclab.llm import CallRequest, Gateway, RoleSpec, json_parser, load_prompt, register_prompt
from rubriclab.repair._operators import OPERATORS, describe_operators
from rubriclab.repair._packets import render_packet
from rubriclab.rubrics import BudgetLimits, Criterion, check_budget

register_prompt("repair_refine", {"criterion_id", "criterion", "packet", "operators", "max_words"})


class Revision(BaseModel):
    operators: list[str] = Field(min_length=1)
    description: str = Field(min_length=1)
    rationale: str = ""


def _parse(text: str) -> Revision:
    return json_parser(Revision)(text)


def refine_requests(criterion: Criterion, packet: dict[str, Any], subsets: list[tuple[str, ...]], role: RoleSpec, *,
                    limits: BudgetLimits, templates_dir: str | None = None) -> list[CallRequest]:
    """One request per candidate: candidate j applies ``subsets[j]``; sample index j keeps two candidates
    with the same prompt two draws."""
    tpl = load_prompt("repair_refine", templates_dir)
    packet_text = render_packet(packet)
    return [CallRequest(role=role, messages=tpl.render(criterion_id=criterion.id, criterion=criterion.description,
                                                       packet=packet_text, operators=describe_operators(subset),
                                                       max_words=str(limits.max_words)),
                        parser=_parse, response_format={"type": "json_object", "schema": Revision.model_json_schema()},
                        sample_index=j, tag=(criterion.id, j, subset))
            for j, subset in enumerate(subsets)]


def check_candidate(original: Criterion, revision: Revision, requested: tuple[str, ...], *,
                    limits: BudgetLimits, seen: set[str] | None = None) -> list[str]:
    """The rules ``revision`` breaks (empty: it may be judged)."""
    text = revision.description.strip()
    names = [o.strip() for o in revision.operators]
    broken: list[str] = []
    if not names:
        broken.append("no_operator")
    if any(n not in OPERATORS for n in names):
        broken.append("unknown_operator")
    elif any(n not in requested for n in names):
        broken.append("operator_not_requested")
    if " ".join(text.split()) == " ".join(original.description.split()):
        broken.append("unchanged")
    elif seen is not None and " ".join(text.split()) in seen:
        broken.append("duplicate")
    broken += sorted({f"budget:{v.rule}" for v in check_budget(text, limits)})
    return broken


def propose(gateway: Gateway, criterion: Criterion, packet: dict[str, Any], subsets: list[tuple[str, ...]],
            role: RoleSpec, *, limits: BudgetLimits, templates_dir: str | None = None) -> dict[str, Any]:
    """Candidates for ``criterion``: ``{"candidates": [...], "rejected": Counter(rule -> n), "rows": [...]}``.
    A candidate is ``{"index", "operators", "criterion" (revised Criterion, same id), "rationale"}``;
    ``rows`` lists every proposal, kept or not, with the rules it broke."""
    results = gateway.run(refine_requests(criterion, packet, subsets, role, limits=limits,
                                          templates_dir=templates_dir), desc=f"refine:{criterion.id}")
    kept: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    rejected: Counter = Counter()
    seen: set[str] = set()
    for res in results:
        _, j, subset = res.tag
        row = {"criterion": criterion.id, "candidate": j, "requested": list(subset), "operators": None,
               "description": None, "rationale": None, "broken": []}
        if not res.ok:
            row["broken"] = ["unparsed" if res.parse_error is not None else "call_failed"]
            row["error"] = res.parse_error or res.error
        else:
            rev: Revision = res.value
            row.update(operators=list(rev.operators), description=rev.description.strip(), rationale=rev.rationale)
            row["broken"] = check_candidate(criterion, rev, subset, limits=limits, seen=seen)
            if not row["broken"]:
                seen.add(" ".join(rev.description.split()))
                revised = Criterion(id=criterion.id, title=criterion.title, description=rev.description.strip(),
                                    support=criterion.support, provenance={**dict(criterion.provenance or {}),
                                                                           "repaired_from": criterion.description,
                                                                           "operators": list(rev.operators)})
                kept.append({"index": j, "operators": list(rev.operators), "criterion": revised,
                             "rationale": rev.rationale})
        rejected.update(row["broken"])
        rows.append(row)
    return {"candidates": kept, "rejected": rejected, "rows": rows}
