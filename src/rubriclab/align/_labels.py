"""Preference labels from a rubric: which response of each pair the judge prefers under that rubric.

Both rubrics judge the same pairs in the same seeded A/B order through ``judging.judge_pairs`` (the code
path the audit and the drift search use), so re-labelling makes no provider call and the two label sets
differ only by the rubric text. A tie or a failed verdict is not a preference: the pair is left out of
that rubric's training set and counted. In the agreement figures a tie earns the tie credit (the paper's 0.5)
and a failed verdict is left out of n.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from rubriclab.align._intervals import too_few
from rubriclab.data import Pair
from rubriclab.judging import PairwiseRubric, agreement, judge_pairs
from rubriclab.stats import TIE_CREDIT, item_bootstrap

LABEL_COLUMNS = ["pair_id", "domain", "prompt", "chosen", "rejected", "rubric", "verdict", "status",
                 "agrees_with_human"]


def label_pairs(rubrics: Mapping[str, PairwiseRubric], pairs: Sequence[Pair], *, gateway: Any, judge: Any,
                seed: int, samples: int = 1, templates_dir: str | None = None) -> pd.DataFrame:
    """``judge_pairs`` rows (one per rubric × pair) for the labelling."""
    return judge_pairs(rubrics, pairs, gateway=gateway, judge=judge, seed=seed, samples=samples,
                       templates_dir=templates_dir, desc="align: label pairs")


def preference_rows(judged: pd.DataFrame, pairs: Sequence[Pair], rubric: str) -> tuple[pd.DataFrame, dict[str, int]]:
    """The DPO rows of one rubric (prompt, chosen, rejected as the judge decided) and what was left out.

    ``status`` agree: the judge prefers the human-chosen response; disagree: the other one (the pair is
    flipped); tie / failed: left out and counted."""
    by_id = {p.id: p for p in pairs}
    rows, dropped = [], {"tie": 0, "failed": 0}
    for r in judged[judged["rubric"] == rubric].itertuples():
        p = by_id[r.pair_id]
        if r.status in dropped:
            dropped[r.status] += 1
            continue
        agree = r.status == "agree"
        rows.append({"pair_id": p.id, "domain": p.domain, "prompt": p.prompt,
                     "chosen": p.chosen if agree else p.rejected, "rejected": p.rejected if agree else p.chosen,
                     "rubric": rubric, "verdict": r.verdict, "status": r.status, "agrees_with_human": agree})
    return pd.DataFrame(rows, columns=LABEL_COLUMNS), dropped


def label_agreement(judged: pd.DataFrame, first: str, second: str, *, tie_credit: float = TIE_CREDIT,
                    n_boot: int = 1000, confidence: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Per domain (and all): each rubric's agreement with the human labels, and the two rubrics' agreement
    with each other, each with a percentile bootstrap over pairs. A tie earns ``tie_credit`` (the paper's 0.5:
    "ties count as half ... throughout"); a failed verdict is left out of n and counted."""
    out = []
    ci = f"percentile bootstrap over pairs, {confidence:.0%}, B={n_boot}"
    for domain, g in [*judged.groupby("domain", sort=True), ("all", judged)]:
        for name in (first, second):
            m = agreement(g[g["rubric"] == name], tie_credit=tie_credit, n_boot=n_boot, confidence=confidence,
                          seed=seed)
            few = too_few(int(m["n"] or 0), "pairs", confidence) if m["n"] else None
            out.append({"domain": domain, "comparison": f"{name} vs human", "estimate": m["agreement"],
                        "low": np.nan if few else m["low"], "high": np.nan if few else m["high"], "n": m["n"],
                        "n_tie": m["n_tie"], "n_failed": m["n_failed"], "tie_credit": tie_credit, "interval": ci,
                        "reason": few})
        out.append({"domain": domain, "comparison": f"{first} vs {second}", "tie_credit": tie_credit, "interval": ci,
                    **_rubric_agreement(g, first, second, tie_credit, n_boot, confidence, seed)})
    return pd.DataFrame(out, columns=["domain", "comparison", "estimate", "low", "high", "n", "n_tie", "n_failed",
                                      "tie_credit", "interval", "reason"])


def _rubric_agreement(g: pd.DataFrame, first: str, second: str, tie_credit: float, n_boot: int,
                      confidence: float, seed: int) -> dict[str, Any]:
    """Same verdict 1, opposite verdicts 0, a tie on either side ``tie_credit`` (a tie is a coin flip between
    A and B, so it matches the other rubric's verdict, tie or not, half the time); failed on either side: out."""
    a = g[g["rubric"] == first].set_index("pair_id")["verdict"]
    b = g[g["rubric"] == second].set_index("pair_id")["verdict"].reindex(a.index)
    failed = a.isna() | b.isna()
    decided = a.isin(["A", "B"]) & b.isin(["A", "B"])
    credit = np.where(decided, (a == b).to_numpy(dtype=float), float(tie_credit))[~failed.to_numpy()]
    row: dict[str, Any] = {"n": len(credit), "n_tie": int((~decided & ~failed).sum()), "n_failed": int(failed.sum())}
    if not len(credit):
        return {**row, "estimate": np.nan, "low": np.nan, "high": np.nan}
    boot = item_bootstrap(credit, "mean", None, n_resamples=n_boot, confidence=confidence, seed=seed)
    few = too_few(len(credit), "pairs", confidence)
    if few:
        return {**row, "estimate": float(boot["estimate"]), "low": np.nan, "high": np.nan, "reason": few}
    return {**row, "estimate": float(boot["estimate"]), "low": float(boot["low"]), "high": float(boot["high"])}
