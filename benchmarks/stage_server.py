"""`dvc repro` of a small project with and without the warm stage server (rubriclab.stage_server), side by side.

The project is the reliability project (rubriclab.testing.reliability_project: data → discover → audit, drift, probe),
every role answered by the fake OpenAI server in milliseconds, so what is measured is what a stage costs besides its
model calls: start-up, work, exit. Arms alternate per repeat (this machine's speed drifts); each repro runs in a new
session (its own process group, so its own server, started by its first stage) on a new copy of the project, and
the group is killed afterwards (the idle server with it). ``off`` is ``RUBRICLAB_STAGE_SERVER=0``: every stage a
fresh ``python -m`` process, as before.

    python benchmarks/stage_server.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from rubriclab.testing import FakeOpenAIServer, reliability_project, reliability_responder, repro_env  # noqa: E402


def _repro(root: Path, server: str) -> float:
    env = repro_env({"RUBRICLAB_STAGE_SERVER": server})
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "dvc", "repro"], cwd=root, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    out, _ = proc.communicate(timeout=900)
    wall = time.perf_counter() - t
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the arm's idle server
    except ProcessLookupError:
        pass
    if proc.returncode:
        raise SystemExit(f"dvc repro failed in {root} (server={server}):\n{out[-3000:]}")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    walls: dict[str, list[float]] = {"off": [], "on": []}
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAIServer(responder=reliability_responder) as fake:
        for r in range(args.repeats):
            for arm in (("off", "on") if r % 2 == 0 else ("on", "off")):
                root = reliability_project(Path(tmp) / f"{arm}{r}", fake.url, timeout=3.0)
                walls[arm].append(_repro(root, "0" if arm == "off" else "1"))
                print(f"repeat {r + 1} {arm:>3}: {walls[arm][-1]:6.1f} s", flush=True)
    off, on = statistics.median(walls["off"]), statistics.median(walls["on"])
    print(f"\n`dvc repro` of the 5-stage reliability project (fake server); median of {args.repeats} alternating "
          "runs per arm; 2 cores")
    print(f"{'fresh processes s':>18} {'stage server s':>15} {'ratio':>6}")
    print(f"{off:18.1f} {on:15.1f} {off / on:5.2f}x")


if __name__ == "__main__":
    main()
