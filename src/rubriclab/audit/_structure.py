"""Structural adequacy (PReMISE §3.2, B.1.2, prompt E.9): five design properties per criterion,
PASS/FAIL by majority of the judge panel; Struct(R) = mean number of properties passed (out of 5)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pandas as pd

from rubriclab.audit._context import AuditContext, from_bootstrap, metric
from rubriclab.llm import CallRequest, answer_format, load_prompt
from rubriclab.rubrics import RubricSet
from rubriclab.stats import item_bootstrap

# The design criteria exactly as the paper supplies them to the judge (E.9).
PROPERTIES: tuple[tuple[str, str, str], ...] = (
    ("no_conflicting_requirements", "No Conflicting Requirements",
     "The rubric does not contain internally contradictory rules. No requirement in the definition makes it "
     "impossible to satisfy another requirement in the same definition."),
    ("unambiguous_scope", "Unambiguous Scope",
     "The rubric is clear enough that different judges would apply it consistently. The boundaries of what counts "
     "as adherence vs. violation are well-defined."),
    ("response_observable", "Response-Observable",
     "The rubric can be assessed solely from the response text, without needing external knowledge, fact-checking, "
     "ground truth, or information not present in the prompt and response."),
    ("atomic", "Atomic",
     "The rubric measures a single behavioral dimension, not multiple conflated properties. It does not combine "
     "distinct qualities (e.g., \u201cclear AND concise\u201d would fail atomicity)."),
    ("operationalizable", "Operationalizable",
     "The rubric can be expressed as a concrete, answerable scoring question. A judge could turn this into a "
     "specific yes/no or scaled question without needing further interpretation."),
)


def audit_structure(rubric: RubricSet, ctx: AuditContext, source: str = "") -> dict[str, Any]:
    """Majority PASS/FAIL per (criterion, property) over ``ctx.judges``.

    A vote that cannot be parsed (or whose call failed) is not a vote: it is counted and left out of the
    majority. A (criterion, property) with no parsed vote, or a tied vote, has no majority: it is
    *undecided*, never "not passed". Struct(R) is the mean, over the criteria whose five properties all
    have a majority, of the number passed (0–5); criteria with an undecided property are left out and
    counted. With no decided criterion Struct is missing (with the failure count), not 0."""
    tpl = load_prompt("audit_structure", ctx.templates_dir)
    requests = []
    for c in rubric.criteria:
        for pid, pname, pdesc in PROPERTIES:
            msgs = tpl.render(criterion_id=c.id, criterion=c.description, property_name=pname,
                              property_description=pdesc)
            for j, judge in enumerate(ctx.judges):
                # sample_index = panel seat: a panel that repeats one model still makes distinct calls
                requests.append(CallRequest(messages=msgs, sample_index=j, tag=(c.id, pid, j),
                                            **answer_format(judge, "pass_fail")))
    results = ctx.gateway.run(requests, desc="structure") if requests else []
    ctx.tally.add(source, "structure", results)
    votes: dict[tuple[str, str], list[bool]] = {}
    failed = 0
    for res in results:
        cid, pid, _ = res.tag
        votes.setdefault((cid, pid), [])
        if res.ok:
            votes[(cid, pid)].append(bool(res.value))
        else:
            failed += 1
    rows, per_criterion = [], []
    undecided = 0
    for c in rubric.criteria:
        passed: dict[str, bool | None] = {}
        for pid, _, _ in PROPERTIES:
            v = Counter(votes.get((c.id, pid), []))
            decided = v[True] != v[False]
            undecided += int(not decided)
            passed[pid] = (v[True] > v[False]) if decided else None
            rows.append({"criterion": c.id, "property": pid, "pass_votes": v[True], "fail_votes": v[False],
                         "failed_votes": len(ctx.judges) - v[True] - v[False],
                         "passed": passed[pid], "decided": decided})
        complete = all(x is not None for x in passed.values())
        per_criterion.append({"criterion": c.id, "struct": sum(bool(x) for x in passed.values()) if complete else None,
                              **passed})
    n_votes = len(results) - failed
    frame = pd.DataFrame(per_criterion)
    scored = frame[frame["struct"].notna()] if not frame.empty else frame
    ctx.tally.drop(source, "structure", "criterion with an undecided property (failed or tied votes)",
                   len(frame) - len(scored))
    vote_info = {"n_votes": n_votes, "n_failed_votes": failed, "n_undecided": undecided, "panel": len(ctx.judges)}
    if frame.empty:
        struct = metric(None, n=0, reason="empty rubric")
    elif scored.empty:
        why = (f"every one of {len(results)} structure votes failed to parse or call" if n_votes == 0 else
               f"no criterion has a majority on all five properties ({undecided} undecided of {len(rows)})")
        struct = metric(None, n=0, reason=why, **vote_info)
    else:
        boot = item_bootstrap(scored["struct"].to_numpy(float), "mean", scored["criterion"].to_numpy(),
                              n_resamples=ctx.n_boot, confidence=ctx.confidence, seed=ctx.seed)
        struct = from_bootstrap(boot, "criteria", scale="0-5 properties passed, mean over criteria",
                                n_left_out=len(frame) - len(scored), **vote_info)
    by_prop = {}
    for pid, _, _ in PROPERTIES:
        col = frame[pid].dropna() if not frame.empty else pd.Series(dtype=object)
        by_prop[f"struct.{pid}"] = (metric(col.astype(float).mean(), n=len(col), share="criteria passing")
                                    if len(col) else metric(None, n=0, reason="no criterion with a majority vote"))
    return {"metrics": {"struct": struct, **by_prop}, "per_criterion": per_criterion, "items": rows,
            "counts": {"structure_parse_failures": failed, "structure_undecided": undecided}}
