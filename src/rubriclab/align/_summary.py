"""The align stage's summary.md and metrics: the label sets and their agreement, the DPO trainings, the policies'
win rates in the shape of seed 003 Table 4."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from rubriclab.align._context import AlignContext
from rubriclab.align._evaluate import REGIME_LABELS, win_rate_table
from rubriclab.align._intervals import MIN_INTERVAL_N
from rubriclab.llm import embedded_note
from rubriclab.paths import display_path
from rubriclab.reporting import to_markdown


def _fmt(row: Any) -> str:
    if row is None or not math.isfinite(float(row["estimate"])):
        return "— (no pair decided)"
    if not (math.isfinite(float(row["low"])) and math.isfinite(float(row["high"]))):
        return f"{row['estimate']:.3f} (n={int(row['n'])}; {row.get('reason') or 'no interval'})"
    if row["low"] == row["high"]:  # a point bootstrap distribution is not an interval
        return f"{row['estimate']:.3f} (n={int(row['n'])}; the same on every pair: no interval)"
    return f"{row['estimate']:.3f} [{row['low']:.2f}, {row['high']:.2f}] (n={int(row['n'])})"


def _top_ties(best: pd.DataFrame) -> str:
    picked = best[best["n_scored"] > 0]
    tied = int((picked["n_top"] > 1).sum()) if "n_top" in picked else 0
    return (f"Equal top reward scores: the lowest sample index is kept (the samples are i.i.d. draws, so that is a "
            f"random pick among the tied ones; the same rule for every policy); {tied} of {len(picked)} best-of-n picks "
            "had a tied top score (`n_top` in `best_of_n.csv`).")


def summarize(ctx: AlignContext, labels: dict[str, Any] | None, train: dict[str, Any] | None,
              evaluation: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
    """summary.md and the metrics, from the steps that ran (``run_label``, ``run_train``, ``run_evaluate``; None
    for a step that did not)."""
    conf, n_boot = float(ctx.align.confidence), int(ctx.align.n_boot)
    md = [f"# Propagation through DPO: {ctx.setting}", ""]
    md += ["Models: " + "; ".join(f"{k} = {v}" for k, v in ctx.models.items()), ""]
    note = embedded_note(ctx.embedded)
    if note:
        md += [f"> {note} The policy trained here is the embedded SmolLM2-135M (LoRA, a few steps on a handful of "
               "pairs): the win rates below are plumbing, not evidence about drift propagation.", ""]
    md += ["Rubrics: " + ", ".join(f"{n} = `{display_path(r['path'], ctx.project)}` ({r['rubric'].digest})"
                                   for n, r in ctx.rubrics.items()) + "; third-party judge template = "
           f"`{ctx.third_rubric.name}`.", ""]
    if ctx.rubrics["seed"]["rubric"].digest == ctx.rubrics["biased"]["rubric"].digest:
        md += ["> The two rubrics have the same text: the label sets are identical and π_bias is π_seed (e.g. the "
               "drift stage kept the seed because no candidate passed its constraints).", ""]
    metrics: dict[str, Any] = {}
    if labels is not None:
        md += ["## Labels", "", f"Intervals: percentile bootstrap over pairs, {conf:.0%}, B={n_boot}. A tie or a "
               "failed verdict is not a preference: the pair is left out of that rubric's label set (counted). In "
               f"the agreement a tie counts {ctx.tie_credit:g} (the paper's rule: 0.5 throughout), also between the "
               "two rubrics (a tie on either side); a failed verdict is left out of n.", "",
               to_markdown(labels["counts"].rename(columns={"kept": "labelled pairs",
                                                            "flipped": "flipped vs human"})), "", "Agreement:", ""]
        t = labels["agreement"].copy()
        t["value"] = [_fmt(r) for r in t.to_dict("records")]
        md += [to_markdown(t[["domain", "comparison", "value", "n_tie", "n_failed"]]), ""]
        for r in t.to_dict("records"):
            if math.isfinite(float(r["estimate"])):
                metrics[f"labels.{r['domain']}.{r['comparison'].replace(' ', '_')}"] = r["estimate"]
    if train is not None and len(train["summary"]):
        s, lora = train["settings"].dpo, train["settings"].dpo.lora
        md += ["## DPO training", "", f"TRL DPOTrainer, {s.loss_type} loss, β={s.beta}, {s.mode}"
               + (f" (r={lora.r}, α={lora.alpha}, dropout={lora.dropout}, {', '.join(lora.target_modules)})"
                  if s.mode == "lora" else "") + f", lr={s.lr:g}" + ("" if s.learning_rate is not None else " (the paper's for this mode)")
               + f", {s.scheduler}, warmup ratio "
               f"{s.warmup_ratio:g}, batch {s.batch_size}×{s.grad_accum}, max length {s.max_length}, epochs "
               f"{s.epochs:g}; float32 weights (with bf16 autocast on cuda: the optimizer updates float32 master weights), "
               "and evaluated in float32 weights too (bf16 autocast on cuda): a bf16 copy of the weights would round "
               "most of a small update away. "
               "Step curves: `training/curves.png` and the nested MLflow runs `dpo <policy>` (which also hold each "
               "policy's wall time, kept out of these outputs so that a re-run writes the same bytes). "
               "logratio = mean log π(chosen|x) − log π(rejected|x) on the policy's own training pairs, before and "
               "after training (the direction the labels pull).", "",
               to_markdown(train["summary"].drop(columns=[c for c in ("rubric", "regime") if c in train["summary"]])),
               ""]
        for r in train["summary"].to_dict("records"):
            if r.get("steps"):
                metrics[f"train.{r['policy']}.loss_last"] = r["loss_last"]
    if evaluation is not None:
        cfg = ctx.align.evaluate
        c = evaluation["candidates"]
        md += ["## Policy evaluation", "", f"Best-of-{int(cfg.n)} (T={cfg.temperature}, "
               f"top-p={cfg.top_p}, ≤{cfg.max_new_tokens} new tokens) on "
               f"{c['prompt_id'].nunique()} held-out prompts (the test splits), every policy with the same sampling "
               f"seed; the best candidate by the reward ({ctx.reward.model}). Candidates cut off at the token limit: "
               f"{int(c['cut_off'].sum())} of {len(c)} (kept: that is what the policy says); reward scores failed: "
               f"{int(c['score'].isna().sum())} (left out). Side-by-side examples: `examples.md`; bars with intervals: `win_rates.png`.", "",
               *(["Not trained, so not evaluated (their comparisons are counted as failed): "
                  + "; ".join(f"{k} ({v})" for k, v in evaluation["untrained"].items()), ""]
                 if evaluation["untrained"] else []),
               _top_ties(evaluation["best"]), "",
               f"Identical best responses (a tie without a judge call: the two policies said the same thing): "
               f"{int((evaluation['judged']['status'] == 'identical').sum())} of {len(evaluation['judged'])} "
               "comparisons.", "",
               f"Win rate of the left policy (ties {ctx.tie_credit:g}); cells: win% [CI] (n prompts); "
               f"percentile bootstrap over prompts, {conf:.0%}, B={n_boot}, given from {MIN_INTERVAL_N} prompts up "
               f"(below, its level does not hold); columns: <evaluation set>@<training "
               "regime> (B bench-only, T target-only, BT bench+target), the shape of seed 003 Table 4.", ""]
        for source, g in evaluation["rates"].groupby("source", sort=False):
            md += [f"### {source} ({ctx.third.model if source.startswith('third') else ctx.reward.model})", "",
                   to_markdown(win_rate_table(g)), ""]
            for r in g.to_dict("records"):
                if math.isfinite(float(r["estimate"])):
                    key = f"win.{'judge' if source.startswith('third') else 'reward'}.{r['comparison'].replace(' ', '_')}"
                    cell = f"{key}.{r['domain']}@{REGIME_LABELS.get(r['regime'], r['regime'])}"
                    metrics[cell], metrics[f"{cell}.n"] = r["estimate"], int(r["n"])  # an estimate with its n
    return "\n".join(md) + "\n", metrics
