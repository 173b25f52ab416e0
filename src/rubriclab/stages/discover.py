"""DVC stage `discover` (one instance per dataset): the rubric sources the audit compares.

Writes ``outputs/rubrics/<dataset>/``: discovered.json, pref_repaired.json, task_derived.json and
imported_<name>.json for each file under ``discover.imported_dir``; and the discovery evidence
(candidates, rejected candidates, consolidation levels, preference-fit table, plots) under
``outputs/discover/<dataset>/``.

Model-written criteria that fail validation (``rubriclab.discover._validate``) are counted by reason in
report.json (``rejected``), metrics.json and the MLflow run (``rejected.<step>.<reason>``). A source
with fewer criteria than asked is still written, with ``provenance["shortfall"]``; the stage repeats
it in report.json (``shortfall``), as metric ``shortfall.<source>`` (criteria missing; 0 when none)
and as MLflow tag ``shortfall.<source>`` (the reason).
"""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path
from typing import Any

import pandas as pd

from rubriclab import atomic
from rubriclab.config import find_project_dir, load_params
from rubriclab.data import read_pairs
from rubriclab.discover import REASONS, discover, task_derived_rubric
from rubriclab.errors import ConfigError
from rubriclab.llm import check_calls, gateway_from_params, panel, roles_from_params
from rubriclab.rubrics import load_rubric_file, save_rubric_set
from rubriclab.settings import Params
from rubriclab.stages import exit_stage, run_stage
from rubriclab.tracking import stage_run, write_metrics_json

RUBRIC_SUFFIXES = (".json", ".yaml", ".yml", ".md")


def _role(roles: dict, name: str):
    if name not in roles:
        raise ConfigError(f"params.yaml: llm.roles.{name} is not configured; discover needs it")
    return panel(roles[name])[0]


def _plots(result, out: Path) -> dict[str, Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = {}
    fig, ax = plt.subplots(figsize=(7, 3.2))
    levels = result.levels
    if levels:
        xs = [0] + [lv["level"] for lv in levels]
        ax.plot(xs, [levels[0]["nodes_in"]] + [lv["nodes_out"] for lv in levels], marker="o", label="criteria in pool")
        ax.bar([lv["level"] for lv in levels], [lv["merged_members"] for lv in levels], alpha=0.3,
               label="members merged at level")
        ax.legend()
    else:
        ax.text(0.5, 0.5, "no consolidation needed (pool already at target size)", ha="center",
                transform=ax.transAxes)
    ax.set_xlabel("consolidation level")
    ax.set_ylabel("count")
    ax.set_title("discover: consolidation loop")
    fig.tight_layout()
    paths["levels"] = out / "consolidation_levels.png"
    atomic.save_figure(fig, paths["levels"], dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 0.3 * max(1, result.discovered.K) + 1.4))
    crit = list(result.discovered.criteria)
    ax.barh([c.id for c in crit], [c.support for c in crit], color="#4c72b0")
    ax.invert_yaxis()
    ax.set_xlabel("support (raw candidates merged into the criterion)")
    ax.set_title(f"discover: support of the K={len(crit)} discovered criteria")
    sf = result.discovered.provenance.get("shortfall")
    if sf:  # an empty or short plot says why instead of looking like a result
        ax.text(0.5, 0.5, textwrap.fill(f"{sf['got']} of {sf['asked']} asked: {sf['reason']}", 90), ha="center",
                va="center", fontsize=7, color="#a00", transform=ax.transAxes)
    fig.tight_layout()
    paths["support"] = out / "support.png"
    atomic.save_figure(fig, paths["support"], dpi=110)
    plt.close(fig)
    return paths


def _missing(rs) -> int:
    """Criteria short of what was asked (0 when the source is complete)."""
    sf = rs.provenance.get("shortfall")
    return int(sf["asked"]) - int(sf["got"]) if sf else 0


