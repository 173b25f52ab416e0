"""Judge labels for rubric items (seed 004): generated responses where an item has none, and the judge's
"criterion met" verdict on each (item, response).

Every call goes through the gateway; a failed call or an unparseable reply is recorded as a failure
(``label_status="failed"``, ``label`` NaN) and never folded into a verdict.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rubriclab.errors import ArgumentError, ParseFailure
from rubriclab.llm import CallRequest, RoleSpec, answer_format, distinct_draws, load_prompt, register_prompt
from rubriclab.stats import majority_vote

register_prompt("probe_generate", {"prompt"})
register_prompt("probe_judge", {"prompt", "response", "criterion"})

_TIE = "__tie__"


def is_missing_text(value: Any) -> bool:
    """True for None, NaN or a blank string (a response that is not there)."""
    if value is None:
        return True
    if isinstance(value, float) and np.isnan(value):
        return True
    return isinstance(value, str) and not value.strip()


def parse_free_text(text: str) -> str:
    """A free-text reply (a generated response): the stripped text; an empty reply is a parse failure."""
    out = (text or "").strip()
    if not out:
        raise ParseFailure("empty reply; expected the response text")
    return out


def _record_key(row: pd.Series) -> tuple[str, str]:
    return (str(row.get("dataset", "")), str(row.get("record_id", row.get("item_id", row.name))))


def generate_responses(items: pd.DataFrame, *, gateway, generator: RoleSpec,
                       templates_dir: str | Path | None = None) -> pd.DataFrame:
    """Fill missing responses: one generated response per record (``dataset``, ``record_id``) that has an
    item without a response (prompt ``probe_generate``, placeholder ``{prompt}``; one gateway batch).

    Only items whose ``response`` is missing (None/NaN/blank) are filled; they get
    ``response_source="generator:<model>"``. Items that already have a response are left untouched, even
    in a record that also has items without one. A failed or empty generation is counted per record in
    ``df.attrs["generation_failures"]`` and its items keep ``response=None``; ``df.attrs["generated"]`` is
    the number of records that received a generated response.
    """
    df = items.copy()
    if "response" not in df.columns:
        df["response"] = None
    if "response_source" not in df.columns:
        df["response_source"] = None
    df["response"] = df["response"].astype(object)
    df["response_source"] = df["response_source"].astype(object)
    missing = df["response"].map(is_missing_text)
    df.loc[missing, "response"] = None
    tpl = load_prompt("probe_generate", templates_dir)
    records: dict[tuple[str, str], list[Any]] = {}
    prompts: dict[tuple[str, str], str] = {}
    for idx, row in df[missing].iterrows():
        key = _record_key(row)
        records.setdefault(key, []).append(idx)
        prompts.setdefault(key, str(row["prompt"]))
    reqs = [CallRequest(role=generator, messages=tpl.render(prompt=prompts[key]), parser=parse_free_text, tag=key)
            for key in records]
    results = gateway.run(distinct_draws(reqs), desc="probe:generate") if reqs else []
    failures = 0
    for res in results:
        if not res.ok:
            failures += 1
            continue
        for idx in records[res.tag]:
            df.at[idx, "response"] = res.value
            df.at[idx, "response_source"] = f"generator:{generator.model}"
    df.attrs["generation_failures"] = failures
    df.attrs["generated"] = len(results) - failures
    return df


def _error_of(res) -> str:
    return str(res.parse_error or res.error or "failed")


def judge_items(items: pd.DataFrame, *, gateway, judge: RoleSpec, templates_dir: str | Path | None = None,
                criterion_col: str = "criterion", response_col: str = "response", samples: int = 1) -> pd.DataFrame:
    """The judge's verdict on whether each item's response meets its rubric item (prompt ``probe_judge``,
    placeholders ``{prompt}``, ``{response}``, ``{criterion}``; a yes/no answer via
    ``answer_format(judge, "yes_no")``, so a schema role such as the embedded model gets a JSON schema).

    Adds ``label`` (1.0 criterion met, 0.0 not, NaN when no verdict), ``label_status`` (``"ok"`` or
    ``"failed"``) and ``label_error`` (why it failed, else None). The label is always "criterion met":
    a negative-points item (a HealthBench "undesirable" criterion, e.g. "recommends an unsafe dose") is
    judged as "does the response do what this item describes", exactly as HealthBench's grader does; the
    item's sign is applied by whoever turns labels into a score, not here.

    All items go in one gateway batch. With ``samples > 1`` each item is asked ``samples`` times as distinct
    draws (this only differs from one sample at judge temperature > 0) and the label is the strict majority
    of the parsed votes; a tie or no parsed vote is a failure. An item without a response is a failure
    (``label_error="no response"``) and costs no call. Re-running on the same call store costs no provider
    calls.
    """
    if samples < 1:
        raise ArgumentError(f"samples must be >= 1, got {samples}")
    df = items.copy()
    labels = np.full(len(df), np.nan)
    status = ["failed"] * len(df)
    errors: list[str | None] = [None] * len(df)
    tpl = load_prompt("probe_judge", templates_dir)
    fmt = answer_format(judge, "yes_no")
    reqs: list[CallRequest] = []
    for pos, (_, row) in enumerate(df.iterrows()):
        response = row.get(response_col)
        if is_missing_text(response):
            errors[pos] = "no response"
            continue
        criterion = row.get(criterion_col)
        if is_missing_text(criterion):
            errors[pos] = "no criterion"
            continue
        msgs = tpl.render(prompt=str(row.get("prompt", "")), response=str(response), criterion=str(criterion))
        reqs.extend(CallRequest(messages=msgs, tag=pos, **fmt) for _ in range(samples))
    results = gateway.run(distinct_draws(reqs), desc="probe:judge") if reqs else []
    votes: dict[int, list[Any]] = {}
    errs: dict[int, list[str]] = {}
    for res in results:
        votes.setdefault(res.tag, []).append(int(bool(res.value)) if res.ok else None)
        if not res.ok:
            errs.setdefault(res.tag, []).append(_error_of(res))
    for pos, vs in votes.items():
        verdict = majority_vote(vs, tie=_TIE)
        if verdict is None:
            errors[pos] = "; ".join(dict.fromkeys(errs.get(pos, ["no parsed verdict"])))
        elif verdict == _TIE:
            errors[pos] = f"no majority among {sum(v is not None for v in vs)} parsed votes (tie)"
        else:
            labels[pos], status[pos] = float(verdict), "ok"
    df["label"] = labels
    df["label_status"] = status
    df["label_error"] = pd.Series(errors, index=df.index, dtype=object)  # None stays None (pandas ≥ 3)
    return df
