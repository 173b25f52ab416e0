"""DVC stage `probe`: rubric artifacts (seed 004). Loads rubric-item datasets (HealthBench- and
ResearchRubrics-style), fills missing responses with the generator role, labels every (response, item) with
the judge through the call store, trains rubric-only probe classifiers (held-out 20% by record, 5-fold CV,
bootstrap CIs), cross-dataset transfer, output and rubric counterfactual flip tests (also on the criteria of
pairwise rubric sets), and the semantic analyses; tables, plots, metrics and one MLflow run."""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path
from typing import Any

import pandas as pd

from rubriclab import atomic
from rubriclab.audit import to_markdown
from rubriclab.config import find_project_dir, load_params
from rubriclab.data import read_pairs
from rubriclab.errors import ConfigError
from rubriclab.llm import check_calls, embed_texts, embedded_note, gateway_from_params, panel, roles_from_params
from rubriclab.paths import display_path
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
from rubriclab.settings import Counterfactual, Data, Params, Probe, ProbeDataset
from rubriclab.stages import exit_stage, run_stage
from rubriclab.tracking import stage_run, write_metrics_json

METRICS = ("balanced_accuracy", "accuracy", "precision", "recall", "f1", "roc_auc")


def _resolve(project: Path, spec: str) -> Path:
    if str(spec).startswith("demo:"):
        return demo_items_path(str(spec).split(":", 1)[1])
    path = Path(spec)
    return path if path.is_absolute() else project / path


def load_datasets(project: Path, probe: Probe, data_files: list[Path] | None = None,
                  seed: int = Data().seed) -> dict[str, pd.DataFrame]:
    """``probe.datasets`` (name -> {path, format, limit}), or the given files (name = file stem)."""
    specs = ({Path(f).stem: ProbeDataset(path=str(f)) for f in data_files} if data_files
             else dict(probe.datasets or {}))
    if not specs:
        raise ConfigError("params.yaml: probe.datasets is empty; give at least one rubric-item file "
                          "(or demo:healthbench)")
    out = {}
    for name, spec in specs.items():
        path = _resolve(project, spec.path)
        df = load_rubric_items(path, fmt=spec.format, dataset=name, limit=spec.limit, seed=seed)
        # provenance that names the same file on every machine: a shipped demo by its spec (its path is wherever
        # the package is installed), a project file relative to the project (the items table stores it)
        df.attrs["file"] = spec.path if str(spec.path).startswith("demo:") else display_path(path, project)
        out[name] = df
    return out


def rubric_set_items(project: Path, probe: Probe, rubric_files: list[Path] | None = None) -> dict[str, pd.DataFrame]:
    """Criteria of pairwise rubric sets as items over preference pairs (``probe.rubric_sets``)."""
    rs_cfg = probe.rubric_sets
    files = list(rubric_files or []) or [Path(p) for p in rs_cfg.files]
    if not files:
        return {}
    pairs_path = project / rs_cfg.pairs
    if not pairs_path.exists():
        raise ConfigError(f"{pairs_path}: missing; probe.rubric_sets.pairs names the preference pairs whose "
                          "responses the criteria are judged on (run `dvc repro data`)")
    pairs = read_pairs(pairs_path)[: rs_cfg.max_pairs]
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
                         f"(n={res.get('n')} items in {m.get('n_records', res.get('n'))} records; "
                         f"{100 * m['ci']['level']:g}% percentile bootstrap over records, B={m['ci']['resamples']})")
    fails = ", ".join(f"{k} {v}" for k, v in (res.get("failures") or {}).items() if v)
    lines.append(f"- sampled {res.get('n_sampled')} conversations, one rubric item each; failures: "
                 f"{fails or 'none'} (counted, left out)")
    return lines


def _safe(name: str) -> str:
    """A dataset or cohort name as a file name part (``rubric_set:rs`` -> ``rubric_set_rs``)."""
    return re.sub(r"[^\w.-]+", "_", name).strip("_")


def _label_line(items: pd.DataFrame) -> str:
    n_failed = int(items["label"].isna().sum())
    return (f"{len(items)} items in {items['record_id'].nunique()} records; labels: "
            f"{int((items['label'] == 1).sum())} met, {int((items['label'] == 0).sum())} not met, "
            f"{n_failed} failed (left out).")


