"""DVC stage `drift` (one instance per benchmark–target setting of ``data.ripd``): the biased rubric search
and its baselines under one validation budget, selection on val and the comparison on test (seed 003
Tables 1–2), the stealth check and transfer. The search runs as an Optuna study over its tolerance knobs
(ε_train, population, rounds); every candidate is an MLflow nested run and a line of the archive."""

from __future__ import annotations

import argparse
import hashlib
import json
import math
from pathlib import Path
from typing import Any

import optuna
import pandas as pd

from rubriclab import atomic
from rubriclab.audit import to_markdown
from rubriclab.config import find_project_dir, load_params
from rubriclab.data import read_pairs
from rubriclab.drift import (
    DriftContext,
    DriftData,
    DriftSettings,
    archive_frame,
    archive_lines,
    report_on_test,
    run_method,
    selected_template,
    stealth_check,
    transfer,
)
from rubriclab.drift._outputs import LABELS, comparison_figure, comparison_markdown, method_rows, transfer_markdown
from rubriclab.errors import ConfigError
from rubriclab.judging import PairwiseRubric, load_pairwise_rubric
from rubriclab.llm import check_calls, embedded_note, gateway_from_params, panel, roles_from_params
from rubriclab.repair import grid_results, run_grid, study_storage
from rubriclab.reporting import files_line
from rubriclab.rubrics import JudgeTemplate, write_ripd
from rubriclab.settings import DriftGrid, DriftLimits, Params
from rubriclab.stages import exit_stage, run_stage
from rubriclab.tracking import stage_run, write_metrics_json

KNOBS = ("eps_train", "population", "rounds")


def load_data(project: Path, setting: str, limits: DriftLimits | None = None) -> DriftData:
    """The six splits of ``outputs/data/ripd/<setting>``, each cut to ``drift.limits.<split>`` pairs (None: all)."""
    base = project / "outputs/data/ripd" / setting
    splits = {}
    for domain in ("bench", "target"):
        for split in ("train", "val", "test"):
            path = base / f"{domain}_{split}.parquet"
            if not path.exists():
                raise ConfigError(f"{path}: missing; run `dvc repro data` (data.ripd.{setting})")
            pairs = read_pairs(path)
            cap = getattr(limits, split) if limits is not None else None
            splits[(domain, split)] = pairs[: int(cap)] if cap is not None else pairs
    for split in ("val", "test"):
        for domain in ("bench", "target"):
            if not splits[(domain, split)]:
                raise ConfigError(f"{base}/{domain}_{split}.parquet is empty; drift needs {domain} {split} pairs "
                                  f"(data.ripd.{setting}.{split})")
    return DriftData.of(splits)


def seed_template(project: Path, seed_rubrics: dict[str, str], setting: str,
                  seed_file: Path | None = None) -> JudgeTemplate:
    spec = seed_file or seed_rubrics.get(setting)
    if not spec:
        raise ConfigError(f"params.yaml: drift.seed_rubrics.{setting} is not set; give the seed judge template "
                          "(a {\"name\", \"template\"} file or a RIPD .jsonl)")
    path = Path(spec) if Path(spec).is_absolute() else project / spec
    rubric = load_pairwise_rubric(path)
    if rubric.template is None:
        raise ConfigError(f"{path}: the drift search rewrites a whole judge template; this file is a criteria list "
                          "(the drift gate, `rubriclab drift check`, takes criteria lists)")
    return rubric.template


def grid_of(grid: DriftGrid, settings: DriftSettings) -> list[dict[str, Any]]:
    """Study grid (``drift.study.grid``) over (ε_train, population, rounds); the configured point comes first."""
    base = {k: getattr(settings.drift.search, k) for k in KNOBS}
    values = {k: list(getattr(grid, k) or [base[k]]) for k in KNOBS}
    points = [base]
    for e in values["eps_train"]:
        for p in values["population"]:
            for r in values["rounds"]:
                pt = {"eps_train": float(e), "population": int(p), "rounds": int(r)}
                if pt not in points:
                    points.append(pt)
    return points


def _study_name(setting: str, seed: JudgeTemplate, settings: DriftSettings, data: DriftData, models: list[str]) -> str:
    blob = json.dumps([setting, seed.text, repr(settings), data.counts(), models], sort_keys=True, default=str)
    return f"drift-{setting}-{hashlib.sha256(blob.encode()).hexdigest()[:12]}"


