"""Vectorised cluster bootstrap of the probe metrics vs a naive per-resample sklearn loop, in one run.

On ``--items`` held-out items in ``--records`` records (synthetic labels, scores and predictions):

  * vectorised: ``rubriclab.probe.classification_metrics`` with ``--boot`` resamples over records — count
    metrics (accuracy, precision, recall, F1, balanced accuracy) from summed per-record confusion counts,
    and ROC-AUC (weighted Mann–Whitney over chunks of resamples), timed separately and together;
  * naive: per resample, gather the drawn records' rows and call sklearn's six metric functions;
    run on ``--naive-boot`` resamples and extrapolated per resample to ``--boot``.

Prints a table and the speed-up ratios; exits non-zero when the vectorised run of all six metrics with
``--boot`` resamples takes more than ``--budget`` seconds.

    python benchmarks/probe_bootstrap.py [--items 3000] [--records 600] [--boot 10000] [--naive-boot 200]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import numpy as np  # noqa: E402
from sklearn.exceptions import UndefinedMetricWarning  # noqa: E402
from sklearn.metrics import (  # noqa: E402
    accuracy_score,
    balanced_accuracy_score,
    f1_score,
    precision_score,
    recall_score,
    roc_auc_score,
)

from rubriclab.probe import classification_metrics  # noqa: E402


def naive(y: np.ndarray, pred: np.ndarray, score: np.ndarray, groups: np.ndarray, n_boot: int,
          seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    ids = np.unique(groups)
    rows_of = {g: np.flatnonzero(groups == g) for g in ids}
    out = np.full((n_boot, 6), np.nan)
    for b in range(n_boot):
        rows = np.concatenate([rows_of[g] for g in rng.choice(ids, len(ids))])
        yt, yp = y[rows], pred[rows]
        out[b, :5] = (accuracy_score(yt, yp), precision_score(yt, yp, zero_division=np.nan),
                      recall_score(yt, yp, zero_division=np.nan), f1_score(yt, yp, zero_division=np.nan),
                      balanced_accuracy_score(yt, yp))
        if yt.min() != yt.max():
            out[b, 5] = roc_auc_score(yt, score[rows])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=3000)
    ap.add_argument("--records", type=int, default=600)
    ap.add_argument("--boot", type=int, default=10000)
    ap.add_argument("--naive-boot", type=int, default=200)
    ap.add_argument("--budget", type=float, default=5.0, help="max seconds for the vectorised run (all metrics)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    rng = np.random.default_rng(args.seed)
    groups = rng.integers(0, args.records, args.items)
    y = rng.integers(0, 2, args.items)
    score = 0.6 * y + rng.normal(size=args.items)
    pred = (score > 0.3).astype(int)

    t0 = time.perf_counter()
    counts_only = classification_metrics(y, pred, groups=groups, n_boot=args.boot, seed=args.seed)
    t_counts = time.perf_counter() - t0
    t0 = time.perf_counter()
    full = classification_metrics(y, pred, score, groups=groups, n_boot=args.boot, seed=args.seed)
    t_full = time.perf_counter() - t0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        t0 = time.perf_counter()
        naive_reps = naive(y, pred, score, groups, args.naive_boot, args.seed)
        t_naive = time.perf_counter() - t0
    per_naive = t_naive / args.naive_boot
    naive_extrap = per_naive * args.boot

    n_rec = len(np.unique(groups))
    print(f"{args.items} items in {n_rec} records, cluster bootstrap over records, {args.boot} resamples\n")
    print("| method | resamples run | seconds | per resample (ms) | seconds for "
          f"{args.boot} |")
    print("|---|---|---|---|---|")
    print(f"| vectorised, 5 count metrics | {args.boot} | {t_counts:.3f} | {1e3 * t_counts / args.boot:.4f} "
          f"| {t_counts:.3f} |")
    print(f"| vectorised, 5 count metrics + ROC-AUC | {args.boot} | {t_full:.3f} | "
          f"{1e3 * t_full / args.boot:.4f} | {t_full:.3f} |")
    print(f"| naive sklearn loop, 6 metrics | {args.naive_boot} | {t_naive:.3f} | {1e3 * per_naive:.3f} | "
          f"{naive_extrap:.1f} (extrapolated) |")
    print(f"\nspeed-up, all six metrics: {naive_extrap / t_full:.0f}x; count metrics alone vs naive: "
          f"{naive_extrap / t_counts:.0f}x")
    print("\n| metric | estimate | vectorised 95% CI | naive 95% CI (fewer resamples) |")
    print("|---|---|---|---|")
    names = ("accuracy", "precision", "recall", "f1", "balanced_accuracy", "roc_auc")
    for j, m in enumerate(names):
        lo, hi = np.nanquantile(naive_reps[:, j], [0.025, 0.975])
        e = full[m]
        print(f"| {m} | {e['estimate']:.4f} | [{e['low']:.4f}, {e['high']:.4f}] | [{lo:.4f}, {hi:.4f}] |")
    assert counts_only["accuracy"]["estimate"] == full["accuracy"]["estimate"]
    ok = t_full <= args.budget
    print(f"\nvectorised run of all six metrics: {t_full:.2f} s (goal <= {args.budget:.1f} s: "
          f"{'PASS' if ok else 'FAIL'})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