def split_cohorts(name: str, items: pd.DataFrame) -> tuple[dict[str, pd.DataFrame], str | None]:
    """One probe cohort per response source (seed 004: each cohort is one model's responses); a dataset with
    one source keeps its name. Items without a source (no response, so no label) are left out and counted."""
    src = items["response_source"] if "response_source" in items.columns else pd.Series(None, index=items.index)
    kinds = sorted(src.dropna().astype(str).unique())
    if len(kinds) <= 1:
        return {name: items}, None
    parts = {f"{name}[{k}]": items[src.astype(str).eq(k) & src.notna()] for k in kinds}
    n_none = int(src.isna().sum())
    note = (f"Responses come from {len(kinds)} sources ({', '.join(kinds)}): one probe cohort per source, never "
            f"pooled" + (f"; {n_none} items without a response left out." if n_none else "."))
    return parts, note


def _probe_cohort(cohort: str, items: pd.DataFrame, probe_kw: dict[str, Any], out: Path, flat: dict[str, Any],
                  run: Any) -> tuple[dict[str, Any] | None, list[str]]:
    """Probe one cohort; write its tables; return the result (None when it could not run) and its markdown."""
    safe = _safe(cohort)
    try:
        res = run_probe(items, **probe_kw)
    except Exception as exc:  # noqa: BLE001 - a cohort too small to split is reported, not fatal
        flat[f"{safe}.probe_error"] = 1
        return None, [f"Probe not run: {exc}", ""]
    atomic.write_csv(res["table"], out / f"{safe}.probe.csv", index=False)
    atomic.write_csv(res["cv"], out / f"{safe}.cv.csv", index=False)
    atomic.write_csv(res["predictions"], out / f"{safe}.predictions.csv", index=False)
    sp = res["split"]
    md = [f"Split: {sp['method']} — {sp['n_groups']} clusters; {sp['n_texts_in_several_records']} of "
          f"{sp['n_texts']} criterion texts recur in several records ({sp['n_items_with_shared_text']} items); "
          f"records on both sides: {sp['overlap_records']}, texts on both sides: {sp['overlap_texts']}; held out: "
          f"{sp['n_test_items']} of {sp['n_train_items'] + sp['n_test_items']} items ({sp['test_item_share']:.0%}; "
          f"asked {sp['test_size']:.0%} ± {sp['split_tolerance']:.0%}, seeded split {sp['splits_tried']} of "
          "those tried).", "",
          "Probe on held-out clusters:", "", probe_markdown(res["table"]), ""]
    lk = res.get("leakage") or {}
    if lk and math.isfinite(lk.get("estimate", math.nan)):
        md += [f"Rubric prior leakage: {lk.get('model')} balanced accuracy − majority baseline = "
               f"{lk['estimate']:+.3f} [{lk['low']:.2f}, {lk['high']:.2f}] (paired bootstrap over "
               f"{sp['unit']}, n={lk.get('n')} items in {lk.get('n_groups')} clusters; model chosen by "
               f"{lk.get('selected_by') or 'held-out balanced accuracy'}).", ""]
        flat[f"{safe}.leakage"] = lk["estimate"]
    for r in res["table"].to_dict("records"):
        if r["metric"] in ("balanced_accuracy", "roc_auc") and isinstance(r["estimate"], float) \
                and math.isfinite(r["estimate"]):
            flat[f"{safe}.{r['model']}.{r['metric']}"] = r["estimate"]
    run.log_table(res["table"], f"{safe}/probe.json")
    return res, md


