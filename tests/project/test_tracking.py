"""Tests for rubriclab.tracking (MLflow runs per stage, nested trials, DVC metrics files)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from rubriclab.tracking import (
    MAX_PARAM_VALUE_LENGTH,
    flatten_params,
    is_secret_key,
    stage_run,
    tracking_uri,
    write_metrics_json,
)

PARAMS = {
    "judge": {
        "model": "openai/gpt-4o-mini",
        "api_key": "sk-abcdefghijklmnopqrstuvwxyz",
        "temperature": 0.0,
        "max_tokens": 16,
        "panel": [{"model": "a", "api_key": "sk-zzzzzzzzzzzzzzzzzzzz"}, {"model": "b"}],
    },
    "hf_token": "hf_abcdefghijklmnopqrstu",
    "db": {"password": "hunter2", "url": "sqlite:///x"},
    "seeds": [1, 2, 3],
    "long": "x" * 7000,
}


# -- pure functions (no MLflow) ----------------------------------------------------------------


def test_flatten_params_nested_lists_truncation() -> None:
    flat = flatten_params(PARAMS)
    assert flat["judge.model"] == "openai/gpt-4o-mini"
    assert flat["judge.temperature"] == "0.0"
    assert flat["judge.max_tokens"] == "16"  # plural "tokens" is a decoding knob, not a secret
    assert json.loads(flat["seeds"]) == [1, 2, 3]
    assert json.loads(flat["judge.panel"]) == [{"model": "a"}, {"model": "b"}]  # secrets scrubbed in lists
    assert len(flat["long"]) == MAX_PARAM_VALUE_LENGTH
    assert flat["db.url"] == "sqlite:///x"
    assert all(isinstance(v, str) for v in flat.values())
    assert flatten_params({"a": {}})["a"] == "{}"
    assert flatten_params({"bad key!": 1}) == {"bad key_": "1"}


def test_no_secret_survives_flattening() -> None:
    flat = flatten_params(PARAMS)
    dumped = json.dumps(flat)
    for secret in ("sk-abc", "sk-zzz", "hf_abc", "hunter2"):
        assert secret not in dumped
    assert not any(is_secret_key(k) for k in flat)
    # A provider-key-shaped value is dropped even under an innocent name.
    assert flatten_params({"note": "sk-proj1234567890abcdef"}) == {}
    assert "judge.api_key" in flatten_params(PARAMS, drop_secrets=False)


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("api_key", True),
        ("judge.api_key", True),
        ("openaiApiKey", True),
        ("key", True),
        ("hf_token", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("db.password", True),
        ("credentials.path", True),
        ("judge.max_tokens", False),
        ("judge.model", False),
        ("api_base", False),
        ("keywords", False),
    ],
)
def test_is_secret_key(key: str, secret: bool) -> None:
    assert is_secret_key(key) is secret


def test_tracking_uri_default_and_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    uri = tracking_uri(tmp_path)
    assert uri == f"sqlite:///{tmp_path.resolve()}/mlflow.db" and uri.startswith("sqlite:////")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    assert tracking_uri(tmp_path) == "http://127.0.0.1:5000"


def test_write_metrics_json(tmp_path: Path) -> None:
    import numpy as np

    path = write_metrics_json(
        tmp_path / "out" / "metrics.json",
        {"b": 1 / 3, "a": {"nan": math.nan, "inf": math.inf, "n": 3, "np": np.float64(0.5)}, "ok": True},
    )
    text = path.read_text()
    assert json.loads(text) == {"a": {"inf": None, "n": 3, "nan": None, "np": 0.5}, "b": 0.333333, "ok": True}
    assert text.index('"a"') < text.index('"b"') < text.index('"ok"')  # sorted keys
    assert "NaN" not in text and text.endswith("\n")


# -- MLflow round trips (one sqlite DB for the module: init costs seconds) -----------------------


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("project")


@pytest.fixture()
def client(project: Path, monkeypatch: pytest.MonkeyPatch):
    from mlflow import MlflowClient

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)  # exercise the project default
    monkeypatch.setenv("DVC_EXP_NAME", "exp-test")
    return MlflowClient(tracking_uri=tracking_uri(project))


def test_stage_run_params_tags_metrics_artifacts(project: Path, client) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    with stage_run("audit", "audit@demo-human", PARAMS, project, tags={"dataset": "demo"}) as run:
        logged = run.log_metrics({"vfr": 0.25, "nested": {"kappa": 0.5}, "bad": math.nan, "n": 7}, step=1)
        assert logged == {"vfr": 0.25, "nested.kappa": 0.5, "n": 7.0}
        run.log_table(pd.DataFrame({"item": ["a", "b"], "verdict": ["A", "B"]}), "tables/items.json")
        run.log_dict({"criteria": ["be concise"]}, "rubric.json")
        fig, ax = plt.subplots()
        ax.plot([0, 1], [0, 1])
        run.log_figure(fig, "plots/line.png")
        plt.close(fig)
        extra = project / "note.txt"
        extra.write_text("hello")
        run.log_artifact(extra)
        with pytest.raises(ValueError, match=r"\.json"):
            run.log_table({"a": [1]}, "table.csv")
        run_id = run.run_id

    r = client.get_run(run_id)
    assert r.info.status == "FINISHED" and r.info.run_name == "audit@demo-human"
    p = r.data.params
    assert p["judge.model"] == "openai/gpt-4o-mini" and p["judge.max_tokens"] == "16"
    assert not any(is_secret_key(k) for k in p)
    blob = json.dumps(p)
    assert "sk-" not in blob and "hf_" not in blob and "hunter2" not in blob
    t = r.data.tags
    assert t["stage"] == "audit" and t["dvc_exp_name"] == "exp-test" and t["dataset"] == "demo"
    assert t["git_commit"]  # a sha, or "unknown" outside git
    assert t["metric_skipped.bad"] == "nan"
    assert r.data.metrics == {"vfr": 0.25, "nested.kappa": 0.5, "n": 7.0}

    names = {f.path for f in client.list_artifacts(run_id)}
    assert {"rubric.json", "note.txt", "tables", "plots"} <= names
    assert [f.path for f in client.list_artifacts(run_id, "tables")] == ["tables/items.json"]
    # MlflowClient.load_table goes through the fluent (global) URI, so read the file directly.
    local = client.download_artifacts(run_id, "tables/items.json", str(project / "dl"))
    table = json.loads(Path(local).read_text())
    assert table["columns"] == ["item", "verdict"] and table["data"] == [["a", "A"], ["b", "B"]]
    assert '"tables/items.json"' in t["mlflow.loggedArtifacts"]  # what the UI's table view keys on

    # Artifacts live beside the sqlite DB, under <project>/mlartifacts.
    exp = client.get_experiment(r.info.experiment_id)
    assert exp.artifact_location == (project / "mlartifacts").resolve().as_uri()
    assert (project / "mlflow.db").exists()
    found = client.search_runs([r.info.experiment_id], filter_string="tags.stage = 'audit'")
    assert run_id in {x.info.run_id for x in found}


def test_git_commit_tag_outside_git_is_unknown(project: Path, client) -> None:
    import subprocess

    inside = subprocess.run(["git", "rev-parse", "HEAD"], cwd=project, capture_output=True).returncode == 0
    with stage_run("probe", "probe@x", {}, project) as run:
        pass
    tags = client.get_run(run.run_id).data.tags
    assert (tags["git_commit"] == "unknown") is (not inside)


def test_nested_trials_have_parent_tag(project: Path, client) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with stage_run("repair", "repair@demo", {"delta": 0.1}, project) as parent:

        def one(i: int) -> str:
            with parent.trial(f"trial-{i}", {"lr": 0.1 * i, "api_key": "nope"}) as child:
                child.log_metrics({"objective": i / 10})
                return child.run_id

        # Optuna runs trials in worker threads with n_jobs > 1; nested runs must not need the fluent stack.
        with ThreadPoolExecutor(2) as pool:
            child_ids = list(pool.map(one, range(3)))

    for i, cid in enumerate(child_ids):
        r = client.get_run(cid)
        assert r.data.tags["mlflow.parentRunId"] == parent.run_id
        assert r.data.tags["trial"] == f"trial-{i}" and r.data.tags["stage"] == "repair"
        assert r.data.params == {"lr": str(0.1 * i)}
        assert r.data.metrics["objective"] == pytest.approx(i / 10)
        assert r.info.status == "FINISHED" and r.info.run_name == f"trial-{i}"


def test_failed_stage_and_trial_marked_failed(project: Path, client) -> None:
    ids: dict[str, str] = {}
    with pytest.raises(RuntimeError, match="boom"):
        with stage_run("drift", "drift@demo", {}, project) as run:
            ids["stage"] = run.run_id
            with pytest.raises(ValueError):
                with run.trial("t0", {}) as t:
                    ids["trial"] = t.run_id
                    raise ValueError("bad trial")
            raise RuntimeError("boom")
    assert client.get_run(ids["stage"]).info.status == "FAILED"
    assert client.get_run(ids["trial"]).info.status == "FAILED"


def test_env_tracking_uri_wins(tmp_path: Path, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow import MlflowClient

    # Reuse the module DB through the env var while pointing project_dir elsewhere.
    monkeypatch.setenv("MLFLOW_TRACKING_URI", tracking_uri(project))
    monkeypatch.delenv("DVC_EXP_NAME", raising=False)
    with stage_run("data", "data@env", {"n": 1}, tmp_path, experiment="other") as run:
        pass
    assert not (tmp_path / "mlflow.db").exists()
    r = MlflowClient(tracking_uri=tracking_uri(project)).get_run(run.run_id)
    assert r.info.status == "FINISHED" and r.data.params == {"n": "1"}
    assert r.data.tags["dvc_exp_name"] == ""  # workspace run, not a `dvc exp run`


def test_a_run_record_goes_only_to_the_folder_the_stage_names(project: Path, client) -> None:
    """``mlflow_run.json`` is written where the stage wrote its outputs. A guess from the run name put the record
    of ``rubriclab align train --out X`` (``align@demo:train``) into ``outputs/align`` and the record of an ad-hoc
    ``rubriclab report --out X`` over the DVC report's own, and the next report listed a run that made none of its
    outputs."""
    dvc_report = project / "outputs/report"
    dvc_report.mkdir(parents=True)
    with stage_run("report", "report", {}, project, record_dir=dvc_report) as dvc_run:
        pass
    assert json.loads((dvc_report / "mlflow_run.json").read_text())["run_id"] == dvc_run.run_id
    adhoc = project / "elsewhere"
    with stage_run("report", "report", {}, project, record_dir=adhoc) as adhoc_run:
        pass
    assert json.loads((adhoc / "mlflow_run.json").read_text())["run_id"] == adhoc_run.run_id
    assert json.loads((dvc_report / "mlflow_run.json").read_text())["run_id"] == dvc_run.run_id
    (project / "outputs/align/demo").mkdir(parents=True)
    with stage_run("align", "align@demo:train", {}, project):  # no folder named: no record anywhere
        pass
    assert sorted(p.relative_to(project).as_posix() for p in project.rglob("mlflow_run.json")) == [
        "elsewhere/mlflow_run.json", "outputs/report/mlflow_run.json"]


def test_every_stage_names_the_folder_of_its_run_record() -> None:
    """Each ``stage_run`` in the stages passes ``record_dir``: without it the stage's outputs name no run and the
    report falls back to the newest run of that name."""
    import ast

    stages = Path(__file__).resolve().parents[2] / "src/rubriclab/stages"
    missing, seen = [], 0
    for path in sorted(stages.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "stage_run":
                seen += 1
                if "record_dir" not in {k.arg for k in node.keywords}:
                    missing.append(f"{path.name}:{node.lineno}")
    assert seen >= 10 and missing == []
