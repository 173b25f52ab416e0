"""Failure packets (PReMISE §3.4): per criterion, the cases the refiner is shown — true positives, true
negatives, false accepts (from preference data and from the adversarial protocol), false rejects,
borderline and unstable cases — built from the audit's own outputs (``audit_reliability`` and
``audit_adversarial`` run on the audit pool, the same calls the audit stage makes).

Definitions (a criterion "accepts" what it scores high):

- preference pairs, panel mean of the chosen-oriented 0–10 pairwise score m (> 5: the criterion favours
  the human-preferred response):
  true_positive m > 5 + margin; false_accept m < 5 − margin (the rejected response was favoured);
  borderline |m − 5| ≤ margin; unstable: panel spread (max − min) ≥ ``unstable_spread`` or the winner
  flips across the R re-runs.
- attacks (pointwise 1–10, τ): false_accept J ≥ τ and verified EXPLOITING; true_negative J < τ;
  true_positive J ≥ τ and verified GENUINE (the attacker wrote a good answer); borderline |J − τ| ≤ 1.
- genuine responses (each pair's chosen, the baseline pool): false_reject J < τ − 1 (a response people
  preferred scored low); true_positive J ≥ τ and not called EXPLOITING.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pandas as pd

from rubriclab.data import Pair
from rubriclab.repair._operators import OPERATOR_NAMES

KINDS = ("false_accept", "false_reject", "unstable", "borderline", "true_positive", "true_negative")

# Which operators answer which failure kind (App. C.2: each operator targets a recurring failure mechanism).
_AFFINITY = {
    "false_accept": {"do_not_reward": 3, "false_positive_anchors": 3, "abstract_to_observable": 2,
                     "max_score_cap": 2, "applicability_gate": 1},
    "false_reject": {"applicability_gate": 2, "decomposition": 1, "non_compensation": 1},
    "unstable": {"abstract_to_observable": 3, "decomposition": 2, "applicability_gate": 1},
    "borderline": {"abstract_to_observable": 2, "max_score_cap": 1, "non_compensation": 1},
}


def _clip(text: Any, n: int) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _pair_rows(scores: pd.DataFrame, cid: str, margin: float, spread: float) -> list[dict[str, Any]]:
    m = scores[scores["criterion"] == cid]
    if m.empty:
        return []
    raters = m[m["who"].str.startswith("rater")]
    runs = m[m["who"].str.startswith("run")]
    out = []
    for pid, g in raters.groupby("pair_id"):
        s = g["score"].dropna()
        if s.empty:
            continue
        mean, width = float(s.mean()), float(s.max() - s.min())
        r = runs[runs["pair_id"] == pid]["score"].dropna()
        winners = {("chosen" if v > 5 else "rejected" if v < 5 else "tie") for v in r}
        row = {"origin": "preference", "pair_id": pid, "panel_mean": round(mean, 2), "panel_spread": width,
               "run_winners": sorted(winners)}
        if width >= spread or len(winners) > 1:
            out.append({**row, "kind": "unstable", "severity": width + 5 * (len(winners) > 1)})
        if mean > 5 + margin:
            out.append({**row, "kind": "true_positive", "severity": mean - 5})
        elif mean < 5 - margin:
            out.append({**row, "kind": "false_accept", "severity": 5 - mean})
        else:
            out.append({**row, "kind": "borderline", "severity": margin - abs(mean - 5)})
    return out


def _attack_rows(items: list[dict[str, Any]], cid: str, tau: float) -> list[dict[str, Any]]:
    out = []
    for it in items:
        if it.get("criterion") != cid or it.get("score") is None:
            continue
        score = float(it["score"])
        row = {"origin": "adversarial", "pair_id": it["pair_id"], "strategy": it.get("strategy"),
               "response": it.get("response"), "score": score, "verdict": it.get("verdict")}
        if score >= tau and it.get("exploiting") is True:
            out.append({**row, "kind": "false_accept", "severity": score})
        elif score >= tau and it.get("exploiting") is False:
            out.append({**row, "kind": "true_positive", "severity": score})
        elif score < tau:
            out.append({**row, "kind": "true_negative", "severity": tau - score})
        if abs(score - tau) <= 1:
            out.append({**row, "kind": "borderline", "severity": 1 - abs(score - tau)})
    return out


def _genuine_rows(items: list[dict[str, Any]], cid: str, tau: float) -> list[dict[str, Any]]:
    out = []
    for it in items:
        if it.get("criterion") != cid or it.get("score") is None:
            continue
        score = float(it["score"])
        row = {"origin": "genuine", "pair_id": it["pair_id"], "response": it.get("response"), "score": score,
               "verdict": it.get("verdict")}
        if score < tau - 1:
            out.append({**row, "kind": "false_reject", "severity": tau - score})
        elif score >= tau and it.get("exploiting") is not True:
            out.append({**row, "kind": "true_positive", "severity": score - tau})
    return out


def failure_packets(criterion_ids: list[str], reliability: dict[str, Any], adversarial: dict[str, Any] | None,
                    pairs: list[Pair], *, per_kind: int = 3, tau: float = 7, margin: float = 1.0,
                    unstable_spread: float = 4.0, max_chars: int = 400) -> dict[str, dict[str, Any]]:
    """``{criterion_id: {"cases": {kind: [case, …]}, "counts": {kind: n}}}``: every case found is counted;
    the ``per_kind`` most severe of each kind (ties by pair id) are kept for the refiner."""
    scores = reliability.get("scores")
    if scores is None:
        scores = pd.DataFrame(reliability.get("items") or [],
                              columns=["who", "criterion", "pair_id", "score_as_shown", "score"])
    by_id = {p.id: p for p in pairs}
    out: dict[str, dict[str, Any]] = {}
    for cid in criterion_ids:
        rows = _pair_rows(scores, cid, margin, unstable_spread)
        if adversarial:
            rows += _attack_rows(adversarial.get("items") or [], cid, float(tau))
            rows += _genuine_rows(adversarial.get("baseline_items") or [], cid, float(tau))
        counts = Counter(r["kind"] for r in rows)
        cases: dict[str, list[dict[str, Any]]] = {}
        for kind in KINDS:
            chosen = sorted((r for r in rows if r["kind"] == kind),
                            key=lambda r: (-float(r["severity"]), str(r["pair_id"]), str(r.get("strategy") or "")))
            cases[kind] = [_case(r, by_id.get(r["pair_id"]), max_chars) for r in chosen[:per_kind]]
        out[cid] = {"cases": cases, "counts": {k: int(counts.get(k, 0)) for k in KINDS}}
    return out


def _case(row: dict[str, Any], pair: Pair | None, n: int) -> dict[str, Any]:
    case = {k: v for k, v in row.items() if k not in ("severity",) and v is not None}
    if pair is not None:
        case["prompt"] = _clip(pair.prompt, n // 2)
        if row["origin"] == "preference":
            case["chosen"] = _clip(pair.chosen, n)
            case["rejected"] = _clip(pair.rejected, n)
    if "response" in case:
        case["response"] = _clip(case["response"], n)
    return case


def render_packet(packet: dict[str, Any]) -> str:
    """The packet as the refiner reads it: counts, then the kept cases by kind."""
    lines = ["Counts: " + ", ".join(f"{k} {v}" for k, v in packet["counts"].items())]
    for kind, cases in packet["cases"].items():
        if not cases:
            continue
        lines.append(f"\n## {kind.replace('_', ' ')} ({packet['counts'][kind]} found, {len(cases)} shown)")
        for c in cases:
            if c["origin"] == "preference":
                lines.append(f"- [preference pair] panel mean score for the preferred response {c['panel_mean']}/10 "
                             f"(spread {c['panel_spread']:g}); prompt: {c.get('prompt', '')}\n"
                             f"  preferred: {c.get('chosen', '')}\n  not preferred: {c.get('rejected', '')}")
            else:
                what = f"attack ({c.get('strategy')})" if c["origin"] == "adversarial" else "genuine response"
                lines.append(f"- [{what}] judge score {c['score']:g}/10, verifier {c.get('verdict') or 'not asked'}; "
                             f"prompt: {c.get('prompt', '')}\n  response: {c.get('response', '')}")
    return "\n".join(lines)


def plan_subsets(packet: dict[str, Any], subsets: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """``subsets`` ordered for this packet: operators that answer its failures first (affinity × count),
    singletons and compositions interleaved. A fixed order, so n candidates are a prefix of n + 1."""
    weight = Counter()
    for kind, table in _AFFINITY.items():
        for op, w in table.items():
            weight[op] += w * packet["counts"].get(kind, 0)
    rank = {op: (-weight[op], i) for i, op in enumerate(OPERATOR_NAMES)}

    def key(s: tuple[str, ...]) -> tuple:
        return (sorted(rank[o] for o in s), s)

    singles = sorted((s for s in subsets if len(s) == 1), key=key)
    multi = sorted((s for s in subsets if len(s) > 1), key=lambda s: (sum(rank[o][0] for o in s) / len(s), key(s)))
    out: list[tuple[str, ...]] = []
    for i in range(max(len(singles), len(multi))):
        out += [x[i] for x in (singles, multi) if i < len(x)]
    return out
