"""Figures the stages do not draw themselves: from the audit card, applicability in vs out of domain and
reliability vs adversarial robustness per rubric source, each point with its interval."""

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
