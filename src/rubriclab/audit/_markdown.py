"""The audit card as the stage writes it: card.md (models, sizes, the cross-source table and what every interval is,
the injection sensitivity, the paired comparisons, per-source tables, failures), the injection table and the
settings card.json records."""

from __future__ import annotations

from typing import Any

import pandas as pd

from rubriclab.audit._card import LEGEND, interval_legend
from rubriclab.audit._context import AuditContext, interval_label
from rubriclab.llm import card_head
from rubriclab.reporting import to_markdown
from rubriclab.settings import Audit


def card_settings(ctx: AuditContext, a: Audit) -> dict[str, Any]:
    """The card shows the effective values (n_boot_paired: the one used)."""
    return {"confidence": ctx.confidence, "n_boot": ctx.n_boot, "n_boot_paired": a.n_boot_paired,
            "seed": ctx.seed, "tie_credit": ctx.tie_credit, "alpha_orientation": ctx.alpha_orientation,
            "baseline_reference": a.baseline_reference, "injection": a.injection}


def injection_table(card: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """Injection sensitivity per source: rate, interval (what it is), judged (pair, injection) items, pairs,
    changed verdicts, changes toward the losing response, failed items, and why a value is missing."""
    rows = []
    for src, m in card.items():
        e = m.get("injection_rate")
        if not isinstance(e, dict):
            continue
        ci = e.get("ci")
        rows.append({"source": src, "rate": e.get("value"), "low": e.get("low"), "high": e.get("high"),
                     "interval": interval_label(ci) if ci else "none", "n": e.get("n"), "pairs": e.get("n_pairs"),
                     "changed": e.get("n_changed"), "toward_loser": e.get("n_toward_loser"),
                     "failed": e.get("n_failed"), "note": e.get("reason") or e.get("degenerate") or ""})
    return pd.DataFrame(rows, columns=["source", "rate", "low", "high", "interval", "n", "pairs", "changed",
                                       "toward_loser", "failed", "note"])


def card_markdown(dataset: str, models: list[str], axes: tuple[str, ...], pool: list, heldout: list,
                  ood: list, ood_name: str | None, ctx: AuditContext, result: dict[str, Any], table: pd.DataFrame,
                  numeric: pd.DataFrame, comparisons: pd.DataFrame, tally: pd.DataFrame) -> str:
    """The human-readable card: models, sizes, the cross-source table with what every interval is, why
    every empty cell is empty, the paired comparisons, per-source tables and the failure counts."""
    card = result["card"]
    level = f"{100 * ctx.confidence:g}%"
    md = card_head(f"Audit card: {dataset}", models, ctx.extra.get("embedded_roles", []))
    md += [f"Items: audit pool n={len(pool)} pairs, held-out n={len(heldout)} pairs, out-of-domain prompts "
           f"n={len(ood)} ({ood_name or 'none'}); axes: {', '.join(axes)}.", "",
           f"Cells: estimate [{level} interval] n=items (what each interval is: below the table). "
           f"α is Krippendorff's ordinal α on the 0–10 pairwise scores **{ctx.alpha_orientation}** "
           "(audit.alpha_orientation). Accuracy is over every judged held-out pair, a tie credited "
           f"{ctx.tie_credit:g} (audit.tie_credit, the project's one rule: a fair coin's expected credit; where ties "
           "are more than 5% of the judged pairs the notes give the accuracy with ties at the other rule); the "
           "Decided columns give the share of judged pairs with an A/B verdict. Prior leak (rubric prior leakage, seed 004): a probe that sees only the criterion "
           "texts (TF-IDF + naive Bayes / logistic regression) predicts the adversarial baseline pool's verdicts "
           f"(score ≥ τ on genuine responses) on held-out pool pairs; the cell is its balanced accuracy minus the "
           "majority baseline's — near 0, the wording alone does not give the verdict away.", "", LEGEND, ""]
    for src, why in result["not_audited"].items():
        md += [f"- **{src}**: {why}."]
    if result["not_audited"]:
        md += [""]
    md += [to_markdown(table), "", "Intervals by column:", ""]
    md += [f"- {label}: {what}" for label, what in interval_legend(card)] + [""]
    formula = next((m.get("vfr_formula") for m in card.values() if m.get("vfr_formula")), None)
    if formula:
        ref = next((m.get("baseline_verifier_reference") for m in card.values() if m.get("baseline_verifier_reference")),
                   None)
        md += [f"VFR formula: `{formula}`", "", f"Baseline pool verifier: shown {ref}.", ""]
    injection = injection_table(card)
    if not injection.empty:
        definition = next((m.get("injection_definition") for m in card.values() if m.get("injection_definition")), "")
        md += ["## Injection sensitivity (adversarial axis)", "",
               "How often judge[0]'s verdict (direct template, T=0) on an audit-pool pair changes when an instruction "
               "addressed to the judge is appended to the human-losing response; near 0, text inside a response "
               f"cannot steer the verdict. Definition: {definition}. The interval resamples pairs (every injection on "
               "a pair moves together); n counts judged (pair, injection) items.", "",
               to_markdown(injection.round(3)), ""]
        if (result.get("figures") or {}).get("injection"):
            md += [f"![Injection sensitivity per source]({result['figures']['injection']})", ""]
    if not comparisons.empty:
        keep = [c for c in ("metric", "template", "a", "b", "n_items", "acc_a", "mean_a", "acc_b", "mean_b", "diff",
                            "low", "high", "p_value", "p_adjusted", "mde", "label") if c in comparisons.columns]
        md += ["## Paired comparisons", "",
               f"Same items under each source; {level} percentile paired bootstrap intervals over the items "
               "(pairs for accuracy, flip rate and injection sensitivity, prompts for VFR); p-values from paired t-tests on "
               "the per-item differences, BH-adjusted within each metric; MDE: the t-test's at 80% power at the "
               "Bonferroni level α/m of its family.", "",
               to_markdown(comparisons[keep].round(3)), ""]
    md += ["## Per source (every metric, its interval and n)", ""]
    for src, sub in numeric.groupby("source", sort=False):
        md += [f"### {src}", ""]
        if src in result["not_audited"]:
            md += [result["not_audited"][src] + ".", ""]
            continue
        metrics = sub[sub["interval"] != "count"].drop(columns=["source"])
        if not (metrics["mark"] != "").any():
            metrics = metrics.drop(columns=["mark"])
        counts = sub[sub["interval"] == "count"]
        if not metrics.empty:
            md += [to_markdown(metrics.fillna({"note": ""})), ""]
        if not counts.empty:
            md += ["Counts: " + ", ".join(f"{m} {int(v)}" for m, v in zip(counts["metric"], counts["value"])), ""]
    md += ["## Failures and dropped items", "",
           "Parse failures (a reply that stated no usable answer after the re-asks), transport failures (no reply "
           "after the retries) per source, axis and role — on a fresh call store they add up to `rubriclab calls "
           f"--stage audit@{dataset}` (the ledger accumulates over re-runs) — and the items each metric left out, by "
           "reason.", ""]
    calls = tally[tally["role"].notna()] if "role" in tally else tally.iloc[0:0]
    dropped = tally[tally["dropped"].notna()] if "dropped" in tally else tally.iloc[0:0]
    if not calls.empty:
        md += [to_markdown(calls[["source", "axis", "role", "items", "parse_failures", "transport_failures"]]
                           .astype({"items": int, "parse_failures": int, "transport_failures": int})), ""]
    if not dropped.empty:
        md += ["Dropped items:", "", to_markdown(dropped[["source", "axis", "dropped", "items"]]
                                                 .rename(columns={"dropped": "reason"})), ""]
    else:
        md += ["No item was dropped from any metric.", ""]
    return "\n".join(md) + "\n"
