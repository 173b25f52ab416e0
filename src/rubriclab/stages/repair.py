"""DVC stage `repair` (one instance per dataset): reliability-constrained refinement of every configured
rubric source, swept over δ (and the number of candidates) as an Optuna study. Writes the constrained
(δ = 0) and unconstrained (δ = ∞) repaired sets, per-source diffs, candidates, packets, the operating
curve (CSV + plot) and the study, metrics.json and an MLflow run with one nested run per trial."""

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
from rubriclab.audit import context_from_params, interval_label, to_markdown
from rubriclab.config import find_project_dir, load_params
from rubriclab.data import read_pairs
from rubriclab.errors import ConfigError
from rubriclab.llm import check_calls, embedded_note, gateway_from_params, panel, roles_from_params
from rubriclab.repair import (
    RepairSettings,
    candidates_table,
    curve_figure,
    delta_label,
    diff_markdown,
    grid_results,
    operating_point,
    paired_deltas,
    parse_delta,
    report_heldout,
    run_grid,
    search,
    study_storage,
)
from rubriclab.rubrics import RubricSet, load_rubric_file, save_rubric_set
from rubriclab.settings import Params, RepairSweep
from rubriclab.stages import exit_stage, run_stage
from rubriclab.tracking import stage_run, write_metrics_json

NAMED = {"constrained": 0.0, "unconstrained": math.inf}


def _split(project: Path, dataset: str, name: str, limit: int | None, key: str) -> list:
    path = project / "outputs/data/premise" / dataset / f"{name}.parquet"
    if not path.exists():
        raise ConfigError(f"{path}: missing {name} split for {dataset!r}; run `dvc repro data` (data.premise.{name})")
    pairs = read_pairs(path)
    if not pairs:
        raise ConfigError(f"{path}: the {name} split is empty; set data.premise.{name} > 0 ({key} reads it)")
    return pairs[:limit] if limit else pairs


def grid_of(sweep: RepairSweep, deltas: list[Any] | None = None, candidates: list[int] | None = None) -> list[dict]:
    """Grid points (δ × candidates) of ``repair.sweep``, or of the given lists; δ = 0 and δ = ∞ are always in the
    sweep's (the named operating points)."""
    ds = sorted({parse_delta(d) for d in (deltas if deltas is not None else sweep.deltas)}
                | ({0.0, math.inf} if deltas is None else set()))
    ns = sorted({int(n) for n in (candidates or sweep.candidates)})
    if any(n < 1 for n in ns):
        raise ConfigError(f"repair.sweep.candidates: {ns}; expected integers >= 1")
    return [{"delta": d, "candidates": n} for n in ns for d in ds]


def _study_name(dataset: str, source: str, rs: RubricSet, settings: RepairSettings, splits: dict[str, list],
                models: list[str]) -> str:
    blob = json.dumps({"rubric": rs.to_dict(), "settings": repr(settings), "models": models,
                       "splits": {k: [p.id for p in v] for k, v in splits.items()}}, sort_keys=True, default=str)
    return f"repair-{dataset}-{source}-{hashlib.sha256(blob.encode()).hexdigest()[:10]}"


def _metric_row(point: dict, res: dict, deltas: dict, changed: list[str]) -> dict[str, Any]:
    """One curve row: held-out α and VFR of the repaired set, and Δ (repaired − original) with its paired
    interval; every interval says its method, level and unit (``*_ci``) and its n."""
    row: dict[str, Any] = {"delta": point["delta"], "candidates": point["candidates"]}
    for name, col in (("alpha", "alpha_heldout"), ("vfr", "vfr_heldout")):
        row.update(_entry_columns(col, name, res[name]))
    for name in ("alpha", "vfr"):
        row.update(_entry_columns(f"delta_{name}", f"delta_{name}", deltas[name]))
    return {**row, "n_changed": len(changed), "changed": ",".join(changed)}


def _entry_columns(value_col: str, prefix: str, m: dict[str, Any]) -> dict[str, Any]:
    return {value_col: m.get("value"), f"{prefix}_low": m.get("low"), f"{prefix}_high": m.get("high"),
            f"{prefix}_n": m.get("n"), f"{prefix}_ci": interval_label(m.get("ci"))}


