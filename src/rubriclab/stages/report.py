"""DVC stage `report` (last): one HTML page, ``outputs/report/index.html``, with every stage's numbers, figures
and the models behind them, plus ``build.js`` beside it (when it was made, the commit, links to the MLflow runs,
the call ledger: new on every build, so out of DVC's hashes); both logged to MLflow.

Reads (its DVC deps): ``outputs/recorded/<name>/{card.json,comparisons.csv}`` (one "Recorded judges" section per
``recorded@<name>``, first), ``outputs/audit``, ``outputs/repair``, ``outputs/drift`` (and ``outputs/drift_check``
when the gate ran), ``outputs/probe``, ``outputs/align``; the MLflow store and the call store at report time."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rubriclab.config import find_project_dir, load_params
from rubriclab.llm import open_store, store_location
from rubriclab.paths import display_path
from rubriclab.report import build_report
from rubriclab.settings import Llm, Params
from rubriclab.stages import exit_stage, run_stage
from rubriclab.tracking import git_commit, stage_run, tracking_uri


def ledger_rows(llm: Llm, project: Path) -> tuple[list[dict[str, Any]], str]:
    loc = store_location(llm, project)
    if "://" not in loc and not Path(loc).exists():
        return [], loc
    store = open_store(loc)
    try:
        return store.ledger(), loc
    finally:
        store.close()


def run_report_stage(params: dict[str, Any], project: Path, *, out_dir: Path | None = None,
                     ui_url: str | None = None, track: bool = True) -> dict[str, Any]:
    """Build the report into ``outputs/report`` (or ``out_dir``) and log it as an MLflow run ``report``."""
    p = Params.of(params)
    experiment = p.tracking.experiment
    rows, store = ledger_rows(p.llm, project)
    display_store = display_path(store, project)
    out = out_dir or project / "outputs/report"
    res = build_report(project, out, tracking_uri=tracking_uri(project), experiment=experiment, ledger_rows=rows,
                       store=display_store, ui_url=ui_url or p.report.mlflow_ui,
                       commit=git_commit(project))
    if track:
        with stage_run("report", "report", p.effective(), project, experiment=experiment,
                       tags={"sections": ", ".join(s["id"] for s in res["sections"]),
                             "adhoc": str(out_dir is not None)}, record_dir=out) as run:
            run.log_artifact(res["path"])
            run.log_artifact(res["build_path"])
            res["run_id"] = run.run_id
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rubriclab.stages.report")
    ap.parse_args(argv)
    project = find_project_dir()
    run_report_stage(load_params(project / "params.yaml"), project)
    return 0


if __name__ == "__main__":
    exit_stage(run_stage(main, "report"))