def _transfer_section(results: dict[str, Any], cohorts: dict[str, tuple[str, pd.DataFrame]],
                      probe_kw: dict[str, Any], out: Path) -> list[str]:
    """Train on one cohort, test on a cohort of another dataset; test items seen in training are dropped."""
    names = [n for n in results if not cohorts[n][0].startswith("rubric_set:")]
    kw = {k: v for k, v in probe_kw.items() if k not in ("test_size", "split_tolerance", "cv_folds")}
    rows, md = [], []
    for a in names:
        for b in names:
            if cohorts[a][0] == cohorts[b][0]:
                continue
            try:
                rows.append(probe_transfer(cohorts[a][1], cohorts[b][1], **kw).assign(train=a, test=b))
            except Exception as exc:  # noqa: BLE001 - e.g. every test item also in training: said, not fatal
                md += [f"Train {a} → test {b}: not run: {exc}", ""]
    if not rows and not md:
        return []
    md = ["## Cross-dataset transfer (train on one, test on the other)", "", *md]
    if rows:
        transfer = pd.concat(rows, ignore_index=True)
        atomic.write_csv(transfer, out / "transfer.csv", index=False)
        for (a, b), g in transfer.groupby(["train", "test"], sort=False):
            first = g.iloc[0]
            md += [f"Train {a} → test {b} ({int(first['n_test_dropped_overlap'])} test items left out: their "
                   f"record or criterion text is also in training; {int(first['n_test'])} tested):", "",
                   probe_markdown(g), ""]
    return md


def _counterfactual_sections(labelled: dict[str, pd.DataFrame], cf: Counterfactual, seed: int, out: Path,
                             flat: dict[str, Any], **roles: Any) -> list[str]:
    md: list[str] = []
    n_cf = cf.n_items
    for name in list(cf.datasets or list(labelled)[:1]):
        if name not in labelled:
            raise ConfigError(f"params.yaml: probe.counterfactual.datasets: unknown dataset {name!r}; "
                              f"known: {', '.join(labelled)}")
        safe = _safe(name)
        common = {"gateway": roles["gateway"], "judge": roles["judge"], "n_items": n_cf, "seed": seed,
                  "templates_dir": roles["templates_dir"]}
        outp = output_perturbation(labelled[name], generator=roles["generator"], **common)
        rubp = rubric_perturbation(labelled[name], rewriter=roles["rewriter"], **common)
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
    return md


def _semantic_sections(results: dict[str, Any], cohorts: dict[str, tuple[str, pd.DataFrame]], embed: Any,
                       seed: int, out: Path, run: Any, projection: str = "auto") -> list[str]:
    """Semantic analyses per cohort (never pooled across datasets), under ``semantics/<cohort>/``; the LR
    weights are the cohort's own probe, fitted on its training clusters, and its title counts those items."""
    md: list[str] = []
    for cohort, (dataset, items) in cohorts.items():
        if dataset.startswith("rubric_set:"):
            continue
        safe = _safe(cohort)
        res = results.get(cohort) or {}
        held_out = set(res["predictions"]["item_id"]) if res else set()
        train = items[~items["item_id"].isin(held_out)] if res else None
        vectors = embed(items["criterion"].tolist()) if len(items) else None  # one row per item
        report = semantic_report(items, fitted_lr=res.get("fitted", {}).get("lr"), vectors=vectors, seed=seed,
                                 lr_items=train, name=cohort, projection_method=projection)
        md += [f"## Semantic analyses: {cohort}", ""]
        for key, part in report.items():
            md += [f"- `{key}`: `semantics/{safe}/{key}.csv`, `semantics/{safe}/{key}.png`"
                   + (f" — {'; '.join(part['notes'])}" if part.get("notes") else "")]
        for path in write_semantic_report(report, out / "semantics" / safe):
            run.log_artifact(path, f"semantics/{safe}")
        md += [""]
    return md


