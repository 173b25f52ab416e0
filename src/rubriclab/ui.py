"""`rubriclab ui`: the MLflow UI on the project's tracking store, offline, opening on the runs table."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import Any

from rubriclab.tracking import EXPERIMENT_KIND, EXPERIMENT_KIND_TAG, reap_orphaned_runs, tracking_uri

OFFLINE_ENV = {
    # mlflow's server imports litellm, which otherwise fetches its price map from the network (~10 s here)
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "HF_HUB_OFFLINE": "1",
}


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def prepare_experiment(uri: str, experiment: str) -> str | None:
    """Tag the project's experiment so MLflow 3 opens it on its runs (not the GenAI traces page); its id, or None
    when it does not exist yet (no stage has run)."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return None
    if exp.tags.get(EXPERIMENT_KIND_TAG) != EXPERIMENT_KIND:
        client.set_experiment_tag(exp.experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
    reap_orphaned_runs(client, exp.experiment_id)  # a killed stage's run shows KILLED, not running forever
    return exp.experiment_id


def ui_command(project: Path, experiment: str, host: str = "127.0.0.1", port: int = 5000) -> dict[str, Any]:
    """The ``mlflow ui`` command line, its environment and the address to open."""
    uri = tracking_uri(project)
    exp_id = prepare_experiment(uri, experiment)
    argv = [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri, "--host", host, "--port", str(port)]
    if uri.startswith("sqlite:"):
        argv += ["--default-artifact-root", (project.resolve() / "mlartifacts").as_uri()]
    # MLflow 3.17 keeps a per-browser "workflow type" (GenAI by default, whatever the experiment's kind): the
    # machine-learning one opens the experiment on its runs table, with metric columns and nested runs
    url = f"http://{host}:{port}/" + (f"#/experiments/{exp_id}/runs?workflowType=machine_learning" if exp_id else "")
    return {"argv": argv, "env": {**os.environ, **OFFLINE_ENV}, "url": url, "experiment_id": exp_id, "uri": uri}
