"""What the recorded stage reports: ``metrics/recorded/<name>.json`` (``stage_metrics``) and the terminal lines of a
run (``summary_lines``)."""

from __future__ import annotations

from typing import Any

from rubriclab.recorded._analysis import RecordedAnalysis
from rubriclab.recorded._records import RecordedSet

SUMMARY_METRICS = ("accuracy", "accuracy_original", "accuracy_swapped", "both_correct", "positional_agreement",
                   "first_position_rate", "kappa", "macro_f1")


def stage_metrics(rs: RecordedSet, analysis: RecordedAnalysis, publisher: dict[str, Any] | None) -> dict[str, Any]:
    """What ``metrics/recorded/<name>.json`` holds: counts, per judge × condition the headline metrics with their
    interval bounds and n, agreement, the publisher check's tally, and model_calls = 0."""
    cells: dict[str, Any] = {}
    for c in analysis.cells:
        row: dict[str, Any] = {"n_pairs": c["n_pairs"], "n_none": c["n_none"], "n_tie": c["n_tie"]}
        for m in SUMMARY_METRICS:
            e = c["metrics"].get(m) or {}
            row[m] = e.get("value")
            if e.get("low") is not None:
                row[f"{m}_low"], row[f"{m}_high"] = e["low"], e["high"]
        cells.setdefault(c["judge"], {})[c["condition"]] = row
    out: dict[str, Any] = {"source": rs.name, "format": rs.format, "model_calls": 0, "counts": analysis.counts,
                           "cells": cells,
                           "comparisons": {"n": len(analysis.comparisons),
                                           "differences": sum(r.get("label") == "difference"
                                                              for r in analysis.comparisons)},
                           "contrasts": {f"{r['judge']} · {r['contrast']} · {r['metric']}": {
                               k: r.get(k) for k in ("diff", "low", "high", "p_adjusted", "mde", "n_pairs")}
                               for r in analysis.contrasts},
                           "judge_alpha": {r["condition"]: r["krippendorff_alpha"]["value"]
                                           for r in analysis.judge_agreement}}
    if analysis.leaderboard:  # per judge and model: the publishers' rates with their intervals
        out["leaderboard"] = {f"{r['annotator']} · {r['model']}": {
            "win_rate": r["win_rate"], "win_rate_low": r["win_rate_ci"]["low"], "win_rate_high": r["win_rate_ci"]["high"],
            "discrete_win_rate": r["discrete_win_rate"], "n_total": r["n_total"],
            "length_controlled_winrate": r["length_controlled_winrate"]} for r in analysis.leaderboard}
        out["judges_compared"] = {f"{c['a']} vs {c['b']}": {
            "spearman": (c.get("spearman") or {}).get("value"), "kendall": (c.get("kendall") or {}).get("value"),
            "swapped_pairs": len((c.get("reversals") or {}).get("pairs", [])),
            "supported_reversals": sum(p["supported"] for p in (c.get("reversals") or {}).get("pairs", []))}
            for c in analysis.judges_compared}
    if analysis.annotator_agreement:
        a = analysis.annotator_agreement
        out["annotator_alpha"] = a["krippendorff_alpha"]["value"]
        out["annotator_fleiss_kappa"] = a["fleiss_kappa"]["value"]
    if publisher:
        rows = publisher["rows"]
        if publisher.get("metrics"):  # a check that states its own headline figures
            out["publisher_check"] = publisher["metrics"]
        elif "match" in (rows[0] if rows else {}):
            checked = [r for r in rows if r["match"] is not None]  # a row with nothing published to match is no figure
            out["publisher_check"] = {"figures": len(checked), "reproduced": sum(bool(r["match"]) for r in checked)}
        else:
            out["publisher_check"] = {f"{r['metric']} ({r['convention']})" if r.get("convention") else r["metric"]:
                                      r["ratio"] for r in rows}
    return out


def summary_lines(res: dict[str, Any]) -> list[str]:
    """A few lines for the terminal: accuracy per judge × condition and the publisher check."""
    a: RecordedAnalysis = res["analysis"]
    lines = [f"{a.source['name']}: {a.counts['pairs']} pairs, {a.counts['judgments']} judgments "
             f"({a.counts['verdict_none']} none), {len(a.cells)} judge × condition cells, 0 model calls"]
    for c in a.cells:
        e = c["metrics"]["accuracy"]
        if e.get("value") is not None:
            ci = f" [{e['low']:.3f}, {e['high']:.3f}]" if e.get("low") is not None else ""
            lines.append(f"  {c['judge']:<16} {c['condition']:<26} accuracy {e['value']:.3f}{ci} n={e['n']}")
    for r in a.leaderboard:
        ci = r["win_rate_ci"]
        lines.append(f"  {r['annotator']:<32} {r['model']:<22} win rate {r['win_rate']:6.2f}% [{ci['low']:.2f}, "
                     f"{ci['high']:.2f}] n={r['n_total']} (vs {r['baseline']})")
    if res.get("publisher"):
        lines.append(res["publisher"]["summary"])
    return lines
