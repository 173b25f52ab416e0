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
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from rubriclab.ui import free_port, stop_group, ui_command  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
ARMS = {"job runner on (mlflow's default)": "true", "job runner off (rubriclab ui now)": "false"}


def _group_cpu(pgid: int) -> tuple[float, int]:
    """CPU seconds (user + system, the processes' own and their reaped children's) of every live process in group
    ``pgid``, and how many there are."""
    total, n = 0.0, 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # fields after the name: state, ppid, pgrp, ..., utime(11), stime(12), cutime, cstime
            total += sum(int(f) for f in fields[11:15]) / TICK
            n += 1
    return total, n


def _one(project: Path, value: str, settle: float) -> dict[str, float]:
    cmd = ui_command(project, "rubriclab", port=free_port())
    env = {**cmd["env"], "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": value}
    base = cmd["url"].split("#")[0].rstrip("/")
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd["argv"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"mlflow ui exited with {proc.returncode}")
            try:
                with urllib.request.urlopen(base + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            time.sleep(0.1)
        up = time.monotonic() - t0
        cpu_up, _ = _group_cpu(proc.pid)
        time.sleep(settle)
        cpu_later, procs = _group_cpu(proc.pid)
    finally:
        stop_group(proc.pid, grace=20.0)
        proc.wait()
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
