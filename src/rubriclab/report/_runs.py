"""The MLflow run behind each stage instance, so every report section links to the run it came from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rubriclab.tracking import RUN_RECORD


def stage_runs(tracking_uri: str, experiment: str, project: Path | None = None) -> dict[str, dict[str, Any]]:
    """``{run_name: {run_id, experiment_id, status, tags, found_by}}``, one per stage instance (e.g.
    ``audit@demo_helpful``); {} when the store or the experiment does not exist.

    A stage's outputs name the run that wrote them (``outputs/**/mlflow_run.json``, ``found_by: "outputs"``; an
    ad-hoc CLI run's record, in its own folder, is not a stage's);
    an instance without that record falls back to its newest top-level run of that name (``"newest by name"``),
    which may be a later run than the one behind the outputs."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    try:
        client = MlflowClient(tracking_uri=tracking_uri)
        exp = client.get_experiment_by_name(experiment)
    except MlflowException:
        return {}
    if exp is None:
        return {}
    out: dict[str, dict[str, Any]] = {}
    runs = client.search_runs([exp.experiment_id], filter_string="tags.stage != ''", max_results=2000,
                              order_by=["attributes.start_time DESC"])
    for r in runs:
        tags = r.data.tags
        if "mlflow.parentRunId" in tags or tags.get("adhoc") == "True":
            continue
        out.setdefault(r.info.run_name, _entry(r, "newest by name"))
    for record in _run_records(project):
        try:
            r = client.get_run(record["run_id"])
        except MlflowException:
            continue  # outputs from a run this store does not hold (another machine's store)
        if r.data.tags.get("adhoc") == "True":
            continue  # a CLI run's own folder (outputs/<verb>_cli/...): it made none of the stage's outputs
        if r.info.experiment_id == exp.experiment_id:
            out[r.info.run_name] = _entry(r, "outputs")
    return out


def _entry(run: Any, found_by: str) -> dict[str, Any]:
    return {"run_id": run.info.run_id, "experiment_id": run.info.experiment_id, "status": run.info.status,
            "tags": dict(run.data.tags), "found_by": found_by}


def _run_records(project: Path | None) -> list[dict[str, Any]]:
    if project is None or not (Path(project) / "outputs").is_dir():
        return []
    records = []
    for path in sorted((Path(project) / "outputs").rglob(RUN_RECORD)):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # a half-written or foreign file: the name lookup still covers the stage
        if isinstance(record, dict) and record.get("run_id"):
            records.append(record)
    return records


def run_link(ui_url: str, run: dict[str, Any] | None) -> str | None:
    """The MLflow UI address of a run (``{ui}/#/experiments/<id>/runs/<run id>``)."""
    if not run:
        return None
    return f"{ui_url.rstrip('/')}/#/experiments/{run['experiment_id']}/runs/{run['run_id']}"