def run_drift_stage(params: dict[str, Any], project: Path, setting: str, *, seed_file: Path | None = None,
                    out_dir: Path | None = None, storage_url: str | None = None) -> dict[str, Any]:
    """Run the drift search, baselines, selection and reports for ``setting``; write ``outputs/drift/<setting>``
    and ``metrics/drift/<setting>.json`` (an ad-hoc run with ``out_dir`` writes only that folder)."""
    p = Params.of(params)
    settings = DriftSettings.of(p.drift, p.data.seed)
    data = load_data(project, setting, p.drift.limits)
    seed = seed_template(project, p.drift.seed_rubrics, setting, seed_file)
    roles = roles_from_params(p.llm)
    for needed in ("judge", "refiner"):
        if needed not in roles:
            raise ConfigError(f"params.yaml: llm.roles.{needed} is not configured; drift needs it")
    judge, refiner = panel(roles["judge"])[0], panel(roles["refiner"])[0]
    evaluator = panel(roles["evaluator"])[0] if "evaluator" in roles else None
    stealth_runs = p.drift.stealth.runs
    transfer_models = list(p.drift.transfer.judges)
    used = [judge, refiner] + ([evaluator] if evaluator is not None and stealth_runs else [])
    models = sorted({f"{r.name}={r.model}" for r in used} | {f"transfer={m}" for m in transfer_models})
    embedded = sorted({r.name for r in used if r.model.startswith("local/")}
                      | {"transfer" for m in transfer_models if m.startswith("local/")})
    gateway = gateway_from_params(p.llm, stage=f"drift@{setting}", project_dir=project)
    templates_dir = p.llm.templates_dir
    ctx = DriftContext(seed=seed, data=data, gateway=gateway, judge=judge, refiner=refiner, settings=settings,
                       templates_dir=templates_dir)
    out = out_dir or project / "outputs/drift" / setting
    out.mkdir(parents=True, exist_ok=True)
    grid = grid_of(p.drift.study.grid, settings)
    flat: dict[str, Any] = {}
    with stage_run("drift", f"drift@{setting}", p.effective(), project, experiment=p.tracking.experiment,
                   tags={"setting": setting, "models": ", ".join(models), "embedded_model": str(bool(embedded)),
                         "adhoc": str(out_dir is not None)}) as run:
        results: dict[str, dict[str, Any]] = {}
        for method in settings.drift.methods:
            if method != "ours":
                results[method] = run_method(ctx, method)
        ours_points: dict[int, dict[str, Any]] = {}
        if "ours" in settings.drift.methods:
            storage = study_storage(storage_url or p.drift.study.storage,
                                    journal=out / "study.journal")

            def label_of(point: dict[str, Any]) -> str:
                return "ours" if grid.index(point) == 0 else f"ours{grid.index(point)}"

            def objective(trial: optuna.Trial, point: dict[str, Any]) -> float:
                res = run_method(ctx, "ours", settings.with_search(**point), label=label_of(point))
                ours_points[grid.index(point)] = res
                value = (res["selected"].val if res["selected"] is not None else ctx.seed_val)["target"]["agreement"]
                trial.set_user_attr("selected", res["selected"].prompt_id if res["selected"] else "seed")
                trial.set_user_attr("reason", res["reason"])
                if not math.isfinite(value):
                    raise optuna.TrialPruned("target-val agreement undefined (no judged target val pair)")
                return value

            study = run_grid(_study_name(setting, seed, settings, data, models), storage, grid, objective,
                             directions=("minimize",))
            for i, point in enumerate(grid):  # points another worker ran: recomputed from the call store
                if i not in ours_points:
                    ours_points[i] = run_method(ctx, "ours", settings.with_search(**point), label=label_of(point))
            results["ours"] = ours_points[0]
            table = grid_results(study).drop(columns=["values"])
            table["selected"] = [ours_points[grid.index({k: (int(r[k]) if k != "eps_train" else float(r[k]))
                                                         for k in KNOBS})]["reason"] for _, r in table.iterrows()]
            atomic.write_csv(table, out / "study.csv", index=False)
        order = [m for m in ("seed", "random", "icl", "textgrad", "ours") if m in results]
        chosen = {m: selected_template(ctx, results[m]) for m in order}
        comparison = report_on_test(chosen, data=data, judging=ctx.judging, settings=settings)
        stealth = _stealth(ctx, chosen, evaluator, stealth_runs, gateway, templates_dir, settings)
        if not stealth.empty:
            ci = comparison.attrs["ci"]
            comparison = comparison.merge(stealth[["method", "win_rate", "win_low", "win_high", "runs_n",
                                                   "runs_failed"]], on="method", how="left")
            comparison.attrs["ci"] = ci
        atomic.write_csv(comparison, out / "comparison.csv", index=False)
        trans = _transfer(ctx, chosen, judge, transfer_models, gateway, settings)
        atomic.write_csv(trans, out / "transfer.csv", index=False)
        selection = method_rows({m: results[m] for m in order}, ctx.seed_val)
        atomic.write_csv(selection, out / "selection.csv", index=False)
        archive = archive_frame(ctx)
        atomic.write_csv(archive, out / "archive.csv", index=False)
        write_ripd(archive_lines(ctx), out / "archive.jsonl")
        selected_lines = [{"prompt_id": "seed", "gen_step": 0, "prompt": seed.text}]
        for m in order:
            if m != "seed":
                sel = results[m]["selected"]
                selected_lines.append({"prompt_id": m, "parent_prompt_id": "seed", "prompt": chosen[m].text,
                                       "candidate": sel.prompt_id if sel is not None else "seed",
                                       "reason": results[m]["reason"]})
        write_ripd(selected_lines, out / "selected.jsonl")  # RIPD format; the last line is the search's choice
        rounds = pd.DataFrame(results["ours"]["extra"].get("rounds", [])) if "ours" in results else pd.DataFrame()
        atomic.write_csv(rounds, out / "rounds.csv", index=False)
        steps = pd.DataFrame(results["textgrad"]["extra"].get("steps", [])) if "textgrad" in results else pd.DataFrame()
        atomic.write_csv(steps, out / "textgrad_steps.csv", index=False)
        caption = (f"Test: bench n={comparison['bench_n'].iloc[0]}, target n={comparison['target_n'].iloc[0]} pairs; "
                   f"bars: {comparison.attrs['ci']}. Models: {', '.join(models)}."
                   + (" Embedded model: the pipeline runs; these are not findings." if embedded else ""))
        fig = comparison_figure(comparison, f"Benchmark vs target agreement on test: {setting}", caption)
        atomic.save_figure(fig, out / "comparison.png", dpi=120)
        run.log_figure(fig, "comparison.png")
        empty = _empty_reasons(settings.drift, results, trans, rounds, steps)
        summary = _summary(setting, data, seed, settings, models, embedded, comparison, selection, trans, ctx, grid,
                           empty)
        atomic.write_text(out / "summary.md", summary)
        for name in ("summary.md", "comparison.csv", "archive.jsonl", "archive.csv", "selected.jsonl"):
            run.log_artifact(out / name)
        _log_candidates(run, ctx, setting)
        for r in comparison.to_dict("records"):
            for k in ("bench", "target", "gap", "d_target", "d_bench", "win_rate"):
                if k in r and isinstance(r[k], float) and math.isfinite(r[k]):
                    flat[f"{r['method']}.test_{k}"] = r[k]
        flat["seed.val_bench"] = ctx.seed_val["bench"]["agreement"]
        flat["seed.val_target"] = ctx.seed_val["target"]["agreement"]
        flat["candidates.proposed"] = len(ctx.registry.candidates)
        flat["candidates.usable"] = sum(c.usable for c in ctx.registry.candidates)
        for rule, n in ctx.registry.rejected().items():
            flat[f"candidates.rejected.{rule}"] = n
        run.log_metrics(flat)
        check_calls(gateway)  # a role whose calls failed past llm.defaults.max_failure_share: exit non-zero
    if out_dir is None:
        write_metrics_json(project / "metrics/drift" / f"{setting}.json", flat)
    return {"out": out, "comparison": comparison, "selection": selection, "ctx": ctx, "results": results,
            "metrics": flat, "summary": summary}


