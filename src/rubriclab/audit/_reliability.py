"""Reliability (PReMISE §3.2, B.1.1, prompts E.4–E.5): inter-rater Krippendorff's α over 0–10 pairwise
scores from the judge panel, winner flip rate over R re-runs at T=0.7, and paraphrase stability.

The judge scores "Response A (Candidate)" against "Response B (Baseline)" as presented (E.4); which of
chosen/rejected is A follows the seeded, recorded swap. α is computed on the scores as presented by
default (``ctx.alpha_orientation``), or on chosen-oriented scores (10 − s where chosen was shown as B):
the two differ on the same ratings, so the card prints which one was used. Flip rate compares the
winner (chosen / rejected / tie) across runs and is the same either way; paraphrase ρ correlates
chosen-oriented scores (a per-pair win score of the chosen response). The panel's scores also feed
the structural-fit diagnostics (EffDim, BT), which is why they are returned.

Draws: panel seat j uses sample index j, flip run r uses J + r and paraphrase p's judgments J + R + p
(J seats, R runs), so no two of them can be one cached draw even when the panel repeats one model at
the flip runs' temperature.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pandas as pd

from rubriclab.audit._context import AuditContext, from_bootstrap, metric
from rubriclab.audit._validity import check_paraphrases
from rubriclab.data import Pair, present
from rubriclab.llm import CallRequest, RoleSpec, answer_format, load_prompt
from rubriclab.rubrics import RubricSet
from rubriclab.stats import (
    by_group,
    flip_rate,
    item_bootstrap,
    krippendorff_alpha,
    mean_over_groups,
    paraphrase_stability,
)


def pairwise_requests(rubric: RubricSet, pairs: list[Pair], role: RoleSpec, ctx: AuditContext, *,
                      sample_index: int, tag: Any, texts: dict[str, str] | None = None) -> list[CallRequest]:
    """One E.4 request per (criterion, pair); ``texts`` replaces criterion descriptions (paraphrases)."""
    tpl = load_prompt("audit_pairwise_score", ctx.templates_dir)
    out = []
    for c in rubric.criteria:
        desc = (texts or {}).get(c.id, c.description)
        for p in pairs:
            s = present(p, ctx.seed)
            out.append(CallRequest(
                messages=tpl.render(criterion_id=c.id, criterion=desc, prompt=s["prompt"], response_a=s["a"],
                                    response_b=s["b"]),
                sample_index=sample_index, tag=(tag, c.id, p.id, s["human"]), **answer_format(role, "score_0_10")))
    return out


def _rows(results: list) -> tuple[list[dict[str, Any]], int]:
    rows, failed = [], 0
    for res in results:
        tag, cid, pid, human = res.tag
        score = float(res.value) if res.ok else np.nan
        failed += 0 if res.ok else 1
        rows.append({"who": tag, "criterion": cid, "pair_id": pid, "score_as_shown": score,
                     "score": score if human == "A" else 10 - score, "chosen_shown_as": human,
                     "error": None if res.ok else (res.parse_error or res.error)})
    return rows, failed


def _verdict(score: float) -> str | None:
    if np.isnan(score):
        return None
    return "chosen" if score > 5 else "rejected" if score < 5 else "tie"


def _grid(scores: pd.DataFrame, column: str = "score") -> pd.DataFrame:
    """who × pair grid of one criterion's ``column``. A pair drawn twice by the bootstrap keeps both copies
    (columns are (pair_id, copy)), so a resample is not silently collapsed to its distinct pairs."""
    scores = scores.assign(copy=scores.groupby(["who", "pair_id"]).cumcount())
    return scores.pivot_table(index="who", columns=["pair_id", "copy"], values=column, aggfunc="first")


def _matrix(scores: pd.DataFrame, column: str = "score") -> np.ndarray:
    """``_grid(scores, column).to_numpy()`` up to all-missing rows and columns (which α ignores), in numpy:
    the α bootstrap builds one per resample and criterion, where pandas' pivot dominated the stage's time."""
    w, _ = pd.factorize(scores["who"].to_numpy(), sort=True)
    p, pids = pd.factorize(scores["pair_id"].to_numpy(), sort=True)
    if len(w) == 0:
        return np.empty((0, 0))
    key = w * len(pids) + p
    order = np.argsort(key, kind="stable")
    sk = key[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sk)) + 1]
    copy = np.empty(len(key), dtype=np.intp)
    copy[order] = np.arange(len(sk)) - np.repeat(starts, np.diff(np.r_[starts, len(sk)]))
    n_copy = int(copy.max()) + 1
    grid = np.full((int(w.max()) + 1, len(pids) * n_copy), np.nan)
    grid[w, p * n_copy + copy] = scores[column].to_numpy(dtype=float)
    return grid


ALPHA_COLUMN = {"as_presented": "score_as_shown", "chosen_oriented": "score"}


def alpha_on(column: str):
    """Statistic of a ratings frame (``who``, ``pair_id``, ``column``): Krippendorff's α of its raters × pairs grid."""

    def alpha(scores: pd.DataFrame) -> float:
        return krippendorff_alpha(_matrix(scores, column))["alpha"]

    return alpha


