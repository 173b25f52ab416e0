"""The drift stage's tables and figure: the method comparison in the shape of seed 003 Tables 1–2."""

from __future__ import annotations

import math
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

LABELS = {"seed": "Seed", "random": "Random search", "icl": "Few-shot ICL", "textgrad": "TextGrad", "ours": "Biased search"}


def _ci(v: float, lo: float, hi: float) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{v:.3f} [{lo:.2f}, {hi:.2f}]"


def comparison_markdown(table: pd.DataFrame) -> str:
    """Bench ↑, Target ↓, Gap ↑ per method with intervals and n, plus Δ target vs seed (paired; p raw and
    BH-adjusted across methods)."""
    lines = ["| Method | Selected | Bench ↑ | Target ↓ | Gap (Bench − Target) ↑ | Δ Target vs seed (p; p BH) "
             "| n bench / target | ties / failed |", "|---|---|---|---|---|---|---|---|"]
    for r in table.to_dict("records"):
        d_t = "(reference)" if r["method"] == "seed" else (
            f"{r['d_target']:+.3f} [{r['d_target_low']:.2f}, {r['d_target_high']:.2f}] (p={r['d_target_p']:.3g}; "
            f"p_BH={r.get('d_target_p_bh', float('nan')):.3g})"
            if isinstance(r.get("d_target"), float) and not math.isnan(r["d_target"]) else "—")
        lines.append(
            f"| {LABELS.get(r['method'], r['method'])} | {r['rubric']} | {_ci(r['bench'], r['bench_low'], r['bench_high'])} "
            f"| {_ci(r['target'], r['target_low'], r['target_high'])} | {_ci(r['gap'], r['gap_low'], r['gap_high'])} "
            f"| {d_t} | {r['bench_n']} / {r['target_n']} "
            f"| {r['bench_ties'] + r['target_ties']} / {r['bench_failed'] + r['target_failed']} |")
    return "\n".join(lines)


def transfer_markdown(trans: pd.DataFrame) -> str:
    """Bench, target and gap per (judge model, rubric) with intervals, n and ties/failed."""
    lines = ["| Judge model | Rubric | Bench | Target | Gap | n bench / target | ties / failed |",
             "|---|---|---|---|---|---|---|"]
    for r in trans.to_dict("records"):
        lines.append(
            f"| {r['model']} | {LABELS.get(r['rubric'], r['rubric'])} "
            f"| {_ci(r['bench_agreement'], r['bench_low'], r['bench_high'])} "
            f"| {_ci(r['target_agreement'], r['target_low'], r['target_high'])} | {_ci(r['gap'], r['gap_low'], r['gap_high'])} "
            f"| {r['bench_n']} / {r['target_n']} | {r['bench_n_tie'] + r['target_n_tie']} / "
            f"{r['bench_n_failed'] + r['target_n_failed']} |")
    return "\n".join(lines)


def comparison_figure(table: pd.DataFrame, title: str, caption: str):
    """Grouped bars: bench and target agreement on test per method, with interval whiskers."""
    fig, ax = plt.subplots(figsize=(max(5.5, 1.3 * len(table) + 2), 3.8))
    xs = range(len(table))
    for off, (col, color) in zip((-0.18, 0.18), (("bench", "#4c72b0"), ("target", "#dd8452"))):
        vals = table[col].astype(float)
        err = [vals - table[f"{col}_low"].astype(float), table[f"{col}_high"].astype(float) - vals]
        ax.bar([x + off for x in xs], vals, width=0.36, color=color, label=f"{col} (test)", yerr=err, capsize=3)
    ax.set_xticks(list(xs), [LABELS.get(m, m) for m in table["method"]], rotation=15)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("agreement with reference labels")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    fig.text(0.01, 0.01, caption, fontsize=7, wrap=True)
    fig.tight_layout(rect=(0, 0.09, 1, 1))
    return fig


def method_rows(results: dict[str, dict[str, Any]], seed_val: dict[str, Any]) -> pd.DataFrame:
    """Per method: proposals, candidates validated (of the budget; ``budget_note`` says why one fell short),
    feasible, the selection and why (selection on val)."""
    rows = []
    for label, r in results.items():
        sel = r["selected"]
        extra = r.get("extra", {})
        rows.append({
            "method": label, "proposed": extra.get("proposed", 0), "validated": len(r["pool"]),
            "budget_note": extra.get("budget_note", ""), "feasible": sum(bool(c.feasible_val) for c in r["pool"]),
            "selected": ("seed" if sel is None else sel.prompt_id if sel.method == label
                         else f"{sel.prompt_id} (same text, proposed again)"),
            "val_bench": sel.val["bench"]["agreement"] if sel is not None else seed_val["bench"]["agreement"],
            "val_target": sel.val["target"]["agreement"] if sel is not None else seed_val["target"]["agreement"],
            "reason": r["reason"],
        })
    return pd.DataFrame(rows)
