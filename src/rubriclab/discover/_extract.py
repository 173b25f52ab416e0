"""Step 1 of discovery: per pair, an extractor names the criteria on which the responses differ.

Every criterion passes the rules of ``_validate`` before it becomes a candidate. A reply keeps its
usable criteria when at least ``min_criteria`` are usable; otherwise it is a ParseFailure, re-asked by
the gateway with the reasons, and after the role's ``parse_retries`` the pair is a counted failure
that contributes nothing (its reason text is kept). Criteria repeated verbatim across unrelated pairs
are dropped once all replies are in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field, create_model

from rubriclab.data import Pair, present
from rubriclab.discover._validate import (
    Echo,
    check_reply,
    count_reasons,
    criteria_items,
    echo_of,
    norm,
    rejection_problem,
    repeated_texts,
)
from rubriclab.errors import ParseFailure
from rubriclab.llm import CallRequest, Gateway, RoleSpec, load_prompt


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


@dataclass
class CheckedReply:
    """One extraction reply after validation: usable criteria and the rejected items with reasons."""

    kept: list[ExtractedCriterion]
    rejected: list[tuple[dict[str, Any], str]]  # (raw item, reason)


def check_extraction(text: str, echo: Echo, *, max_n: int, min_words: int) -> tuple[CheckedReply, list, list]:
    """Validate one reply. Returns (checked, items, reasons); raises ParseFailure only when the reply
    is not a JSON object with a ``criteria`` list of at most ``max_n`` items."""
    raw, parsed, items = criteria_items(text, ExtractedCriterion, max_n)
    reasons = check_reply(items, echo, min_words)
    kept = [c for c, r in zip(parsed, reasons) if r is None and c is not None]
    rejected = [(item if isinstance(item, dict) else {"item": item}, r)
                for item, r in zip(raw, reasons) if r is not None]
    return CheckedReply(kept, rejected), items, reasons


def extraction_parser(echo: Echo, *, min_n: int, max_n: int, min_words: int):
    """Parser for one reply: the CheckedReply, or ParseFailure (re-asked) with fewer than ``min_n`` usable."""

    def parse(text: str) -> CheckedReply:
        checked, items, reasons = check_extraction(text, echo, max_n=max_n, min_words=min_words)
        if len(checked.kept) < min_n:
            raise ParseFailure(rejection_problem(items, reasons, min_n))
        return checked

    return parse


def _row(s: dict[str, Any], j: int, c: ExtractedCriterion) -> dict[str, Any]:
    a_is_chosen = s["human"] == "A"
    return {"cand_id": f"{s['id']}#{j}", "pair_id": s["id"], "name": " ".join(c.name.split()),
            "description": " ".join(c.description.split()),
            "score_chosen": c.model_a_score if a_is_chosen else c.model_b_score,
            "score_rejected": c.model_b_score if a_is_chosen else c.model_a_score}


def _rejected_row(pair_id: str, item: dict[str, Any], reason: str) -> dict[str, Any]:
    return {"pair_id": pair_id, "name": str(item.get("name", ""))[:200],
            "description": str(item.get("description", ""))[:500], "reason": reason}


def extract_candidates(pairs: list[Pair], gateway: Gateway, role: RoleSpec, *, seed: int, min_criteria: int,
                       max_criteria: int, templates_dir: str | None = None, min_words: int = 4,
                       identical_limit: float = 0.5) -> tuple[list[dict[str, Any]], dict]:
    """Raw candidate criteria (one row each, scores mapped back to chosen/rejected) and a report:
    pairs whose reply stayed unusable (``failures``, with the reason text and cause), criteria
    rejected by reason (``rejected``; counted in each pair's final reply — earlier replies that were
    re-asked show in ``reasks``) and the rejected items themselves (``rejected_rows``)."""
    tpl = load_prompt("discover_extract", templates_dir)
    echo = echo_of(tpl)
    model = extraction_schema(min_criteria, max_criteria)
    parser = extraction_parser(echo, min_n=min_criteria, max_n=max_criteria, min_words=min_words)
    shown = [present(p, seed) for p in pairs]
    requests = [
        CallRequest(
            role=role,
            messages=tpl.render(prompt=s["prompt"], response_a=s["a"], response_b=s["b"], winner=s["human"],
                                min_criteria=str(min_criteria), max_criteria=str(max_criteria)),
            parser=parser,
            response_format={"type": "json_object", "schema": model.model_json_schema()},
            tag=s,
        )
        for s in shown
    ]
    results = gateway.run(requests, desc="extract")
    candidates: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    rejected_rows: list[dict[str, Any]] = []
    seen = lost = reasks = 0
    for res in results:
        s = res.tag
        reasks += max(0, res.attempts - 1)
        if res.ok:
            checked: CheckedReply = res.value
            seen += len(checked.kept) + len(checked.rejected)
            candidates += [_row(s, j, c) for j, c in enumerate(checked.kept)]
            rejected_rows += [_rejected_row(s["id"], item, r) for item, r in checked.rejected]
            continue
        row: dict[str, Any] = {"pair_id": s["id"], "error": res.parse_error or res.error or "unknown",
                               "cause": "call_error" if res.parse_error is None else "unparseable", "attempts": res.attempts}
        if res.parse_error is not None:
            try:  # the final reply again, to count its criteria by reason (validation is deterministic)
                checked, _, _ = check_extraction(res.text or "", echo, max_n=max_criteria, min_words=min_words)
            except ParseFailure:
                pass
            else:
                row["cause"] = "too_few_valid"
                row["rejected"] = count_reasons(r for _, r in checked.rejected)
                seen += len(checked.kept) + len(checked.rejected)
                lost += len(checked.kept)
                rejected_rows += [_rejected_row(s["id"], item, r) for item, r in checked.rejected]
        failed.append(row)

    # a text repeated verbatim for many unrelated pairs is a template, not an observation
    replies = len(pairs) - len(failed)
    repeated = repeated_texts(((c["pair_id"], c["name"], c["description"]) for c in candidates), replies,
                              identical_limit)
    if repeated:
        keep = []
        for c in candidates:
            if (norm(c["name"]), norm(c["description"])) in repeated:
                rejected_rows.append(_rejected_row(c["pair_id"], c, "identical_across_pairs"))
            else:
                keep.append(c)
        candidates = keep
    report = {"pairs": len(pairs), "pairs_failed": len(failed), "candidates": len(candidates),
              "criteria_seen": seen, "valid_in_failed_replies": lost, "reasks": reasks,
              "rejected": count_reasons(r["reason"] for r in rejected_rows),
              "failed_by_cause": count_reasons(f["cause"] for f in failed),
              "failures": failed, "rejected_rows": rejected_rows}
    return candidates, report
