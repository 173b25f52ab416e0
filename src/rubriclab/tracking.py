"""MLflow tracking for rubriclab stages: one run per DVC stage instance, nested runs per trial.

Everything goes through an explicit ``MlflowClient`` and run id rather than MLflow's fluent
(global, thread-local) active-run stack, so Optuna trials running in worker threads can open
nested runs safely and nothing here mutates process-wide MLflow state.

``mlflow`` is imported lazily: ``flatten_params`` and ``write_metrics_json`` stay cheap to import.
"""

from __future__ import annotations

import json
import math
import os
import posixpath
import re
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rubriclab.atomic import write_text
from rubriclab.errors import ArgumentError
from rubriclab.owner import owner_is_gone, process_owner
from rubriclab.secrets import (
    is_role_extra_path,
    is_secret_key,
    logged_extra,
    looks_like_secret_value,
    redact_urls,
    scrub,
)

if TYPE_CHECKING:
    from mlflow import MlflowClient

__all__ = [
    "MAX_PARAM_VALUE_LENGTH",
    "RunHandle",
    "EXPERIMENT_KIND",
    "EXPERIMENT_KIND_TAG",
    "flatten_params",
    "git_commit",
    "is_secret_key",
    "reap_orphaned_runs",
    "stage_run",
    "tracking_uri",
    "write_metrics_json",
]

# MLflow 3 opens an experiment without this tag on its GenAI traces page (empty here); with it, on the runs table
EXPERIMENT_KIND_TAG, EXPERIMENT_KIND = "mlflow.experimentKind", "custom_model_development"
MAX_PARAM_VALUE_LENGTH = 6000  # mlflow.utils.validation.MAX_PARAM_VAL_LENGTH
_MAX_KEY_LENGTH = 250
_MAX_TAG_VALUE_LENGTH = 8000
_PARAMS_PER_BATCH = 100
_METRICS_PER_BATCH = 1000

OWNER_TAG = "rubriclab.owner"  # host:pid:token of the process that opened the run (reaped when it is gone)

_BAD_KEY_CHARS = re.compile(r"[^/\w.\- ]")


def _param_str(value: Any) -> str:
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else list(value)
        s = json.dumps(scrub(items), default=str, ensure_ascii=False)
    else:  # an endpoint or storage URL keeps no user:password@ or ?key=… (api_base is not a secret-named key)
        s = redact_urls(str(value))
    return s[:MAX_PARAM_VALUE_LENGTH]


def _clean_key(key: str) -> str:
    """Make a key acceptable to MLflow (restricted charset, no path tricks, ≤250 chars)."""
    k = _BAD_KEY_CHARS.sub("_", key)[:_MAX_KEY_LENGTH]
    norm = posixpath.normpath(k) if k else "."
    if norm != k or norm == "." or norm.startswith(".."):
        k = k.replace("/", "_").strip(".") or "_"
    return k


def flatten_params(d: Mapping[str, Any], prefix: str = "", *, drop_secrets: bool = True) -> dict[str, str]:
    """Flatten a nested mapping into ``{"a.b.c": str(value)}`` for MLflow params.

    Lists/tuples become JSON strings (with secret-named entries of nested dicts removed); values
    are cut to MLflow's 6000-char limit; keys are sanitised to MLflow's charset. With
    ``drop_secrets`` (default) any key path for which :func:`is_secret_key` holds, and any value
    shaped like a provider key (``sk-…``, ``hf_…``), is dropped, and a role's ``extra``
    (``llm.roles.<role>.extra``, ``llm.defaults.extra``) is logged by allow-list: its documented decoding
    parameters as they are, every other field by name only, its value shown as its ``os.environ/NAME``
    reference or ``(sent, not logged)`` (``rubriclab.secrets.logged_extra``).
    """
    out: dict[str, str] = {}
    for k, v in d.items():
        path = f"{prefix}.{k}" if prefix else str(k)
        if drop_secrets and (is_secret_key(path) or looks_like_secret_value(v)):
            continue
        if drop_secrets and isinstance(v, Mapping) and v and is_role_extra_path(path):
            v = logged_extra(v)
        if isinstance(v, Mapping):
            if v:
                out.update(flatten_params(v, path, drop_secrets=drop_secrets))
            else:
                out[_clean_key(path)] = "{}"
            continue
        out[_clean_key(path)] = _param_str(v)
    return out