def repair_source(name: str, rs: RubricSet, *, dataset: str, pool: list, dev: list, heldout: list, ctx, refiner,
                  settings: RepairSettings, grid: list[dict], out: Path, run, models: list[str],
                  storage_url: str | None = None, study_name: str | None = None) -> dict[str, Any]:
    """Refine one rubric set and sweep its operating points; write its outputs under ``out``."""
    src_dir = out / name
    src_dir.mkdir(parents=True, exist_ok=True)
    max_n = max(p["candidates"] for p in grid)
    found = search(rs, pool=pool, dev=dev, ctx=ctx, refiner=refiner, n_candidates=max_n, settings=settings,
                   source=name)
    storage = study_storage(storage_url, journal=src_dir / "study.journal")
    study_name = study_name or _study_name(dataset, name, rs, settings, {"pool": pool, "dev": dev,
                                                                         "heldout": heldout}, models)
    points: dict[tuple, dict[str, Any]] = {}
    reports: dict[tuple, dict[str, Any]] = {}

    def heldout_of(repaired: RubricSet) -> dict[str, Any]:
        # operating points that select the same texts are one measurement (calls and bootstrap alike)
        key = tuple(c.description for c in repaired.criteria)
        if key not in reports:
            res = report_heldout(repaired, heldout, ctx, settings, source=name)
            # Δ against the original on the same held-out units, resampled together (one paired bootstrap);
            # the original itself is measured first, so it is its own baseline (Δ = 0)
            base = res if key == original else before
            res["deltas"] = paired_deltas(base, res, n_boot=ctx.n_boot, confidence=ctx.confidence, seed=ctx.seed)
            reports[key] = res
        return reports[key]

    original = tuple(c.description for c in rs.criteria)
    before = heldout_of(rs)

    def row_of(point: dict, op: dict) -> dict[str, Any]:
        res = heldout_of(op["rubric"])
        return _metric_row(point, res, res["deltas"], op["changed"])

    def objective(trial, point):
        op = operating_point(found, rs, point["delta"], point["candidates"])
        row = row_of(point, op)
        points[(point["delta"], point["candidates"])] = {"op": op, "row": row}
        for k, val in row.items():
            trial.set_user_attr(k, None if isinstance(val, float) and not math.isfinite(val) else val)
        with run.trial(f"repair@{dataset}-{name}-delta={delta_label(point['delta'])}-n={point['candidates']}",
                       {"source": name, "delta": delta_label(point["delta"]), "candidates": point["candidates"]}) as t:
            t.log_metrics({k: val for k, val in row.items() if k != "delta" and not isinstance(val, str)})
        if row["alpha_heldout"] is None or row["vfr_heldout"] is None:  # measured, but undefined: not a failure
            res = heldout_of(op["rubric"])
            why = "; ".join(f"{k}: {res[k].get('reason', 'undefined')}" for k in ("alpha", "vfr")
                            if res[k].get("value") is None)
            raise optuna.TrialPruned(f"held-out {why}")
        return row["alpha_heldout"], row["vfr_heldout"]

    study = run_grid(study_name, storage, grid, objective)
    table = grid_results(study)  # every trial's state, worker and, when pruned or failed, why
    atomic.write_csv(table.drop(columns=["values"]), src_dir / "study.csv", index=False)
    # points another worker ran, and the named points (δ = 0, ∞) when the grid lacks them: their calls come
    # from the call store when it is shared (on one machine it is), else they are bought here
    for point in [*grid, *({"delta": d, "candidates": max_n} for d in NAMED.values())]:
        key = (point["delta"], point["candidates"])
        if key not in points:
            op = operating_point(found, rs, point["delta"], point["candidates"])
            points[key] = {"op": op, "row": row_of(point, op)}
    curve = pd.DataFrame([points[(p["delta"], p["candidates"])]["row"] for p in grid])
    curve.insert(0, "point", ["constrained" if r["delta"] == 0 and r["candidates"] == max_n else
                              "unconstrained" if math.isinf(r["delta"]) and r["candidates"] == max_n else ""
                              for _, r in curve.iterrows()])
    atomic.write_csv(curve, src_dir / "curve.csv", index=False)
    written = {}
    diffs = [f"# Repair of {name} ({dataset})", ""]
    for label, delta in NAMED.items():
        op = points[(delta, max_n)]["op"]
        repaired = op["rubric"].with_criteria(op["rubric"].criteria, name=f"{rs.name}.robust_{label}",
                                              provenance={**dict(rs.provenance or {}), "repaired_from": name,
                                                          "operating_point": label, "delta": delta_label(delta),
                                                          "candidates": max_n,
                                                          "changed": op["changed"],
                                                          "heldout": points[(delta, max_n)]["row"]})
        path = out / f"{name}.robust_{label}.json"
        save_rubric_set(repaired, path)
        written[label] = path
        diffs.append(diff_markdown(rs, repaired, op["decisions"], f"{label} (δ = {delta_label(delta)}, "
                                   f"{max_n} candidates per criterion)"))
    atomic.write_text(src_dir / "diff.md", "\n".join(diffs) + "\n")
    cands = candidates_table(found)
    atomic.write_csv(cands, src_dir / "candidates.csv", index=False)
    atomic.write_json(src_dir / "packets.json", {cid: e["packet"] for cid, e in found["criteria"].items()},
                      indent=2, default=str)
    level = f"{100 * ctx.confidence:g}%"
    caption = (f"Held-out split: α n={before['alpha'].get('n')} pairs, VFR n={before['vfr'].get('n')} prompts; bars: "
               f"{level} percentile bootstrap (B={ctx.n_boot}) over pairs (α) and prompts (VFR). Models: "
               f"{', '.join(models)}." + (" Embedded model: the curve shows the pipeline runs, not findings."
                                          if any(m.startswith("local/") for m in models) else ""))
    fig = curve_figure(curve, before, f"α–VFR operating curve: {name} ({dataset})", caption)
    atomic.save_figure(fig, src_dir / "curve.png", dpi=120)
    run.log_figure(fig, f"{name}/curve.png")
    run.log_table(curve, f"{name}/curve.json")
    run.log_artifact(src_dir / "diff.md", name)
    rejected = {}
    for e in found["criteria"].values():
        for rule, n in e["rejected"].items():
            rejected[rule] = rejected.get(rule, 0) + n
    return {"found": found, "before": before, "curve": curve, "written": written, "study": study, "table": table,
            "rejected": rejected, "candidates": cands}


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
    grid = grid_of(p.repair.sweep, deltas, candidates)
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
    summary = [f"# Repair: {dataset}", "", f"Models: {', '.join(models)}", ""]
    note = embedded_note(embedded)
    if note:
        summary += [f"> {note}", ""]
    summary += [f"Splits: failure packets from the audit pool (n={len(pool)} pairs), acceptance on dev "
                f"(n={len(dev)} pairs), report on held-out (n={len(heldout)} pairs); {settings.repair.n_attacks} attacks "
                f"per criterion on dev and held-out, τ={settings.tau:g}. Grid: δ ∈ "
                f"{{{', '.join(delta_label(d) for d in sorted({g['delta'] for g in grid}))}}} × candidates ∈ "
                f"{sorted({g['candidates'] for g in grid})}.", ""]
    results = {}
    with stage_run("repair", f"repair@{dataset}", p.effective(), project, experiment=p.tracking.experiment,
                   tags={"dataset": dataset, "models": ", ".join(models), "sources": ", ".join(sets),
                         "embedded_model": str(bool(embedded)), "adhoc": str(out_dir is not None)}) as run:
        for name, rs in sets.items():
            if not rs.criteria:
                why = (rs.provenance or {}).get("shortfall", {}).get("reason", "the rubric set has no criteria")
                for label in NAMED:
                    save_rubric_set(rs.with_criteria((), name=f"{rs.name}.robust_{label}", source="robust_repaired",
                                                     provenance={"repaired_from": name, "operating_point": label,
                                                                 "shortfall": {"asked": 0, "got": 0,
                                                                               "reason": f"nothing to repair: {why}"}}),
                                    out / f"{name}.robust_{label}.json")
                summary += [f"## {name}", "", f"Not repaired: K=0 — {why}.", ""]
                continue
            res = repair_source(name, rs, dataset=dataset, pool=pool, dev=dev, heldout=heldout, ctx=ctx,
                                refiner=refiner, settings=settings, grid=grid, out=out, run=run, models=models,
                                storage_url=storage_url or p.repair.study.storage,
                                study_name=study_name)
            results[name] = res
            summary += _summary(name, res)
            for _, r in res["curve"].iterrows():
                if r["point"]:
                    for k in ("alpha_heldout", "vfr_heldout", "delta_alpha", "delta_alpha_low", "delta_alpha_high",
                              "delta_vfr", "delta_vfr_low", "delta_vfr_high", "n_changed"):
                        flat[f"{name}.{r['point']}.{k}"] = r[k]
            flat[f"{name}.original.alpha_heldout"] = res["before"]["alpha"].get("value")
            flat[f"{name}.original.vfr_heldout"] = res["before"]["vfr"].get("value")
            flat[f"{name}.candidates_proposed"] = int(res["candidates"]["candidate"].notna().sum())
            for rule, n in res["rejected"].items():
                flat[f"{name}.rejected.{rule}"] = n
        atomic.write_text(out / "summary.md", "\n".join(summary) + "\n")
        run.log_artifact(out / "summary.md")
        run.log_metrics(flat)
        check_calls(ctx.gateway)  # outputs are written; a role whose calls failed fails the run and the stage
    if out_dir is None:
        write_metrics_json(project / "metrics/repair" / f"{dataset}.json", flat)
    return {"out": out, "results": results, "metrics": flat, "summary": "\n".join(summary)}