def run_probe_stage(params: dict[str, Any], project: Path, *, data_files: list[Path] | None = None,
                    rubric_files: list[Path] | None = None, out_dir: Path | None = None) -> dict[str, Any]:
    """Run the probe on every configured dataset; write ``outputs/probe`` and ``metrics/probe.json`` (an ad-hoc
    run with ``out_dir`` writes only that folder)."""
    p = Params.of(params)
    pr = p.probe
    seed = p.data.seed
    n_boot = int(pr.n_boot)
    confidence = float(pr.confidence)
    models = tuple(pr.models or PROBE_MODELS)
    if pr.encoder:
        raise ConfigError("params.yaml: probe.encoder: fine-tuning a Hugging Face encoder needs a GPU and is not "
                          "built here; set probe.encoder: null (the embed model uses the embedder role)")
    roles = roles_from_params(p.llm)
    for needed in ("judge", "generator", "embedder"):
        if needed not in roles:
            raise ConfigError(f"params.yaml: llm.roles.{needed} is not configured; probe needs it")
    judge, generator = panel(roles["judge"])[0], panel(roles["generator"])[0]
    rewriter = panel(roles.get("refiner") or roles["generator"])[0]
    embedder = panel(roles["embedder"])[0]
    gateway = gateway_from_params(p.llm, stage="probe", project_dir=project)
    templates_dir = p.llm.templates_dir
    used = [judge, generator, rewriter, embedder]
    models_used = sorted({f"{r.name}={r.model}" for r in used})
    embedded = sorted({r.name for r in used if r.model.startswith("local/") and r.name != "embedder"})

    def embed(texts: list[str]):
        return embed_texts(list(texts), embedder, gateway.store, progress=False, stage=gateway.stage)

    datasets = load_datasets(project, pr, data_files, seed)
    datasets.update(rubric_set_items(project, pr, rubric_files))
    out = out_dir or project / "outputs/probe"
    out.mkdir(parents=True, exist_ok=True)
    probe_kw = {"models": models, "embed": embed if "embed" in models else None, "seed": seed,
                "test_size": float(pr.test_size), "split_tolerance": float(pr.split_tolerance),
                "cv_folds": int(pr.cv_folds),
                "class_weight": pr.class_weight, "balance": pr.balance,
                "n_boot": n_boot, "confidence": confidence}
    cf = pr.counterfactual
    flat: dict[str, Any] = {}
    md = ["# Rubric artifacts: probe", "", f"Models: {', '.join(models_used)}", ""]
    note = embedded_note(embedded)
    if note:
        md += [f"> {note}", ""]
    md += [f"Intervals: {100 * confidence:g}% percentile bootstrap (B={n_boot}) over record-text clusters (a "
           "conversation's items, and every record sharing a criterion's wording, resampled together), on the "
           f"{probe_kw['test_size']:.0%} of clusters held out (split by cluster, so no record and no wording is on "
           f"both sides); CV: mean ± sd over {probe_kw['cv_folds']} cluster folds of the rest. One probe cohort per "
           "response source. Labels: the judge's verdict (criterion met = 1) on each (response, rubric item); "
           "items whose label failed are counted and left out.", ""]
    labelled: dict[str, pd.DataFrame] = {}
    results: dict[str, dict[str, Any]] = {}
    cohorts: dict[str, tuple[str, pd.DataFrame]] = {}  # cohort -> (dataset, items)
    with stage_run("probe", "probe", p.effective(), project, experiment=p.tracking.experiment,
                   tags={"models": ", ".join(models_used), "embedded_model": str(bool(embedded)),
                         "datasets": ", ".join(datasets), "adhoc": str(out_dir is not None)}) as run:
        for name, items in datasets.items():
            items = generate_responses(items, gateway=gateway, generator=generator, templates_dir=templates_dir)
            items = judge_items(items, gateway=gateway, judge=judge, templates_dir=templates_dir)
            labelled[name] = items
            atomic.write_parquet(items.drop(columns=[c for c in ("tags",) if c in items]).assign(
                tags=items["tags"].map(lambda t: "|".join(t) if isinstance(t, (list, tuple)) else t)
            ), out / f"{_safe(name)}.items.parquet", index=False)
            md += [f"## {name}", "", _label_line(items), ""]
            parts, note = split_cohorts(name, items)
            md += [note, ""] if note else []
            for cohort, part in parts.items():
                cohorts[cohort] = (name, part)
                md += [f"### {cohort}", "", _label_line(part), ""] if len(parts) > 1 else []
                res, lines = _probe_cohort(cohort, part, probe_kw, out, flat, run)
                md += lines
                if res is not None:
                    results[cohort] = res
        md += _transfer_section(results, cohorts, probe_kw, out)
        md += _counterfactual_sections(labelled, cf, seed, out, flat, gateway=gateway, generator=generator,
                                       rewriter=rewriter, judge=judge, templates_dir=templates_dir)
        md += _semantic_sections(results, cohorts, embed, seed, out, run, projection=pr.projection)
        atomic.write_text(out / "summary.md", "\n".join(md) + "\n")
        run.log_artifact(out / "summary.md")
        run.log_metrics(flat)
        check_calls(gateway)  # outputs are written; a role whose calls failed fails the run and the stage
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
    exit_stage(run_stage(main, "probe"))