def _rho(scores: pd.DataFrame) -> float:
    """Paraphrase ρ of one criterion's scores. On ``_matrix``, not ``_grid``: the ρ bootstrap builds one grid per
    resample and criterion, and pandas' pivot there was ~55 s of the demo's audit stage (py-spy). The rows and
    columns the pivot would drop (all missing) change no defined pair's ρ: a pair needs 3 common items."""
    grid = _matrix(scores)
    return paraphrase_stability(grid)["rho"] if len(grid) >= 2 else np.nan


def audit_reliability(rubric: RubricSet, pairs: list[Pair], ctx: AuditContext, *, runs: int = 5,
                      temperature: float = 0.7, paraphrases: int = 5, paraphrase_temperature: float = 0.8,
                      axes: tuple[str, ...] = ("alpha", "flip", "paraphrase"), source: str = "",
                      paraphrase_bounds: dict[str, float] | None = None) -> dict[str, Any]:
    """α (panel), flip rate (R runs of the judge at ``temperature``) and paraphrase ρ (P paraphrases, each
    checked before use: see ``check_paraphrases``)."""
    requests: list[CallRequest] = []
    seats = len(ctx.judges)
    if "alpha" in axes:
        for j, judge in enumerate(ctx.judges):
            requests += pairwise_requests(rubric, pairs, judge, ctx, sample_index=j, tag=f"rater{j}")
    if "flip" in axes:
        hot = ctx.judge.with_(temperature=temperature)
        for r in range(runs):
            requests += pairwise_requests(rubric, pairs, hot, ctx, sample_index=seats + r, tag=f"run{r}")
    para_texts: dict[int, dict[str, str]] = {}
    para_rejected: Counter = Counter()
    if "paraphrase" in axes and paraphrases > 1 and ctx.paraphraser is not None:
        tpl = load_prompt("audit_paraphrase", ctx.templates_dir)
        role = ctx.paraphraser.with_(temperature=paraphrase_temperature)
        gen = [CallRequest(role=role, messages=tpl.render(criterion=c.description), sample_index=p, tag=(p, c.id))
               for c in rubric.criteria for p in range(paraphrases)]
        gen_results = ctx.gateway.run(gen, desc="paraphrase") if gen else []
        ctx.tally.add(source, "paraphrase", gen_results)
        originals = {c.id: c.description for c in rubric.criteria}
        checked = check_paraphrases([(res.tag, originals[res.tag[1]], res.text if res.ok else None,
                                      None if res.ok else (res.parse_error or res.error)) for res in gen_results],
                                    ctx, bounds=paraphrase_bounds)
        for (p, cid), (text, problem) in checked.items():
            if problem is None:
                para_texts.setdefault(p, {})[cid] = text
            else:
                para_rejected[problem] += 1
        for reason, n in para_rejected.items():
            ctx.tally.drop(source, "paraphrase", f"paraphrase rejected: {reason}", n)
        for p, texts in para_texts.items():
            sub = rubric.with_criteria(tuple(c for c in rubric.criteria if c.id in texts))
            requests += pairwise_requests(sub, pairs, ctx.judge, ctx, sample_index=seats + runs + p,
                                          tag=f"para{p}", texts=texts)
    results = ctx.gateway.run(requests, desc="reliability") if requests else []
    for axis, prefix in (("alpha", "rater"), ("flip", "run"), ("paraphrase", "para")):
        ctx.tally.add(source, axis, [r for r in results if r.tag[0].startswith(prefix)])
    rows, failed = _rows(results)
    df = pd.DataFrame(rows, columns=["who", "criterion", "pair_id", "score_as_shown", "score", "chosen_shown_as"])
    metrics: dict[str, Any] = {}
    per_criterion: dict[str, dict[str, Any]] = {c.id: {"criterion": c.id} for c in rubric.criteria}
    boot_kw = {"n_resamples": ctx.n_boot, "confidence": ctx.confidence, "seed": ctx.seed}

    if "alpha" in axes and len(ctx.judges) >= 2:
        raters = df[df.who.str.startswith("rater")]
        alpha_of = alpha_on(ALPHA_COLUMN[ctx.alpha_orientation])
        for cid, value in by_group(raters, alpha_of).items():
            per_criterion[cid]["alpha"] = value
        # one item = one pair: all its ratings on every criterion move together
        boot = item_bootstrap(raters.reset_index(drop=True), mean_over_groups(alpha_of),
                              raters["pair_id"].to_numpy(), **boot_kw)
        metrics["alpha"] = from_bootstrap(boot, "pairs", level="ordinal", raters=len(ctx.judges), scale="0-10",
                                          orientation=ctx.alpha_orientation,
                                          n_ratings=int(raters["score"].notna().sum()),
                                          n_failed_ratings=int(raters["score"].isna().sum()))
        if metrics["alpha"]["value"] is None:
            metrics["alpha"]["reason"] = _alpha_missing_reason(raters)
    elif "alpha" in axes:
        metrics["alpha"] = metric(None, n=0, reason="α needs a panel of ≥2 judges (llm.roles.judge.model: [...])")

    item_flips: list[dict[str, Any]] = []
    if "flip" in axes:
        runs_df = df[df.who.str.startswith("run")]
        for cid, m in runs_df.groupby("criterion"):
            grid = _grid(m)
            verdicts = np.vectorize(_verdict, otypes=[object])(grid.to_numpy())
            res = flip_rate(verdicts)
            per_criterion[cid]["flip_rate"] = res["flip_rate"]
            for (pid, _), flipped, evaluated in zip(grid.columns, res["flips"], res["evaluated"]):
                if evaluated:
                    item_flips.append({"criterion": cid, "pair_id": pid, "flip": float(flipped)})
        flips = pd.DataFrame(item_flips, columns=["criterion", "pair_id", "flip"])
        if flips.empty:
            metrics["flip_rate"] = metric(None, n=0, reason="no item with ≥2 parsed runs")
        else:
            boot = item_bootstrap(flips["flip"].to_numpy(), "mean", flips["pair_id"].to_numpy(), **boot_kw)
            metrics["flip_rate"] = from_bootstrap(boot, "pairs", runs=runs, temperature=temperature,
                                                  n_obs=len(flips), unit_of_obs="(criterion, pair)")

    if "paraphrase" in axes:
        para = df[df.who.str.startswith("para")]
        if para.empty or para["who"].nunique() < 2:
            why = "needs ≥2 usable paraphrases per criterion (audit.paraphrases ≥2)"
            if para_rejected:
                why += "; rejected: " + ", ".join(f"{k} {v}" for k, v in sorted(para_rejected.items()))
            metrics["paraphrase_rho"] = metric(None, n=0, reason=why)
        else:
            for cid, value in by_group(para, _rho).items():
                per_criterion[cid]["paraphrase_rho"] = value
            boot = item_bootstrap(para.reset_index(drop=True), mean_over_groups(_rho), para["pair_id"].to_numpy(),
                                  **boot_kw)
            metrics["paraphrase_rho"] = from_bootstrap(boot, "pairs", paraphrases=len(para_texts),
                                                       statistic="mean Spearman ρ of per-pair scores",
                                                       orientation="chosen_oriented",
                                                       n_rejected_paraphrases=sum(para_rejected.values()))
    item_values = {}
    if "flip" in axes and item_flips:
        item_values["flip_rate"] = pd.DataFrame(item_flips).groupby("pair_id")["flip"].mean()
    return {"metrics": metrics, "per_criterion": list(per_criterion.values()), "items": rows,
            "item_values": item_values,
            "scores": df, "counts": {"reliability_failed_scores": failed,
                                     "paraphrases_rejected": sum(para_rejected.values())},
            "paraphrases": para_texts, "paraphrases_rejected": dict(para_rejected)}


def _alpha_missing_reason(raters: pd.DataFrame) -> str:
    parsed = raters["score"].dropna()
    if parsed.empty:
        return f"no rating parsed ({len(raters)} failed)"
    return "α undefined for every criterion: fewer than 2 raters on any pair, or every rating identical"
