"""Rubric prior leakage for the audit card: how well rubric text alone predicts the judge's verdict.

The audit's adversarial axis scores genuine responses of the audit pool on every criterion (the baseline
pool); a score ≥ τ is "criterion met". Those (criterion, response) verdicts are rubric items. A probe that sees
only the criterion's text is trained on 80% of the pool's pairs and tested on the rest (split by pair); the
card shows its balanced accuracy minus the majority baseline's, with the paired bootstrap interval over pairs
(``run_probe``'s ``leakage``). Near 0: the text alone does not give the verdict away; well above 0: the rubric's
wording predicts the verdict whatever the response.

The split is by pair only (``group_by="record"``): every pair is scored on the same criteria, so grouping by
criterion text too would chain all pairs into one cluster. The question here is new responses under a fixed
rubric (a criterion's prior), not new wording, so the same text on both sides is the point, not a leak.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from rubriclab.rubrics import RubricSet

LEAKAGE_MODELS = ("majority", "nb", "lr")


def baseline_rubric_items(baseline_items: list[dict[str, Any]] | pd.DataFrame, rubric_set: RubricSet) -> pd.DataFrame:
    """The adversarial baseline pool as rubric items: text = the criterion's label and description, record = the
    pool pair, label = the judge's score ≥ τ (NaN when the score failed)."""
    df = pd.DataFrame(baseline_items)
    texts = {c.id: f"{c.label}: {c.description.strip()}" for c in rubric_set.criteria}
    ok = df["status"].eq("ok") if "status" in df else pd.Series(True, index=df.index)
    return pd.DataFrame({
        "item_id": df["criterion"].astype(str) + "@" + df["pair_id"].astype(str),
        "dataset": rubric_set.name,
        "record_id": df["pair_id"].astype(str),
        "criterion": df["criterion"].map(texts).fillna(df["criterion"].astype(str)),
        "label": df["high"].where(ok).astype(float),
    })


def rubric_prior_leakage(baseline_items: list[dict[str, Any]] | pd.DataFrame, rubric_set: RubricSet, *,
                         n_boot: int = 1000, confidence: float = 0.95, seed: int = 0) -> dict[str, Any]:
    """``{value, low, high, n, ci, model, reason}``: probe balanced accuracy − majority baseline on held-out pairs."""
    from rubriclab.probe._classify import run_probe

    items = baseline_rubric_items(baseline_items, rubric_set)
    n_failed = int(items["label"].isna().sum())
    judged = items[items["label"].notna()]
    base: dict[str, Any] = {"value": None, "low": None, "high": None, "n": 0, "ci": None, "n_failed": n_failed}
    if judged.empty:
        return {**base, "reason": "no judged baseline response"}
    if judged["label"].nunique() < 2:
        return {**base, "n": len(judged), "reason": f"every verdict is {int(judged['label'].iloc[0])}: nothing to "
                                                    "predict (leakage undefined)"}
    n_records = judged["record_id"].nunique()
    try:
        res = run_probe(items, models=LEAKAGE_MODELS, seed=seed, test_size=0.2, group_by="record",
                        cv_folds=max(2, min(5, int(n_records * 0.8))), n_boot=n_boot, confidence=confidence,
                        unit_name="pool pairs")
    except Exception as exc:  # noqa: BLE001 - too few pairs to split is a stated gap, not a crash
        return {**base, "n": len(judged), "reason": f"probe not estimable: {exc}"}
    lk = res.get("leakage") or {}
    est = lk.get("estimate")
    if est is None or est != est:
        return {**base, "n": lk.get("n", len(judged)), "reason": lk.get("reason") or "leakage undefined"}
    low = lk.get("low")
    if low is None or low != low:  # too few held-out pairs for an interval that holds its level
        return {**base, "value": float(est), "n": int(lk.get("n", 0)), "model": lk.get("model"),
                "reason": f"{lk.get('reason') or 'no interval'} (raise audit.pool_size)"}
    ci = {"method": "paired percentile bootstrap (probe − majority)", "level": confidence, "unit": "pairs",
          "resamples": n_boot}
    return {"value": float(est), "low": float(lk["low"]), "high": float(lk["high"]), "n": int(lk.get("n", 0)),
            "ci": ci, "model": lk.get("model"), "n_failed": n_failed, "reason": lk.get("reason")}

