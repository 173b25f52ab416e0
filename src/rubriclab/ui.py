"""`rubriclab ui`: the MLflow UI on the project's tracking store, offline, opening on the runs table."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from rubriclab.errors import ArgumentError, RubricLabError
from rubriclab.owner import group_members
from rubriclab.tracking import EXPERIMENT_KIND, EXPERIMENT_KIND_TAG, reap_orphaned_runs, tracking_uri


class PortInUseError(RubricLabError):
    """The UI's port is taken by another process (named in the message)."""

OFFLINE_ENV = {
    # mlflow's server imports litellm, which otherwise fetches its price map from the network (~10 s here)
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "HF_HUB_OFFLINE": "1",
}
JOB_RUNNER_OFF = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_holder(host: str, port: int) -> str | None:
    """Who listens on ``host:port`` (``pid 1234 (python -m mlflow ui …)``), ``"another process"`` when the port is
    taken by one this user cannot see, or None when the port is free."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        try:
            s.bind((host, port))  # no SO_REUSEADDR: a listener on the port, or one in TIME_WAIT, makes this fail
            return None
        except OSError:
            pass
    import psutil

    try:
        listening = [c for c in psutil.net_connections(kind="inet")
                     if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port]
    except (psutil.AccessDenied, OSError):
        listening = []
    for conn in listening:
        if conn.pid is None:
            continue
        try:
            cmd = " ".join(" ".join(psutil.Process(conn.pid).cmdline()).split())  # one line
        except psutil.Error:
            cmd = "?"
        return f"pid {conn.pid} ({cmd[:120]})"
    return "another process"


def check_port(host: str, port: int) -> None:
    """Raise PortInUseError when ``host:port`` is taken: a second server there would log "address already in use"
    and leave the first one answering the URL this one prints."""
    holder = port_holder(host, port)
    if holder is not None:
        kill = f" (kill {holder.split()[1]})" if holder.startswith("pid ") else ""
        raise PortInUseError(f"port {port} on {host} is in use by {holder}; stop it{kill} or pass --port N")


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


def ui_command(project: Path, experiment: str, host: str = "127.0.0.1", port: int = 5000,
               workers: int = 1) -> dict[str, Any]:
    """The ``mlflow ui`` command line, its environment and the address to open.

    ``workers``: uvicorn worker processes. One by default: mlflow's 4 are for a shared server, and on a 2-core
    machine each imports the whole server (up 18 s with 4, 11 s with 1, the page as fast: benchmarks/README.md)."""
    if int(workers) < 1:
        raise ArgumentError(f"rubriclab ui: --workers {workers}: expected a whole number >= 1")
    uri = tracking_uri(project)
    exp_id = prepare_experiment(uri, experiment)
    argv = [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri, "--host", host, "--port", str(port),
            "--workers", str(int(workers))]
    if uri.startswith("sqlite:"):
        argv += ["--default-artifact-root", (project.resolve() / "mlartifacts").as_uri()]
    # MLflow 3.17 keeps a per-browser "workflow type" (GenAI by default, whatever the experiment's kind): the
    # machine-learning one opens the experiment on its runs table, with metric columns and nested runs
    url = f"http://{host}:{port}/" + (f"#/experiments/{exp_id}/runs?workflowType=machine_learning" if exp_id else "")
    # MLflow's job runner (a supervisor and eight huey consumers, each importing MLflow) runs server-side jobs such as a
    # scorer started from the UI; rubriclab submits none, and on 2 cores it took 13 s to answer instead of 5 and 37
    # CPU-s instead of 6 (benchmarks/ui_startup.py). Off unless the caller's environment asks for it.
    env = {**JOB_RUNNER_OFF, **os.environ, **OFFLINE_ENV}
    return {"argv": argv, "env": env, "url": url, "experiment_id": exp_id, "uri": uri}


# signals that stop `rubriclab ui`: each is passed on to the server's whole process group
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to process group ``pgid``; False when the group is gone."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:  # only zombies left, or a pid reused by someone else's group
        return False
    return True


def serve(argv: list[str], env: dict[str, str] | None = None, *, grace: float = 10.0) -> int:
    """Run the ``mlflow ui`` command line ``argv`` until it exits or this process is told to stop.

    The server runs in its own process group (``mlflow ui`` starts a uvicorn child of its own, which a signal to
    ``mlflow ui`` alone would leave serving on the port), under a guard (``rubriclab._ui_guard``) that takes the
    group down when this process is gone, SIGKILL included. SIGINT, SIGTERM and SIGHUP to this process are passed
    on to that whole group (SIGHUP as SIGTERM); then this waits for the server, kills the group if it is still
    there after ``grace`` seconds, and returns: 0 after Ctrl-C, 128 + the signal's number after SIGTERM or
    SIGHUP, else the server's exit code. The group gets a last SIGTERM on the way out (workers the server left
    behind)."""
    received: list[int] = []
    guarded = [sys.executable, "-m", "rubriclab._ui_guard", str(os.getpid()), "--", *argv]
    proc = subprocess.Popen(guarded, env=env, start_new_session=True)

    def forward(signum: int, _frame: object) -> None:
        received.append(signum)
        # SIGINT and SIGTERM as they came; SIGHUP as SIGTERM (uvicorn reloads its workers on SIGHUP)
        _signal_group(proc.pid, signal.SIGINT if signum == signal.SIGINT else signal.SIGTERM)

    main_thread = threading.current_thread() is threading.main_thread()  # handlers can be set there only
    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED} if main_thread else {}
    try:
        deadline = None
        while True:
            try:
                code = proc.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                pass
            if received and deadline is None:
                deadline = time.monotonic() + grace
            if deadline is not None and time.monotonic() > deadline:
                _signal_group(proc.pid, signal.SIGKILL)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if proc.poll() is None:  # this process is failing (an exception): take the server with it
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
        stop_group(proc.pid, grace=min(grace, 5.0))
    if received:
        return 0 if received[0] == signal.SIGINT else 128 + received[0]
    return code


def stop_group(pgid: int, grace: float) -> None:
    """Stop process group ``pgid`` (a server started with ``start_new_session``, its workers included): SIGTERM,
    then SIGKILL after ``grace`` seconds to whatever is still running."""
    if not _signal_group(pgid, signal.SIGTERM):
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not _alive_in_group(pgid):
            return
        time.sleep(0.1)
    _signal_group(pgid, signal.SIGKILL)


def _alive_in_group(pgid: int) -> bool:
    """Whether a process of group ``pgid`` is still running (zombies, which hold no port, do not count)."""
    members = group_members(pgid)
    if members is None:  # not Linux: the group answers signals while any member exists
        return _signal_group(pgid, 0)
    return any(fields[0] != "Z" for fields in members.values())
