"""The audit card: one table per (dataset, rubric source) with every metric, its CI and its n, and a
cross-source table in the shape of PReMISE's Table 1 with the best value per column marked."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

# column key -> (label, which value is best: "max" | "min" | "half" (closest to 0.5) | None)
COLUMNS: dict[str, tuple[str, str | None]] = {
    "struct": ("Struct (/5)", "max"),
    "alpha": ("α", "max"),
    "flip_rate": ("Flip", "min"),
    "paraphrase_rho": ("Para ρ", "max"),
    "app_in": ("App_in", "max"),
    "app_out": ("App_out", None),
    "delta_app": ("ΔApp", "max"),
    "t_per_p": ("T/p", None),
    "effdim": ("EffDim", "max"),
    "effdim_ratio": ("EffDim/K", "max"),
    "mean_abs_rho": ("mean |ρ|", "min"),
    "bt_cv_accuracy": ("BT-CV acc", "max"),
    "bt_weight_entropy": ("BT H", "max"),
    "acc_direct": ("Acc direct", "max"),
    "acc_per_rubric": ("Acc per-rubric", "max"),
    "first_position_rate_direct": ("1st-pos rate", "half"),
    "swap_flip_rate_direct": ("Swap-flip", "min"),
    "fool_rate": ("Fool", "min"),
    "confirmation_rate": ("Confirm", None),
    "vfr": ("VFR", "min"),
}


def _value(entry: Any) -> float | None:
    if isinstance(entry, dict):
        v = entry.get("value")
    else:
        v = entry
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return float(v) if isinstance(v, (int, float)) else None


def best_sources(card: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """Per column, the source(s) holding the best value (ties all marked)."""
    out: dict[str, list[str]] = {}
    for key, (_, rule) in COLUMNS.items():
        vals = {src: _value(m.get(key)) for src, m in card.items()}
        vals = {s: v for s, v in vals.items() if v is not None}
        if not rule or len(vals) < 2:
            continue
        score = {"max": lambda v: v, "min": lambda v: -v, "half": lambda v: -abs(v - 0.5)}[rule]
        top = max(score(v) for v in vals.values())
        out[key] = sorted(s for s, v in vals.items() if math.isclose(score(v), top, abs_tol=1e-12))
    return out


def cross_source_table(card: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """Rows = rubric sources; cells "value [low, high] n=…", best per column marked with ★."""
    best = best_sources(card)
    cols = [k for k in COLUMNS if any(k in m for m in card.values())]
    rows = []
    for src, m in card.items():
        row = {"source": src}
        for key in cols:
            e = m.get(key)
            v = _value(e)
            if v is None:
                row[COLUMNS[key][0]] = "—"
                continue
            cell = f"{v:.3f}"
            if isinstance(e, dict) and e.get("low") is not None and e.get("high") is not None:
                cell += f" [{e['low']:.3f}, {e['high']:.3f}]"
            if isinstance(e, dict) and e.get("n") is not None:
                cell += f" n={e['n']}"
            if src in best.get(key, []):
                cell = "★ " + cell
            row[COLUMNS[key][0]] = cell
        rows.append(row)
    return pd.DataFrame(rows)


def flat_metrics(card: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``<source>.<metric>[.low|.high|.n]`` numbers, for metrics.json / MLflow."""
    flat: dict[str, Any] = {}
    for src, m in card.items():
        for key, e in m.items():
            if isinstance(e, dict):
                for part in ("value", "low", "high", "n"):
                    if e.get(part) is not None:
                        flat[f"{src}.{key}" + ("" if part == "value" else f".{part}")] = e[part]
            elif isinstance(e, (int, float)):
                flat[f"{src}.{key}"] = e
    return flat


def numeric_table(card: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """Long CSV form: source, metric, value, low, high, n, best, note (why a value is missing or degenerate)."""
    best = best_sources(card)
    rows = []
    for src, m in card.items():
        for key, e in m.items():
            if isinstance(e, dict) and "value" in e:
                rows.append({"source": src, "metric": key, "value": e.get("value"), "low": e.get("low"),
                             "high": e.get("high"), "n": e.get("n"), "best": src in best.get(key, []),
                             "note": e.get("reason") or e.get("degenerate") or ""})
            elif isinstance(e, (int, float)):
                rows.append({"source": src, "metric": key, "value": e, "low": None, "high": None, "n": None,
                             "best": False, "note": ""})
    return pd.DataFrame(rows)


def to_markdown(table: pd.DataFrame) -> str:
    """A GitHub-flavoured markdown table (no extra dependency)."""

    def cell(v: Any) -> str:
        text = "—" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)
        return text.replace("|", "\\|")  # a literal pipe (e.g. "mean |ρ|") must not split the cell

    cols = list(table.columns)
    lines = ["| " + " | ".join(cell(c) for c in cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for _, row in table.iterrows():
        lines.append("| " + " | ".join(cell(row[c]) for c in cols) + " |")
    return "\n".join(lines)
