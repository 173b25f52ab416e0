"""DVC stage `repair` (one instance per dataset): reliability-constrained refinement of every configured
rubric source, swept over δ (and the number of candidates) as an Optuna study. Writes the constrained
(δ = 0) and unconstrained (δ = ∞) repaired sets, per-source diffs, candidates, packets, the operating
curve (CSV + plot) and the study, metrics.json and an MLflow run with one nested run per trial."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rubriclab import atomic
from rubriclab.audit import context_from_params
from rubriclab.config import find_project_dir, load_params
from rubriclab.data import read_pairs
from rubriclab.errors import ConfigError
from rubriclab.llm import card_head, check_calls, gateway_from_params, panel, roles_from_params
from rubriclab.repair import (
    RepairSettings,
    curve_caption,
    curve_figure,
    delta_label,
    sweep_diff,
    sweep_grid,
    sweep_metrics,
    sweep_source,
    sweep_study_name,
    sweep_summary,
    unrepaired_reason,
    unrepaired_sets,
)
from rubriclab.rubrics import RubricSet, load_rubric_file, save_rubric_set
from rubriclab.settings import Params
from rubriclab.stages import exit_stage, run_stage
from rubriclab.studies import study_storage
from rubriclab.tracking import stage_run, write_metrics_json


def _split(project: Path, dataset: str, name: str, limit: int | None, key: str) -> list:
    path = project / "outputs/data/premise" / dataset / f"{name}.parquet"
    if not path.exists():
        raise ConfigError(f"{path}: missing {name} split for {dataset!r}; run `dvc repro data` (data.premise.{name})")
    pairs = read_pairs(path)
    if not pairs:
        raise ConfigError(f"{path}: the {name} split is empty; set data.premise.{name} > 0 ({key} reads it)")
    return pairs[:limit] if limit else pairs


def repair_source(name: str, rs: RubricSet, *, dataset: str, pool: list, dev: list, heldout: list, ctx, refiner,
                  settings: RepairSettings, grid: list[dict], out: Path, run, models: list[str],
                  storage_url: str | None = None, study_name: str | None = None) -> dict[str, Any]:
    """Refine one rubric set and sweep its operating points (``rubriclab.repair.sweep_source``); write its outputs
    under ``out`` and log each trial as a nested run."""
    src_dir = out / name
    src_dir.mkdir(parents=True, exist_ok=True)
    storage = study_storage(storage_url, journal=src_dir / "study.journal")
    study_name = study_name or sweep_study_name(dataset, name, rs, settings, {"pool": pool, "dev": dev,
                                                                              "heldout": heldout}, models)

    def log_trial(point: dict[str, Any], row: dict[str, Any]) -> None:
        with run.trial(f"repair@{dataset}-{name}-delta={delta_label(point['delta'])}-n={point['candidates']}",
                       {"source": name, "delta": delta_label(point["delta"]), "candidates": point["candidates"]}) as t:
            t.log_metrics({k: val for k, val in row.items() if k != "delta" and not isinstance(val, str)})

    res = sweep_source(name, rs, pool=pool, dev=dev, heldout=heldout, ctx=ctx, refiner=refiner, settings=settings,
                       grid=grid, storage=storage, study_name=study_name, on_trial=log_trial)
    atomic.write_csv(res["table"].drop(columns=["values"]), src_dir / "study.csv", index=False)
    atomic.write_csv(res["curve"], src_dir / "curve.csv", index=False)
    res["written"] = {}
    for label, entry in res["named"].items():
        path = out / f"{name}.robust_{label}.json"
        save_rubric_set(entry["rubric"], path)
        res["written"][label] = path
    atomic.write_text(src_dir / "diff.md", sweep_diff(name, dataset, rs, res))
    atomic.write_csv(res["candidates"], src_dir / "candidates.csv", index=False)
    atomic.write_json(src_dir / "packets.json", {cid: e["packet"] for cid, e in res["found"]["criteria"].items()},
                      indent=2, default=str)
    fig = curve_figure(res["curve"], res["before"], f"α–VFR operating curve: {name} ({dataset})",
                       curve_caption(res["before"], ctx.n_boot, ctx.confidence, models))
    atomic.save_figure(fig, src_dir / "curve.png", dpi=120)
    run.log_figure(fig, f"{name}/curve.png")
    run.log_table(res["curve"], f"{name}/curve.json")
    run.log_artifact(src_dir / "diff.md", name)
    return res


def run_repair_stage(params: dict[str, Any], project: Path, dataset: str, *, sources: list[str] | None = None,
                     rubric_files: list[Path] = (), deltas: list[Any] | None = None,
                     candidates: list[int] | None = None, out_dir: Path | None = None,
                     storage_url: str | None = None, study_name: str | None = None) -> dict[str, Any]:
    """Repair ``dataset``'s rubric sources. The DVC stage writes ``outputs/repair/<dataset>`` and
    ``metrics/repair/<dataset>.json``; an ad-hoc run (``out_dir``) writes only its own folder."""
    p = Params.of(params)
    settings = RepairSettings.of(p.repair, p.audit)
    names = list(sources if sources is not None else p.repair.sources)
    sets: dict[str, RubricSet] = {}
    for n in names:
        path = project / "outputs/rubrics" / dataset / f"{n}.json"
        if not path.exists():
            raise ConfigError(f"repair.sources: no rubric source {n!r} for {dataset} ({path}); run `dvc repro discover`")
        sets[n] = load_rubric_file(path)
    for f in rubric_files:
        sets[Path(f).stem] = load_rubric_file(f)
    if not sets:
        raise ConfigError("repair: no rubric source selected (repair.sources or --rubrics FILE)")
    grid = sweep_grid(p.repair.sweep, deltas, candidates)
    pool = _split(project, dataset, "audit", p.audit.pool_size, "repair (failure packets)")
    dev = _split(project, dataset, "dev", p.repair.dev_size, "repair (acceptance)")
    heldout = _split(project, dataset, "heldout", p.repair.heldout_size, "repair (report)")
    roles = roles_from_params(p.llm)
    if "refiner" not in roles:
        raise ConfigError("params.yaml: llm.roles.refiner is not configured; repair needs a refiner model")
    refiner = panel(roles["refiner"])[0]
    gateway = gateway_from_params(p.llm, stage=f"repair@{dataset}", project_dir=project)
    ctx, models = context_from_params(p.llm, p.audit, p.data.seed, gateway)
    used = [*ctx.judges, ctx.attacker, ctx.verifier, refiner]  # the roles a repair calls
    embedded = sorted(m.name for m in used if m is not None and m.model.startswith("local/"))
    out = out_dir or project / "outputs/repair" / dataset
    out.mkdir(parents=True, exist_ok=True)
    flat: dict[str, Any] = {}
    summary = card_head(f"Repair: {dataset}", models, embedded)
    summary += [f"Splits: failure packets from the audit pool (n={len(pool)} pairs), acceptance on dev "
                f"(n={len(dev)} pairs), report on held-out (n={len(heldout)} pairs); {settings.repair.n_attacks} attacks "
                f"per criterion on dev and held-out, τ={settings.tau:g}. Grid: δ ∈ "
                f"{{{', '.join(delta_label(d) for d in sorted({g['delta'] for g in grid}))}}} × candidates ∈ "
                f"{sorted({g['candidates'] for g in grid})}.", ""]
    results = {}
    with stage_run("repair", f"repair@{dataset}", p.effective(), project, experiment=p.tracking.experiment,
                   tags={"dataset": dataset, "models": ", ".join(models), "sources": ", ".join(sets),
                         "embedded_model": str(bool(embedded)), "adhoc": str(out_dir is not None)},
                   record_dir=out) as run:
        for name, rs in sets.items():
            if not rs.criteria:
                for label, empty in unrepaired_sets(name, rs).items():
                    save_rubric_set(empty, out / f"{name}.robust_{label}.json")
                summary += [f"## {name}", "", f"Not repaired: K=0 — {unrepaired_reason(rs)}.", ""]
                continue
            res = repair_source(name, rs, dataset=dataset, pool=pool, dev=dev, heldout=heldout, ctx=ctx,
                                refiner=refiner, settings=settings, grid=grid, out=out, run=run, models=models,
                                storage_url=storage_url or p.repair.study.storage,
                                study_name=study_name)
            results[name] = res
            summary += sweep_summary(name, res)
            flat.update(sweep_metrics(name, res))
        atomic.write_text(out / "summary.md", "\n".join(summary) + "\n")
        run.log_artifact(out / "summary.md")
        run.log_metrics(flat)
        check_calls(ctx.gateway)  # outputs are written; a role whose calls failed fails the run and the stage
    if out_dir is None:
        write_metrics_json(project / "metrics/repair" / f"{dataset}.json", flat)
    return {"out": out, "results": results, "metrics": flat, "summary": "\n".join(summary)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rubriclab.stages.repair")
    ap.add_argument("--dataset", required=True)
    args = ap.parse_args(argv)
    project = find_project_dir()
    run_repair_stage(load_params(project / "params.yaml"), project, args.dataset)
    return 0


if __name__ == "__main__":
    exit_stage(run_stage(main, "repair"))
