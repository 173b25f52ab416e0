"""DVC stage `audit` (one instance per dataset): the four-axis audit of every configured rubric source,
written as an audit card (JSON, CSV, markdown), per-item tables, metrics.json and an MLflow run with
one nested run per source."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from rubriclab.audit import AuditContext, cross_source_table, flat_metrics, numeric_table, run_audit, to_markdown
from rubriclab.config import find_project_dir, get, load_params
from rubriclab.data import read_pairs
from rubriclab.errors import ConfigError
from rubriclab.llm import gateway_from_params, panel, roles_from_params
from rubriclab.rubrics import RubricSet, load_rubric_file
from rubriclab.tracking import stage_run, write_metrics_json

EMBEDDED_NOTE = ("Numbers below come from the embedded SmolLM2-135M model, which is at chance as a pairwise judge: "
                 "they show the pipeline runs end to end and are NOT findings. Set real models in params.yaml "
                 "(llm.roles) for a real audit.")


def _split(project: Path, dataset: str, name: str, limit: int | None) -> list:
    path = project / "outputs/data/premise" / dataset / f"{name}.parquet"
    if not path.exists():
        raise ConfigError(f"{path}: missing {name} split for {dataset!r}; run `dvc repro data` with {dataset} "
                          "in data.premise.sources")
    pairs = read_pairs(path)
    return pairs[:limit] if limit else pairs


def load_sources(project: Path, dataset: str, names: list[str], extra: list[Path] = ()) -> dict[str, RubricSet]:
    """Rubric sources by name from ``outputs/rubrics/<dataset>/<name>.json`` plus explicit files."""
    out: dict[str, RubricSet] = {}
    folder = project / "outputs/rubrics" / dataset
    for name in names:
        path = folder / f"{name}.json"
        if not path.exists():
            have = sorted(p.stem for p in folder.glob("*.json")) if folder.exists() else []
            raise ConfigError(f"audit.sources: no rubric source {name!r} for {dataset} ({path}); available: "
                              f"{', '.join(have) or 'none (run `dvc repro discover`)'}")
        out[name] = load_rubric_file(path)
    for path in extra:
        out[Path(path).stem] = load_rubric_file(path)
    return out


def _context(params: dict[str, Any], project: Path, stage: str) -> tuple[AuditContext, list[str]]:
    roles = roles_from_params(params)
    if "judge" not in roles:
        raise ConfigError("params.yaml: llm.roles.judge is not configured; the audit needs a judge (or a panel)")
    cfg = get(params, "audit", {})

    def one(name: str):
        return panel(roles[name])[0] if name in roles else None

    ctx = AuditContext(gateway=gateway_from_params(params, stage=stage, project_dir=project),
                       judges=panel(roles["judge"]), paraphraser=one("paraphraser"), attacker=one("attacker"),
                       verifier=one("verifier"), templates_dir=get(params, "llm.templates_dir", None),
                       seed=get(params, "data.seed", 42), n_boot=int(cfg.get("n_boot", 2000)),
                       confidence=float(cfg.get("confidence", 0.95)))
    models = sorted({m.model for r in roles.values() for m in panel(r)})
    return ctx, models


def run_audit_stage(params: dict[str, Any], project: Path, dataset: str, *, sources: list[str] | None = None,
                    rubric_files: list[Path] = (), axes: list[str] | None = None,
                    out_dir: Path | None = None) -> dict[str, Any]:
    """Audit ``dataset``. The DVC stage writes ``outputs/audit/<dataset>`` and ``metrics/audit/<dataset>.json``;
    an ad-hoc audit (``out_dir`` given, e.g. from the CLI) writes only its own folder, so it never
    touches the pipeline's outputs."""
    cfg = dict(get(params, "audit", {}))
    names = list(sources if sources is not None else cfg.get("sources", []))
    rubric_sets = load_sources(project, dataset, names, rubric_files)
    if not rubric_sets:
        raise ConfigError("audit: no rubric source selected (audit.sources or --rubrics FILE)")
    pool = _split(project, dataset, "audit", cfg.get("pool_size"))
    heldout = _split(project, dataset, "heldout", cfg.get("heldout_size"))
    ood_name = (cfg.get("out_of_domain") or {}).get(dataset)
    ood = _split(project, ood_name, "audit", cfg.get("pool_size")) if ood_name else []
    axes = tuple(axes or cfg.get("axes") or ("structure", "reliability", "fit", "adversarial"))
    ctx, models = _context(params, project, f"audit@{dataset}")
    out = out_dir or project / "outputs/audit" / dataset
    out.mkdir(parents=True, exist_ok=True)
    embedded = any(m.startswith("local/") for m in models)
    with stage_run("audit", f"audit@{dataset}", params, project,
                   experiment=get(params, "tracking.experiment", "rubriclab"),
                   tags={"dataset": dataset, "models": ", ".join(models), "sources": ", ".join(rubric_sets),
                         "embedded_model": str(embedded), "adhoc": str(out_dir is not None)}) as run:
        result = run_audit(rubric_sets, pool=pool, heldout=heldout, ood=ood, ctx=ctx, cfg=cfg, axes=axes)
        card = result["card"]
        table = cross_source_table(card)
        numeric = numeric_table(card)
        numeric.to_csv(out / "card.csv", index=False)
        table.to_csv(out / "cross_source.csv", index=False)
        comparisons = pd.DataFrame(result["comparisons"])
        comparisons.to_csv(out / "comparisons.csv", index=False)
        formula = next((m.get("vfr_formula") for m in card.values() if m.get("vfr_formula")), None)
        md = [f"# Audit card: {dataset}", "", f"Models: {', '.join(models)}", ""]
        if embedded:
            md += [f"> {EMBEDDED_NOTE}", ""]
        md += [f"Items: audit pool n={len(pool)}, held-out n={len(heldout)}, out-of-domain prompts n={len(ood)} "
               f"({ood_name or 'none'}); axes: {', '.join(axes)}. Cells: estimate [95% CI, item bootstrap] n=items; "
               "★ = best in column.", "", to_markdown(table), ""]
        if formula:
            md += [f"VFR formula: `{formula}`", ""]
        if not comparisons.empty:
            keep = [c for c in ("metric", "template", "a", "b", "n_items", "acc_a", "acc_b", "diff", "low", "high", "p_value",
                                "p_adjusted", "mde", "label") if c in comparisons.columns]
            md += ["## Paired comparisons (same items under each source; paired bootstrap, BH-adjusted within "
                   "each metric, MDE at 80% power)", "",
                   to_markdown(comparisons[keep].round(3)), ""]
        md += ["## Per source (every metric, 95% CI, n)", ""]
        for src, sub in numeric.groupby("source", sort=False):
            md += [f"### {src}", "", to_markdown(sub.drop(columns=["source"]).round(3)), ""]
        md += ["## Counts (parse failures, dropped items)", "", "```", json.dumps(result["counts"], indent=2), "```"]
        (out / "card.md").write_text("\n".join(md) + "\n")
        (out / "card.json").write_text(json.dumps({"dataset": dataset, "models": models, "embedded": embedded,
                                                   "axes": list(axes), "card": card,
                                                   "comparisons": result["comparisons"]},
                                                  indent=2, sort_keys=True, default=str))
        for src, det in result["details"].items():
            for axis, d in det.items():
                if isinstance(d, dict) and d.get("per_criterion"):
                    pd.DataFrame(d["per_criterion"]).to_csv(out / f"{src}.{axis}.per_criterion.csv", index=False)
                if isinstance(d, dict) and d.get("items"):
                    pd.DataFrame(d["items"]).to_parquet(out / f"{src}.{axis}.items.parquet", index=False)
        if result["accuracy_items"]:
            pd.DataFrame(result["accuracy_items"]).to_parquet(out / "accuracy.items.parquet", index=False)

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
                for axis, d in result["details"].get(src, {}).items():
                    if isinstance(d, dict) and d.get("items"):
                        child.log_table(pd.DataFrame(d["items"]), f"{axis}.items.json")
    if out_dir is None:
        write_metrics_json(project / "metrics/audit" / f"{dataset}.json", flat)
    return {"card": card, "table": table, "out": out, "metrics": flat}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rubriclab.stages.audit")
    ap.add_argument("--dataset", required=True)
    args = ap.parse_args(argv)
    project = find_project_dir()
    run_audit_stage(load_params(project / "params.yaml"), project, args.dataset)
    return 0


if __name__ == "__main__":
    sys.exit(main())
