"""Calibration on LLMBar Natural: PPI vs labels-only vs judge-only over seeded label draws, in one run.

The shipped LLMBar Natural verdicts (100 pairs, one gold label each, 6 judges × 15 strategies, both presentation
orders averaged per pair; ``none`` verdicts counted 0.5). The full label set is the truth: the human preference
rate for response 1 over all pairs. Each of ``--draws`` seeded draws gives ``--fraction`` of the pairs their label
(``rubriclab.calibrate.calibrate``, seed = draw index) and records, per estimate, whether its interval covers the
truth and its width. Per judge × strategy the table gives PPI's and labels-only's coverage and median width,
the judge-only estimate's bias (its value − truth: the same in every draw, no label is used) and the isotonic
estimate's coverage; the headline cell (``--judge``, ``--condition``) is checked:

  goal: PPI coverage ≥ confidence − 2 × the simulation's standard error (√(c(1−c)/draws)), and its median width
  below the labels-only interval's. Exit 1 when either is missed.

    python benchmarks/calibrate_llmbar.py [--draws 200] [--fraction 0.1] [--judge GPT-4] [--condition Vanilla]
                                          [--all] [--no-isotonic]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def run_cell(table, draws: int, fraction: float, confidence: float, isotonic: bool, lam: float | None = None) -> dict:
    """Coverage and widths of every estimate over ``draws`` seeded label draws of one verdict table."""
    from rubriclab.calibrate import calibrate

    truth = float(table.frame["human"].mean())
    cover: dict[str, list[bool]] = {}
    width: dict[str, list[float]] = {}
    ess = []
    for seed in range(draws):
        res = calibrate(table, label_fraction=fraction, seed=seed, confidence=confidence,
                        isotonic_folds=5 if isotonic else 0, lam=lam)
        for e in res.estimates:
            cover.setdefault(e.method, []).append(e.covers(truth))
            width.setdefault(e.method, []).append(e.width)
        ess.append(res.ess)
    judge = res.get("judge_only")
    row = {"truth": truth, "n": res.n, "N": res.n_pairs, "judge_bias": judge.value - truth,
           "median_ess": float(np.median(ess))}
    for m in cover:
        row[f"{m}_cover"] = float(np.mean(cover[m]))
        row[f"{m}_width"] = float(np.median(width[m]))
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--fraction", type=float, default=0.1)
    ap.add_argument("--confidence", type=float, default=0.95)
    ap.add_argument("--judge", default="GPT-4")
    ap.add_argument("--condition", default="Vanilla")
    ap.add_argument("--all", action="store_true", help="every judge × strategy, not the headline cell alone")
    ap.add_argument("--no-isotonic", action="store_true")
    ap.add_argument("--lam", type=float, default=1.0, help="ppi_py's λ (default 1: plain PPI; -1: power-tuned PPI++)")
    args = ap.parse_args()

    from rubriclab.calibrate import load_recorded, verdict_table

    rs = load_recorded("shipped:llmbar_natural", Path.cwd())
    cells = [(j, c) for j in rs.judges for c in sorted({x.condition for x in rs.judgments if x.judge == j})]
    if not args.all:
        cells = [(args.judge, args.condition)]
    t0 = time.perf_counter()
    rows = []
    for judge, cond in cells:
        table = verdict_table(rs, judge, cond)
        rows.append({"judge": judge, "condition": cond,
                     **run_cell(table, args.draws, args.fraction, args.confidence, not args.no_isotonic,
                              None if args.lam < 0 else args.lam)})
    df = pd.DataFrame(rows)
    cols = [c for c in ["judge", "condition", "truth", "n", "N", "ppi_cover", "labels_only_cover", "isotonic_cover",
                        "ppi_width", "labels_only_width", "isotonic_width", "judge_bias", "median_ess"] if c in df]
    with pd.option_context("display.width", 200, "display.max_rows", 200):
        print(df[cols].round(3).to_string(index=False))
    se = math.sqrt(args.confidence * (1 - args.confidence) / args.draws)
    floor = args.confidence - 2 * se
    if len(df) > 1:
        print(f"\nacross {len(df)} cells: median PPI coverage {df.ppi_cover.median():.3f} (min {df.ppi_cover.min():.3f}),"
              f" labels-only {df.labels_only_cover.median():.3f}; PPI narrower in "
              f"{int((df.ppi_width < df.labels_only_width).sum())}/{len(df)}; median |judge bias| "
              f"{df.judge_bias.abs().median():.3f} (max {df.judge_bias.abs().max():.3f})")
    head = df[(df.judge == args.judge) & (df.condition == args.condition)].iloc[0]
    ok_cover, ok_width = head.ppi_cover >= floor, head.ppi_width < head.labels_only_width
    print(f"\n{args.judge} × {args.condition}: {args.draws} draws of {args.fraction:g} labels (n = {head.n} of "
          f"{head.N}), {args.confidence:.0%} intervals; truth {head.truth:.3f}")
    print(f"  PPI coverage {head.ppi_cover:.3f} (goal ≥ {floor:.3f} = {args.confidence} − 2×{se:.4f}): "
          f"{'met' if ok_cover else 'MISSED'}")
    print(f"  median width PPI {head.ppi_width:.3f} vs labels-only {head.labels_only_width:.3f} "
          f"(ratio {head.ppi_width / head.labels_only_width:.2f}): {'met' if ok_width else 'MISSED'}")
    print(f"  judge-only bias {head.judge_bias:+.3f}; labels-only coverage {head.labels_only_cover:.3f}")
    print(f"wall {time.perf_counter() - t0:.1f} s")
    return 0 if ok_cover and ok_width else 1


if __name__ == "__main__":
    sys.exit(main())
