"""Step 1 of discovery: per pair, an extractor names the criteria on which the responses differ."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, create_model

from rubriclab.data import Pair, present
from rubriclab.llm import CallRequest, Gateway, RoleSpec, json_parser, load_prompt


class ExtractedCriterion(BaseModel):
    name: str = Field(min_length=1, max_length=100)
    description: str = Field(min_length=1)
    model_a_score: int = Field(ge=1, le=10)
    model_b_score: int = Field(ge=1, le=10)


def extraction_schema(min_n: int, max_n: int) -> type[BaseModel]:
    """The reply model: 5–15 criteria by default (the count is part of the schema, so constrained
    decoders emit it and a reply outside it is re-asked)."""
    return create_model(
        "Extraction", criteria=(list[ExtractedCriterion], Field(min_length=min_n, max_length=max_n))
    )


def extract_candidates(pairs: list[Pair], gateway: Gateway, role: RoleSpec, *, seed: int, min_criteria: int,
                       max_criteria: int, templates_dir: str | None = None) -> tuple[list[dict[str, Any]], dict]:
    """Raw candidate criteria (one row each, scores mapped back to chosen/rejected) and a report
    counting pairs whose reply stayed unparseable (they contribute no candidates)."""
    tpl = load_prompt("discover_extract", templates_dir)
    model = extraction_schema(min_criteria, max_criteria)
    shown = [present(p, seed) for p in pairs]
    requests = [
        CallRequest(
            role=role,
            messages=tpl.render(prompt=s["prompt"], response_a=s["a"], response_b=s["b"], winner=s["human"],
                                min_criteria=str(min_criteria), max_criteria=str(max_criteria)),
            parser=json_parser(model),
            response_format={"type": "json_object", "schema": model.model_json_schema()},
            tag=s,
        )
        for s in shown
    ]
    results = gateway.run(requests, desc="extract")
    candidates: list[dict[str, Any]] = []
    failed: list[dict[str, str]] = []
    for res in results:
        s = res.tag
        if not res.ok:
            failed.append({"pair_id": s["id"], "error": res.parse_error or res.error or "unknown"})
            continue
        for j, c in enumerate(res.value.criteria):
            a_is_chosen = s["human"] == "A"
            candidates.append({
                "cand_id": f"{s['id']}#{j}",
                "pair_id": s["id"],
                "name": " ".join(c.name.split()),
                "description": " ".join(c.description.split()),
                "score_chosen": c.model_a_score if a_is_chosen else c.model_b_score,
                "score_rejected": c.model_b_score if a_is_chosen else c.model_a_score,
            })
    report = {"pairs": len(pairs), "pairs_failed": len(failed), "candidates": len(candidates), "failures": failed}
    return candidates, report
