"""A task-description-derived rubric source in the spirit of AgentEval: criteria proposed from a
description of the task alone, with no preference data."""

from __future__ import annotations

from pydantic import BaseModel, Field, create_model

from rubriclab.llm import CallRequest, Gateway, RoleSpec, json_parser, load_prompt
from rubriclab.rubrics import Criterion, RubricSet, slugify, unique_id


class ProposedCriterion(BaseModel):
    name: str = Field(min_length=1, max_length=80)
    description: str = Field(min_length=1)


def task_derived_rubric(task: str, k: int, gateway: Gateway, role: RoleSpec, name: str,
                        templates_dir: str | None = None) -> tuple[RubricSet | None, dict]:
    """Ask once for ``k`` criteria; None (with the error in the report) when the reply stays invalid."""
    model = create_model("Proposal", criteria=(list[ProposedCriterion], Field(min_length=1, max_length=k)))
    tpl = load_prompt("task_criteria", templates_dir)
    res = gateway.run([CallRequest(role=role, messages=tpl.render(task=task, k=str(k)), parser=json_parser(model),
                                   response_format={"type": "json_object", "schema": model.model_json_schema()})],
                      desc="task-derived")[0]
    if not res.ok:
        return None, {"ok": False, "error": res.parse_error or res.error}
    taken: set[str] = set()
    criteria = []
    for c in res.value.criteria:
        cid = unique_id(slugify(c.name), taken)
        taken.add(cid)
        criteria.append(Criterion(id=cid, title=c.name, description=" ".join(c.description.split()),
                                  provenance={"method": "task_description", "task": task}))
    return RubricSet(name=name, criteria=tuple(criteria), source="task_derived",
                     provenance={"method": "AgentEval-style proposal from the task description", "task": task,
                                 "model": role.model}), {"ok": True, "k": len(criteria)}
