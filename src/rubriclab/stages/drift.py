"""DVC stage `drift` (one instance per benchmark–target setting of ``data.ripd``): the biased rubric search
and its baselines under one validation budget, selection on val and the comparison on test (seed 003
Tables 1–2), the stealth check and transfer. The search runs as an Optuna study over its tolerance knobs
(ε_train, population, rounds); every candidate is an MLflow nested run and a line of the archive."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import pandas as pd

from rubriclab import atomic
from rubriclab.config import find_project_dir, load_params
from rubriclab.data import read_pairs
from rubriclab.drift import (
    DriftContext,
    DriftData,
    DriftSettings,
    archive_frame,
    archive_lines,
    comparison_figure,
    empty_reasons,
    method_rows,
    report_on_test,
    run_method,
    run_summary,
    search_grid,
    search_study,
    search_study_name,
    selected_template,
    stealth_table,
    transfer_table,
)
from rubriclab.errors import ConfigError
from rubriclab.judging import load_pairwise_rubric
from rubriclab.llm import check_calls, gateway_from_params, panel, roles_from_params
from rubriclab.rubrics import JudgeTemplate, write_ripd
from rubriclab.settings import DriftLimits, Params
from rubriclab.stages import exit_stage, run_stage
from rubriclab.studies import study_storage
from rubriclab.tracking import stage_run, write_metrics_json


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
    grid = search_grid(p.drift.study.grid, settings)
    flat: dict[str, Any] = {}
    with stage_run("drift", f"drift@{setting}", p.effective(), project, experiment=p.tracking.experiment,
                   tags={"setting": setting, "models": ", ".join(models), "embedded_model": str(bool(embedded)),
                         "adhoc": str(out_dir is not None)}, record_dir=out) as run:
        results: dict[str, dict[str, Any]] = {}
        for method in settings.drift.methods:
            if method != "ours":
                results[method] = run_method(ctx, method)
        if "ours" in settings.drift.methods:
            storage = study_storage(storage_url or p.drift.study.storage, journal=out / "study.journal")
            ours_points, table = search_study(ctx, grid, storage, search_study_name(setting, seed, settings, data,
                                                                                    models))
            results["ours"] = ours_points[0]
            atomic.write_csv(table, out / "study.csv", index=False)
        order = [m for m in ("seed", "random", "icl", "textgrad", "ours") if m in results]
        chosen = {m: selected_template(ctx, results[m]) for m in order}
        comparison = report_on_test(chosen, data=data, judging=ctx.judging, settings=settings)
        stealth = stealth_table(ctx, chosen, evaluator, stealth_runs, gateway, templates_dir, settings)
        if not stealth.empty:
            ci = comparison.attrs["ci"]
            comparison = comparison.merge(stealth[["method", "win_rate", "win_low", "win_high", "runs_n",
                                                   "runs_failed"]], on="method", how="left")
            comparison.attrs["ci"] = ci
        atomic.write_csv(comparison, out / "comparison.csv", index=False)
        trans = transfer_table(ctx, chosen, judge, transfer_models, gateway, settings)
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
        empty = empty_reasons(settings.drift, results, trans, rounds, steps)
        summary = run_summary(setting, data, seed, settings, models, embedded, comparison, selection, trans, ctx, grid,
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rubriclab.stages.drift")
    ap.add_argument("--setting", required=True)
    args = ap.parse_args(argv)
    project = find_project_dir()
    run_drift_stage(load_params(project / "params.yaml"), project, args.setting)
    return 0


if __name__ == "__main__":
    exit_stage(run_stage(main, "drift"))