def run_discover_stage(params: dict[str, Any], project_dir: Path, dataset: str, k: int | None = None) -> dict:
    """Discover rubrics on ``dataset``'s extraction split; write every rubric source; log the run."""
    p = Params.of(params)
    cfg = p.discover if k is None else p.discover.model_copy(update={"k": k})
    split = project_dir / "outputs/data/premise" / dataset / "extraction.parquet"
    if not split.exists():
        raise ConfigError(f"{split}: no extraction split for dataset {dataset!r}; run `dvc repro data` and check "
                          f"data.premise.sources lists it")
    pairs = read_pairs(split)
    roles = roles_from_params(p.llm)
    templates_dir = p.llm.templates_dir
    rubrics_out = project_dir / "outputs/rubrics" / dataset
    evidence = project_dir / "outputs/discover" / dataset
    rubrics_out.mkdir(parents=True, exist_ok=True)
    evidence.mkdir(parents=True, exist_ok=True)
    gateway = gateway_from_params(p.llm, stage=f"discover@{dataset}", project_dir=project_dir)
    with stage_run("discover", f"discover@{dataset}", p.effective(), project_dir,
                   experiment=p.tracking.experiment,
                   tags={"dataset": dataset, "models": ", ".join(sorted({m.model for r in roles.values()
                                                                          for m in panel(r)}))},
                   record_dir=evidence) as run:
        result = discover(pairs, cfg, gateway=gateway, store=gateway.store, extractor=_role(roles, "extractor"),
                          consolidator=_role(roles, "consolidator"), embedder=_role(roles, "embedder"),
                          judge=_role(roles, "judge"), dataset=dataset, seed=p.data.seed,
                          templates_dir=templates_dir)
        written = {"discovered": save_rubric_set(result.discovered, rubrics_out / "discovered.json"),
                   "pref_repaired": save_rubric_set(result.pref_repaired, rubrics_out / "pref_repaired.json")}
        sizes = {"discovered": result.discovered.K, "pref_repaired": result.pref_repaired.K}

        task = p.discover.task_derived.tasks.get(dataset)
        task_report: dict[str, Any] = {"ok": False, "error": "no task description in discover.task_derived.tasks"}
        sources = [result.discovered, result.pref_repaired]
        if task:
            task_rs, task_report = task_derived_rubric(
                task, p.discover.task_derived.k or (k if k is not None else p.discover.k), gateway, _role(roles, "extractor"),
                f"{dataset}-task_derived", templates_dir,
                min_words=p.discover.min_candidate_words)
            written["task_derived"] = save_rubric_set(task_rs, rubrics_out / "task_derived.json")  # K=0 included
            sizes["task_derived"] = task_rs.K
            sources.append(task_rs)
        shortfalls = {rs.source: rs.provenance["shortfall"] for rs in sources if "shortfall" in rs.provenance}
        rejected = {**result.report["rejected"], **({"task_derived": task_report.get("rejected", {})} if task else {})}

        imported_dir = project_dir / p.discover.imported_dir
        for path in sorted(imported_dir.glob("*")) if imported_dir.is_dir() else []:
            if path.suffix in RUBRIC_SUFFIXES:
                rs = load_rubric_file(path)
                rs = rs.with_criteria(rs.criteria, source="imported",
                                      provenance={**rs.provenance, "file": str(path.relative_to(project_dir))})
                written[f"imported_{path.stem}"] = save_rubric_set(rs, rubrics_out / f"imported_{path.stem}.json")
                sizes[f"imported_{path.stem}"] = rs.K

        atomic.write_parquet(pd.DataFrame(result.candidates), evidence / "candidates.parquet", index=False)
        rejected_table = pd.DataFrame(result.rejected, columns=["pair_id", "name", "description", "reason"])
        atomic.write_csv(rejected_table, evidence / "rejected_candidates.csv", index=False)
        atomic.write_csv(pd.DataFrame(result.pref_rows), evidence / "pref_fit.csv", index=False)
        nodes = [{"id": n.id, "name": n.name, "description": n.description, "support": n.support,
                  "pairs": len(n.pairs), "level": n.level, "merged_from": n.merged_from} for n in result.nodes]
        report = {**result.report, "task_derived": task_report, "dataset": dataset, "rejected": rejected,
                  "shortfall": shortfalls, "rubric_sources": sorted(written), "levels_detail": result.levels,
                  "dropped": result.dropped, "empty_outputs": empty_outputs(result, shortfalls)}
        atomic.write_json(evidence / "report.json", report, indent=2, sort_keys=True, default=str)
        atomic.write_json(evidence / "nodes.json", nodes, indent=2)
        plots = _plots(result, evidence)

        metrics = {"pairs": result.report["extraction"]["pairs"],
                   "pairs_failed": result.report["extraction"]["pairs_failed"],
                   "extraction_reasks": result.report["extraction"]["reasks"],
                   "candidates": len(result.candidates), "levels": len(result.levels),
                   "pool_final": result.report["pool_final"], "pool_kept": result.report["pool_kept"],
                   "k_discovered": result.discovered.K, "k_pref_repaired": result.pref_repaired.K,
                   **{f"support.{k}": v for k, v in result.report["support"].items()},
                   **{f"pref_rank.{k}": v for k, v in result.report["pref_rank"].items()},
                   **{f"level{lv['level']}.{k}": v for lv in result.levels for k, v in lv.items()
                      if k != "level" and not isinstance(v, dict)},
                   **{f"K.{name}": k for name, k in sizes.items()},
                   **{f"rejected.{step}.{reason}": counts.get(reason, 0) for step, counts in rejected.items()
                      for reason in dict.fromkeys([*REASONS, *counts])},
                   **{f"shortfall.{rs.source}": _missing(rs) for rs in sources}}
        run.log_metrics(metrics)
        if shortfalls:
            run.set_tags({f"shortfall.{name}": sf["reason"] for name, sf in shortfalls.items()})
        for path in written.values():
            run.log_artifact(path, "rubrics")
        run.log_table(pd.DataFrame(result.candidates), "candidates.json")
        run.log_table(pd.DataFrame(result.pref_rows), "pref_fit.json")
        run.log_table(rejected_table, "rejected_candidates.json")
        run.log_table(pd.DataFrame([{k: v for k, v in lv.items() if not isinstance(v, dict)} for lv in result.levels]),
                      "levels.json")
        for path in plots.values():
            run.log_artifact(path, "plots")
        check_calls(gateway)  # outputs are written; a role whose calls failed fails the run and the stage
    write_metrics_json(project_dir / "metrics/discover" / f"{dataset}.json", metrics)
    return {"metrics": metrics, "written": {k: str(v) for k, v in written.items()}, "report": report}


def empty_outputs(result: Any, shortfalls: dict[str, Any]) -> dict[str, str]:
    """Why each evidence table this run leaves without a row is empty (report.json's ``empty_outputs``)."""
    out = {}
    if not result.pref_rows:
        why = (shortfalls.get("pref_repaired") or shortfalls.get("discovered") or {}).get("reason")
        out["pref_fit.csv"] = "no discovered criterion was scored for preference fit" + (f": {why}" if why else "")
    if not result.rejected:
        out["rejected_candidates.csv"] = "no extracted criterion was rejected"
    if not result.candidates:
        out["candidates.parquet"] = "no criterion was extracted"
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rubriclab.stages.discover")
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--k", type=int, default=None)
    args = ap.parse_args(argv)
    project = find_project_dir()
    run_discover_stage(load_params(project / "params.yaml"), project, args.dataset, args.k)
    return 0


if __name__ == "__main__":
    exit_stage(run_stage(main, "discover"))
