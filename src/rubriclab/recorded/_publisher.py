"""Checks against what a publisher printed: LLMBar's ``statistics.json`` figures (reproduced from the judgments
by the publisher's own definitions) and PandaLM's README claim that PandaLM-7B reaches 93.75% of GPT-3.5's F1."""

from __future__ import annotations

from typing import Any

from rubriclab.recorded._analysis import RecordedAnalysis
from rubriclab.recorded._llmbar import llmbar_check
from rubriclab.recorded._records import RecordedSet

PANDALM_CLAIM = 0.9375
PANDALM_JUDGES = ("pandalm-7b", "gpt-3.5-turbo")


def _value(analysis: RecordedAnalysis, judge: str, condition: str, metric: str) -> float | None:
    try:
        return analysis.cell(judge, condition)["metrics"][metric]["value"]
    except KeyError:
        return None


def pandalm_claims(analysis: RecordedAnalysis, condition: str = "published") -> list[dict[str, Any]]:
    """The README's "PandaLM-7B … 93.75% of GPT-3.5's F1" against the macro-F1 (and accuracy) ratio the files give
    under the card's rule; empty when either judge is absent."""
    mine, ref = PANDALM_JUDGES
    rows = []
    for metric in ("macro_f1", "accuracy"):
        a, b = _value(analysis, mine, condition, metric), _value(analysis, ref, condition, metric)
        if a is None or b is None or not b:
            continue
        ratio = a / b
        rows.append({
            "claim": "PandaLM README: PandaLM-7B reaches 93.75% of GPT-3.5's F1 (evaluation ability)",
            "metric": metric, mine: a, ref: b, "ratio": ratio, "claimed": PANDALM_CLAIM if metric == "macro_f1" else None,
            "agrees": (abs(ratio - PANDALM_CLAIM) < 0.005) if metric == "macro_f1" else None,
            "rule": analysis.source.get("label_rule", "") + "; a reply that is no verdict counts wrong; ties a class",
        })
    return rows


def publisher_check(rs: RecordedSet, analysis: RecordedAnalysis) -> dict[str, Any] | None:
    """``{"kind", "rows", "summary"}`` for a format whose publisher printed figures, else None."""
    if rs.format == "llmbar" and rs.extras.get("statistics"):
        rows = llmbar_check(rs)
        main = [r for r in rows if not r["key"].startswith("kappa")]
        kappas = [r for r in rows if r["key"].startswith("kappa")]
        bad = [r for r in rows if not r["match"]]
        summary = (f"{sum(r['match'] for r in main)} of {len(main)} accuracy figures (correct_False, correct_True, "
                   f"correct_average, correct_both, equal) in {len({(r['judge'], r['condition']) for r in main})} "
                   f"statistics.json files reproduced exactly from the verdicts; "
                   f"{sum(r['match'] for r in kappas)} of {len(kappas)} kappa figures reproduced.")
        if kappas:
            summary += (" LLMBar's kappa_* are not Cohen's κ between verdict and label: its script encodes a winner "
                        "'2' (and a missing one) as 0 and compares that with labels 1/2, so they are reproduced with "
                        "that encoding; the card's κ is the plain one.")
        if bad:
            summary += " Mismatches: " + "; ".join(f"{r['judge']}/{r['condition']} {r['key']}: published "
                                                   f"{r['published']!r}, here {r['reproduced']!r}" for r in bad[:10])
        return {"kind": "llmbar statistics.json", "rows": rows, "summary": summary}
    if rs.format == "pandalm":
        rows = pandalm_claims(analysis)
        if not rows:
            return None
        f1 = next((r for r in rows if r["metric"] == "macro_f1"), None)
        summary = ""
        if f1 is not None:
            summary = (f"PandaLM's README says PandaLM-7B reaches 93.75% of GPT-3.5's F1. From the published files, "
                       f"under the rule above, PandaLM-7B's macro-F1 is {f1['pandalm-7b']:.4f} and gpt-3.5-turbo's "
                       f"{f1['gpt-3.5-turbo']:.4f}: a ratio of {100 * f1['ratio']:.2f}%"
                       + (", consistent with the claim." if f1["agrees"] else ", not 93.75%."))
        return {"kind": "pandalm README claim", "rows": rows, "summary": summary}
    return None
