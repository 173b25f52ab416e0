"""Pairwise judging with a rubric — a judge template or a criteria list — shared by audit, drift and align:
the request builder, batch judging of preference pairs, and agreement with ties and failures counted."""

from __future__ import annotations

from rubriclab.judging._judge import (
    STATUSES,
    TIE,
    agreement,
    credit,
    describe_agreement,
    judge_pairs,
    pairwise_request,
    status_of,
)
from rubriclab.judging._rubric import PairwiseRubric, load_judge_prompt, load_pairwise_rubric

__all__ = [
    "STATUSES", "TIE", "PairwiseRubric", "agreement", "credit", "describe_agreement", "judge_pairs",
    "load_judge_prompt", "load_pairwise_rubric", "pairwise_request", "status_of",
]
