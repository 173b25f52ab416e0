"""Paired comparisons between rubric sources on per-item audit values (flip rate per pair, verified
fool rate per prompt): the same items were judged under every source, so differences are paired.
Benjamini–Hochberg within each metric family; an MDE for each comparison."""

from __future__ import annotations

from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from rubriclab.stats import bh_adjust, label_comparison, mde_paired, paired_bootstrap


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
    for a, b in combinations(sorted(values), 2):
        common = values[a].index.intersection(values[b].index)
        row: dict[str, Any] = {"metric": metric, "a": a, "b": b, "n_items": len(common)}
        if len(common) < 2:
            rows.append({**row, "p_value": np.nan, "label": "undetermined (fewer than 2 shared items)"})
            continue
        res = paired_bootstrap(values[a].loc[common].to_numpy(float), values[b].loc[common].to_numpy(float),
                               n_resamples=n_boot, seed=seed, confidence=confidence)
        se = res.get("se")
        rows.append({**row, "mean_a": res["mean_a"], "mean_b": res["mean_b"], "diff": res["diff"],
                     "low": res["low"], "high": res["high"], "se": se, "p_value": res["p_value"],
                     "mde": mde_paired(se) if se is not None and np.isfinite(se) and se > 0 else None})
    if rows:
        adjusted = bh_adjust(np.array([r.get("p_value", np.nan) for r in rows], dtype=float))
        for r, p in zip(rows, adjusted):
            r["p_adjusted"] = float(p) if np.isfinite(p) else None
            if "diff" in r:
                r["label"] = label_comparison(r)
    return rows
