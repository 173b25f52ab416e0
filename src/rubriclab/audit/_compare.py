"""Paired comparisons between rubric sources on per-item audit values (flip rate per pair, verified
fool rate per prompt): the same items were judged under every source, so differences are paired.
Benjamini–Hochberg within each metric family; an MDE for each comparison, stated at the Bonferroni
level α/m for the m comparisons of its family (what "no detectable difference" could have seen)."""

from __future__ import annotations

from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from rubriclab.stats import bh_adjust, label_comparison, mde_paired, paired_bootstrap

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
        res = paired_bootstrap(values[a].loc[common].to_numpy(float), values[b].loc[common].to_numpy(float),
                               n_resamples=n_boot, seed=seed, confidence=confidence)
        rows.append({**row, "mean_a": res["mean_a"], "mean_b": res["mean_b"], "diff": res["diff"],
                     "low": res["low"], "high": res["high"], "se": res.get("se"), "p_value": res["p_value"],
                     "degenerate": res.get("degenerate")})
    return adjust_family(rows)


def adjust_family(rows: list[dict[str, Any]], alpha: float = 0.05, power: float = 0.8) -> list[dict[str, Any]]:
    """BH-adjust one family of comparisons, state each MDE at the Bonferroni level α/m (m = comparisons
    that could be tested), and label each row. Rows need ``p_value`` (NaN when untestable) and ``se``."""
    p = np.array([np.nan if r.get("p_value") is None else r["p_value"] for r in rows], dtype=float)
    adjusted = bh_adjust(p) if rows else []
    m = int(np.isfinite(p).sum())
    level = alpha / max(m, 1)
    for row, q in zip(rows, adjusted, strict=True):
        se = row.get("se")
        row["mde"] = mde_paired(se, alpha=level, power=power) if se is not None and np.isfinite(se) else None
        row["mde_alpha"] = level
        row["mde_method"] = f"paired, bootstrap SE, two-sided α={alpha:g}/{m} (Bonferroni over the family), power {power:g}"
        as_nan = {k: (np.nan if row.get(k) is None else row[k]) for k in ("low", "high", "se")}
        row["label"] = label_comparison({**row, **as_nan, "p_adjusted": q}, alpha=alpha, power=power)
        if row["label"].startswith("no detectable difference") and row["mde"] is not None:
            row["label"] = f"no detectable difference (MDE={row['mde']:.3g} at α={alpha:g}/{m}, power {power:g})"
        row["p_adjusted"] = _num(q)
        row["p_value"] = _num(row.get("p_value"))
        row["family_size"] = m
    return rows




def _num(x: Any) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)
