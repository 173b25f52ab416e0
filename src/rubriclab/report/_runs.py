"""The MLflow run behind each stage instance, so every report section links to the run it came from."""

from __future__ import annotations

from typing import Any


def stage_runs(tracking_uri: str, experiment: str) -> dict[str, dict[str, Any]]:
    """``{run_name: {run_id, experiment_id, status, tags}}`` for the latest top-level run of each stage instance
    (e.g. ``audit@demo_helpful``); {} when the store or the experiment does not exist."""
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
        out.setdefault(r.info.run_name, {"run_id": r.info.run_id, "experiment_id": exp.experiment_id,
                                         "status": r.info.status, "tags": dict(tags)})
    return out


def run_link(ui_url: str, run: dict[str, Any] | None) -> str | None:
    """The MLflow UI address of a run (``{ui}/#/experiments/<id>/runs/<run id>``)."""
    if not run:
        return None
    return f"{ui_url.rstrip('/')}/#/experiments/{run['experiment_id']}/runs/{run['run_id']}"
