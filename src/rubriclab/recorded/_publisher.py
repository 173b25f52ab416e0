"""Checks against what a publisher printed: LLMBar's ``statistics.json`` figures (reproduced from the judgments
by the publisher's own definitions) and PandaLM's README claim that PandaLM-7B reaches 93.75% of GPT-3.5's F1."""

from __future__ import annotations

from typing import Any

from rubriclab.recorded._analysis import RecordedAnalysis
from rubriclab.recorded._records import RecordedSet
from rubriclab.recorded._registry import publisher_check_of, register_check
from rubriclab.recorded.formats.llmbar import llmbar_check

PANDALM_CLAIM = 0.9375
PANDALM_JUDGES = ("pandalm-7b", "gpt-3.5-turbo")


CONVENTIONS = {"none wrong": "a reply that is no verdict counts wrong (its own class)",
               "none = tie": "a reply that is no verdict counts as a tie verdict"}


def _classification(rs: RecordedSet, judge: str, condition: str, convention: str) -> dict[str, float] | None:
    """PandaLM's task as a 3-class classification (labels 1, 2, tie; the majority of the annotators): accuracy
    (verdict = label; a tie verdict on a 1/2 label is wrong, as in the publisher's evaluation) and macro-F1 over the
    label classes (``sklearn.metrics.f1_score``), under ``convention`` for a reply that is no verdict."""
    from sklearn.metrics import accuracy_score, f1_score

    rows = [(rs.pairs[j.pair_id].label, j.choice) for j in rs.judgments
            if (j.judge, j.condition) == (judge, condition) and rs.pairs[j.pair_id].label is not None]
    if not rows:
        return None
    labels = [lab for lab, _ in rows]
    preds = [("tie" if c == "none" else c) if convention == "none = tie" else c for _, c in rows]
    classes = [c for c in ("1", "2", "tie") if c in set(labels)]
    return {"accuracy": float(accuracy_score(labels, preds)),
            "macro_f1": float(f1_score(labels, preds, labels=classes, average="macro", zero_division=0)),
            "n": len(rows)}


def pandalm_claims(rs: RecordedSet, condition: str = "published") -> list[dict[str, Any]]:
    """The README's "PandaLM-7B … 93.75% of GPT-3.5's F1" against the macro-F1 and accuracy ratios the files give,
    under both conventions for gpt-3.5-turbo's unparseable replies (wrong, or a tie); empty when a judge is absent.
    The claim holds only where it holds under both."""
    mine, ref = PANDALM_JUDGES
    rows = []
    for convention, rule in CONVENTIONS.items():
        a, b = _classification(rs, mine, condition, convention), _classification(rs, ref, condition, convention)
        if a is None or b is None:
            return []
        for metric in ("macro_f1", "accuracy"):
            ratio = a[metric] / b[metric] if b[metric] else float("nan")
            rows.append({"claim": "PandaLM README: PandaLM-7B reaches 93.75% of GPT-3.5's F1 (evaluation ability)",
                         "metric": metric, "convention": convention, mine: a[metric], ref: b[metric], "ratio": ratio,
                         "n": a["n"], "claimed": PANDALM_CLAIM if metric == "macro_f1" else None,
                         "agrees": bool(abs(ratio - PANDALM_CLAIM) < 0.005) if metric == "macro_f1" else None,
                         "rule": f"{rs.label_rule}; ties a class (a tie verdict on a 1/2 label is wrong); {rule}"})
    return rows


def _claim_summary(rows: list[dict[str, Any]]) -> str:
    f1 = {r["convention"]: r for r in rows if r["metric"] == "macro_f1"}
    acc = {r["convention"]: r for r in rows if r["metric"] == "accuracy"}
    f1_ratios = sorted(r["ratio"] for r in f1.values())
    acc_ratios = sorted(r["ratio"] for r in acc.values())
    per = "; ".join(f"{c}: macro-F1 {100 * f1[c]['ratio']:.2f}%, accuracy {100 * acc[c]['ratio']:.2f}%" for c in f1)
    holds = [c for c, r in f1.items() if r["agrees"]]
    verdict = ("The 93.75% F1 claim holds under both conventions." if len(holds) == len(f1) else
               "The 93.75% F1 claim holds under neither convention." if not holds else
               f"The 93.75% F1 claim holds only with {holds[0]}, so it is not supported: it depends on the convention.")
    return (f"PandaLM's README says PandaLM-7B reaches 93.75% of GPT-3.5's F1. From the published files (labels: the "
            f"annotators' majority, ties a class), PandaLM-7B's score as a share of gpt-3.5-turbo's, with "
            f"gpt-3.5-turbo's unparseable replies counted wrong or as ties — {per}. {verdict} What holds under both: "
            f"PandaLM-7B's macro-F1 is {100 * f1_ratios[0]:.1f}%–{100 * f1_ratios[-1]:.1f}% of gpt-3.5-turbo's and "
            f"its accuracy {100 * acc_ratios[0]:.1f}%–{100 * acc_ratios[-1]:.1f}%.")


@register_check("llmbar")
def llmbar_publisher_check(rs: RecordedSet, analysis: RecordedAnalysis) -> dict[str, Any] | None:
    """LLMBar's ``statistics.json`` figures, reproduced from the verdicts by the publisher's own definitions."""
    if not rs.extras.get("statistics"):
        return None
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


@register_check("pandalm")
def pandalm_publisher_check(rs: RecordedSet, analysis: RecordedAnalysis) -> dict[str, Any] | None:
    rows = pandalm_claims(rs)
    if not rows:
        return None
    return {"kind": "pandalm README claim", "rows": rows, "summary": _claim_summary(rows)}


def publisher_check(rs: RecordedSet, analysis: RecordedAnalysis) -> dict[str, Any] | None:
    """``{"kind", "rows", "summary"}`` for a format whose publisher printed figures (its registered check), else
    None."""
    check = publisher_check_of(rs.format)
    return check(rs, analysis) if check is not None else None
