"""Preference fit, structural (PReMISE §3.2, B.1.3, B.3, prompt E.11): applicability in and out of
domain, effective dimensionality of the criterion score matrix, and Bradley–Terry diagnostics."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from rubriclab.audit._context import AuditContext, from_bootstrap, interval, metric
from rubriclab.llm import CallRequest, answer_format, distinct_draws, load_prompt
from rubriclab.rubrics import RubricSet
from rubriclab.stats import bt_diagnostics, effective_dimensionality, item_bootstrap


def audit_applicability(rubric: RubricSet, prompts_in: dict[str, str], prompts_out: dict[str, str],
                        ctx: AuditContext, source: str = "") -> dict[str, Any]:
    """App = mean over prompts of the fraction of the K criteria judged applicable (yes) to the prompt;
    ΔApp = App_in − App_out; T/p = mean count of applicable criteria per in-domain prompt.
    A criterion whose answer could not be parsed is left out of that prompt's fraction (counted); a prompt
    with no parsed answer is left out (counted). The same prompt text twice (two pairs, or in and out of
    domain) is asked twice, as separate draws at T > 0."""
    tpl = load_prompt("audit_applicability", ctx.templates_dir)
    reqs = [CallRequest(messages=tpl.render(criterion_id=c.id, criterion=c.description, prompt=text),
                        tag=(domain, pid, c.id), **answer_format(ctx.judge, "yes_no"))
            for domain, prompts in (("in", prompts_in), ("out", prompts_out)) for pid, text in prompts.items()
            for c in rubric.criteria]
    results = ctx.gateway.run(distinct_draws(reqs), desc="applicability") if reqs else []
    ctx.tally.add(source, "applicability", results)
    rows = [{"domain": r.tag[0], "prompt_id": r.tag[1], "criterion": r.tag[2],
             "applicable": float(r.value) if r.ok else np.nan} for r in results]
    df = pd.DataFrame(rows, columns=["domain", "prompt_id", "criterion", "applicable"])
    failed = int(df["applicable"].isna().sum())
    per_prompt = df.dropna().groupby(["domain", "prompt_id"])["applicable"].agg(["mean", "sum"]).reset_index()
    asked = df.groupby("domain")["prompt_id"].nunique().to_dict() if len(df) else {}
    for domain in ("in", "out"):
        ctx.tally.drop(source, "applicability", f"{domain}-domain prompt with no parsed answer",
                       asked.get(domain, 0) - int((per_prompt.domain == domain).sum()))
    out: dict[str, Any] = {}
    boot_kw = {"n_resamples": ctx.n_boot, "confidence": ctx.confidence, "seed": ctx.seed}
    fractions = {}
    for domain in ("in", "out"):
        sub = per_prompt[per_prompt.domain == domain]
        fractions[domain] = sub["mean"].to_numpy()
        if len(sub):
            out[f"app_{domain}"] = from_bootstrap(item_bootstrap(sub["mean"].to_numpy(), "mean",
                                                                 sub["prompt_id"].to_numpy(), **boot_kw), "prompts")
        else:
            out[f"app_{domain}"] = metric(None, n=0, reason=f"no {domain}-domain prompt with a parsed answer")
    sub = per_prompt[per_prompt.domain == "in"]
    out["t_per_p"] = (from_bootstrap(item_bootstrap(sub["sum"].to_numpy(), "mean", sub["prompt_id"].to_numpy(),
                                                    **boot_kw), "prompts")
                      if len(sub) else metric(None, n=0, reason="no in-domain prompt with a parsed answer"))
    a, b = fractions["in"], fractions["out"]
    if len(a) >= 2 and len(b) >= 2:
        # in- and out-of-domain prompts are independent samples: resample each on its own
        res = sps.bootstrap((a, b), lambda x, y, axis=-1: np.mean(x, axis=axis) - np.mean(y, axis=axis),
                            n_resamples=ctx.n_boot, confidence_level=ctx.confidence, method="percentile",
                            random_state=np.random.default_rng(ctx.seed), vectorized=True)
        out["delta_app"] = metric(a.mean() - b.mean(), res.confidence_interval.low, res.confidence_interval.high,
                                  n=len(a) + len(b), n_in=len(a), n_out=len(b),
                                  ci=interval("two-sample percentile bootstrap", ctx.confidence,
                                              "in- and out-of-domain prompts, each resampled separately", ctx.n_boot))
    else:
        out["delta_app"] = metric((a.mean() - b.mean()) if len(a) and len(b) else None, n=len(a) + len(b),
                                  reason="CI needs ≥2 prompts on each side")
    per_criterion = (df.dropna().groupby(["criterion", "domain"])["applicable"].mean().unstack()
                     .rename(columns=lambda d: f"app_{d}").reset_index().to_dict("records"))
    return {"metrics": out, "per_criterion": per_criterion, "items": rows,
            "counts": {"applicability_parse_failures": failed}}


def audit_score_structure(rubric: RubricSet, scores: pd.DataFrame, ctx: AuditContext,
                          who: str = "rater0", source: str = "") -> dict[str, Any]:
    """EffDim / EffDim/K / mean |ρ| on the pairs × criteria matrix of the judge's chosen-oriented pairwise
    scores, and BT diagnostics on score differences as shown (s − 5, A-oriented) against the human label
    (chosen shown as A), so both classes occur through the seeded presentation swap."""
    sub = scores[scores.who == who].dropna(subset=["score"])
    if sub.empty or rubric.K == 0:
        empty = metric(None, n=0, reason="no parsed pairwise scores")
        return {"metrics": {"effdim": empty, "effdim_ratio": empty, "mean_abs_rho": empty,
                            "bt_cv_accuracy": empty, "bt_weight_entropy": empty}, "counts": {"bt_pairs_dropped": 0}}
    S = sub.pivot_table(index="pair_id", columns="criterion", values="score", aggfunc="first")
    D = sub.pivot_table(index="pair_id", columns="criterion", values="score_as_shown", aggfunc="first") - 5
    complete = D.dropna().index
    labels = sub.drop_duplicates("pair_id").set_index("pair_id")["chosen_shown_as"]
    y = (labels.loc[complete] == "A").astype(int).to_numpy()
    full = S.dropna()
    ed = effective_dimensionality(full.to_numpy())
    out = {}
    for key, field in (("effdim", "effdim"), ("effdim_ratio", "effdim_ratio"), ("mean_abs_rho", "mean_abs_corr")):
        if len(full) >= 3:
            # resample pairs (rows of S), recomputing the spectrum on each resample
            boot = item_bootstrap(full.reset_index(drop=True),
                                  lambda sub, f=field: effective_dimensionality(sub.to_numpy())[f],
                                  np.arange(len(full)), n_resamples=ctx.n_boot, confidence=ctx.confidence,
                                  seed=ctx.seed)
            out[key] = metric(ed[field], boot["low"], boot["high"], n=ed["n"], K=ed["K"], reason=ed.get("reason"),
                              ci=interval("percentile bootstrap", ctx.confidence, "pairs", ctx.n_boot))
        else:
            out[key] = metric(ed[field], n=ed["n"], K=ed["K"], reason=ed.get("reason") or "CI needs ≥3 pairs")
    if len(complete) >= 4 and len(set(y)) == 2:
        bt = bt_diagnostics(D.loc[complete].to_numpy(float), y, seed=ctx.seed)
        folds = [float(f) for f in bt.get("cv_accuracy_folds", [])]
        low, high = (min(folds), max(folds)) if folds else (None, None)
        out["bt_cv_accuracy"] = metric(bt["cv_accuracy"], low, high, n=len(complete),
                                       ci=interval(f"min-max over {len(folds)} CV folds (not a confidence interval)"),
                                       folds=bt.get("folds"), C=bt.get("C"), reason=bt.get("reason"))
        out["bt_weight_entropy"] = metric(bt["weight_entropy"], n=len(complete), reason=bt.get("reason"))
        coef = dict(zip(D.columns, np.ravel(bt["coef"]).tolist()))
    else:
        why = "BT needs ≥4 pairs with every criterion scored and both label classes"
        out["bt_cv_accuracy"] = metric(None, n=len(complete), reason=why)
        out["bt_weight_entropy"] = metric(None, n=len(complete), reason=why)
        coef = {}
    ctx.tally.drop(source, "score structure", "pair without a parsed score on every criterion (EffDim, BT)",
                   int(len(D) - len(complete)))
    return {"metrics": out, "bt_coef": coef, "counts": {"bt_pairs_dropped": int(len(D) - len(complete))}}
