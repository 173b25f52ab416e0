"""The audit's paraphrase-ρ bootstrap: a numpy matrix per resample (now) vs a pandas pivot per resample (before).

The reliability axis resamples pairs ``audit.n_boot`` times and, on every resample, builds one paraphrases × pairs
matrix per criterion for the mean Spearman ρ. It used pandas' ``pivot_table`` for that (``_grid``), which was ~55 s
of the demo audit stage's ~95 s of non-model time (py-spy); ``_rho`` now builds it with ``_matrix``, as the α
bootstrap already did. This replays the bootstrap on a finished audit's paraphrase scores (every
``*.reliability.items.parquet`` of the dataset), both arms alternating in one process, and checks they give the
same interval to the bit.

    python benchmarks/audit_bootstrap.py [--audit outputs/audit/demo_helpful] [--n-boot 1000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from rubriclab.audit._reliability import _grid, _rho  # the two arms compared: the audit's own internals
from rubriclab.stats import item_bootstrap, mean_over_groups, paraphrase_stability


def pivot_rho(scores: pd.DataFrame) -> float:
    """``_rho`` as it was: a pandas pivot of the resample."""
    grid = _grid(scores)
    return paraphrase_stability(grid.to_numpy())["rho"] if len(grid) >= 2 else np.nan


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--audit", type=Path, default=Path("outputs/audit/demo_helpful"), help="a finished audit folder")
    ap.add_argument("--n-boot", type=int, default=1000, help="resamples (params.yaml audit.n_boot)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    files = sorted(args.audit.glob("*.reliability.items.parquet"))
    sources = {f.name.removesuffix(".reliability.items.parquet"): pd.read_parquet(f) for f in files}
    sources = {k: d[d.who.str.startswith("para")].reset_index(drop=True) for k, d in sources.items()}
    sources = {k: d for k, d in sources.items() if d["who"].nunique() >= 2}
    if not sources:
        raise SystemExit(f"{args.audit}: no reliability items with ≥2 paraphrases; run `make repro` first")
    arms = {"pivot (before)": mean_over_groups(pivot_rho), "matrix (now)": mean_over_groups(_rho)}
    seconds = {a: [] for a in arms}
    results: dict[str, list] = {a: [] for a in arms}
    for r in range(args.repeats):
        for a in (list(arms) if r % 2 == 0 else list(arms)[::-1]):
            t = time.perf_counter()
            out = [item_bootstrap(d, arms[a], d["pair_id"].to_numpy(), n_resamples=args.n_boot, seed=0)
                   for d in sources.values()]
            seconds[a].append(time.perf_counter() - t)
            results[a] = [(o["estimate"], o["low"], o["high"], o["se"]) for o in out]
    rows = sum(len(d) for d in sources.values())
    crit = sum(d["criterion"].nunique() for d in sources.values())
    print(f"{args.audit}: {len(sources)} rubric sets, {crit} criteria, {rows} paraphrase scores; "
          f"{args.n_boot} resamples each; median of {args.repeats} alternating runs")
    med = {a: float(np.median(s)) for a, s in seconds.items()}
    for a in arms:
        print(f"  {a:15s} {med[a]:7.2f} s")
    before, now = med["pivot (before)"], med["matrix (now)"]
    same = results["pivot (before)"] == results["matrix (now)"]
    print(f"  {before / now:.1f}x faster; the same value and interval and se for every set: {same}")
    for (name, d), (v, lo, hi, _) in zip(sources.items(), results["matrix (now)"]):
        print(f"    {name}: ρ {v:.4f}, 95% percentile bootstrap CI [{lo:.4f}, {hi:.4f}] "
              f"(n = {d['pair_id'].nunique()} pairs, {args.n_boot} resamples)")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
