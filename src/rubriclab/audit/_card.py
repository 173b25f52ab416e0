"""The audit card: one table per (dataset, rubric source) with every metric, its interval (method, level,
unit) and its n, and a cross-source table in the shape of PReMISE's Table 1.

"Best" marks follow the paired comparisons, never the point estimates alone: ★ marks the best source of
a column only when the paired comparison found it different from every other source; otherwise the
best and every source indistinguishable from it are marked ≈ (tied for best). Columns without a paired
comparison (their criteria differ between sources, so items are not shared) get no mark.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from rubriclab.audit._context import interval_label

# column key -> label, in table order
COLUMNS: dict[str, str] = {
    "struct": "Struct (/5)", "alpha": "α", "flip_rate": "Flip", "paraphrase_rho": "Para ρ", "app_in": "App_in",
    "app_out": "App_out", "delta_app": "ΔApp", "t_per_p": "T/p", "effdim": "EffDim", "effdim_ratio": "EffDim/K",
    "mean_abs_rho": "mean |ρ|", "bt_cv_accuracy": "BT-CV acc", "bt_weight_entropy": "BT H",
    "acc_direct": "Acc direct", "decided_rate_direct": "Decided direct", "acc_per_rubric": "Acc per-rubric",
    "decided_rate_per_rubric": "Decided per-rubric", "first_position_rate_direct": "1st-pos rate",
    "swap_flip_rate_direct": "Swap-flip", "fool_rate": "Fool", "confirmation_rate": "Confirm", "vfr": "VFR",
    "leakage": "Prior leak", "injection_rate": "Injection",
}
# columns with a paired comparison between sources: column -> (comparison metric, template, +1 when higher
# is better / -1 when lower is); only these can carry a mark
COMPARED: dict[str, tuple[str, str | None, int]] = {
    "acc_direct": ("accuracy", "direct", 1), "acc_per_rubric": ("accuracy", "per_rubric", 1),
    "flip_rate": ("flip_rate", None, -1), "vfr": ("vfr", None, -1), "injection_rate": ("injection_rate", None, -1),
}
# columns whose value may stand without an interval for a stated reason (said in the notes column)
EXPLAIN_NO_INTERVAL = frozenset({"leakage"})
BEST, TIED = "★", "≈"
# A judge whose first-position rate is confidently beyond 0.5 ± this margin (its whole interval) mostly names a
# position, not a response: its accuracy then mirrors how often the labelled winner was shown first.
POSITION_MARGIN = 0.25
POSITION_DRIVEN = "(position-driven)"
LEGEND = (f"{BEST} = best, and different from every other source in the paired comparison (BH-adjusted); "
          f"{TIED} = tied for best: the paired comparison found no difference from the best. Marks only in "
          "columns with a paired comparison (" + ", ".join(COLUMNS[c] for c in COMPARED) + "); elsewhere "
          f"the sources' criteria differ, so compare intervals instead. {POSITION_DRIVEN}: the judge's "
          f"first-position rate interval lies wholly outside 0.5 ± {POSITION_MARGIN}, so that accuracy "
          "reflects the presentation order more than the responses (the notes give the rate and the swap-flip "
          "rate).")


def _value(entry: Any) -> float | None:
    v = entry.get("value") if isinstance(entry, dict) else entry
    if v is None or (isinstance(v, float) and math.isnan(v)) or isinstance(v, bool):
        return None
    return float(v) if isinstance(v, (int, float)) else None


def _comparison(comparisons: list[dict[str, Any]], metric: str, template: str | None, a: str,
                b: str) -> dict[str, Any] | None:
    for row in comparisons:
        if row.get("metric") == metric and (row.get("template") or None) == template and {row.get("a"), row.get("b")} == {a, b}:
            return row
    return None


def best_sources(card: dict[str, dict[str, Any]], comparisons: list[dict[str, Any]] | None = None
                 ) -> dict[str, dict[str, str]]:
    """Per column, {source: ★ or ≈} as the paired comparisons support (see the module docstring)."""
    out: dict[str, dict[str, str]] = {}
    for key, (metric, template, sign) in COMPARED.items():
        vals = {src: _value(m.get(key)) for src, m in card.items()}
        vals = {s: v for s, v in vals.items() if v is not None}
        if len(vals) < 2:
            continue
        best = max(sorted(vals), key=lambda s: sign * vals[s])
        tied, supported = [best], True
        for other in sorted(vals):
            if other == best:
                continue
            row = _comparison(comparisons or [], metric, template, best, other)
            differs = row is not None and row.get("label") == "difference" and row.get("diff") is not None
            if differs:
                # the difference must favour the best on the compared (shared) items
                differs = sign * (row["diff"] if row["a"] == best else -row["diff"]) > 0
            if not differs:
                supported = False
                if row is None or not str(row.get("label", "")).startswith("difference"):
                    tied.append(other)
        out[key] = {best: BEST} if supported else dict.fromkeys(tied, TIED)
    return out


def _cell(entry: Any) -> str | None:
    v = _value(entry)
    if v is None:
        return None
    text = f"{v:.3f}" if not float(v).is_integer() or isinstance(entry, dict) else f"{int(v)}"
    if isinstance(entry, dict) and entry.get("low") is not None and entry.get("high") is not None:
        if entry["low"] == entry["high"]:  # a point bootstrap distribution: "[0.000, 0.000]" would read as a CI
            text += " (no interval: every resample gives the same value)"
        else:
            text += f" [{entry['low']:.3f}, {entry['high']:.3f}]"
    if isinstance(entry, dict) and entry.get("n") is not None:
        text += f" n={entry['n']}"
    return text


def position_driven(metrics: dict[str, Any], template: str) -> str | None:
    """Why the accuracy under ``template`` is position-driven (see ``POSITION_MARGIN``), or None."""
    rate = metrics.get(f"first_position_rate_{template}")
    if not isinstance(rate, dict) or rate.get("low") is None or rate.get("high") is None:
        return None
    if 0.5 - POSITION_MARGIN <= rate["low"] and rate["high"] <= 0.5 + POSITION_MARGIN:
        return None
    if rate["low"] <= 0.5 + POSITION_MARGIN and rate["high"] >= 0.5 - POSITION_MARGIN:
        return None
    flip = _cell(metrics.get(f"swap_flip_rate_{template}")) or "not measured"
    return (f"the judge named the first position in {_cell(rate)} of its decided judgments (beyond 0.5 ± "
            f"{POSITION_MARGIN}): this accuracy mostly mirrors the presentation order; swap-flip {flip}")


def missing_reason(entry: Any) -> str:
    """Why a cell is empty, in words."""
    if isinstance(entry, dict):
        return str(entry.get("reason") or entry.get("degenerate") or "no value (no reason recorded)")
    return "not measured (its axis was not selected)"


def cross_source_table(card: dict[str, dict[str, Any]], comparisons: list[dict[str, Any]] | None = None
                       ) -> pd.DataFrame:
    """Rows = rubric sources; cells "value [low, high] n=…" with ★/≈ marks (see ``best_sources``); a
    ``notes`` column says why each empty cell is empty."""
    marks = best_sources(card, comparisons)
    cols = [k for k in COLUMNS if any(k in m for m in card.values())]
    rows = []
    for src, m in card.items():
        row: dict[str, Any] = {"source": src, "K": m.get("K", "—") if src != "no_rubric" else "—"}
        notes = []
        if m.get("status"):
            notes.append(m["status"])
        for key in cols:
            text = _cell(m.get(key))
            if text is None:
                row[COLUMNS[key]] = "—"
                # a not-audited source says why once; the baseline explains the columns it has no part in
                if not m.get("status") and not (src == "no_rubric" and key not in m):
                    notes.append(f"{COLUMNS[key]}: {missing_reason(m.get(key))}")
                continue
            mark = marks.get(key, {}).get(src)
            row[COLUMNS[key]] = f"{mark} {text}" if mark else text
            why = position_driven(m, key.removeprefix("acc_")) if key.startswith("acc_") else None
            if why:
                row[COLUMNS[key]] += f" {POSITION_DRIVEN}"
                notes.append(f"{COLUMNS[key]}: {why}")
            entry = m.get(key)
            alt = entry.get("at_other_tie_credit") if isinstance(entry, dict) else None
            if alt:  # ties are common here: the other tie rule's value beside the card's
                notes.append(f"{COLUMNS[key]}: {alt['value']:.3f} with ties credited {alt['tie_credit']:g} "
                             f"({entry.get('n_ties')} ties, > 5% of the judged pairs)")
            if key in EXPLAIN_NO_INTERVAL and isinstance(entry, dict) and entry.get("low") is None \
                    and entry.get("reason"):
                notes.append(f"{COLUMNS[key]}: {entry['reason']}")
        if src == "no_rubric":
            notes.insert(0, "baseline without a rubric: only the direct-template columns apply")
        row["notes"] = "; ".join(notes)
        rows.append(row)
    return pd.DataFrame(rows)


def interval_legend(card: dict[str, dict[str, Any]]) -> list[tuple[str, str]]:
    """(column label, what its intervals are) for every column of the cross-source table."""
    out = []
    for key, label in COLUMNS.items():
        kinds = sorted({interval_label(e.get("ci")) for m in card.values() for e in [m.get(key)]
                        if isinstance(e, dict) and e.get("ci")})
        if kinds:
            out.append((label, "; ".join(kinds)))
        elif any(isinstance(m.get(key), dict) and _value(m.get(key)) is not None for m in card.values()):
            out.append((label, "no interval (a count or rate without resampling)"))
    return out


def flat_metrics(card: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``<source>.<metric>[.low|.high|.n]`` numbers, for metrics.json / MLflow."""
    flat: dict[str, Any] = {}
    for src, m in card.items():
        for key, e in m.items():
            if isinstance(e, dict):
                for part in ("value", "low", "high", "n"):
                    if e.get(part) is not None and not isinstance(e.get(part), bool):
                        flat[f"{src}.{key}" + ("" if part == "value" else f".{part}")] = e[part]
            elif isinstance(e, (int, float)) and not isinstance(e, bool):
                flat[f"{src}.{key}"] = e
    return flat


def numeric_table(card: dict[str, dict[str, Any]], comparisons: list[dict[str, Any]] | None = None) -> pd.DataFrame:
    """Long CSV form: source, metric, value, low, high, interval (what it is), n, mark (★/≈), note (why a
    value is missing or degenerate)."""
    marks = best_sources(card, comparisons)
    rows = []
    for src, m in card.items():
        for key, e in m.items():
            if isinstance(e, dict) and "value" in e:
                rows.append({"source": src, "metric": key, "value": e.get("value"), "low": e.get("low"),
                             "high": e.get("high"),
                             "interval": interval_label(e.get("ci")) if e.get("ci") else "none (not resampled)",
                             "n": e.get("n"), "mark": marks.get(key, {}).get(src, ""),
                             "note": (e.get("reason") or e.get("degenerate") or "") if e.get("value") is None
                             or e.get("degenerate") else ""})
            elif isinstance(e, (int, float)) and not isinstance(e, bool):
                rows.append({"source": src, "metric": key, "value": e, "low": None, "high": None, "interval": "count",
                             "n": None, "mark": "", "note": ""})
    return pd.DataFrame(rows, columns=["source", "metric", "value", "low", "high", "interval", "n", "mark", "note"])
