"""The probe stage's summary.md pieces: the models × metrics table, the counterfactual rates, the label counts, and
dataset or cohort names as file name parts."""

from __future__ import annotations

import math
import re
from typing import Any

import pandas as pd

_METRICS = ("balanced_accuracy", "accuracy", "precision", "recall", "f1", "roc_auc")  # summary.md's column order


def _nan(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _fmt(row: pd.Series, notes: list[str]) -> str:
    """``estimate [low, high]``, with a numbered note whenever there is a reason (a missing or degenerate interval,
    resamples left out): a number alone would read as a plain interval. The note's text goes into ``notes``."""
    v, reason = row["estimate"], row.get("reason")
    reason = None if _nan(reason) else str(reason)
    mark = ""
    if reason:
        if reason not in notes:
            notes.append(reason)
        mark = f" (note {notes.index(reason) + 1})"
    if _nan(v):
        return "—" + (mark or " (undefined)")
    if _nan(row["low"]) or _nan(row["high"]):
        return f"{v:.3f}" + (mark or " (no interval)")
    return f"{v:.3f} [{row['low']:.2f}, {row['high']:.2f}]{mark}"


def probe_markdown(table: pd.DataFrame) -> str:
    """Models × metrics, each cell ``estimate [low, high]``; n and the interval stated under it; a cell's reason
    (no interval, an undefined metric, resamples left out) as a numbered note under the table."""
    rows = ["| model | " + " | ".join(_METRICS) + " | n items (clusters) |", "|---|" + "---|" * (len(_METRICS) + 1)]
    notes: list[str] = []
    for model, g in table.groupby("model", sort=False):
        g = g.set_index("metric")
        cells = [_fmt(g.loc[m], notes) if m in g.index else "—" for m in _METRICS]
        n = int(g["n"].iloc[0]) if "n" in g and pd.notna(g["n"].iloc[0]) else "—"
        groups = g["n_groups"].iloc[0] if "n_groups" in g else None
        n = f"{n} ({int(groups)})" if groups is not None and pd.notna(groups) else n
        rows.append(f"| {model} | " + " | ".join(cells) + f" | {n} |")
    if notes:
        rows += [""] + [f"- note {i}: {text}" for i, text in enumerate(notes, 1)]
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
            why = next((m[k] for k in ("reason", "degenerate", "note") if isinstance(m.get(k), str) and m[k]), None)
            ci = ("no interval" if _nan(m.get("low")) or _nan(m.get("high"))
                  else f"[{m['low']:.2f}, {m['high']:.2f}]")
            lines.append(f"- {label}: {m['estimate']:.3f} {ci} "
                         f"(n={res.get('n')} items in {m.get('n_records', res.get('n'))} records; "
                         f"{100 * m['ci']['level']:g}% percentile bootstrap over records, B={m['ci']['resamples']}"
                         + (f"; {why}" if why else "") + ")")
    fails = ", ".join(f"{k} {v}" for k, v in (res.get("failures") or {}).items() if v)
    lines.append(f"- sampled {res.get('n_sampled')} conversations, one rubric item each; failures: "
                 f"{fails or 'none'} (counted, left out)")
    return lines


def file_part(name: str) -> str:
    """A dataset or cohort name as a file name part (``rubric_set:rs`` -> ``rubric_set_rs``)."""
    return re.sub(r"[^\w.-]+", "_", name).strip("_")


def label_line(items: pd.DataFrame, drops: dict[str, int] | None = None) -> str:
    """Items, records and labels, and what was left out before them: exact duplicate records when the file was read
    (``drops``, else the frame's ``attrs["drops"]``) and responses the generator failed to write."""
    n_failed = int(items["label"].isna().sum())
    line = (f"{len(items)} items in {items['record_id'].nunique()} records; labels: "
            f"{int((items['label'] == 1).sum())} met, {int((items['label'] == 0).sum())} not met, "
            f"{n_failed} failed (left out).")
    dropped = {k: v for k, v in (drops if drops is not None else items.attrs.get("drops") or {}).items() if v}
    if dropped:
        line += " Read from the file without: " + ", ".join(f"{v} {k.replace('_', ' ')}(s)" for k, v in dropped.items()) \
            + " (counted, not labelled)."
    gen = items.attrs.get("generation_failures")
    if gen:
        line += f" {gen} response(s) the generator failed to write (their items are among the failed labels)."
    return line
