"""Where a judge and the label disagree, item by item, and the confusion matrix behind the card's κ and F1: every
labelled judgment whose choice is not the label (a tie or no verdict on a decided label included), with the ids a
user opens it by — the pair id, the trace id and its MLflow UI link for an MLflow source, the sample id for an
inspect log — and per judge × condition the counts of label × choice."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from rubriclab.recorded._records import CHOICES, RecordedSet
from rubriclab.recorded._rows import codes_and_values, codes_of

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


_KEYS = ("judge", "condition", "pair_id", "order", "label", "choice", "verdict")


def _per_value(col: pd.Series, fn: Any) -> np.ndarray:
    """``fn`` of each row's value, called once per distinct value (a million rows share a handful of them)."""
    codes, uniques = pd.factorize(col.to_numpy(dtype=object), use_na_sentinel=False)
    return np.array([fn(u) for u in uniques] + [None], dtype=object)[codes]


def _categories_in_order(col: pd.Series) -> pd.Series:
    """A column as a categorical whose categories are in the strings' order (so it sorts as the strings do)."""
    cat = col.astype("category")
    return cat.cat.reorder_categories(sorted(cat.cat.categories, key=str))


def disagreements(rs: RecordedSet, mlflow_ui: str | None = None, frame: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per labelled judgment whose choice differs from its pair's label (see the module docstring);
    ``frame``: ``rs.frame()`` when the caller has it. Columns repeat few values: they stay categorical, and each
    text is cut once per distinct value."""
    df = rs.frame() if frame is None else frame
    off = df.loc[(df["label"].notna() & (df["choice"].astype(str) != df["label"].astype(str))).to_numpy(),
                 [*_KEYS, "meta", "raw"]]  # the columns it shows, not a copy of every column
    metas = off["meta"].fillna("")

    def of_meta(key: str, cut: int | None = None) -> np.ndarray:
        return _per_value(metas, lambda m: ((_meta(str(m)).get(key) or "")[:cut] or None) if cut
                          else _meta(str(m)).get(key))

    out = pd.DataFrame({
        **{c: _categories_in_order(off[c]).array for c in _KEYS},
        "trace_id": of_meta("trace_id"), "experiment_id": of_meta("experiment_id"),
        "sample_id": of_meta("sample_id"), "link": None,
        "prompt": _per_value(off["pair_id"], lambda p: (rs.pairs[str(p)].prompt or "")[:160]),
        "answer": of_meta("answer", 300),
        "raw": _per_value(off["raw"].fillna(""), lambda r: str(r)[:300])}, columns=COLUMNS)
    if mlflow_ui:
        out["link"] = [trace_link(mlflow_ui, e, t) for e, t in zip(out["experiment_id"], out["trace_id"],
                                                                   strict=True)]
    out = out.sort_values(["judge", "condition", "pair_id", "order"], kind="stable").reset_index(drop=True)
    for c in _KEYS:
        out[c] = out[c].astype(object)  # the columns a reader compares with strings read as strings
    return out


def confusion_counts(rs: RecordedSet, frame: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per judge × condition × label: the count of each choice (``1``, ``2``, ``tie``, ``none``), labelled
    judgments only."""
    df = rs.frame() if frame is None else frame
    cols = ["judge", "condition", "label", *(f"choice_{c}" for c in CHOICES), "n"]
    label = codes_of(df["label"], CHOICES)
    lab = label >= 0
    if not lab.any():
        return pd.DataFrame(columns=cols)
    # counts from the columns' codes (one bincount), not a crosstab of string columns
    judge, judges = codes_and_values(df["judge"][lab])
    cond, conds = codes_and_values(df["condition"][lab])
    choice = codes_of(df["choice"][lab], CHOICES)
    k = len(CHOICES)
    key = ((judge * len(conds) + cond) * k + label[lab]) * k + choice
    counts = np.bincount(key[choice >= 0], minlength=len(judges) * len(conds) * k * k).reshape(-1, k)
    cells = np.flatnonzero(counts.sum(axis=1))
    j, rest = np.divmod(cells, len(conds) * k)
    c, lab_code = np.divmod(rest, k)
    out = pd.DataFrame({"judge": [str(judges[i]) for i in j], "condition": [str(conds[i]) for i in c],
                        "label": [CHOICES[i] for i in lab_code],
                        **{f"choice_{name}": counts[cells, i] for i, name in enumerate(CHOICES)}})
    out["n"] = counts[cells].sum(axis=1)
    return out.sort_values(["judge", "condition", "label"], kind="stable").reset_index(drop=True)[cols].astype(
        {c: int for c in cols[3:]})


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
