"""The calibration intervals' coverage simulation (``simulated_coverage``), as the recorded stage runs it on every
judge × condition cell of a shipped source, against the way it ran before (issue 60), side by side in one run.

- ``now``: the working tree: the judge-only interval (it uses no label) made once per cell, not once per draw; the
  isotonic estimate's KFold splits made once per (labelled count, folds, seed) and shared by the cells;
- ``before``: the same loop with both made afresh in every draw (the splits' cache cleared before each draw, the
  judge-only interval not passed in), which is what the code did before.

Both arms must give the same coverage counts in every cell (exit 1 otherwise); the arms alternate per repeat and
the table gives each arm's best and median seconds and the ratio.

    python benchmarks/coverage_sim.py [--source llmbar_natural] [--draws 200] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import numpy as np  # noqa: E402


def _before(vt, *, label_fraction: float, draws: int, confidence: float, lam: float | None) -> dict[str, int]:
    """The loop as it was: judge-only and the KFold splits made in every draw."""
    from rubriclab.calibrate import draw_labelled
    from rubriclab.calibrate._calibrate import estimates
    from rubriclab.calibrate._estimators import kfold_splits

    frame = vt.frame
    human, verdict = frame["human"].to_numpy(float), frame["verdict"].to_numpy(float)
    truth = float(human.mean())
    position = {pid: i for i, pid in enumerate(frame["pair_id"])}
    ids = list(frame["pair_id"])
    hits: dict[str, int] = {}
    for k in range(draws):
        kfold_splits.cache_clear()
        mask = np.zeros(len(frame), dtype=bool)
        mask[[position[p] for p in draw_labelled(ids, label_fraction, k)]] = True
        ests, _ = estimates(human[mask], verdict[mask], verdict[~mask], verdict, confidence=confidence, lam=lam,
                            isotonic_folds=5, seed=k)
        for e in ests:
            hits[e.method] = hits.get(e.method, 0) + int(e.covers(truth))
    return hits


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", default="llmbar_natural", help="a shipped recorded source")
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    from rubriclab.calibrate import CellSettings, load_recorded, simulated_coverage, verdict_table
    from rubriclab.calibrate._estimators import kfold_splits

    s = CellSettings()
    rs = load_recorded(f"shipped:{args.source}", Path.cwd())
    cells = [(j, c) for j in rs.judges for c in sorted({x.condition for x in rs.judgments if x.judge == j})]
    tables = [verdict_table(rs, j, c, order=s.order, none=s.none) for j, c in cells]
    opts = {"label_fraction": s.label_fraction, "draws": args.draws, "confidence": s.confidence, "lam": s.lam}

    def now() -> list[dict[str, int]]:
        kfold_splits.cache_clear()  # each repeat starts cold, as a stage process does
        return [{m: c["covered"] for m, c in (simulated_coverage(vt, **opts) or {}).items()} for vt in tables]

    def before() -> list[dict[str, int]]:
        return [_before(vt, **opts) for vt in tables]

    seconds: dict[str, list[float]] = {"before": [], "now": []}
    results: dict[str, list] = {}
    for r in range(args.repeats):
        for name, arm in (("before", before), ("now", now)) if r % 2 == 0 else (("now", now), ("before", before)):
            t0 = time.perf_counter()
            results[name] = arm()
            seconds[name].append(time.perf_counter() - t0)
    same = results["before"] == results["now"]
    print(f"{args.source}: {len(cells)} cells x {args.draws} label draws (fraction {s.label_fraction}), "
          f"{args.repeats} repeats, arms alternating")
    print(f"{'arm':<8} {'best s':>8} {'median s':>9}  runs")
    for name, xs in seconds.items():
        print(f"{name:<8} {min(xs):8.2f} {statistics.median(xs):9.2f}  {', '.join(f'{x:.2f}' for x in xs)}")
    print(f"ratio before/now: {min(seconds['before']) / min(seconds['now']):.2f}x (best), "
          f"{statistics.median(seconds['before']) / statistics.median(seconds['now']):.2f}x (median)")
    print(f"same coverage counts in every cell: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
