"""Figures the stages do not draw themselves: from the audit card, applicability in vs out of domain and
reliability vs adversarial robustness per rubric source; from a recorded-judges card, accuracy per condition and
judge; each point with its interval."""

from __future__ import annotations

import io
import math
from typing import Any


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _cell(card: dict[str, Any], source: str, metric: str) -> tuple[float, float, float] | None:
    m = (card.get(source) or {}).get(metric)
    if not isinstance(m, dict):
        return None
    v = m.get("value", m.get("estimate"))
    if v is None or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
        return None
    lo, hi = m.get("low"), m.get("high")
    lo = float(lo) if isinstance(lo, (int, float)) and math.isfinite(float(lo)) else float(v)
    hi = float(hi) if isinstance(hi, (int, float)) and math.isfinite(float(hi)) else float(v)
    return float(v), lo, hi


def card_scatter(card: dict[str, Any], x: str, y: str, xlabel: str, ylabel: str, title: str,
                 diagonal: bool = False) -> tuple[bytes | None, list[str]]:
    """PNG bytes of ``y`` against ``x`` per source (error bars = the card's intervals), and the sources left out
    (a metric the card does not have for them)."""
    points, missing = [], []
    for source in card:
        a, b = _cell(card, source, x), _cell(card, source, y)
        if a is None or b is None:
            missing.append(source)
        else:
            points.append((source, a, b))
    if not points:
        return None, missing
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.6, 4.2))
    for source, (xv, xl, xh), (yv, yl, yh) in points:
        ax.errorbar([xv], [yv], xerr=[[xv - xl], [xh - xv]], yerr=[[yv - yl], [yh - yv]], fmt="o", capsize=3,
                    label=source)
    if diagonal:
        lo = min(min(p[1][1], p[2][1]) for p in points)
        hi = max(max(p[1][2], p[2][2]) for p in points)
        ax.plot([lo, hi], [lo, hi], color="grey", lw=0.8, ls="--")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue(), missing


def accuracy_by_condition(cells: list[dict[str, Any]], level: float = 0.95,
                          metric: str = "accuracy") -> tuple[bytes | None, list[str]]:
    """PNG bytes of a recorded card's ``metric`` per condition (x) and judge (one series each, error bars = the
    card's intervals), and the ``judge · condition`` cells left out (no value)."""
    points: dict[str, dict[str, tuple[float, float, float]]] = {}
    missing = []
    for c in cells:
        v = _cell({"x": c.get("metrics") or {}}, "x", metric)
        if v is None:
            missing.append(f"{c['judge']} · {c['condition']}")
        else:
            points.setdefault(c["judge"], {})[c["condition"]] = v
    if not points:
        return None, missing
    conditions = sorted({cond for per in points.values() for cond in per})
    judges = sorted(points)
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(5.6, 0.6 * len(conditions) + 2.5), 4.4))
    width = 0.7 / max(len(judges), 1)
    for k, judge in enumerate(judges):
        xs, ys, lo, hi = [], [], [], []
        for i, cond in enumerate(conditions):
            if cond in points[judge]:
                v, low, high = points[judge][cond]
                xs.append(i - 0.35 + width * (k + 0.5))
                ys.append(v)
                lo.append(v - low)
                hi.append(high - v)
        ax.errorbar(xs, ys, yerr=[lo, hi], fmt="o", ms=4, capsize=2, lw=1, label=judge)
    ax.set_xlim(-0.6, len(conditions) - 0.4)
    ax.set_xticks(range(len(conditions)))
    ax.set_xticklabels(conditions, rotation=40 if len(conditions) > 3 else 0, ha="right" if len(conditions) > 3
                       else "center", fontsize=8)
    ax.set_ylabel(f"{metric.replace('_', ' ')} ({level:.0%} interval)")
    ax.set_ylim(0.0, 1.0)
    ax.grid(axis="y", lw=0.3)
    ax.legend(fontsize=7, ncol=min(len(judges), 6), loc="lower left")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue(), missing


def judges_leaderboards(leaderboard: list[dict[str, Any]], compared: dict[str, Any]) -> bytes | None:
    """PNG bytes of two judges' leaderboards side by side: each model's win rate (with its interval) under the
    first judge (left) and the second (right), each judge on its own axis (their baselines may differ), and each
    judge's ranking in the title (a pair in another order is a reversal)."""
    a, b = compared["a"], compared["b"]
    rows = {(r["annotator"], r["model"]): r for r in leaderboard}
    models = [m for m in compared.get("models", []) if (a, m) in rows and (b, m) in rows]
    if len(models) < 2:
        return None
    plt = _plt()
    fig, (left, right) = plt.subplots(1, 2, figsize=(7.2, 3.8), sharey=False)
    for ax, judge in ((left, a), (right, b)):
        for i, m in enumerate(models):
            r = rows[(judge, m)]
            ci = r["win_rate_ci"]
            ax.errorbar([i], [r["win_rate"]], yerr=[[r["win_rate"] - ci["low"]], [ci["high"] - r["win_rate"]]],
                        fmt="o", capsize=3)
        ax.set_xticks(range(len(models)), models, rotation=30, ha="right", fontsize=7)
        ax.set_title(f"{judge}\n(vs {', '.join(sorted({rows[(judge, m)]['baseline'] for m in models}))})", fontsize=8)
        ax.set_ylabel("win rate (%)", fontsize=8)
    order_a = sorted(models, key=lambda m: -rows[(a, m)]["win_rate"])
    order_b = sorted(models, key=lambda m: -rows[(b, m)]["win_rate"])
    fig.suptitle(f"ranking under {a}: {' > '.join(order_a)}\nranking under {b}: {' > '.join(order_b)}", fontsize=7)
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()
