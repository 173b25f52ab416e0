"""`rubriclab ui` start-up with MLflow's job runner on and off: time until the server answers ``/health`` and the CPU
its whole process group spent by then, and again a few seconds later (what a 2-core machine gives away while the
UI waits for its user).

MLflow 3's server starts a job runner beside uvicorn when its store is a database (MLFLOW_SERVER_ENABLE_JOB_EXECUTION,
default on): a supervisor and a pool of huey consumers, each importing MLflow, for jobs the server runs itself (a
scorer started from the UI). Nothing in rubriclab submits such a job, so `rubriclab ui` turns it off unless the
caller's environment sets the variable. Arms alternate per repeat, on one throwaway sqlite store.

    python benchmarks/ui_startup.py [--repeats 3] [--settle 8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from rubriclab.owner import group_members  # noqa: E402
from rubriclab.testing import mlflow_ui  # noqa: E402
from rubriclab.ui import free_port, ui_command  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
VAR = "MLFLOW_SERVER_ENABLE_JOB_EXECUTION"
ARMS = {"job runner on (mlflow's default)": "true", "job runner off (rubriclab ui now)": "false"}


def _group_cpu(pgid: int) -> tuple[float, int]:
    """CPU seconds (user + system, the processes' own and their reaped children's) of every process in group
    ``pgid``, and how many there are."""
    members = group_members(pgid) or {}
    return sum(sum(int(f) for f in fields[11:15]) for fields in members.values()) / TICK, len(members)


def _one(project: Path, value: str, settle: float) -> dict[str, float]:
    """One start of the server as `rubriclab ui` runs it (``testing.mlflow_ui``: the same command line and
    environment, ``/health`` polled every 0.5 s), the job runner set to ``value`` by the environment."""
    os.environ[VAR] = value
    t0 = time.monotonic()
    with mlflow_ui(project) as server:
        up = time.monotonic() - t0
        cpu_up, _ = _group_cpu(server["pid"])
        time.sleep(settle)
        cpu_later, procs = _group_cpu(server["pid"])
    return {"up_s": up, "cpu_up": cpu_up, "cpu_later": cpu_later, "procs": procs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--settle", type=float, default=8.0, help="seconds after /health answers before the second reading")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        ui_command(project, "rubriclab", port=free_port())  # creates the store (its migrations) before any arm runs
        rows: dict[str, list[dict[str, float]]] = {arm: [] for arm in ARMS}
        for _ in range(a.repeats):
            for arm, value in ARMS.items():
                rows[arm].append(_one(project, value, a.settle))
    os.environ.pop(VAR, None)
    print(f"`rubriclab ui` on a sqlite store, {a.repeats} repeat(s), arms alternating, {os.cpu_count()} cores")
    print(f"{'arm':36s} {'up s (mean)':>11s} {'CPU s at up':>11s} {f'CPU s +{a.settle:g}s':>11s} {'processes':>9s}")
    means = {}
    for arm, rs in rows.items():
        m = {k: statistics.mean(r[k] for r in rs) for k in rs[0]}
        means[arm] = m
        print(f"{arm:36s} {m['up_s']:11.1f} {m['cpu_up']:11.1f} {m['cpu_later']:11.1f} {m['procs']:9.0f}")
    on, off = means.values()
    print(f"on / off: {on['up_s'] / off['up_s']:.2f}x time to answer, {on['cpu_later'] / off['cpu_later']:.2f}x CPU "
          f"{a.settle:g} s after it")


if __name__ == "__main__":
    main()
