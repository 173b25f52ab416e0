"""Paired comparisons between rubric sources on per-item audit values (flip rate per pair, verified
fool rate per prompt): the same items were judged under every source, so differences are paired.
Each Δ has its percentile paired bootstrap interval; the test is a paired t-test on the per-item differences
(``rubriclab.stats.adjust_family``), Benjamini–Hochberg within each metric family, and an MDE for each comparison,
the t-test's at the Bonferroni level α/m for the m comparisons of its family (what "no detectable difference"
could have seen, with the power it states)."""

from __future__ import annotations

from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from rubriclab.stats import adjust_family, paired_bootstrap, paired_test

UNITS = {"flip_rate": "pairs", "vfr": "prompts", "injection_rate": "pairs"}


def adversarial_item_values(items: list[dict[str, Any]]) -> pd.Series:
    """Per prompt: share of its scored attacks (all criteria) that scored ≥ τ and were verified EXPLOITING."""
    df = pd.DataFrame(items)
    if df.empty or "score" not in df:
        return pd.Series(dtype=float)
    usable = df["score"].notna() & (~df["high"].fillna(False).astype(bool) | df["exploiting"].notna())
    df = df[usable]
    value = (df["high"].fillna(False).astype(bool) & df["exploiting"].fillna(False).astype(bool)).astype(float)
    return value.groupby(df["item_id"]).mean()


def paired_item_comparisons(values: dict[str, pd.Series], metric: str, *, n_boot: int, seed: int,
                            confidence: float = 0.95) -> list[dict[str, Any]]:
    """Every pair of sources on the items both have a value for; one row per comparison."""
    rows = []
    unit = UNITS.get(metric, "items")
    for a, b in combinations(sorted(values), 2):
        common = values[a].index.intersection(values[b].index)
        row: dict[str, Any] = {"metric": metric, "a": a, "b": b, "n_items": len(common),
                               "n_excluded_a": len(values[a]) - len(common), "n_excluded_b": len(values[b]) - len(common),
                               "p_value": np.nan, "se": None, "confidence": confidence, "n_resamples": n_boot,
                               "ci": f"{100 * confidence:g}% percentile paired bootstrap over {unit} (B={n_boot})"}
        if len(common) < 2:
            rows.append({**row, "degenerate": f"fewer than 2 shared {unit}"})
            continue
        xa, xb = values[a].loc[common].to_numpy(float), values[b].loc[common].to_numpy(float)
        res = paired_bootstrap(xa, xb, n_resamples=n_boot, seed=seed, confidence=confidence)
        rows.append({**row, "mean_a": res["mean_a"], "mean_b": res["mean_b"], "diff": res["diff"],
                     "low": res["low"], "high": res["high"], "boot_se": res.get("se"), **paired_test(xa, xb),
                     "degenerate": res.get("degenerate")})
    return adjust_family(rows)


def _num(x: Any) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)
