"""Figures of the align stage: DPO step curves per policy, and win rates with their intervals (Fig. 3's bars)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rubriclab.align._evaluate import REGIME_LABELS
from rubriclab.atomic import save_figure


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def curves_figure(history: pd.DataFrame, path: Path) -> Path:
    """Loss, reward margin and reward accuracy by step, one line per policy."""
    plt = _plt()
    keys = [k for k in ("loss", "rewards/margins", "rewards/accuracies") if k in history]
    fig, axes = plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 3.2), squeeze=False)
    for ax, key in zip(axes[0], keys):
        for name, g in history.groupby("policy", sort=False):
            ax.plot(g["step"], g[key], marker="o", ms=3, label=name)
        ax.set_xlabel("step (one batch each)")
        ax.set_title(key)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path


def win_rate_figure(rates: pd.DataFrame, path: Path) -> Path:
    """One panel per source (third-party judge, reward): bars = win rate of the left policy per
    ``<eval set>@<regime>``, grouped by comparison, with the interval as error bars and n under each bar. A cell
    without a win rate (nothing judged) has no bar, only a note: a 0-height bar would read as a 0% win rate."""
    plt = _plt()
    sources = list(dict.fromkeys(rates["source"]))
    fig, axes = plt.subplots(len(sources), 1, figsize=(10, 3.3 * len(sources)), squeeze=False)
    for ax, source in zip(axes[:, 0], sources):
        g = rates[rates["source"] == source].copy()
        g["column"] = g["domain"] + "@" + g["regime"].map(lambda r: REGIME_LABELS.get(r, r))
        columns = list(dict.fromkeys(g["column"]))
        comps = list(dict.fromkeys(g["comparison"]))
        width = 0.8 / max(len(comps), 1)
        for i, comp in enumerate(comps):
            part = g[g["comparison"] == comp].set_index("column").reindex(columns)
            x = np.arange(len(columns)) + (i - (len(comps) - 1) / 2) * width
            _bars(ax, x, part, width, comp)
        ax.axhline(0.5, color="grey", lw=0.8, ls="--")
        ax.set_xticks(np.arange(len(columns)), columns)
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("win rate of the left policy")
        ax.set_title(f"{source}: {_interval(g)}; {_tie_rule(g)}", fontsize=9)
        ax.legend(fontsize=7, ncol=len(comps))
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path


def _bars(ax: Any, x: np.ndarray, part: pd.DataFrame, width: float, label: str) -> None:
    """Bars with error bars where there is a win rate; elsewhere a vertical "no win rate" note at the bar's place."""
    est = part["estimate"].to_numpy(dtype=float)
    have = np.isfinite(est)
    err = np.vstack([est - part["low"].to_numpy(dtype=float), part["high"].to_numpy(dtype=float) - est])
    ci = np.isfinite(err).all(axis=0)
    ax.bar(x[have], est[have], width, yerr=np.where(ci, err, 0.0)[:, have], capsize=2, label=label)
    n = part["n"].fillna(0).astype(int).to_numpy()
    for xi, ni, ok, e, has_ci in zip(x, n, have, est, ci):
        if ok:  # above the bar, in a dark colour: a 0% bar has no height to write on
            ax.text(xi, e + 0.02, f"n={ni}" + ("" if has_ci else ", no CI"), ha="center", va="bottom", fontsize=6,
                    rotation=90, color="black")
        else:
            ax.text(xi, 0.02, "no win rate (n=0)", ha="center", va="bottom", fontsize=6, rotation=90, color="grey")


def _interval(g: pd.DataFrame) -> str:
    return str(g["interval"].iloc[0]) if len(g) and "interval" in g else ""


def _tie_rule(g: pd.DataFrame) -> str:
    """The tie credit the win rates were computed with, as recorded in the rates (not assumed)."""
    credits = sorted(set(g["tie_credit"].dropna())) if "tie_credit" in g else []
    if not credits:
        return "tie credit not recorded"
    return "ties count " + " / ".join(f"{c:g}" for c in credits)
