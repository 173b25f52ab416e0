"""Paired intervals for what a repair changed: Δα and ΔVFR (repaired − original) on the held-out split.

The original and the repaired set are judged on the same held-out pairs and attacked on the same prompts, so
one bootstrap resamples those units once and evaluates both sets on each resample (``item_bootstrap`` over
the rows of both sides, clustered by pair for α and by prompt for VFR). Differencing two separate
bootstraps instead throws away the pairing: the between-prompt variance that the two sets share stays in
the interval, which is then far too wide for a change that moves every prompt the same way.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from rubriclab.audit import alpha_on, attack_arrays, interval, metric
from rubriclab.errors import ArgumentError
from rubriclab.stats import item_bootstrap, macro_rate, mean_over_groups

METHOD = "paired percentile bootstrap"


def paired_delta_vfr(before: list[dict[str, Any]], after: list[dict[str, Any]], criteria: list[str], *,
                     n_boot: int, confidence: float, seed: int) -> dict[str, Any]:
    """VFR(after) − VFR(before) from two sets' attack rows (``audit_adversarial``'s ``items``, criteria by id,
    the same ids on both sides), prompts resampled jointly; VFR is the card's mean over criteria."""
    index = {cid: k for k, cid in enumerate(criteria)}
    unknown = sorted({r["criterion"] for r in (*before, *after)} - set(index))
    if unknown:
        raise ArgumentError(f"paired ΔVFR: attack rows of criteria {unknown}; expected only {criteria}")
    rows = [{**r, "_k": index[r["criterion"]]} for r in (*before, *after)]
    if not rows:
        return metric(None, n=0, reason="no attack on either side")
    a = attack_arrays(rows)
    side = np.r_[np.zeros(len(before), dtype=bool), np.ones(len(after), dtype=bool)]
    macro = macro_rate(len(criteria))

    def delta(s: np.ndarray, k: np.ndarray, num: np.ndarray, den: np.ndarray) -> float:
        return macro(k[s], num[s], den[s]) - macro(k[~s], num[~s], den[~s])

    boot = item_bootstrap((side, a["k"], a["confirmed"], a["vfr_den"]), delta, a["item"], n_resamples=n_boot,
                          confidence=confidence, seed=seed)
    return _entry(boot, "prompts", "VFR undefined on the original or the repaired set")


def paired_delta_alpha(before: pd.DataFrame, after: pd.DataFrame, column: str, *, n_boot: int,
                       confidence: float, seed: int) -> dict[str, Any]:
    """α(after) − α(before) from two sets' panel ratings (``who`` = rater*, ``criterion``, ``pair_id``,
    ``column``), pairs resampled jointly; α is the card's mean over criteria of Krippendorff's α."""
    both = pd.concat([before.assign(_after=False), after.assign(_after=True)], ignore_index=True)
    if both.empty:
        return metric(None, n=0, reason="no rating on either side")
    alpha = mean_over_groups(alpha_on(column))

    def delta(df: pd.DataFrame) -> float:
        s = df["_after"].to_numpy(dtype=bool)
        return alpha(df[s]) - alpha(df[~s])

    boot = item_bootstrap(both, delta, both["pair_id"].to_numpy(), n_resamples=n_boot, confidence=confidence,
                          seed=seed)
    return _entry(boot, "pairs", "α undefined on the original or the repaired set")


def paired_deltas(before: dict[str, Any], after: dict[str, Any], *, n_boot: int, confidence: float,
                  seed: int) -> dict[str, dict[str, Any]]:
    """``{"alpha", "vfr"}``: after − before, each an audit-card entry whose ``ci`` names the paired method,
    level, unit and resamples; ``before``/``after`` are ``evaluate_set`` results on the same pairs."""
    ub, ua = before.get("units"), after.get("units")
    if after is before and ub is not None:  # nothing changed: Δ is 0 on every resample, no bootstrap needed
        return {name: _unchanged(before[name], unit, confidence, n_boot)
                for name, unit in (("alpha", "pairs"), ("vfr", "prompts"))}
    if ub is None or ua is None:
        why = "K=0 on the original or the repaired set"
        return {"alpha": metric(None, n=0, reason=why), "vfr": metric(None, n=0, reason=why)}
    if ub["criteria"] != ua["criteria"] or ub["alpha_column"] != ua["alpha_column"]:
        raise ArgumentError(f"paired Δ: criteria {ub['criteria']} vs {ua['criteria']} (α on {ub['alpha_column']} vs "
                            f"{ua['alpha_column']}); expected the repaired set to keep the original's ids and α")
    kw = {"n_boot": n_boot, "confidence": confidence, "seed": seed}
    return {"alpha": paired_delta_alpha(ub["alpha"], ua["alpha"], ub["alpha_column"], **kw),
            "vfr": paired_delta_vfr(ub["vfr"], ua["vfr"], ub["criteria"], **kw)}


def _unchanged(m: dict[str, Any], unit: str, confidence: float, n_boot: int) -> dict[str, Any]:
    if m.get("value") is None:
        return metric(None, n=m.get("n"), reason=m.get("reason", "undefined on the original set"))
    return metric(0.0, 0.0, 0.0, m.get("n"), ci=interval(METHOD, confidence, unit, n_boot),
                  degenerate="the same set on both sides: Δ = 0 on every resample")


def _entry(boot: dict[str, Any], unit: str, undefined: str) -> dict[str, Any]:
    ci = interval(METHOD, boot["confidence"], unit, boot["n_resamples"])
    extra = {"degenerate": boot["degenerate"]} if boot.get("degenerate") else {}
    if not np.isfinite(boot["estimate"]):
        extra["reason"] = undefined
    return metric(boot["estimate"], boot["low"], boot["high"], boot["n_items"], ci=ci, **extra)