def tracking_uri(project_dir: Path) -> str:
    """``$MLFLOW_TRACKING_URI`` if set, else an absolute ``sqlite:///<project_dir>/mlflow.db``.

    MLflow 3 refuses the plain file store, so the local default is SQLite.
    """
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    return f"sqlite:///{(Path(project_dir).resolve() / 'mlflow.db').as_posix()}"


def git_commit(cwd: Path) -> str:
    """The checkout's HEAD commit, or ``unknown`` outside git."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    sha = out.stdout.strip()
    return sha if out.returncode == 0 and sha else "unknown"


def _experiment_id(client: MlflowClient, name: str, uri: str, project_dir: Path) -> str:
    from mlflow.exceptions import MlflowException

    exp = client.get_experiment_by_name(name)
    if exp is not None and exp.tags.get(EXPERIMENT_KIND_TAG) != EXPERIMENT_KIND:
        client.set_experiment_tag(exp.experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
    if exp is None:
        # With a local SQLite backend keep artifacts beside the DB (git/dvc-ignored mlartifacts/),
        # not in ./mlruns of whatever the cwd is; a tracking server decides for itself.
        location = None
        if uri.startswith("sqlite:"):
            location = (Path(project_dir).resolve() / "mlartifacts").as_uri()
        try:
            return client.create_experiment(name, artifact_location=location,
                                            tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND})
        except MlflowException:  # another stage created it concurrently
            exp = client.get_experiment_by_name(name)
            if exp is None:
                raise
    if exp.lifecycle_stage == "deleted":
        client.restore_experiment(exp.experiment_id)
    return exp.experiment_id


def _finite_number(value: Any) -> float | None:
    """The value as a float if it is a real finite number (bools count as 0/1), else None."""
    if hasattr(value, "item") and callable(value.item):  # numpy / torch scalars
        try:
            value = value.item()
        except (ValueError, TypeError):
            return None
    if isinstance(value, (int, float)):
        f = float(value)
        return f if math.isfinite(f) else None
    return None


def _flatten_metrics(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        path = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, Mapping):
            out.update(_flatten_metrics(v, path))
        else:
            out[path] = v
    return out


class RunHandle:
    """One MLflow run (a stage or a trial). Log through it; it knows its run id.

    Attributes: ``run_id``, ``experiment_id``, ``client`` (an ``MlflowClient``), ``tags``.
    """

    def __init__(self, client: MlflowClient, run_id: str, experiment_id: str, tags: dict[str, str]) -> None:
        self.client = client
        self.run_id = run_id
        self.experiment_id = experiment_id
        self.tags = tags

    def __repr__(self) -> str:
        return f"RunHandle(run_id={self.run_id!r}, experiment_id={self.experiment_id!r})"

    def log_params(self, params: Mapping[str, Any]) -> dict[str, str]:
        """Log params flattened and secret-filtered (see :func:`flatten_params`); returns them."""
        from mlflow.entities import Param

        flat = flatten_params(params)
        items = [Param(k, v) for k, v in flat.items()]
        for i in range(0, len(items), _PARAMS_PER_BATCH):
            self.client.log_batch(self.run_id, params=items[i : i + _PARAMS_PER_BATCH])
        return flat

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        """Set run tags (values stringified and cut to MLflow's tag limit)."""
        from mlflow.entities import RunTag

        items = [RunTag(_clean_key(str(k)), redact_urls(str(v))[:_MAX_TAG_VALUE_LENGTH]) for k, v in tags.items()]
        for i in range(0, len(items), _PARAMS_PER_BATCH):
            self.client.log_batch(self.run_id, tags=items[i : i + _PARAMS_PER_BATCH])

    def log_metrics(self, metrics: Mapping[str, Any], step: int | None = None) -> dict[str, float]:
        """Log numeric metrics (nested dicts flattened to ``a.b``); returns what was logged.

        NaN/inf and non-numeric values are NOT logged as metrics (they break MLflow's charts and
        comparisons); each is recorded instead as tag ``metric_skipped.<key>`` = its repr, so the
        absence is visible in the UI rather than silent.
        """
        from mlflow.entities import Metric

        ts = int(time.time() * 1000)
        logged: dict[str, float] = {}
        skipped: dict[str, str] = {}
        for k, v in _flatten_metrics(metrics).items():
            key = _clean_key(k)
            f = _finite_number(v)
            if f is None:
                skipped[f"metric_skipped.{key}"] = repr(v)
            else:
                logged[key] = f
        items = [Metric(k, v, ts, step or 0) for k, v in logged.items()]
        for i in range(0, len(items), _METRICS_PER_BATCH):
            self.client.log_batch(self.run_id, metrics=items[i : i + _METRICS_PER_BATCH])
        if skipped:
            self.set_tags(skipped)
        return logged

    def log_table(self, data: Any, artifact_file: str) -> None:
        """Log a per-item table (DataFrame, dict of columns, or list of row dicts) as
        ``artifact_file`` (``.json`` or ``.parquet``; shown in the MLflow UI's table view)."""
        if not artifact_file.endswith((".json", ".parquet")):
            raise ArgumentError(f"log_table artifact_file must end with '.json' or '.parquet', got {artifact_file!r}")
        if isinstance(data, list):
            import pandas as pd

            data = pd.DataFrame(data)
        self.client.log_table(self.run_id, data, artifact_file)

    def log_dict(self, obj: Any, artifact_file: str) -> None:
        """Log a JSON/YAML-serialisable object (format chosen by the file extension)."""
        self.client.log_dict(self.run_id, obj, artifact_file)

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        """Upload a local file (or directory) as an artifact."""
        p = Path(path)
        if p.is_dir():
            self.client.log_artifacts(self.run_id, str(p), artifact_path)
        else:
            self.client.log_artifact(self.run_id, str(p), artifact_path)

    def log_figure(self, fig: Any, artifact_file: str) -> None:
        """Log a matplotlib (or plotly) figure, e.g. ``plots/calibration.png``."""
        self.client.log_figure(self.run_id, fig, artifact_file)

    @contextmanager
    def trial(self, name: str, params: Mapping[str, Any] | None = None) -> Iterator[RunHandle]:
        """Open a nested run (e.g. one Optuna trial) under this run; thread-safe.

        The child carries ``mlflow.parentRunId`` plus this run's tags and ``trial=<name>``.
        """
        tags = dict(self.tags)
        tags.pop("mlflow.runName", None)
        tags.update({"mlflow.parentRunId": self.run_id, "trial": name})
        with _run(self.client, self.experiment_id, name, params or {}, tags) as child:
            yield child


@contextmanager
def _run(
    client: MlflowClient, experiment_id: str, run_name: str, params: Mapping[str, Any], tags: dict[str, str]
) -> Iterator[RunHandle]:
    from mlflow.entities import RunStatus

    run = client.create_run(experiment_id, tags={**tags, OWNER_TAG: process_owner()}, run_name=run_name)
    handle = RunHandle(client, run.info.run_id, experiment_id, tags)
    status = RunStatus.to_string(RunStatus.FINISHED)
    try:
        handle.log_params(params)
        yield handle
    except KeyboardInterrupt:
        status = RunStatus.to_string(RunStatus.KILLED)
        raise
    except BaseException:
        status = RunStatus.to_string(RunStatus.FAILED)
        raise
    finally:
        client.set_terminated(handle.run_id, status=status)


@contextmanager
def stage_run(
    stage: str,
    run_name: str,
    params: Mapping[str, Any],
    project_dir: Path,
    experiment: str = "rubriclab",
    tags: Mapping[str, Any] | None = None,
    record_dir: Path | None = None,
) -> Iterator[RunHandle]:
    """One MLflow run for one DVC stage instance (e.g. ``run_name="audit@helpsteer2-human"``).

    Logs ``params`` flattened (secrets dropped), tags ``stage``, ``git_commit`` (``unknown``
    outside git) and ``dvc_exp_name`` (``$DVC_EXP_NAME``, empty in the workspace), plus ``tags``.
    Yields a :class:`RunHandle`. The run ends FINISHED, or FAILED if the block raises
    (KILLED on KeyboardInterrupt); the exception propagates. ``record_dir``: the folder the block wrote its
    outputs to; a finished run writes ``mlflow_run.json`` there (none without it).
    """
    from mlflow import MlflowClient

    if hasattr(params, "effective"):  # a typed Params: every effective value, defaults included
        params = params.effective()
    project_dir = Path(project_dir)
    uri = tracking_uri(project_dir)
    client = MlflowClient(tracking_uri=uri)
    exp_id = _experiment_id(client, experiment, uri, project_dir)
    commit = git_commit(project_dir)
    all_tags = {
        "stage": stage,
        "git_commit": commit,
        "dvc_exp_name": os.environ.get("DVC_EXP_NAME", ""),
    }
    if commit != "unknown":
        all_tags["mlflow.source.git.commit"] = commit  # shown by the MLflow UI
    all_tags.update({_clean_key(str(k)): redact_urls(str(v))[:_MAX_TAG_VALUE_LENGTH] for k, v in (tags or {}).items()})
    reap_orphaned_runs(client, exp_id)
    with _run(client, exp_id, run_name, params, all_tags) as handle:
        yield handle
        if record_dir is not None:
            write_run_record(Path(record_dir), stage, run_name, handle)


RUN_RECORD = "mlflow_run.json"


def write_run_record(folder: Path, stage: str, run_name: str, handle: RunHandle) -> Path:
    """Write ``mlflow_run.json`` (run id, experiment id, run name) into the folder a finished stage wrote, so the
    report links each section to the run that made it, not the newest run of that name. The stage names the folder:
    a guess from the run name put an ad-hoc run's record (``--out``) into the DVC stage's folder. The file differs
    on every run, so ``.dvcignore`` keeps it out of DVC's hashes."""
    record = {"run_id": handle.run_id, "experiment_id": handle.experiment_id, "run_name": run_name, "stage": stage}
    Path(folder).mkdir(parents=True, exist_ok=True)
    return write_text(Path(folder) / RUN_RECORD, json.dumps(record, indent=1) + "\n")


def reap_orphaned_runs(client: MlflowClient, experiment_id: str) -> list[str]:
    """Mark KILLED every RUNNING run of this experiment whose process is gone (a SIGKILLed stage cannot end
    its own run, which MLflow would otherwise show as running forever). Runs of live processes, and runs
    from other hosts, are left alone. Returns the run ids it ended."""
    from mlflow.entities import RunStatus

    ended: list[str] = []
    runs = client.search_runs([experiment_id], filter_string="attributes.status = 'RUNNING'", max_results=1000)
    for run in runs:
        owner = run.data.tags.get(OWNER_TAG)
        if not owner_is_gone(owner):
            continue
        client.set_tag(run.info.run_id, "rubriclab.ended_by",
                       f"marked KILLED by a later stage run: its process ({owner}) was gone")
        client.set_terminated(run.info.run_id, status=RunStatus.to_string(RunStatus.KILLED))
        ended.append(run.info.run_id)
    return ended


def _metric_value(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _metric_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_metric_value(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        try:
            value = value.item()
        except (ValueError, TypeError):
            return str(value)
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            return None  # JSON has no NaN; DVC shows null as missing
        return float(f"{value:.6g}")  # 6 significant digits: stable diffs, no float noise
    return str(value)


def write_metrics_json(path: str | Path, metrics: Mapping[str, Any]) -> Path:
    """Write a DVC metrics file: sorted keys, floats to 6 significant digits, NaN/inf → null.

    Written atomically (temp file + rename) so a killed stage never leaves half a file.
    """
    text = json.dumps(_metric_value(metrics), indent=2, sort_keys=True, allow_nan=False) + "\n"
    return write_text(path, text)
