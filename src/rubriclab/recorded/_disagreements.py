"""Where a judge and the label disagree, item by item, and the confusion matrix behind the card's κ and F1: every
labelled judgment whose choice is not the label (a tie or no verdict on a decided label included), with the ids a
user opens it by — the pair id, the trace id and its MLflow UI link for an MLflow source, the sample id for an
inspect log — and per judge × condition the counts of label × choice."""

from __future__ import annotations

from typing import Any

import pandas as pd

from rubriclab.recorded._records import CHOICES, RecordedSet

SHOWN = 20  # disagreements listed in card.md (all of them in disagreements.csv)
COLUMNS = ["judge", "condition", "pair_id", "order", "label", "choice", "verdict", "trace_id", "experiment_id",
           "sample_id", "link", "prompt", "answer", "raw"]


def trace_link(ui: str | None, experiment_id: str | None, trace_id: str | None) -> str | None:
    """The MLflow UI address of a trace (its experiment's Traces tab with the trace selected)."""
    if not (ui and experiment_id and trace_id):
        return None
    return f"{ui.rstrip('/')}/#/experiments/{experiment_id}/traces?selectedEvaluationId={trace_id}"


def _meta(text: str) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in text.split(";") if "=" in kv) if text else {}


def disagreements(rs: RecordedSet, mlflow_ui: str | None = None, frame: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per labelled judgment whose choice differs from its pair's label (see the module docstring);
    ``frame``: ``rs.frame()`` when the caller has it."""
    df = rs.frame() if frame is None else frame
    off = df[df["label"].notna() & (df["choice"].astype(str) != df["label"].astype(str))]
    metas = off["meta"].astype(str)
    meta = [_meta(m) for m in metas] if (metas != "").any() else [{}] * len(off)
    pids = off["pair_id"].astype(str)
    uniq = pd.unique(pids)
    prompts = pids.map(dict(zip(uniq, ((rs.pairs[p].prompt or "")[:160] for p in uniq), strict=True)))
    out = pd.DataFrame({
        "judge": off["judge"].to_numpy(), "condition": off["condition"].to_numpy(),
        "pair_id": off["pair_id"].to_numpy(), "order": off["order"].to_numpy(), "label": off["label"].to_numpy(),
        "choice": off["choice"].to_numpy(), "verdict": off["verdict"].to_numpy(),
        "trace_id": [m.get("trace_id") for m in meta], "experiment_id": [m.get("experiment_id") for m in meta],
        "sample_id": [m.get("sample_id") for m in meta], "link": None,
        "prompt": prompts.to_numpy(),
        "answer": [(m.get("answer") or "")[:300] or None for m in meta],
        "raw": off["raw"].astype(str).str.slice(0, 300).to_numpy()}, columns=COLUMNS)
    out["link"] = [trace_link(mlflow_ui, e, t) for e, t in zip(out["experiment_id"], out["trace_id"], strict=True)]
    return out.sort_values(["judge", "condition", "pair_id", "order"], kind="stable").reset_index(drop=True)


def confusion_counts(rs: RecordedSet, frame: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per judge × condition × label: the count of each choice (``1``, ``2``, ``tie``, ``none``), labelled
    judgments only."""
    df = rs.frame() if frame is None else frame
    lab = df[df["label"].notna()]
    cols = ["judge", "condition", "label", *(f"choice_{c}" for c in CHOICES), "n"]
    if lab.empty:
        return pd.DataFrame(columns=cols)
    counts = pd.crosstab([lab["judge"], lab["condition"], lab["label"]], lab["choice"]).reindex(
        columns=list(CHOICES), fill_value=0)
    counts.columns = [f"choice_{c}" for c in counts.columns]
    counts["n"] = counts.sum(axis=1)
    return counts.reset_index()[cols].astype({c: int for c in cols[3:]})


def disagreements_md(table: pd.DataFrame, confusion: pd.DataFrame, md_table: Any) -> list[str]:
    """The card's section: counts per cell, the confusion matrices, and the first disagreements."""
    if confusion.empty:
        return ["## Where judge and label disagree", "",
                "No labelled judgment: there is no label to disagree with (disagreements.csv and confusion.csv are "
                "empty).", ""]
    per_cell = table.groupby(["judge", "condition"]).size() if len(table) else pd.Series(dtype=int)
    totals = confusion.groupby(["judge", "condition"])["n"].sum()
    md = ["## Where judge and label disagree", "",
          f"{len(table)} labelled judgments whose choice is not the label (a tie or no verdict on a decided label "
          "counts), listed in `disagreements.csv` with their pair id (and the trace id and MLflow UI link, or the "
          "sample id, where the source has them); the confusion matrices (`confusion.csv`) count label × choice per "
          "judge × condition.", ""]
    md += md_table(["judge", "condition", "disagree / labelled judgments"],
                   [[j, c, f"{int(per_cell.get((j, c), 0))} / {int(n)}"] for (j, c), n in totals.items()]) + [""]
    md += md_table(["judge", "condition", "label", "→ 1", "→ 2", "→ tie", "→ none"],
                   [[r["judge"], r["condition"], r["label"], r["choice_1"], r["choice_2"], r["choice_tie"],
                     r["choice_none"]] for r in confusion.to_dict("records")]) + [""]
    if len(table):
        shown = table.head(SHOWN)
        md += [f"The first {len(shown)} of {len(table)}:", ""]
        md += md_table(["judge", "condition", "pair", "order", "label", "choice", "open"],
                       [[r["judge"], r["condition"], r["pair_id"], r["order"], r["label"], r["choice"],
                         r["link"] or r["trace_id"] or r["sample_id"] or "—"] for r in shown.to_dict("records")]) + [""]
    return md
