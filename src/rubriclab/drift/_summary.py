"""What a drift run reports beside the comparison: the stealth check and transfer tables, why an output is empty,
and ``summary.md``."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from rubriclab.drift._engine import DriftData, DriftSettings
from rubriclab.drift._run import DriftContext
from rubriclab.drift._stealth import stealth_check, transfer
from rubriclab.judging import PairwiseRubric
from rubriclab.llm import Gateway, RoleSpec, card_head
from rubriclab.reporting import files_line, to_markdown
from rubriclab.rubrics import JudgeTemplate
from rubriclab.settings import Drift


def stealth_table(ctx: DriftContext, chosen: dict[str, JudgeTemplate], evaluator: RoleSpec | None, runs: int,
                  gateway: Gateway, templates_dir: str | None, settings: DriftSettings) -> pd.DataFrame:
    """The stealth check of every chosen rubric that differs from the seed (``stealth_check``): one row per method
    with its win rate over the seed, interval and runs; empty without an evaluator or with ``runs`` 0."""
    rows, cfg = [], settings.drift
    if evaluator is None or not runs:
        return pd.DataFrame()
    for m, tpl in chosen.items():
        if m == "seed" or tpl.text == ctx.seed.text:
            continue
        r = stealth_check(ctx.seed, tpl, gateway=gateway, evaluator=evaluator, runs=runs, seed_value=settings.seed,
                          templates_dir=templates_dir, n_boot=cfg.n_boot, confidence=cfg.confidence)
        rows.append({"method": m, "win_rate": r["win_rate"], "win_low": r["low"], "win_high": r["high"],
                     "runs_n": r["n"], "runs_failed": r["n_failed"]})
    return pd.DataFrame(rows)


def transfer_table(ctx: DriftContext, chosen: dict[str, JudgeTemplate], judge: RoleSpec, models: list[str],
                   gateway: Gateway, settings: DriftSettings) -> pd.DataFrame:
    """Every chosen rubric judged by each of ``models`` (``drift.transfer.judges``) on the test split
    (``transfer``); an empty table without transfer judges."""
    if not models:
        return pd.DataFrame(columns=["judge", "rubric"])
    judges = [judge.with_(model=m) for m in models]
    rubrics = {m: PairwiseRubric.of(tpl, name=m) for m, tpl in chosen.items()}  # every method, as Tables 1–2
    cfg = settings.drift
    return transfer(rubrics, ctx.data.both("test"), gateway=gateway, judges=judges, seed=settings.seed,
                    tie_credit=cfg.tie_credit, n_boot=cfg.n_boot, confidence=cfg.confidence,
                    bench_domain="bench", target_domain="target", samples=cfg.samples)


def empty_reasons(cfg: Drift, results: dict, trans: pd.DataFrame, rounds: pd.DataFrame,
                  steps: pd.DataFrame) -> dict[str, str]:
    """Why each output this run leaves empty (or does not write) is empty, for the summary's file list."""
    out = {}
    if trans.empty:
        out["transfer.csv"] = ("no transfer judge: `drift.transfer.judges` is [] (list other judge models there to "
                               "evaluate the selected rubrics with them)")
    if "ours" not in results:
        out["rounds.csv"] = "the biased search (`ours`) is not in `drift.methods`"
        out["study.csv"] = "not written: the biased search (`ours`) is not in `drift.methods`"
    elif rounds.empty:
        out["rounds.csv"] = "the biased search ran no round"
    if "textgrad" not in results:
        out["textgrad_steps.csv"] = "`textgrad` is not in `drift.methods`"
    elif steps.empty:
        out["textgrad_steps.csv"] = "TextGrad took no step"
    return out


def run_summary(setting: str, data: DriftData, seed: JudgeTemplate, settings: DriftSettings, models: list[str],
                embedded: list[str], comparison: pd.DataFrame, selection: pd.DataFrame, trans: pd.DataFrame,
                ctx: DriftContext, grid: list[dict[str, Any]], empty: dict[str, str]) -> str:
    """``summary.md`` of a drift run: splits and search settings, the method comparison on test, the stealth check,
    selection on val, the candidates, transfer and the files (each empty one with its reason)."""
    from rubriclab.drift._outputs import LABELS, comparison_markdown, transfer_markdown  # matplotlib: on first use

    counts, cfg, q = data.counts(), settings.drift, settings.drift.search
    md = card_head(f"Rubric-induced preference drift: {setting}", models, embedded)
    md += [f"Seed rubric: `{seed.name}`. Splits (pairs): bench train/val/test {counts['bench_train']}/"
           f"{counts['bench_val']}/{counts['bench_test']}, target train/val/test {counts['target_train']}/"
           f"{counts['target_val']}/{counts['target_test']}. Validation budget: {cfg.val_budget} candidates "
           f"per method. Search: population {q.population}, T={q.rounds} rounds, subsample "
           f"{q.subsample:g}, ε_train={q.eps_train:g}, k={q.top_k}, t={q.children} "
           f"children; study grid of {len(grid)} point(s) (study.csv; the first is the configured one).", "",
           "## Method comparison on test (seed 003 Tables 1–2)", "",
           f"Intervals: {comparison.attrs['ci']}. Agreement counts a tie as {cfg.tie_credit:g} and leaves "
           "failed verdicts out (counted in the last column).", "",
           comparison_markdown(comparison), ""]
    if "win_rate" in comparison:
        md += ["Stealth check (refined vs seed rubric quality, independent evaluator, randomised order, ties 0.5): "
               + "; ".join(f"{LABELS.get(r['method'], r['method'])} {r['win_rate']:.2f} [{r['win_low']:.2f}, "
                           f"{r['win_high']:.2f}] (n={int(r['runs_n'])} runs, {int(r['runs_failed'])} failed)"
                           for r in comparison.to_dict("records") if isinstance(r.get("win_rate"), float)
                           and math.isfinite(r["win_rate"])) + ".", ""]
    md += ["## Selection on val (Eq. 5–6: feasible = bench-val ≥ seed's; lowest target-val)", "",
           "Failed verdicts: agreement leaves them out, so a candidate is feasible only with no more failed "
           "verdicts than the seed's on each val split (bench and target, the same pairs), and likewise on each "
           "search round's train subsample: failing cannot buy benchmark feasibility or a target drop. Budget: every method validates "
           f"{cfg.val_budget} distinct usable candidates; invalid or repeated proposals are replaced by up to "
           f"{cfg.refill} × {cfg.val_budget} more proposals (`budget_note` says where that cap left a "
           "method short). Δ vs seed p-values: raw and Benjamini–Hochberg adjusted across methods (p_BH).", "",
           to_markdown(selection.round(3).fillna("—")), ""]
    rej = ctx.registry.rejected()
    md += [f"Candidates proposed: {len(ctx.registry.candidates)}; usable: "
           f"{sum(c.usable for c in ctx.registry.candidates)}; not used, by reason: "
           + (", ".join(f"{k} {v}" for k, v in sorted(rej.items())) or "none") + ".", ""]
    if not trans.empty:
        md += ["## Transfer to other judge models (test)", "", f"Intervals: {comparison.attrs['ci']}.", "",
               transfer_markdown(trans), ""]
    md += [files_line([("comparison.csv", None), ("comparison.png", None), ("selection.csv", None),
                       ("archive.jsonl", "RIPD format"), ("archive.csv", None),
                       ("selected.jsonl", "RIPD format; last line = the search's choice"), ("rounds.csv", None),
                       ("textgrad_steps.csv", None), ("study.csv", None), ("transfer.csv", None)],
                      empty), ""]
    return "\n".join(md)
