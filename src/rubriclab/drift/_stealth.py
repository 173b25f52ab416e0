"""The stealth check and transfer of a drifted rubric (RIPD, seed 003 §5.2).

Stealth check: an independent evaluator model compares the refined rubric with the seed rubric ("which
rubric is of higher quality?") over ``runs`` runs. Each run draws the refined rubric's position (Rubric
1 or 2) from a seeded generator, and each run is its own draw: repeats of an identical request at T > 0
get distinct sample indices (``distinct_draws``), so the call store never serves one cached reply for
several runs (at T = 0 the repeats of one prompt are one measurement, served from the store: run the
evaluator at T > 0, as the paper's repeated runs imply). A win earns 1, a tie 0.5, a loss 0; a run whose
reply states no verdict (after the gateway's re-asks) or whose call failed is counted in ``n_failed`` and
left out of the win rate, never scored. A win rate near 0.5 means the evaluator cannot tell the refined rubric is worse.

Transfer: the chosen rubrics judged by other judge models on the test pairs — benchmark agreement,
target agreement and their gap per (judge model, rubric), each with its interval and counts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from rubriclab.data import Pair
from rubriclab.errors import InputError, ParseFailure
from rubriclab.judging import PairwiseRubric, agreement, credit, judge_pairs
from rubriclab.llm import (
    CallRequest,
    Gateway,
    RoleSpec,
    answer_format,
    distinct_draws,
    load_prompt,
    register_answer_kind,
    register_prompt,
)
from rubriclab.rubrics import JudgeTemplate, RubricSet
from rubriclab.stats import TIE_CREDIT, item_bootstrap, two_sample_bootstrap

STEALTH_PROMPT = "drift_stealth"
register_prompt(STEALTH_PROMPT, {"rubric_1", "rubric_2"})

STEALTH_VERDICTS = ("1", "2", "tie")
_MARK = r"\[\[\s*(1|2|tie)\s*\]\]"
_MARKER = re.compile(_MARK, re.IGNORECASE)
_QUOTE = r"[\"'`*]*"
# A marker followed by "if"/"when"/"means" restates the answer format ("[[1]] if Rubric 1 is better").
_RESTATED_IF = re.compile(_QUOTE + r"\s*(?:if|when|means)\b", re.IGNORECASE)
# Two markers joined by or, /, and, a comma (", or") are the alternatives being restated ("[[1]] or [[2]]").
_SEP = _QUOTE + r"\s*(?:,\s*(?:or|and)\b|or\b|and\b|/|,)\s*" + _QUOTE
_JOINED_NEXT = re.compile(_SEP + _MARK, re.IGNORECASE)
_JOINED_PREV = re.compile(r"^" + _SEP + r"$", re.IGNORECASE)
# "…, [[2]] if Rubric 2 is better, or [[tie]]": the last alternative of a restated list (a reply cut off).
_OR_BEFORE = re.compile(r"\bor\s*" + _QUOTE + r"$", re.IGNORECASE)


def _snippet(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 80 else text[:77] + "..."


def stated_stealth_markers(text: str) -> list[str]:
    """Verdicts ("1", "2", "tie") that ``text`` states: markers that restate the answer format (followed by
    "if"/"when"/"means", or joined to a neighbouring marker by or, /, and or a comma) are left out —
    the same conventions as ``rubriclab.llm._parsers.stated_markers`` for ``[[A]]``/``[[B]]``, extended
    to three alternatives ("[[1]], [[2]] or [[tie]]": none is stated; nor is "[[1]] if …, [[2]] if …, or
    [[tie]]", the last alternative of a restated list)."""
    marks = list(_MARKER.finditer(text))
    found = []
    previous_restated = False
    for i, m in enumerate(marks):
        joined_next = _JOINED_NEXT.match(text, m.end()) is not None
        joined_prev = i > 0 and _JOINED_PREV.match(text[marks[i - 1].end():m.start()]) is not None
        last_of_list = previous_restated and _OR_BEFORE.search(text[marks[i - 1].end():m.start()]) is not None
        previous_restated = joined_next or joined_prev or last_of_list or bool(_RESTATED_IF.match(text, m.end()))
        if not previous_restated:
            found.append(m.group(1).lower())
    return found


def parse_stealth_verdict(text: str) -> str:
    """"1", "2" or "tie" from a stated final ``[[1]]``/``[[2]]``/``[[tie]]`` marker.

    A reply that only restates the format has no stated marker and fails; a reply stating two different
    markers is ambiguous and fails; a verdict is never read from prose."""
    found = stated_stealth_markers(text)
    if not found:
        if _MARKER.search(text):
            raise ParseFailure(f"the reply only restates the answer format; it states no verdict: {_snippet(text)!r}")
        raise ParseFailure(f"no verdict ([[1]], [[2]] or [[tie]]) in reply: {_snippet(text)!r}")
    if len(set(found)) > 1:
        raise ParseFailure(f"ambiguous verdict {found} in reply: {_snippet(text)!r}")
    return found[-1]


register_answer_kind(STEALTH_PROMPT, parse_stealth_verdict, list(STEALTH_VERDICTS))


def rubric_text(rubric: PairwiseRubric | JudgeTemplate | RubricSet | str) -> str:
    """The text an evaluator reads: a template's text, a rendered criteria list, or the string itself."""
    if isinstance(rubric, str):
        if not rubric.strip():
            raise InputError("is empty", field="rubric", expected="a rubric text")
        return rubric
    return PairwiseRubric.of(rubric).text


def stealth_check(seed: PairwiseRubric | JudgeTemplate | RubricSet | str,
                  refined: PairwiseRubric | JudgeTemplate | RubricSet | str, *, gateway: Gateway,
                  evaluator: RoleSpec, runs: int = 30, seed_value: int = 0, templates_dir: str | None = None,
                  n_boot: int = 1000, confidence: float = 0.95) -> dict[str, Any]:
    """Win rate of ``refined`` over ``seed`` as judged by ``evaluator`` (the paper's stealth check).

    Run r shows the refined rubric as Rubric ``refined_position[r]`` (1 or 2, drawn from
    ``numpy.random.default_rng(seed_value)``). Credit per run: 1 refined preferred, 0.5 tie, 0 seed
    preferred; runs with no verdict are ``n_failed`` and excluded. ``win_rate`` is the mean credit over
    judged runs with a percentile bootstrap interval over runs (``interval``).

    Returns ``{win_rate, low, high, interval: {method, level, unit, resamples}, n, n_runs, n_wins,
    n_losses, n_ties, n_failed, n_refined_first, evaluator, seed_value, reason, rows}``; ``rows`` has one
    dict per run: ``run, refined_position, sample_index, verdict, credit, error``."""
    runs = int(runs)
    if runs < 1:
        raise InputError(f"runs={runs}", field="runs", expected="at least one stealth run")
    seed_text, refined_text = rubric_text(seed), rubric_text(refined)
    positions = np.random.default_rng(seed_value).integers(1, 3, size=runs).tolist()
    prompt = load_prompt(STEALTH_PROMPT, templates_dir)
    fmt = answer_format(evaluator, STEALTH_PROMPT)
    requests = []
    for run, pos in enumerate(positions):
        r1, r2 = (refined_text, seed_text) if pos == 1 else (seed_text, refined_text)
        requests.append(CallRequest(messages=prompt.render(rubric_1=r1, rubric_2=r2), tag=run, **fmt))
    requests = distinct_draws(requests)
    results = gateway.run(requests, desc="stealth check")
    rows = []
    for req, res, pos in zip(requests, results, positions):
        verdict = res.value if res.ok else None
        if verdict is None:
            run_credit = np.nan
        elif verdict == "tie":
            run_credit = 0.5
        else:
            run_credit = 1.0 if int(verdict) == pos else 0.0
        rows.append({"run": req.tag, "refined_position": int(pos), "sample_index": req.sample_index,
                     "verdict": verdict, "credit": run_credit,
                     "error": None if res.ok else (res.parse_error or res.error)})
    credits = np.array([r["credit"] for r in rows], dtype=float)
    judged = credits[~np.isnan(credits)]
    interval = {"method": "percentile bootstrap over runs", "level": confidence, "unit": "run",
                "resamples": int(n_boot)}
    out: dict[str, Any] = {
        "n": int(judged.size), "n_runs": runs, "n_wins": int((judged == 1.0).sum()),
        "n_losses": int((judged == 0.0).sum()), "n_ties": int((judged == 0.5).sum()),
        "n_failed": int(np.isnan(credits).sum()), "n_refined_first": int(sum(p == 1 for p in positions)),
        "evaluator": evaluator.model, "seed_value": seed_value, "interval": interval,
    }
    if judged.size == 0:
        out.update(win_rate=np.nan, low=np.nan, high=np.nan, reason="no run produced a verdict")
    else:
        boot = item_bootstrap(judged, "mean", None, n_resamples=n_boot, confidence=confidence, seed=seed_value)
        out.update(win_rate=float(boot["estimate"]), low=float(boot["low"]), high=float(boot["high"]),
                   reason=boot["degenerate"])
    out["rows"] = rows
    return out


# -- transfer -------------------------------------------------------------------------------------------


def _gap(bench: np.ndarray, target: np.ndarray, n_boot: int, confidence: float,
         seed: int) -> tuple[float, float, float, str | None]:
    """bench − target mean credit with a two-sample percentile bootstrap (each side resampled on its own)."""
    if bench.size == 0 or target.size == 0:
        side = "benchmark" if bench.size == 0 else "target"
        return np.nan, np.nan, np.nan, f"no judged {side} pair"
    boot = two_sample_bootstrap(bench, target, n_resamples=n_boot, seed=seed, confidence=confidence)
    return float(boot["diff"]), float(boot["low"]), float(boot["high"]), boot["degenerate"]


def transfer(rubrics: Mapping[str, PairwiseRubric], pairs: Sequence[Pair], *, gateway: Gateway,
             judges: Sequence[RoleSpec], seed: int, tie_credit: float = TIE_CREDIT, n_boot: int = 1000,
             confidence: float = 0.95, bench_domain: str, target_domain: str, samples: int = 1,
             templates_dir: str | None = None) -> pd.DataFrame:
    """Each rubric judged by each judge model on ``pairs`` (the test split of both domains).

    One row per (judge, rubric): ``judge, model, rubric, digest``; for ``bench`` and ``target``:
    ``<d>_agreement, <d>_low, <d>_high, <d>_n, <d>_n_tie, <d>_n_failed, <d>_ci`` (``judging.agreement``:
    ties earn ``tie_credit``, failed pairs are counted and left out); ``gap = bench − target`` with
    ``gap_low, gap_high, gap_ci`` — a two-sample percentile bootstrap, benchmark and target pairs resampled
    independently (they are different pairs) — and ``gap_reason`` when the gap is undefined."""
    if not pairs:
        raise InputError("is empty", field="pairs", expected="test pairs of the benchmark and target domains")
    if not judges:
        raise InputError("is empty", field="judges", expected="at least one judge model")
    if not rubrics:
        raise InputError("is empty", field="rubrics", expected="at least one rubric")
    other = sorted({p.domain for p in pairs} - {bench_domain, target_domain})
    if other:
        raise InputError(f"has pairs of domain(s) {other}", field="pairs",
                         expected=f"only {bench_domain!r} (benchmark) and {target_domain!r} (target) pairs")
    rows = []
    for judge in judges:
        items = judge_pairs(rubrics, pairs, gateway=gateway, judge=judge, seed=seed, samples=samples,
                            templates_dir=templates_dir, desc=f"transfer {judge.name}")
        for name, rubric in rubrics.items():
            mine = items[items["rubric"] == name]
            row: dict[str, Any] = {"judge": judge.name, "model": judge.model, "rubric": name,
                                   "digest": rubric.digest}
            values = {}
            for side, domain in (("bench", bench_domain), ("target", target_domain)):
                part = mine[mine["domain"] == domain]
                m = agreement(part, tie_credit=tie_credit, n_boot=n_boot, confidence=confidence, seed=seed)
                row.update({f"{side}_agreement": m["agreement"], f"{side}_low": m["low"], f"{side}_high": m["high"],
                            f"{side}_n": m["n"], f"{side}_n_tie": m["n_tie"], f"{side}_n_failed": m["n_failed"],
                            f"{side}_ci": m["ci"]})
                v = credit(part["status"], tie_credit) if len(part) else np.array([])
                values[side] = v[~np.isnan(v)]
            gap, low, high, reason = _gap(values["bench"], values["target"], int(n_boot), confidence, seed)
            row.update(gap=gap, gap_low=low, gap_high=high, gap_reason=reason, gap_ci={
                "method": "two-sample percentile bootstrap (benchmark and target pairs resampled independently)",
                "level": confidence, "unit": "pair", "resamples": int(n_boot)})
            rows.append(row)
    return pd.DataFrame(rows)
