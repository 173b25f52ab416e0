"""DVC stage `probe`: rubric artifacts (seed 004). Loads rubric-item datasets (HealthBench- and
ResearchRubrics-style), fills missing responses with the generator role, labels every (response, item) with
the judge through the call store, trains rubric-only probe classifiers (held-out 20% by record, 5-fold CV,
bootstrap CIs), cross-dataset transfer, output and rubric counterfactual flip tests (also on the criteria of
pairwise rubric sets), and the semantic analyses; tables, plots, metrics and one MLflow run."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from rubriclab import atomic
from rubriclab.audit import to_markdown
from rubriclab.config import find_project_dir, get, load_params
from rubriclab.data import read_pairs
from rubriclab.errors import ConfigError
from rubriclab.llm import embed_texts, gateway_from_params, panel, roles_from_params
from rubriclab.probe import (
    PROBE_MODELS,
    demo_items_path,
    generate_responses,
    items_from_rubric_set,
    judge_items,
    load_rubric_items,
    output_perturbation,
    probe_transfer,
    rubric_perturbation,
    run_probe,
    semantic_report,
    write_semantic_report,
)
from rubriclab.rubrics import load_rubric_file
from rubriclab.stages import run_stage
from rubriclab.stages.audit import embedded_note
from rubriclab.tracking import stage_run, write_metrics_json

METRICS = ("balanced_accuracy", "accuracy", "precision", "recall", "f1", "roc_auc")


def _resolve(project: Path, spec: str) -> Path:
    if str(spec).startswith("demo:"):
        return demo_items_path(str(spec).split(":", 1)[1])
    path = Path(spec)
    return path if path.is_absolute() else project / path


def load_datasets(project: Path, cfg: dict[str, Any], data_files: list[Path] | None = None,
                  seed: int = 42) -> dict[str, pd.DataFrame]:
    """``probe.datasets`` (name -> {path, format, limit}), or the given files (name = file stem)."""
    specs: dict[str, dict[str, Any]] = {}
    if data_files:
        specs = {Path(f).stem: {"path": str(f)} for f in data_files}
    else:
        specs = dict(cfg.get("datasets") or {})
    if not specs:
        raise ConfigError("params.yaml: probe.datasets is empty; give at least one rubric-item file "
                          "(or demo:healthbench)")
    out = {}
    for name, spec in specs.items():
        if not isinstance(spec, dict) or "path" not in spec:
            raise ConfigError(f"params.yaml: probe.datasets.{name}: expected {{path, format?, limit?}}")
        out[name] = load_rubric_items(_resolve(project, spec["path"]), fmt=spec.get("format", "auto"), dataset=name,
                                      limit=spec.get("limit"), seed=seed)
    return out


def rubric_set_items(project: Path, cfg: dict[str, Any], rubric_files: list[Path] | None = None) -> dict[str, pd.DataFrame]:
    """Criteria of pairwise rubric sets as items over preference pairs (``probe.rubric_sets``)."""
    rs_cfg = dict(cfg.get("rubric_sets") or {})
    files = list(rubric_files or []) or [Path(p) for p in rs_cfg.get("files") or []]
    if not files:
        return {}
    pairs_path = project / str(rs_cfg.get("pairs", "outputs/data/premise/demo_helpful/audit.parquet"))
    if not pairs_path.exists():
        raise ConfigError(f"{pairs_path}: missing; probe.rubric_sets.pairs names the preference pairs whose "
                          "responses the criteria are judged on (run `dvc repro data`)")
    pairs = read_pairs(pairs_path)[: int(rs_cfg.get("max_pairs", 3))]
    out = {}
    for f in files:
        path = f if Path(f).is_absolute() else project / f
        rs = load_rubric_file(path)
        if rs.criteria:
            out[f"rubric_set:{rs.name}"] = items_from_rubric_set(rs, pairs, dataset=f"rubric_set:{rs.name}")
    return out


def _fmt(row: pd.Series) -> str:
    v = row["estimate"]
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return f"— ({row.get('reason') or 'undefined'})"
    return f"{v:.3f} [{row['low']:.2f}, {row['high']:.2f}]"


def probe_markdown(table: pd.DataFrame) -> str:
    """Models × metrics, each cell ``estimate [low, high]``; n and the interval stated under it."""
    rows = ["| model | " + " | ".join(METRICS) + " | n items (records) |", "|---|" + "---|" * (len(METRICS) + 1)]
    for model, g in table.groupby("model", sort=False):
        g = g.set_index("metric")
        cells = [_fmt(g.loc[m]) if m in g.index else "—" for m in METRICS]
        n = int(g["n"].iloc[0]) if "n" in g and pd.notna(g["n"].iloc[0]) else "—"
        groups = g["n_groups"].iloc[0] if "n_groups" in g else None
        n = f"{n} ({int(groups)})" if groups is not None and pd.notna(groups) else n
        rows.append(f"| {model} | " + " | ".join(cells) + f" | {n} |")
    return "\n".join(rows)


def _rates_markdown(res: dict[str, Any]) -> list[str]:
    lines = []
    rates = res.get("rates") or {}
    for key in ("desired_flip_rate", "stickiness_rate", "wrong_direction_rate", "inconsistency"):
        m = rates.get(key)
        label = key.replace("_", " ")
        if m is None:
            lines.append(f"- {label}: not defined — " + "; ".join(res.get("notes") or []))
        elif not math.isfinite(float(m.get("estimate", math.nan))):
            lines.append(f"- {label}: — (no valid item: n={res.get('n', 0)})")
        else:
            lines.append(f"- {label}: {m['estimate']:.3f} [{m['low']:.2f}, {m['high']:.2f}] "
                         f"(n={res.get('n')} items)")
    fails = ", ".join(f"{k} {v}" for k, v in (res.get("failures") or {}).items() if v)
    lines.append(f"- sampled {res.get('n_sampled')} items; failures: {fails or 'none'} (counted, left out)")
    return lines


def run_probe_stage(params: dict[str, Any], project: Path, *, data_files: list[Path] | None = None,
                    rubric_files: list[Path] | None = None, out_dir: Path | None = None) -> dict[str, Any]:
    """Run the probe on every configured dataset; write ``outputs/probe`` and ``metrics/probe.json`` (an ad-hoc
    run with ``out_dir`` writes only that folder)."""
    cfg = dict(get(params, "probe", {}) or {})
    seed = int(get(params, "data.seed", 42))
    n_boot = int(cfg.get("n_boot", 10000))
    confidence = float(cfg.get("confidence", 0.95))
    models = tuple(cfg.get("models") or PROBE_MODELS)
    if cfg.get("encoder"):
        raise ConfigError("params.yaml: probe.encoder: fine-tuning a Hugging Face encoder needs a GPU and is not "
                          "built here; set probe.encoder: null (the embed model uses the embedder role)")
    roles = roles_from_params(params)
    for needed in ("judge", "generator", "embedder"):
        if needed not in roles:
            raise ConfigError(f"params.yaml: llm.roles.{needed} is not configured; probe needs it")
    judge, generator = panel(roles["judge"])[0], panel(roles["generator"])[0]
    rewriter = panel(roles.get("refiner") or roles["generator"])[0]
    embedder = panel(roles["embedder"])[0]
    gateway = gateway_from_params(params, stage="probe", project_dir=project)
    templates_dir = get(params, "llm.templates_dir", None)
    used = [judge, generator, rewriter, embedder]
    models_used = sorted({f"{r.name}={r.model}" for r in used})
    embedded = sorted({r.name for r in used if r.model.startswith("local/") and r.name != "embedder"})

    def embed(texts: list[str]):
        return embed_texts(list(texts), embedder, gateway.store, progress=False, stage=gateway.stage)

    datasets = load_datasets(project, cfg, data_files, seed)
    datasets.update(rubric_set_items(project, cfg, rubric_files))
    out = out_dir or project / "outputs/probe"
    out.mkdir(parents=True, exist_ok=True)
    probe_kw = {"models": models, "embed": embed if "embed" in models else None, "seed": seed,
                "test_size": float(cfg.get("test_size", 0.2)), "cv_folds": int(cfg.get("cv_folds", 5)),
                "class_weight": cfg.get("class_weight", "balanced"), "balance": cfg.get("balance", "none"),
                "n_boot": n_boot, "confidence": confidence}
    cf = dict(cfg.get("counterfactual") or {})
    flat: dict[str, Any] = {}
    md = ["# Rubric artifacts: probe", "", f"Models: {', '.join(models_used)}", ""]
    note = embedded_note(embedded)
    if note:
        md += [f"> {note}", ""]
    md += [f"Intervals: {100 * confidence:g}% percentile bootstrap (B={n_boot}) over records (items of one "
           "conversation resampled together), on the 20% of records held out (split by record); CV: mean ± sd "
           f"over {probe_kw['cv_folds']} folds of the other 80%. Labels: the judge's verdict (criterion met = 1) "
           "on each (response, rubric item); items whose label failed are counted and left out.", ""]
    labelled: dict[str, pd.DataFrame] = {}
    results: dict[str, dict[str, Any]] = {}
    with stage_run("probe", "probe", params, project, experiment=get(params, "tracking.experiment", "rubriclab"),
                   tags={"models": ", ".join(models_used), "embedded_model": str(bool(embedded)),
                         "datasets": ", ".join(datasets), "adhoc": str(out_dir is not None)}) as run:
        for name, items in datasets.items():
            items = generate_responses(items, gateway=gateway, generator=generator, templates_dir=templates_dir)
            items = judge_items(items, gateway=gateway, judge=judge, templates_dir=templates_dir)
            labelled[name] = items
            safe = name.replace(":", "_")
            atomic.write_parquet(items.drop(columns=[c for c in ("tags",) if c in items]).assign(
                tags=items["tags"].map(lambda t: "|".join(t) if isinstance(t, (list, tuple)) else t)
            ), out / f"{safe}.items.parquet", index=False)
            n_failed = int(items["label"].isna().sum())
            md += [f"## {name}", "", f"{len(items)} items in {items['record_id'].nunique()} records; labels: "
                   f"{int((items['label'] == 1).sum())} met, {int((items['label'] == 0).sum())} not met, "
                   f"{n_failed} failed (left out).", ""]
            try:
                res = run_probe(items, **probe_kw)
            except Exception as exc:  # noqa: BLE001 - a dataset too small to split is reported, not fatal
                md += [f"Probe not run: {exc}", ""]
                flat[f"{safe}.probe_error"] = 1
                continue
            results[name] = res
            atomic.write_csv(res["table"], out / f"{safe}.probe.csv", index=False)
            atomic.write_csv(res["cv"], out / f"{safe}.cv.csv", index=False)
            atomic.write_csv(res["predictions"], out / f"{safe}.predictions.csv", index=False)
            md += ["Probe on held-out records:", "", probe_markdown(res["table"]), ""]
            lk = res.get("leakage") or {}
            if lk and math.isfinite(lk.get("estimate", math.nan)):
                md += [f"Rubric prior leakage: {lk.get('model')} balanced accuracy − majority baseline = "
                       f"{lk['estimate']:+.3f} [{lk['low']:.2f}, {lk['high']:.2f}] (paired bootstrap over records, "
                       f"n={lk.get('n')} items in {lk.get('n_groups')} records; model chosen by "
                       f"{lk.get('selected_by') or 'held-out balanced accuracy'}).", ""]
                flat[f"{safe}.leakage"] = lk["estimate"]
            for r in res["table"].to_dict("records"):
                if r["metric"] in ("balanced_accuracy", "roc_auc") and isinstance(r["estimate"], float) \
                        and math.isfinite(r["estimate"]):
                    flat[f"{safe}.{r['model']}.{r['metric']}"] = r["estimate"]
            run.log_table(res["table"], f"{safe}/probe.json")
        names = [n for n in results if not n.startswith("rubric_set:")]
        if len(names) >= 2:
            rows = []
            for a in names:
                for b in names:
                    if a != b:
                        t = probe_transfer(labelled[a], labelled[b], **{k: v for k, v in probe_kw.items()
                                                                       if k not in ("test_size", "cv_folds")})
                        rows.append(t.assign(train=a, test=b))
            transfer = pd.concat(rows, ignore_index=True)
            atomic.write_csv(transfer, out / "transfer.csv", index=False)
            md += ["## Cross-dataset transfer (train on one, test on the other)", ""]
            for (a, b), g in transfer.groupby(["train", "test"], sort=False):
                md += [f"Train {a} → test {b}:", "", probe_markdown(g), ""]
        n_cf = cf.get("n_items")
        cf_names = list(cf.get("datasets") or list(labelled)[:1])
        for name in cf_names:
            if name not in labelled:
                raise ConfigError(f"params.yaml: probe.counterfactual.datasets: unknown dataset {name!r}; "
                                  f"known: {', '.join(labelled)}")
            safe = name.replace(":", "_")
            outp = output_perturbation(labelled[name], gateway=gateway, generator=generator, judge=judge,
                                       n_items=n_cf, seed=seed, templates_dir=templates_dir)
            rubp = rubric_perturbation(labelled[name], gateway=gateway, rewriter=rewriter, judge=judge, n_items=n_cf,
                                       seed=seed, templates_dir=templates_dir)
            for kind, res in (("output", outp), ("rubric", rubp)):
                # rows/cols: labels 1, 0
                atomic.write_csv(res["table"], out / f"{safe}.{kind}_perturbation.transitions.csv")
                atomic.write_csv(pd.DataFrame(res["rows"]), out / f"{safe}.{kind}_perturbation.items.csv", index=False)
                t = res["table"]
                md += [f"## Counterfactual: {kind} perturbation ({name})", "",
                       f"Transitions (rows: {t.index.name}, columns: {t.columns.name}; 1 = criterion met):", "",
                       to_markdown(t.rename_axis(index=f"{t.index.name} ↓ / {t.columns.name} →").reset_index()), ""]
                md += _rates_markdown(res) + [""]
                m = (res.get("rates") or {}).get("desired_flip_rate")
                if isinstance(m, dict) and math.isfinite(float(m.get("estimate", math.nan))):
                    flat[f"{safe}.{kind}_perturbation.desired_flip_rate"] = m["estimate"]
        all_items = pd.concat([v for k, v in labelled.items() if not k.startswith("rubric_set:")], ignore_index=True)
        first = next((r for n, r in results.items() if not n.startswith("rubric_set:")), None)
        vectors = embed(all_items["criterion"].tolist()) if len(all_items) else None  # one row per item
        report = semantic_report(all_items, fitted_lr=(first or {}).get("fitted", {}).get("lr"),
                                 vectors=vectors, seed=seed)
        md += ["## Semantic analyses (all rubric-item datasets)", ""]
        for key, part in report.items():
            md += [f"- `{key}`: `semantics/{key}.csv`, `semantics/{key}.png`"
                   + (f" — {'; '.join(part['notes'])}" if part.get("notes") else "")]
        for path in write_semantic_report(report, out / "semantics"):
            run.log_artifact(path, "semantics")
        md += [""]
        atomic.write_text(out / "summary.md", "\n".join(md) + "\n")
        run.log_artifact(out / "summary.md")
        run.log_metrics(flat)
    if out_dir is None:
        write_metrics_json(project / "metrics/probe.json", flat)
    return {"out": out, "results": results, "labelled": labelled, "metrics": flat, "summary": "\n".join(md)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rubriclab.stages.probe")
    ap.parse_args(argv)
    project = find_project_dir()
    run_probe_stage(load_params(project / "params.yaml"), project)
    return 0


if __name__ == "__main__":
    sys.exit(run_stage(main, "probe"))
