"""Reliability figures: the pipeline (`dvc repro` of a small project: data → discover → audit, drift, probe) against
the fake OpenAI server, fault-free vs 30% transport faults of all six kinds, then SIGKILLed mid-batch, during an
output write and during MLflow logging and resumed. Prints a markdown table: faults injected / survived (outputs
equal a fault-free run) and kills / resumed with 0 repeated calls, with the measured details under it.

    python benchmarks/reliability.py [--workdir DIR] [--rate 0.3] [--seed 5] [--timeout 3]

Takes about four minutes on two cores (three `dvc repro` runs plus three killed and resumed attempts).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from rubriclab.testing import reliability_figures  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, default=None, help="where the projects go (default: a temp folder)")
    ap.add_argument("--rate", type=float, default=0.3, help="share of requests given a transport fault")
    ap.add_argument("--seed", type=int, default=5, help="fault plan seed")
    ap.add_argument("--timeout", type=float, default=3.0, help="every role's timeout (a hang fault costs this)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="rubriclab-reliability-") as tmp:
        workdir = args.workdir or Path(tmp) / "reliability"
        print(reliability_figures(workdir, fault_rate=args.rate, seed=args.seed, timeout=args.timeout))


if __name__ == "__main__":
    main()
