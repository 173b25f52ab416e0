"""DVC stage `probe`: rubric artifacts (seed 004). Loads rubric-item datasets (HealthBench- and
ResearchRubrics-style), fills missing responses with the generator role, labels every (response, item) with
the judge through the call store, trains rubric-only probe classifiers (held-out 20% by record, 5-fold CV,
bootstrap CIs), cross-dataset transfer, output and rubric counterfactual flip tests (also on the criteria of
pairwise rubric sets), and the semantic analyses; tables, plots, metrics and one MLflow run."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pandas as pd

from rubriclab import atomic
from rubriclab.config import find_project_dir, load_params
from rubriclab.data import read_pairs
from rubriclab.errors import ConfigError
from rubriclab.llm import card_head, check_calls, embed_texts, gateway_from_params, panel, roles_from_params
from rubriclab.paths import display_path
from rubriclab.probe import (
    PROBE_MODELS,
    counterfactual_sections,
    demo_items_path,
    file_part,
    generate_responses,
    items_from_rubric_set,
    judge_items,
    label_line,
    load_rubric_items,
    probe_cohort,
    semantic_sections,
    split_cohorts,
    transfer_section,
)
from rubriclab.rubrics import load_rubric_file
from rubriclab.settings import Data, Params, Probe, ProbeDataset
from rubriclab.stages import exit_stage, run_stage
from rubriclab.tracking import stage_run, write_metrics_json


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
    md = card_head("Rubric artifacts: probe", models_used, embedded)
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
                         "datasets": ", ".join(datasets), "adhoc": str(out_dir is not None)},
                   record_dir=out) as run:
        for name, items in datasets.items():
            items = generate_responses(items, gateway=gateway, generator=generator, templates_dir=templates_dir)
            items = judge_items(items, gateway=gateway, judge=judge, templates_dir=templates_dir)
            labelled[name] = items
            atomic.write_parquet(items.drop(columns=[c for c in ("tags",) if c in items]).assign(
                tags=items["tags"].map(lambda t: "|".join(t) if isinstance(t, (list, tuple)) else t)
            ), out / f"{file_part(name)}.items.parquet", index=False)
            md += [f"## {name}", "", label_line(items, drops=datasets[name].attrs.get("drops")), ""]
            parts, note = split_cohorts(name, items)
            md += [note, ""] if note else []
            for cohort, part in parts.items():
                cohorts[cohort] = (name, part)
                md += [f"### {cohort}", "", label_line(part), ""] if len(parts) > 1 else []
                res, lines = probe_cohort(cohort, part, probe_kw, out, flat)
                md += lines
                if res is not None:
                    results[cohort] = res
                    run.log_table(res["table"], f"{file_part(cohort)}/probe.json")
        md += transfer_section(results, cohorts, probe_kw, out)
        md += counterfactual_sections(labelled, cf, seed, out, flat, gateway=gateway, generator=generator,
                                      rewriter=rewriter, judge=judge, templates_dir=templates_dir)
        semantics, written = semantic_sections(results, cohorts, embed, seed, out, projection=pr.projection)
        md += semantics
        for path, folder in written:
            run.log_artifact(path, folder)
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
