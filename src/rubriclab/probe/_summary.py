"""The probe stage's summary.md pieces: the models × metrics table, the counterfactual rates, the label counts, and
dataset or cohort names as file name parts."""

from __future__ import annotations

import math
import re
from typing import Any

import pandas as pd

_METRICS = ("balanced_accuracy", "accuracy", "precision", "recall", "f1", "roc_auc")  # summary.md's column order


def _fmt(row: pd.Series) -> str:
    v = row["estimate"]
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return f"— ({row.get('reason') or 'undefined'})"
    return f"{v:.3f} [{row['low']:.2f}, {row['high']:.2f}]"


def probe_markdown(table: pd.DataFrame) -> str:
    """Models × metrics, each cell ``estimate [low, high]``; n and the interval stated under it."""
    rows = ["| model | " + " | ".join(_METRICS) + " | n items (records) |", "|---|" + "---|" * (len(_METRICS) + 1)]
    for model, g in table.groupby("model", sort=False):
        g = g.set_index("metric")
        cells = [_fmt(g.loc[m]) if m in g.index else "—" for m in _METRICS]
        n = int(g["n"].iloc[0]) if "n" in g and pd.notna(g["n"].iloc[0]) else "—"
        groups = g["n_groups"].iloc[0] if "n_groups" in g else None
        n = f"{n} ({int(groups)})" if groups is not None and pd.notna(groups) else n
        rows.append(f"| {model} | " + " | ".join(cells) + f" | {n} |")
    return "\n".join(rows)


def rates_markdown(res: dict[str, Any]) -> list[str]:
    lines = []
    rates = res.get("rates") or {}
    for key in ("desired_flip_rate", "stickiness_rate", "wrong_direction_rate", "inconsistency"):
        m = rates.get(key)
        label = key.replace("_", " ")
        if m is None:
            lines.append(f"- {label}: not defined — " + "; ".join(res.get("notes") or []))
        elif not math.isfinite(float(m.get("estimate", math.nan))):
            lines.append(f"- {label}: — (no valid item: n={res.get('n', 0)})")
        else:
            lines.append(f"- {label}: {m['estimate']:.3f} [{m['low']:.2f}, {m['high']:.2f}] "
                         f"(n={res.get('n')} items in {m.get('n_records', res.get('n'))} records; "
                         f"{100 * m['ci']['level']:g}% percentile bootstrap over records, B={m['ci']['resamples']})")
    fails = ", ".join(f"{k} {v}" for k, v in (res.get("failures") or {}).items() if v)
    lines.append(f"- sampled {res.get('n_sampled')} conversations, one rubric item each; failures: "
                 f"{fails or 'none'} (counted, left out)")
    return lines


def file_part(name: str) -> str:
    """A dataset or cohort name as a file name part (``rubric_set:rs`` -> ``rubric_set_rs``)."""
    return re.sub(r"[^\w.-]+", "_", name).strip("_")


def label_line(items: pd.DataFrame) -> str:
    n_failed = int(items["label"].isna().sum())
    return (f"{len(items)} items in {items['record_id'].nunique()} records; labels: "
            f"{int((items['label'] == 1).sum())} met, {int((items['label'] == 0).sum())} not met, "
            f"{n_failed} failed (left out).")
