"""DVC stage `audit` (one instance per dataset): the four-axis audit of every configured rubric source,
written as an audit card (JSON, CSV, markdown; the adversarial axis's injection sensitivity also as
``injection.csv`` and the figure ``injection.png`` embedded in card.md), per-item tables, metrics.json and an
MLflow run with one nested run per source."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pandas as pd

from rubriclab import atomic
from rubriclab.audit import (
    AuditContext,
    add_leakage,
    card_markdown,
    card_settings,
    context_from_params,
    cross_source_table,
    flat_metrics,
    injection_figure,
    injection_table,
    load_sources,
    numeric_table,
    run_audit,
)
from rubriclab.config import find_project_dir, load_params
from rubriclab.data import read_pairs
from rubriclab.errors import ConfigError
from rubriclab.llm import check_calls, gateway_from_params
from rubriclab.settings import Audit, Params
from rubriclab.stages import exit_stage, run_stage
from rubriclab.tracking import stage_run, write_metrics_json


def _split(project: Path, dataset: str, name: str, limit: int | None) -> list:
    path = project / "outputs/data/premise" / dataset / f"{name}.parquet"
    if not path.exists():
        raise ConfigError(f"{path}: missing {name} split for {dataset!r}; run `dvc repro data` with {dataset} "
                          "in data.premise.sources")
    pairs = read_pairs(path)
    return pairs[:limit] if limit else pairs


def _context(p: Params, project: Path, stage: str) -> tuple[AuditContext, list[str]]:
    return context_from_params(p.llm, p.audit, p.data.seed, gateway_from_params(p.llm, stage=stage, project_dir=project))


def run_audit_stage(params: dict[str, Any], project: Path, dataset: str, *, sources: list[str] | None = None,
                    rubric_files: list[Path] = (), axes: list[str] | None = None,
                    out_dir: Path | None = None) -> dict[str, Any]:
    """Audit ``dataset``. The DVC stage writes ``outputs/audit/<dataset>`` and ``metrics/audit/<dataset>.json``;
    an ad-hoc audit (``out_dir`` given, e.g. from the CLI) writes only its own folder, so it never
    touches the pipeline's outputs."""
    p = Params.of(params)
    a = p.audit
    names = list(sources if sources is not None else a.sources)
    rubric_sets = load_sources(project, dataset, names, rubric_files)
    if not rubric_sets:
        raise ConfigError("audit: no rubric source selected (audit.sources or --rubrics FILE)")
    pool = _split(project, dataset, "audit", a.pool_size)
    heldout = _split(project, dataset, "heldout", a.heldout_size)
    ood_name = a.out_of_domain.get(dataset)
    ood = _split(project, ood_name, "audit", a.pool_size) if ood_name else []
    axes = tuple(axes or a.axes or Audit().axes)
    ctx, models = _context(p, project, f"audit@{dataset}")
    out = out_dir or project / "outputs/audit" / dataset
    out.mkdir(parents=True, exist_ok=True)
    embedded = bool(ctx.extra["embedded_roles"])
    with stage_run("audit", f"audit@{dataset}", p.effective(), project, experiment=p.tracking.experiment,
                   tags={"dataset": dataset, "models": ", ".join(models), "sources": ", ".join(rubric_sets),
                         "embedded_model": str(embedded), "adhoc": str(out_dir is not None)},
                   record_dir=out) as run:
        result = run_audit(rubric_sets, pool=pool, heldout=heldout, ood=ood, ctx=ctx, cfg=a, axes=axes)
        card = result["card"]
        add_leakage(card, result["details"], rubric_sets, ctx)
        table = cross_source_table(card, result["comparisons"])
        numeric = numeric_table(card, result["comparisons"])
        atomic.write_csv(numeric, out / "card.csv", index=False)
        atomic.write_csv(table, out / "cross_source.csv", index=False)
        comparisons = pd.DataFrame(result["comparisons"])
        atomic.write_csv(comparisons, out / "comparisons.csv", index=False)
        tally = pd.DataFrame(result["tally"])
        atomic.write_csv(tally, out / "failures.csv", index=False)
        injection = injection_table(card)
        if not injection.empty:  # the adversarial axis's injection sensitivity: its table and figure
            atomic.write_csv(injection, out / "injection.csv", index=False)
            if injection_figure(card, out / "injection.png") is not None:
                result["figures"] = {**result.get("figures", {}), "injection": "injection.png"}
        md = card_markdown(dataset, models, axes, pool, heldout, ood, ood_name, ctx, result, table,
                           numeric, comparisons, tally)
        atomic.write_text(out / "card.md", md)
        atomic.write_json(out / "card.json", {"dataset": dataset, "models": models, "embedded": embedded,
                                              "embedded_roles": ctx.extra["embedded_roles"],
                                              "axes": list(axes), "card": card,
                                              "settings": card_settings(ctx, a),
                                              "not_audited": result["not_audited"],
                                              "failures": result["tally"],
                                              "failures_by_role": result["tally_by_role"],
                                              "comparisons": result["comparisons"]},
                          indent=2, sort_keys=True, default=str)
        for src, det in result["details"].items():
            for axis, d in det.items():
                if isinstance(d, dict) and d.get("per_criterion"):
                    atomic.write_csv(pd.DataFrame(d["per_criterion"]), out / f"{src}.{axis}.per_criterion.csv",
                                     index=False)
                if isinstance(d, dict) and d.get("items"):
                    atomic.write_parquet(pd.DataFrame(d["items"]), out / f"{src}.{axis}.items.parquet", index=False)
                if isinstance(d, dict) and d.get("baseline_items"):  # genuine pool: verifier calibration sheets
                    atomic.write_parquet(pd.DataFrame(d["baseline_items"]),
                                         out / f"{src}.{axis}.baseline_items.parquet", index=False)
        if result["accuracy_items"]:
            atomic.write_parquet(pd.DataFrame(result["accuracy_items"]), out / "accuracy.items.parquet", index=False)

        flat = flat_metrics(card)
        run.log_metrics(flat)
        run.log_table(table, "cross_source.json")
        run.log_artifact(out / "card.md")
        run.log_artifact(out / "card.json")
        if not comparisons.empty:
            run.log_table(comparisons, "comparisons.json")
        for src in card:
            with run.trial(f"audit@{dataset}-{src}", {"source": src, "K": rubric_sets[src].K if src in rubric_sets
                                                      else 0}) as child:
                child.log_metrics(flat_metrics({src: card[src]}))
                if src in rubric_sets:  # the rubric text the numbers are about, beside them in the UI
                    child.log_dict(rubric_sets[src].to_dict(), "rubric.json")
                for axis, d in result["details"].get(src, {}).items():
                    if isinstance(d, dict) and d.get("items"):
                        child.log_table(pd.DataFrame(d["items"]), f"{axis}.items.json")
        check_calls(ctx.gateway)  # outputs are written; a role whose calls failed fails the run and the stage
    if out_dir is None:
        write_metrics_json(project / "metrics/audit" / f"{dataset}.json", flat)
    return {"card": card, "table": table, "out": out, "metrics": flat, "comparisons": result["comparisons"],
            "failures": result["tally"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rubriclab.stages.audit")
    ap.add_argument("--dataset", required=True)
    args = ap.parse_args(argv)
    project = find_project_dir()
    run_audit_stage(load_params(project / "params.yaml"), project, args.dataset)
    return 0


if __name__ == "__main__":
    exit_stage(run_stage(main, "audit"))
