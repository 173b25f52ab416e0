"""Judge preference pairs under one or more pairwise rubrics, and agreement with the reference labels.

Each pair is shown once, in the seeded order of ``present(pair, seed)`` (the same order under every
rubric, so two rubrics are compared on identical requests but for the rubric text). A verdict is the
majority of ``samples`` draws (sample indices ``sample_offset…``): "A", "B", "tie" (tied votes) or
None when every draw failed (a parse failure after the gateway's re-asks, or a transport failure).
Agreement counts ties and failures explicitly: a failed item is left out of the denominator and
counted; a tie earns ``tie_credit`` (the project's one rule, ``TIE_CREDIT`` = 0.5: the expected credit of a fair
coin) and is counted; both are reported beside the agreement, never folded in silently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from rubriclab.data import Pair, present
from rubriclab.errors import ArgumentError
from rubriclab.judging._rubric import PairwiseRubric
from rubriclab.llm import CallRequest, Gateway, RoleSpec, answer_format
from rubriclab.stats import (
    TIE_CREDIT,
    accuracy,
    at_tie_credit,
    item_bootstrap,
    majority_vote,
    other_tie_credit,
    ties_common,
)

TIE = "tie"
STATUSES = ("agree", "disagree", "tie", "failed")


def pairwise_request(rubric: PairwiseRubric, view: Mapping[str, Any], judge: RoleSpec, *, sample_index: int = 0,
                     tag: Any = None, templates_dir: str | None = None) -> CallRequest:
    """The request that asks ``judge`` for an A/B verdict on ``view`` (a ``present`` dict) under ``rubric``."""
    messages = rubric.messages(view["prompt"], view["a"], view["b"], templates_dir)
    return CallRequest(messages=messages, sample_index=sample_index, tag=tag, **answer_format(judge, "ab"))


def judge_pairs(rubrics: Mapping[str, Any] | Sequence[Any], pairs: Sequence[Pair], *,
                gateway: Gateway, judge: RoleSpec, seed: int, samples: int = 1, sample_offset: int = 0,
                templates_dir: str | None = None, desc: str = "judge pairs") -> pd.DataFrame:
    """Rubrics: PairwiseRubric, JudgeTemplate or RubricSet values (a mapping's keys name them).

    One row per (rubric, pair): ``rubric, pair_id, domain, swapped, human, verdict, votes, status,
    n_failed_samples, error`` — all rubrics in one gateway batch (the store dedupes identical texts)."""
    if not isinstance(rubrics, Mapping):
        rubrics = {r.name: r for r in rubrics}
    rubrics = {name: PairwiseRubric.of(r, name=name) for name, r in rubrics.items()}
    if samples < 1:
        raise ArgumentError(f"samples={samples}: need at least one draw per verdict")
    views = {p.id: present(p, seed) for p in pairs}
    domains = {p.id: p.domain for p in pairs}
    requests = [
        pairwise_request(rubric, views[p.id], judge, sample_index=sample_offset + s, tag=(name, p.id),
                         templates_dir=templates_dir)
        for name, rubric in rubrics.items() for p in pairs for s in range(samples)
    ]
    votes: dict[tuple, list] = {(name, p.id): [] for name in rubrics for p in pairs}
    errors: dict[tuple, str | None] = {}
    for res in gateway.run(requests, desc=desc) if requests else []:
        votes[res.tag].append(res.value if res.ok else None)
        if not res.ok:
            errors.setdefault(res.tag, res.parse_error or res.error)
    rows = []
    for (name, pid), vs in votes.items():
        view = views[pid]
        verdict = majority_vote(vs, tie=TIE)
        rows.append({
            "rubric": name, "pair_id": pid, "domain": domains[pid], "swapped": bool(view["swapped"]),
            "human": view["human"], "verdict": verdict, "votes": "".join(v or "-" for v in vs),
            "status": status_of(verdict, view["human"]), "n_failed_samples": sum(v is None for v in vs),
            "error": errors.get((name, pid)),
        })
    return pd.DataFrame(rows, columns=["rubric", "pair_id", "domain", "swapped", "human", "verdict", "votes",
                                       "status", "n_failed_samples", "error"])


def status_of(verdict: Any, human: str) -> str:
    """agree / disagree / tie / failed."""
    if verdict is None:
        return "failed"
    if verdict == TIE:
        return TIE
    return "agree" if verdict == human else "disagree"


def credit(status: pd.Series | Sequence[str], tie_credit: float = TIE_CREDIT) -> np.ndarray:
    """Per-item agreement credit: 1 agree, ``tie_credit`` tie, 0 disagree, NaN failed."""
    table = {"agree": 1.0, "disagree": 0.0, TIE: float(tie_credit), "failed": np.nan}
    return np.array([table[s] for s in status], dtype=float)


def agreement(rows: pd.DataFrame, *, tie_credit: float = TIE_CREDIT, n_boot: int = 1000, confidence: float = 0.95,
              seed: int = 0) -> dict[str, Any]:
    """Agreement with the reference over judged items (``stats.accuracy``), with its item-bootstrap CI and every
    count: ``agreement = (n_agree + tie_credit · n_ties) / n``, failed items not in n (``n_failed``)."""
    verdicts = rows["verdict"].tolist() if len(rows) else []
    acc = accuracy(verdicts, rows["human"].tolist() if len(rows) else [], tie=TIE, tie_credit=tie_credit)
    n = acc["n"]
    out: dict[str, Any] = {"n_agree": acc["n_correct"], "n_disagree": n - acc["n_correct"] - acc["n_ties"],
                           "n_tie": acc["n_ties"], "n_failed": acc["n_failed"], "n": n, "n_total": len(rows),
                           "tie_credit": float(tie_credit)}
    ci = {"method": "percentile bootstrap over pairs", "level": confidence, "unit": "pair", "resamples": n_boot}
    if not n:
        out.update(agreement=np.nan, low=np.nan, high=np.nan, ci=ci, reason="no judged pair")
        return out
    values = acc["per_item"][~np.isnan(acc["per_item"])]
    boot = item_bootstrap(values, "mean", None, n_resamples=n_boot, confidence=confidence, seed=seed)
    other = other_tie_credit(tie_credit)  # every tie here met a strict reference label, so each earned tie_credit
    out.update(agreement=float(boot["estimate"]), low=float(boot["low"]), high=float(boot["high"]), ci=ci,
               reason=boot["degenerate"], other_tie_credit=other,
               agreement_at_other_tie_credit=at_tie_credit(float(boot["estimate"]), acc["n_ties"], n, tie_credit, other))
    return out


def describe_agreement(m: Mapping[str, Any], digits: int = 3) -> str:
    """``0.625 [0.40, 0.85] (n=16; 2 ties at 0.5, 0.562 with ties at 0, 2 failed)``: the estimate with its
    interval and counts; where ties are more than 5% of n (``rubriclab.stats.ties_common``), the value under the
    other tie rule beside it."""
    if not np.isfinite(m.get("agreement", np.nan)):
        return f"— (n=0; {m.get('n_failed', 0)} failed)"
    extra = []
    if m.get("n_tie"):
        extra.append(f"{m['n_tie']} tie{'s' if m['n_tie'] != 1 else ''} at {m.get('tie_credit', TIE_CREDIT):g}")
        if ties_common(m["n_tie"], m.get("n", 0)) and m.get("agreement_at_other_tie_credit") is not None:
            extra.append(f"{m['agreement_at_other_tie_credit']:.{digits}f} with ties at {m['other_tie_credit']:g}")
    if m.get("n_failed"):
        extra.append(f"{m['n_failed']} failed")
    tail = ("; " + ", ".join(extra)) if extra else ""
    return f"{m['agreement']:.{digits}f} [{m['low']:.2f}, {m['high']:.2f}] (n={m['n']}{tail})"
