"""A task-description-derived rubric source in the spirit of AgentEval: criteria proposed from a
description of the task alone, with no preference data.

Proposed criteria pass the rules of ``_validate`` (duplicate names within the reply included). A
reply with no usable criterion is re-asked; when it stays unusable the source is still written, with
K=0 and ``provenance["shortfall"]`` saying why, so a missing source is explained, not silent.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, create_model

from rubriclab.discover._shortfall import model_clause, shortfall
from rubriclab.discover._validate import (
    Echo,
    check_reply,
    count_reasons,
    criteria_items,
    echo_of,
    format_counts,
    rejection_problem,
)
from rubriclab.errors import ParseFailure
from rubriclab.llm import CallRequest, Gateway, RoleSpec, load_prompt
from rubriclab.rubrics import Criterion, RubricSet, slugify, unique_id


class ProposedCriterion(BaseModel):
    name: str = Field(min_length=1, max_length=80)
    description: str = Field(min_length=1)


def _reply_schema(k: int) -> dict[str, Any]:
    # the schema constrained decoders follow; usability is checked after, item by item
    model = create_model("Proposal", criteria=(list[ProposedCriterion], Field(min_length=1, max_length=k)))
    return model.model_json_schema()


def check_proposal(text: str, echo: Echo, k: int, min_words: int) -> tuple[list, list, list]:
    """(parsed items or None, (name, description) items, reasons) of one reply; ParseFailure when it is
    not an object with a ``criteria`` list of at most ``k`` items."""
    _, parsed, items = criteria_items(text, ProposedCriterion, k)
    return parsed, items, check_reply(items, echo, min_words)


def _parser(echo: Echo, k: int, min_words: int):
    def parse(text: str) -> tuple[list[ProposedCriterion], dict[str, int]]:
        parsed, items, reasons = check_proposal(text, echo, k, min_words)
        kept = [c for c, r in zip(parsed, reasons) if r is None and c is not None]
        if not kept:
            raise ParseFailure(rejection_problem(items, reasons, 1))
        return kept, count_reasons(reasons)

    return parse


def task_derived_rubric(task: str, k: int, gateway: Gateway, role: RoleSpec, name: str,
                        templates_dir: str | None = None, *, min_words: int = 4) -> tuple[RubricSet, dict]:
    """Ask for ``k`` criteria; keep the usable ones. Always returns a RubricSet — with K < k (0 when the
    reply stayed unusable) it carries ``provenance["shortfall"]`` — and a report with the rejections."""
    tpl = load_prompt("task_criteria", templates_dir)
    echo = echo_of(tpl)
    res = gateway.run([CallRequest(role=role, messages=tpl.render(task=task, k=str(k)),
                                   parser=_parser(echo, k, min_words),
                                   response_format={"type": "json_object", "schema": _reply_schema(k)})],
                      desc="task-derived")[0]
    provenance: dict[str, Any] = {"method": "AgentEval-style proposal from the task description", "task": task,
                                  "model": role.model}
    report: dict[str, Any] = {"ok": res.ok, "asked": k, "attempts": res.attempts}
    kept: list[ProposedCriterion] = []
    if res.ok:
        kept, report["rejected"] = res.value
    else:
        report["error"] = res.parse_error or res.error
        report["rejected"] = {}
        if res.parse_error is not None:
            try:  # the final reply again, to count its criteria by reason
                report["rejected"] = count_reasons(check_proposal(res.text or "", echo, k, min_words)[2])
            except ParseFailure:
                pass
    taken: set[str] = set()
    criteria = []
    for c in kept:
        cid = unique_id(slugify(c.name), taken)
        taken.add(cid)
        criteria.append(Criterion(id=cid, title=c.name, description=" ".join(c.description.split()),
                                  provenance={"method": "task_description", "task": task}))
    report["k"] = len(criteria)
    if len(criteria) < k:
        provenance["shortfall"] = shortfall(k, len(criteria), _reason(res, report, len(criteria), k, role.model))
    return RubricSet(name=name, criteria=tuple(criteria), source="task_derived", provenance=provenance), report


def _reason(res, report: dict[str, Any], got: int, k: int, model: str) -> str:
    counts = format_counts(report["rejected"])
    if not res.ok and res.parse_error is None:
        return f"the task-derived call failed ({res.error}); no criteria were proposed"
    if not res.ok:
        why = f" ({counts})" if counts else f" ({res.parse_error[:160]})"
        return (f"the task-derived reply had no usable criterion after {res.attempts} attempt(s){why}"
                + model_clause(model, "propose criteria"))
    if counts:
        n = sum(report["rejected"].values())
        return (f"{got} of the {k} criteria asked were usable; {n} proposed were rejected ({counts})"
                + model_clause(model, "propose criteria"))
    return f"the model proposed only {got} of the {k} criteria asked"