def _summary(name: str, res: dict[str, Any]) -> list[str]:
    curve = res["curve"].copy()
    curve["delta"] = curve["delta"].map(delta_label)
    cols = ["point", "delta", "candidates", "alpha_heldout", "alpha_low", "alpha_high", "alpha_n", "vfr_heldout",
            "vfr_low", "vfr_high", "vfr_n", "delta_alpha", "delta_alpha_low", "delta_alpha_high", "delta_vfr",
            "delta_vfr_low", "delta_vfr_high", "n_changed"]
    b = res["before"]
    rej = ", ".join(f"{k} {v}" for k, v in sorted(res["rejected"].items())) or "none"
    skipped = {cid: e["skipped"] for cid, e in res["found"]["criteria"].items() if e["skipped"]}
    md = [f"## {name}", "",
          f"Original on held-out: α {_fmt(b['alpha'])}, VFR {_fmt(b['vfr'])} (intervals: percentile bootstrap over "
          "pairs for α, over prompts for VFR).", "",
          f"Δα and ΔVFR (repaired − original): {_delta_method(curve)}; the original and the repaired set are "
          "resampled together, so the interval is of the change itself, not a difference of two intervals.", "",
          f"Candidates rejected by the checker, by rule: {rej}.", ""]
    if skipped:
        md += ["Criteria not repaired:", ""] + [f"- {cid}: {why}" for cid, why in skipped.items()] + [""]
    md += [to_markdown(curve[cols].round(3).fillna("—")), "", f"Diffs: `{name}/diff.md`; candidates: "
           f"`{name}/candidates.csv`; plot: `{name}/curve.png`.", ""]
    return md


def _delta_method(curve: pd.DataFrame) -> str:
    parts = []
    for name, what in (("delta_alpha", "Δα"), ("delta_vfr", "ΔVFR")):
        known = curve[curve[f"{name}_ci"] != "no interval"]
        if known.empty:
            parts.append(f"{what}: no interval")
        else:
            parts.append(f"{what}: {known[f'{name}_ci'].iloc[0]}, n={known[f'{name}_n'].iloc[0]}")
    return "; ".join(parts)


def _fmt(m: dict[str, Any]) -> str:
    if m.get("value") is None:
        return f"— ({m.get('reason', 'undefined')})"
    ci = f" [{m['low']:.3f}, {m['high']:.3f}]" if m.get("low") is not None else ""
    return f"{m['value']:.3f}{ci} n={m.get('n')}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rubriclab.stages.repair")
    ap.add_argument("--dataset", required=True)
    args = ap.parse_args(argv)
    project = find_project_dir()
    run_repair_stage(load_params(project / "params.yaml"), project, args.dataset)
    return 0


if __name__ == "__main__":
    exit_stage(run_stage(main, "repair"))