def _stealth(ctx, chosen, evaluator, runs, gateway, templates_dir, settings) -> pd.DataFrame:
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


def _transfer(ctx, chosen, judge, models, gateway, settings) -> pd.DataFrame:
    if not models:
        return pd.DataFrame(columns=["judge", "rubric"])
    judges = [judge.with_(model=m) for m in models]
    rubrics = {m: PairwiseRubric.of(tpl, name=m) for m, tpl in chosen.items()}  # every method, as Tables 1–2
    cfg = settings.drift
    return transfer(rubrics, ctx.data.both("test"), gateway=gateway, judges=judges, seed=settings.seed,
                    tie_credit=cfg.tie_credit, n_boot=cfg.n_boot, confidence=cfg.confidence,
                    bench_domain="bench", target_domain="target", samples=cfg.samples)


def _log_candidates(run, ctx: DriftContext, setting: str) -> None:
    """One nested MLflow run per usable candidate: lineage, numbers and the rubric text."""
    for c in ctx.registry.candidates:
        if not c.usable:
            continue
        with run.trial(f"drift@{setting}-{c.prompt_id}", {"method": c.method, "prompt_id": c.prompt_id,
                                                          "parent_prompt_id": c.parent or "", "gen_step": c.gen_step}) as t:
            metrics = {}
            for r, m in c.train.items():
                metrics.update({f"train_r{r}_bench": m["bench"], f"train_r{r}_target": m["target"]})
            for d in ("bench", "target"):
                if c.val:
                    metrics[f"val_{d}"] = c.val[d]["agreement"]
            t.log_metrics(metrics)
            t.log_dict({"prompt_id": c.prompt_id, "prompt": c.text}, "rubric.json")


def _empty_reasons(cfg, results: dict, trans: pd.DataFrame, rounds: pd.DataFrame,
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


def _summary(setting, data, seed, settings, models, embedded, comparison, selection, trans, ctx, grid,
             empty: dict[str, str]) -> str:
    counts, cfg, q = data.counts(), settings.drift, settings.drift.search
    md = [f"# Rubric-induced preference drift: {setting}", "", f"Models: {', '.join(models)}", ""]
    note = embedded_note(embedded)
    if note:
        md += [f"> {note}", ""]
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rubriclab.stages.drift")
    ap.add_argument("--setting", required=True)
    args = ap.parse_args(argv)
    project = find_project_dir()
    run_drift_stage(load_params(project / "params.yaml"), project, args.setting)
    return 0


if __name__ == "__main__":
    exit_stage(run_stage(main, "drift"))
