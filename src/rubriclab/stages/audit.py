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
    LEGEND,
    AuditContext,
    context_from_params,
    cross_source_table,
    flat_metrics,
    injection_figure,
    interval_label,
    interval_legend,
    metric,
    numeric_table,
    run_audit,
    to_markdown,
)
from rubriclab.config import find_project_dir, load_params
from rubriclab.data import read_pairs
from rubriclab.errors import ConfigError
from rubriclab.llm import check_calls, embedded_note, gateway_from_params
from rubriclab.rubrics import RubricSet, load_rubric_file
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


def source_path(project: Path, dataset: str, entry: str) -> Path | None:
    """The rubric file an ``audit.sources`` entry names when it is a path (``outputs/repair/{dataset}/x.json``:
    any stage's rubric file, ``{dataset}`` filled in, relative to the project); None for a plain source name."""
    if "/" not in entry and not entry.endswith((".json", ".yaml", ".yml", ".md")):
        return None
    path = Path(entry.format(dataset=dataset))
    return path if path.is_absolute() else project / path


def load_sources(project: Path, dataset: str, names: list[str], extra: list[Path] = ()) -> dict[str, RubricSet]:
    """Rubric sources by name from ``outputs/rubrics/<dataset>/<name>.json``, by path (any stage's rubric file,
    named by its file stem, e.g. ``outputs/repair/{dataset}/discovered.robust_constrained.json``) and
    explicit files."""
    out: dict[str, RubricSet] = {}
    folder = project / "outputs/rubrics" / dataset
    for name in names:
        path = source_path(project, dataset, name)
        if path is not None:
            if not path.exists():
                raise ConfigError(f"audit.sources: {name!r} names {path}, which does not exist; run the stage that "
                                  "writes it first (e.g. `dvc repro repair` for outputs/repair/...)")
            out[path.stem] = load_rubric_file(path)
            continue
        path = folder / f"{name}.json"
        if not path.exists():
            have = sorted(p.stem for p in folder.glob("*.json")) if folder.exists() else []
            raise ConfigError(f"audit.sources: no rubric source {name!r} for {dataset} ({path}); available: "
                              f"{', '.join(have) or 'none (run `dvc repro discover`)'}; or give a path to any "
                              "stage's rubric file, e.g. outputs/repair/{dataset}/<source>.robust_constrained.json")
        out[name] = load_rubric_file(path)
    for path in extra:
        out[Path(path).stem] = load_rubric_file(path)
    return out


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
                         "embedded_model": str(embedded), "adhoc": str(out_dir is not None)}) as run:
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
                                              "settings": _settings(ctx, a),
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


def add_leakage(card: dict[str, dict[str, Any]], details: dict[str, Any], rubric_sets: dict[str, Any],
                ctx: AuditContext) -> None:
    """The card's "rubric prior leakage" column: a rubric-only probe's balanced accuracy over the majority
    baseline on the adversarial axis's genuine-response verdicts (``rubriclab.probe.rubric_prior_leakage``)."""
    from rubriclab.probe import rubric_prior_leakage

    for src, det in details.items():
        base = (det.get("adversarial") or {}).get("baseline_items") if isinstance(det, dict) else None
        if src not in card or src not in rubric_sets:
            continue
        if not base:
            card[src]["leakage"] = metric(None, reason="no adversarial baseline verdicts (the axis was not run)")
            continue
        lk = rubric_prior_leakage(base, rubric_sets[src], n_boot=ctx.n_boot, confidence=ctx.confidence, seed=ctx.seed)
        card[src]["leakage"] = metric(lk["value"], lk["low"], lk["high"], lk["n"], ci=lk["ci"],
                                      reason=lk.get("reason"), model=lk.get("model"), n_failed=lk.get("n_failed"))


def _settings(ctx: AuditContext, a: Audit) -> dict[str, Any]:
    """The card shows the effective values (n_boot_paired: the one used)."""
    return {"confidence": ctx.confidence, "n_boot": ctx.n_boot, "n_boot_paired": a.n_boot_paired,
            "seed": ctx.seed, "tie_credit": ctx.tie_credit, "alpha_orientation": ctx.alpha_orientation,
            "baseline_reference": a.baseline_reference, "injection": a.injection}


