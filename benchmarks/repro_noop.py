"""`dvc repro` after no change: provider calls made and wall seconds (run in a project after `make repro`).

Reads the project's call store ledger (provider calls, batches, items served) before and after a plain
`dvc repro`, and times it. An up-to-date pipeline runs no stage, so it makes 0 calls; if DVC ran a stage, the
script says which and fails (the pipeline was not up to date: run `make repro` first).

    python benchmarks/repro_noop.py [--project .] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from rubriclab.config import load_params  # noqa: E402
from rubriclab.llm import open_store, store_location  # noqa: E402


def totals(project: Path) -> tuple[int, int]:
    """(provider calls, batch items) over the whole ledger."""
    store = open_store(store_location(load_params(project / "params.yaml"), project))
    try:
        rows = store.ledger()
    finally:
        store.close()
    return sum(r["calls"] for r in rows), sum(r.get("items", 0) for r in rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--project", default=".")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    project = Path(args.project).resolve()
    dvc = str(Path(sys.executable).with_name("dvc"))
    calls0, items0 = totals(project)
    walls = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        out = subprocess.run([dvc, "repro"], cwd=project, capture_output=True, text=True)
        walls.append(time.perf_counter() - t0)
        if out.returncode != 0:
            sys.exit(f"dvc repro failed ({out.returncode}):\n{out.stdout}{out.stderr}")
        ran = re.findall(r"Running stage '([^']+)'", out.stdout)
        if ran:
            sys.exit(f"the pipeline was not up to date (dvc ran {', '.join(ran)}): run `make repro` first")
    calls1, items1 = totals(project)
    print(f"dvc repro after no change, {args.repeats} runs: wall {min(walls):.2f} s best, {max(walls):.2f} s worst; "
          f"provider calls made: {calls1 - calls0}; batch items served: {items1 - items0}")
    print(out.stdout.strip().splitlines()[-1] if out.stdout.strip() else "(no output)")
    sys.exit(0 if calls1 == calls0 else 1)


if __name__ == "__main__":
    main()
