"""The align stage's DPO trainings: TRL's reference pass in every step (before) vs each distinct sequence's reference
log-probabilities once for all the stage's trainings (now, ``rubriclab.align._reference``).

Replays the trainings of a finished align stage (its label files, the settings in params.yaml, the label sets the
stage trained: a label set equal to an earlier one is not retrained, as in the stage) both ways, the arms
alternating per repeat in one process, and prints the wall time of each arm's trainings, the reference passes, and
how far the two arms' step losses and final margins lie apart.

    python benchmarks/align_reference.py [--project .] [--setting demo] [--repeats 1]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np


def train_all(ctx, settings, source, memo, out: Path):
    from rubriclab.align import train_dpo
    from rubriclab.stages.align import RUBRICS, _label_digest, read_labels

    seen, results = set(), {}
    for rubric in RUBRICS:
        for regime in ctx["regimes"]:
            data = read_labels(ctx, rubric, regime)
            if data.empty or _label_digest(data) in seen:
                continue
            seen.add(_label_digest(data))
            results[f"{rubric}@{regime}"] = train_dpo(source, data, settings, out / f"{rubric}_{regime}",
                                                      reference_memo=memo)
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--project", type=Path, default=Path("."), help="a project whose align stage has run")
    ap.add_argument("--setting", default="demo")
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()

    from rubriclab.align import DPOSettings
    from rubriclab.config import load_params
    from rubriclab.stages.align import align_context, policy_source

    project = args.project.resolve()
    ctx = align_context(load_params(project / "params.yaml"), project, args.setting)
    source = policy_source(ctx["policy"].model, ctx["cache_dir"])
    now = DPOSettings.of(ctx["align"].dpo, ctx["seed"])
    before = DPOSettings(now.dpo, now.seed, {"precompute_ref_log_probs": False})  # TRL's pass in every step
    arms = {"before": before, "now": now}
    walls = {a: [] for a in arms}
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.repeats):
            for arm in (arms if rep % 2 == 0 else reversed(list(arms))):
                t0 = time.perf_counter()
                runs[arm] = train_all(ctx, arms[arm], source, {}, Path(tmp) / f"{arm}{rep}")
                walls[arm].append(time.perf_counter() - t0)
    steps = sum(r["steps"] for r in runs["now"].values())
    print(f"{len(runs['now'])} trainings, {steps} steps, {args.repeats} repeat(s), arms alternating")
    for arm in arms:
        passes = sum(r["reference_passes"] for r in runs[arm].values())
        print(f"{arm:7s} wall {min(walls[arm]):7.1f} s best ({', '.join(f'{w:.1f}' for w in walls[arm])}); "
              f"reference passes before the steps: {passes} pairs")
    print(f"before/now: {min(walls['before']) / min(walls['now']):.2f}x")
    loss = max(float(np.max(np.abs(runs["now"][k]["history"]["loss"].to_numpy()
                                   - runs["before"][k]["history"]["loss"].to_numpy()))) for k in runs["now"])
    print(f"largest step-loss difference between the arms: {loss:.2e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