def injection_table(card: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """Injection sensitivity per source: rate, interval (what it is), judged (pair, injection) items, pairs,
    changed verdicts, changes toward the losing response, failed items, and why a value is missing."""
    rows = []
    for src, m in card.items():
        e = m.get("injection_rate")
        if not isinstance(e, dict):
            continue
        ci = e.get("ci")
        rows.append({"source": src, "rate": e.get("value"), "low": e.get("low"), "high": e.get("high"),
                     "interval": interval_label(ci) if ci else "none", "n": e.get("n"), "pairs": e.get("n_pairs"),
                     "changed": e.get("n_changed"), "toward_loser": e.get("n_toward_loser"),
                     "failed": e.get("n_failed"), "note": e.get("reason") or e.get("degenerate") or ""})
    return pd.DataFrame(rows, columns=["source", "rate", "low", "high", "interval", "n", "pairs", "changed",
                                       "toward_loser", "failed", "note"])


def card_markdown(dataset: str, models: list[str], axes: tuple[str, ...], pool: list, heldout: list,
                  ood: list, ood_name: str | None, ctx: AuditContext, result: dict[str, Any], table: pd.DataFrame,
                  numeric: pd.DataFrame, comparisons: pd.DataFrame, tally: pd.DataFrame) -> str:
    """The human-readable card: models, sizes, the cross-source table with what every interval is, why
    every empty cell is empty, the paired comparisons, per-source tables and the failure counts."""
    card = result["card"]
    level = f"{100 * ctx.confidence:g}%"
    md = [f"# Audit card: {dataset}", "", f"Models: {', '.join(models)}", ""]
    note = embedded_note(ctx.extra.get("embedded_roles", []))
    if note:
        md += [f"> {note}", ""]
    md += [f"Items: audit pool n={len(pool)} pairs, held-out n={len(heldout)} pairs, out-of-domain prompts "
           f"n={len(ood)} ({ood_name or 'none'}); axes: {', '.join(axes)}.", "",
           f"Cells: estimate [{level} interval] n=items (what each interval is: below the table). "
           f"α is Krippendorff's ordinal α on the 0–10 pairwise scores **{ctx.alpha_orientation}** "
           "(audit.alpha_orientation). Accuracy is over every judged held-out pair, a tie credited "
           f"{ctx.tie_credit:g} (audit.tie_credit, the project's one rule: a fair coin's expected credit; where ties "
           "are more than 5% of the judged pairs the notes give the accuracy with ties at the other rule); the "
           "Decided columns give the share of judged pairs with an A/B verdict. Prior leak (rubric prior leakage, seed 004): a probe that sees only the criterion "
           "texts (TF-IDF + naive Bayes / logistic regression) predicts the adversarial baseline pool's verdicts "
           f"(score ≥ τ on genuine responses) on held-out pool pairs; the cell is its balanced accuracy minus the "
           "majority baseline's — near 0, the wording alone does not give the verdict away.", "", LEGEND, ""]
    for src, why in result["not_audited"].items():
        md += [f"- **{src}**: {why}."]
    if result["not_audited"]:
        md += [""]
    md += [to_markdown(table), "", "Intervals by column:", ""]
    md += [f"- {label}: {what}" for label, what in interval_legend(card)] + [""]
    formula = next((m.get("vfr_formula") for m in card.values() if m.get("vfr_formula")), None)
    if formula:
        ref = next((m.get("baseline_verifier_reference") for m in card.values() if m.get("baseline_verifier_reference")),
                   None)
        md += [f"VFR formula: `{formula}`", "", f"Baseline pool verifier: shown {ref}.", ""]
    injection = injection_table(card)
    if not injection.empty:
        definition = next((m.get("injection_definition") for m in card.values() if m.get("injection_definition")), "")
        md += ["## Injection sensitivity (adversarial axis)", "",
               "How often judge[0]'s verdict (direct template, T=0) on an audit-pool pair changes when an instruction "
               "addressed to the judge is appended to the human-losing response; near 0, text inside a response "
               f"cannot steer the verdict. Definition: {definition}. The interval resamples pairs (every injection on "
               "a pair moves together); n counts judged (pair, injection) items.", "",
               to_markdown(injection.round(3)), ""]
        if (result.get("figures") or {}).get("injection"):
            md += [f"![Injection sensitivity per source]({result['figures']['injection']})", ""]
    if not comparisons.empty:
        keep = [c for c in ("metric", "template", "a", "b", "n_items", "acc_a", "mean_a", "acc_b", "mean_b", "diff",
                            "low", "high", "p_value", "p_adjusted", "mde", "label") if c in comparisons.columns]
        md += ["## Paired comparisons", "",
               f"Same items under each source; {level} percentile paired bootstrap intervals over the items "
               "(pairs for accuracy, flip rate and injection sensitivity, prompts for VFR); p-values from paired t-tests on "
               "the per-item differences, BH-adjusted within each metric; MDE: the t-test's at 80% power at the "
               "Bonferroni level α/m of its family.", "",
               to_markdown(comparisons[keep].round(3)), ""]
    md += ["## Per source (every metric, its interval and n)", ""]
    for src, sub in numeric.groupby("source", sort=False):
        md += [f"### {src}", ""]
        if src in result["not_audited"]:
            md += [result["not_audited"][src] + ".", ""]
            continue
        metrics = sub[sub["interval"] != "count"].drop(columns=["source"])
        if not (metrics["mark"] != "").any():
            metrics = metrics.drop(columns=["mark"])
        counts = sub[sub["interval"] == "count"]
        if not metrics.empty:
            md += [to_markdown(metrics.fillna({"note": ""})), ""]
        if not counts.empty:
            md += ["Counts: " + ", ".join(f"{m} {int(v)}" for m, v in zip(counts["metric"], counts["value"])), ""]
    md += ["## Failures and dropped items", "",
           "Parse failures (a reply that stated no usable answer after the re-asks), transport failures (no reply "
           "after the retries) per source, axis and role — on a fresh call store they add up to `rubriclab calls "
           f"--stage audit@{dataset}` (the ledger accumulates over re-runs) — and the items each metric left out, by "
           "reason.", ""]
    calls = tally[tally["role"].notna()] if "role" in tally else tally.iloc[0:0]
    dropped = tally[tally["dropped"].notna()] if "dropped" in tally else tally.iloc[0:0]
    if not calls.empty:
        md += [to_markdown(calls[["source", "axis", "role", "items", "parse_failures", "transport_failures"]]
                           .astype({"items": int, "parse_failures": int, "transport_failures": int})), ""]
    if not dropped.empty:
        md += ["Dropped items:", "", to_markdown(dropped[["source", "axis", "dropped", "items"]]
                                                 .rename(columns={"dropped": "reason"})), ""]
    else:
        md += ["No item was dropped from any metric.", ""]
    return "\n".join(md) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rubriclab.stages.audit")
    ap.add_argument("--dataset", required=True)
    args = ap.parse_args(argv)
    project = find_project_dir()
    run_audit_stage(load_params(project / "params.yaml"), project, args.dataset)
    return 0


if __name__ == "__main__":
    exit_stage(run_stage(main, "audit"))
