"""The audit of recorded judgments: per judge × condition metrics, paired comparisons, agreement among judges and
among annotators, majority-of-judges accuracy and surface biases — every estimate with its interval's method,
level and n, ties and no-verdicts counted.

Definitions (per judge × condition; "pairs" are the pairs with a label unless said otherwise):

* **credit** of a judgment: 1 if its choice equals the label, ``tie_credit`` (default 0) if it is a tie and the
  label is not, else 0 — a reply that is no verdict (``none``) is a wrong answer, in every denominator.
* **accuracy_<order>**: mean credit over the judgments in that order; **accuracy**: per pair the mean credit over
  the orders it was judged in, then the mean over pairs (= the average of the two orders' accuracies when every
  pair has both).
* **both_correct**: pairs whose choice equals the label in both orders / pairs judged in both orders.
* **positional_agreement**: pairs (labelled or not) whose two orders gave the same choice, not ``none`` / pairs
  judged in both orders. **first_position_rate**: ``first`` verdicts / (``first`` + ``second``) verdicts.
* **kappa**: Cohen's κ between choice and label over the judgments of both orders (``none`` a category of its
  own); **kappa_<order>** per order. **macro_precision / recall / f1**: over the label classes present in the
  source (ties a class), a ``none`` counts against the true class.

Intervals: percentile bootstrap resampling pairs (``rubriclab.stats.item_bootstrap``; all judgments of a drawn
pair come along). Paired comparisons: ``rubriclab.stats.paired_bootstrap`` on the pairs both cells judged, BH over
each family (one judge's conditions; one condition's judges), MDE at the Bonferroni level α/m of the family.
Named contrasts (``Settings.contrasts``, or the importer's own: LLMBar's rules = Vanilla − Vanilla_NoRules and own
rubric first = Metrics − Vanilla): the same paired test within each judge, one family per metric over every judge ×
contrast, so the questions a source was set up for are not diluted by every other pair of conditions.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from rubriclab.errors import ConfigError
from rubriclab.recorded._agreement import (
    alpha_from_parts,
    alpha_parts,
    category_counts,
    fleiss_from_parts,
    fleiss_kappa,
    fleiss_parts,
    kappa_batch,
    macro_prf_batch,
    pairwise_agreement,
)
from rubriclab.recorded._boot import additive_bootstrap
from rubriclab.recorded._records import CHOICES, ORDERS, RecordedSet
from rubriclab.stats import bh_adjust, item_bootstrap, krippendorff_alpha, label_comparison, majority_vote, mde_paired
from rubriclab.stats import paired_bootstrap as _paired_bootstrap

CELL_METRICS = ("accuracy", "accuracy_original", "accuracy_swapped", "both_correct", "positional_agreement",
                "first_position_rate", "kappa", "kappa_original", "kappa_swapped", "macro_precision", "macro_recall",
                "macro_f1")
COMPARED = ("accuracy", "positional_agreement")
ORDER_FREE = "pointwise rating: each output scored alone, so presentation order plays no part"
MIN_MAJORITY_JUDGES = 3
_LIST_LINE = re.compile(r"^\s*(?:[-*•+]|\d{1,3}[.)])\s+\S", re.MULTILINE)


@dataclass(frozen=True)
class Settings:
    """How the analysis counts and what its intervals are (``recorded.*`` in params.yaml)."""

    confidence: float = 0.95
    n_boot: int = 2000
    seed: int = 0
    alpha: float = 0.05
    power: float = 0.8
    tie_credit: float = 0.0
    baseline: str | None = None  # within a judge: compare this condition with each other one (None: every pair)
    # named contrasts (name, a, b): Δ = a − b within each judge, one BH family per metric over judges × contrasts
    # (None: the importer's own, e.g. LLMBar's rules and Metrics contrasts; (): none)
    contrasts: tuple[tuple[str, str, str], ...] | None = None
    contrast_judges: tuple[str, ...] | None = None  # the judges the contrasts are drawn for (None: every judge)

    def __post_init__(self) -> None:
        if not 0 < self.confidence < 1 or not 0 < self.alpha < 1 or not 0 < self.power < 1:
            raise ConfigError("recorded: confidence, alpha and power must lie in (0, 1)")
        if self.contrasts is not None:
            object.__setattr__(self, "contrasts", tuple(_contrast(c) for c in self.contrasts))
        if self.contrast_judges is not None:
            object.__setattr__(self, "contrast_judges", tuple(str(j) for j in self.contrast_judges))
        if self.n_boot < 1:
            raise ConfigError(f"recorded.n_boot={self.n_boot}: expected an integer >= 1")
        if not 0 <= self.tie_credit <= 1:
            raise ConfigError(f"recorded.tie_credit={self.tie_credit}: expected a credit in [0, 1]")

    def interval(self, unit: str = "pairs") -> str:
        return f"{100 * self.confidence:g}% percentile bootstrap over {unit} (B={self.n_boot})"


def _contrast(c: Any) -> tuple[str, str, str]:
    """``(name, a, b)`` from a tuple/list of three (or two: named ``a − b``) condition names."""
    items = tuple(str(x) for x in c) if isinstance(c, (list, tuple)) else ()
    if len(items) == 2:
        items = (f"{items[0]} − {items[1]}", *items)
    if len(items) != 3 or items[1] == items[2]:
        raise ConfigError(f"recorded.contrasts: got {c!r}; expected [name, condition a, condition b] (Δ = a − b) "
                          "with two different conditions")
    return items  # type: ignore[return-value]


@dataclass
class RecordedAnalysis:
    """Everything the card shows. ``cells``: one dict per judge × condition, metric -> entry (``entry``);
    the other lists are rows (dicts) of their tables."""

    source: dict[str, Any]
    settings: Settings
    counts: dict[str, Any]
    cells: list[dict[str, Any]] = field(default_factory=list)
    comparisons: list[dict[str, Any]] = field(default_factory=list)
    contrasts: list[dict[str, Any]] = field(default_factory=list)
    judge_agreement: list[dict[str, Any]] = field(default_factory=list)
    annotator_agreement: dict[str, Any] | None = None
    majority: list[dict[str, Any]] = field(default_factory=list)
    biases: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def cell(self, judge: str, condition: str) -> dict[str, Any]:
        for c in self.cells:
            if c["judge"] == judge and c["condition"] == condition:
                return c
        raise KeyError((judge, condition))

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "settings": asdict(self.settings), "counts": self.counts, "cells": self.cells,
                "comparisons": self.comparisons, "contrasts": self.contrasts, "judge_agreement": self.judge_agreement,
                "annotator_agreement": self.annotator_agreement, "majority": self.majority, "biases": self.biases,
                "notes": self.notes}


# -- entries ---------------------------------------------------------------------------------------------------------
def entry(value: float | None, *, n: int, boot: dict[str, Any] | None = None, settings: Settings | None = None,
          unit: str = "pairs", reason: str | None = None, **extra: Any) -> dict[str, Any]:
    """One card entry: value, interval [low, high] with its method, level and resampled unit, n (what the value
    is a share of), and why it is missing when it is."""
    def clean(x: Any) -> float | None:
        return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)

    out: dict[str, Any] = {"value": clean(value), "low": None, "high": None, "n": int(n), "method": None,
                           "level": None, "unit": None, "resamples": None, "reason": reason}
    if boot is not None and settings is not None:
        out.update(low=clean(boot.get("low")), high=clean(boot.get("high")), method="percentile bootstrap",
                   level=settings.confidence, unit=unit, resamples=settings.n_boot, n_units=boot.get("n_items"))
        if boot.get("degenerate"):
            out["interval_note"] = boot["degenerate"]
    if out["value"] is None and out["reason"] is None:
        out["reason"] = "undefined on these data"
    out.update(extra)
    return out


def _missing(reason: str, n: int = 0) -> dict[str, Any]:
    return entry(None, n=n, reason=reason)


def _mean_entry(values: np.ndarray, ids: np.ndarray, s: Settings, reason: str, **extra: Any) -> dict[str, Any]:
    if len(values) == 0:
        return _missing(reason)
    boot = item_bootstrap(values.astype(float), "mean", ids, n_resamples=s.n_boot, confidence=s.confidence,
                          seed=s.seed)
    return entry(boot["estimate"], n=len(values), boot=boot, settings=s, **extra)


def _additive_entry(parts: np.ndarray, fn: Callable[[np.ndarray], np.ndarray], ids: np.ndarray, s: Settings,
                    reason: str, *, unit: str = "pairs", **extra: Any) -> dict[str, Any]:
    if len(ids) == 0:
        return _missing(reason)
    boot = additive_bootstrap(parts, fn, ids, n_resamples=s.n_boot, confidence=s.confidence, seed=s.seed)
    return entry(boot["estimate"], n=len(ids), boot=boot, settings=s, unit=unit, **extra)


# -- the judgments as one frame --------------------------------------------------------------------------------------
def judgments_frame(rs: RecordedSet, tie_credit: float = 0.0) -> pd.DataFrame:
    """``rs.frame()`` with ``credit`` (NaN without a label) and the pair's output lengths and list flags."""
    # a fixed row order, so that the bootstrap draws the same pairs whatever order the importer read them in
    df = rs.frame().sort_values(["judge", "condition", "pair_id", "order"], kind="stable").reset_index(drop=True)
    labels = df["label"]
    choice = df["choice"]
    credit = np.where(choice == labels, 1.0, np.where((choice == "tie") & labels.notna(), tie_credit, 0.0))
    df["credit"] = np.where(labels.isna(), np.nan, credit)
    df["order_free"] = df["meta"].str.contains(r"(?:^|;)mode=rating(?:;|$)", regex=True)
    return df


def _longer(pair: Any) -> str | None:
    a, b = len(pair.output_1), len(pair.output_2)
    if not pair.output_1 or not pair.output_2 or a == b:
        return None
    return "1" if a > b else "2"


def has_list(text: str) -> bool:
    """Whether a response holds a list: at least two lines that start with a bullet or a number."""
    return len(_LIST_LINE.findall(text or "")) >= 2


def _with_list(pair: Any) -> str | None:
    if not pair.output_1 or not pair.output_2:
        return None
    a, b = has_list(pair.output_1), has_list(pair.output_2)
    return None if a == b else ("1" if a else "2")


# -- per cell ------------------------------------------------------------------------------------------------------
def _codes(values: pd.Series, cats: list[str]) -> np.ndarray:
    index = {c: i for i, c in enumerate(cats)}
    return np.array([index[v] for v in values], dtype=np.int64)


def _cell(sub: pd.DataFrame, classes: list[str], s: Settings) -> dict[str, Any]:
    out: dict[str, Any] = {}
    lab = sub[sub["label"].notna()]
    orders = set(sub["order"])
    for order in ORDERS:
        rows = lab[lab["order"] == order]
        out[f"accuracy_{order}"] = _mean_entry(
            rows["credit"].to_numpy(), rows["pair_id"].to_numpy(), s,
            f"no {order}-order judgment of a labelled pair",
            n_none=int((rows["verdict"] == "none").sum()), n_tie=int((rows["verdict"] == "tie").sum()))
    per_pair = lab.groupby("pair_id")["credit"].mean()
    out["accuracy"] = _mean_entry(per_pair.to_numpy(), per_pair.index.to_numpy(), s, "no labelled pair judged",
                                  n_none=int((lab["verdict"] == "none").sum()),
                                  n_tie=int((lab["verdict"] == "tie").sum()), n_judgments=len(lab))
    wide = sub.pivot(index="pair_id", columns="order", values="choice")
    order_free = bool(sub["order_free"].all())
    if set(ORDERS) <= orders:
        wide = wide.dropna(subset=list(ORDERS))
        agree = (wide["original"] == wide["swapped"]) & (wide["original"] != "none")
        out["positional_agreement"] = _mean_entry(agree.to_numpy(float), wide.index.to_numpy(), s, "")
        lw = wide.join(lab.groupby("pair_id")["label"].first(), how="inner")
        both = (lw["original"] == lw["label"]) & (lw["swapped"] == lw["label"])
        out["both_correct"] = _mean_entry(both.to_numpy(float), lw.index.to_numpy(), s, "no labelled pair in both orders")
    else:
        why = f"judged in one order only ({', '.join(sorted(orders))})"
        out["positional_agreement"] = _missing(why)
        out["both_correct"] = _missing(why)
    decided = sub[sub["verdict"].isin(["first", "second"])]
    out["first_position_rate"] = _mean_entry((decided["verdict"] == "first").to_numpy(float),
                                             decided["pair_id"].to_numpy(), s, "no first/second verdict")
    if order_free:  # each output scored alone: the two "orders" are one judgment, position means nothing
        for key in ("positional_agreement", "first_position_rate"):
            out[key] = _missing(ORDER_FREE)
    # κ and macro P/R/F1 from confusion counts (categories: label classes, then tie/none if they occur); a row's
    # confusion part is one-hot, so a replicate's confusion matrix is the sum of its drawn pairs' parts
    cats = list(dict.fromkeys([*classes, *CHOICES]))
    k = len(cats)
    cls = [cats.index(c) for c in classes]

    def kappa(cm: np.ndarray) -> np.ndarray:
        return kappa_batch(cm.reshape(*cm.shape[:-1], k, k))

    def prf(which: str) -> Callable[[np.ndarray], np.ndarray]:
        return lambda cm: macro_prf_batch(cm.reshape(*cm.shape[:-1], k, k), cls)[which]

    for order, rows in (("", lab), *((f"_{o}", lab[lab["order"] == o]) for o in ORDERS)):
        parts = np.zeros((len(rows), k * k))
        parts[np.arange(len(rows)), _codes(rows["label"], cats) * k + _codes(rows["choice"], cats)] = 1.0
        ids = rows["pair_id"].to_numpy()
        why = f"no labelled judgments{order.replace('_', ' in the ')}" + (" order" if order else "")
        out[f"kappa{order}"] = _additive_entry(parts, kappa, ids, s, why)
        if not order:
            for which in ("precision", "recall", "f1"):
                out[f"macro_{which}"] = _additive_entry(parts, prf(which), ids, s, why, classes=list(classes))
    return out


# -- comparisons ---------------------------------------------------------------------------------------------------
def _adjust(rows: list[dict[str, Any]], s: Settings) -> list[dict[str, Any]]:
    p = np.array([np.nan if r.get("p_value") is None else r["p_value"] for r in rows], dtype=float)
    q = bh_adjust(p) if rows else []
    m = int(np.isfinite(p).sum())
    level = s.alpha / max(m, 1)
    for row, qv in zip(rows, q, strict=True):
        se = row.get("se")
        row["mde"] = mde_paired(se, alpha=level, power=s.power) if se is not None and np.isfinite(se) else None
        row["mde_alpha"] = level
        row["family_size"] = m
        as_nan = {k: (np.nan if row.get(k) is None else row[k]) for k in ("low", "high", "se")}
        label = label_comparison({**row, **as_nan, "p_adjusted": qv}, alpha=s.alpha, power=s.power)
        if label.startswith("no detectable difference") and row["mde"] is not None:
            label = f"no detectable difference (MDE={row['mde']:.3g} at α={s.alpha:g}/{m}, power {s.power:g})"
        row["label"] = label
        row["p_adjusted"] = None if not np.isfinite(qv) else float(qv)
    return rows


def _paired_row(va: pd.Series, vb: pd.Series, s: Settings, **fixed: Any) -> dict[str, Any]:
    """One paired comparison (Δ = a − b on the pairs both have), before the family's BH and MDE."""
    common = va.index.intersection(vb.index)
    row: dict[str, Any] = {**fixed, "n_pairs": len(common),
                           "ci": s.interval("pairs").replace("percentile bootstrap", "percentile paired bootstrap"),
                           "p_value": None, "se": None, "low": None, "high": None, "diff": None}
    if len(common) < 2:
        return {**row, "degenerate": "fewer than 2 shared pairs"}
    res = _paired_bootstrap(va.loc[common].to_numpy(float), vb.loc[common].to_numpy(float),
                            n_resamples=s.n_boot, seed=s.seed, confidence=s.confidence)
    return {**row, "mean_a": res["mean_a"], "mean_b": res["mean_b"], "diff": res["diff"], "low": res["low"],
            "high": res["high"], "se": res["se"], "p_value": res["p_value"], "degenerate": res.get("degenerate")}


def _compare(values: dict[str, pd.Series], names: list[tuple[str, str]], family: str, metric: str,
             s: Settings, fixed: dict[str, str]) -> list[dict[str, Any]]:
    rows = [_paired_row(values[a], values[b], s, family=family, metric=metric, **fixed, a=a, b=b) for a, b in names]
    return _adjust(rows, s)


def _per_pair_values(sub: pd.DataFrame, metric: str) -> pd.Series:
    if metric == "accuracy":
        lab = sub[sub["label"].notna()]
        return lab.groupby("pair_id")["credit"].mean()
    wide = sub.pivot(index="pair_id", columns="order", values="choice")
    if not set(ORDERS) <= set(wide.columns) or sub["order_free"].all():
        return pd.Series(dtype=float)
    wide = wide.dropna(subset=list(ORDERS))
    return ((wide["original"] == wide["swapped"]) & (wide["original"] != "none")).astype(float)


def comparisons(df: pd.DataFrame, s: Settings) -> list[dict[str, Any]]:
    """Within each judge (its conditions: each other one against ``baseline``, or every pair) and within each
    condition (every pair of judges), for accuracy and positional agreement; BH per family."""
    out: list[dict[str, Any]] = []
    for metric in COMPARED:
        for judge, g in df.groupby("judge", sort=True):
            values = {c: _per_pair_values(gc, metric) for c, gc in g.groupby("condition", sort=True)}
            values = {c: v for c, v in values.items() if len(v)}
            conds = sorted(values)
            if s.baseline and s.baseline in values:  # Δ = condition − baseline
                names = [(c, s.baseline) for c in conds if c != s.baseline]
            else:
                names = list(combinations(conds, 2))
            if names:
                out += _compare(values, names, f"judge:{judge}", metric, s, {"judge": judge, "condition": None})
        for cond, g in df.groupby("condition", sort=True):
            values = {j: _per_pair_values(gj, metric) for j, gj in g.groupby("judge", sort=True)}
            values = {j: v for j, v in values.items() if len(v)}
            names = list(combinations(sorted(values), 2))
            if names:
                out += _compare(values, names, f"condition:{cond}", metric, s, {"judge": None, "condition": cond})
    return out


def contrasts(df: pd.DataFrame, s: Settings, spec: tuple[tuple[str, str, str], ...],
              judges: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """The named contrasts (``(name, a, b)``: Δ = a − b) within each judge (``judges``, or every judge) that has
    both conditions, for accuracy and positional agreement; one family per metric (every judge × contrast of
    that metric): BH over it, MDE at its Bonferroni level α/m."""
    out: list[dict[str, Any]] = []
    keep = sorted(set(df["judge"])) if judges is None else [j for j in judges if j in set(df["judge"])]
    for metric in COMPARED:
        rows = []
        for judge in keep:
            g = df[df["judge"] == judge]
            for name, a, b in spec:
                if not {a, b} <= set(g["condition"]):
                    continue
                va = _per_pair_values(g[g["condition"] == a], metric)
                vb = _per_pair_values(g[g["condition"] == b], metric)
                if len(va) and len(vb):
                    rows.append(_paired_row(va, vb, s, family=f"contrasts:{metric}", metric=metric, contrast=name,
                                            judge=judge, condition=None, a=a, b=b))
        out += _adjust(rows, s)
    return out


# -- agreement -----------------------------------------------------------------------------------------------------
def rater_agreement(ratings: np.ndarray, unit_pairs: np.ndarray, cats: list[str], s: Settings,
                    unit: str = "pairs") -> dict[str, Any]:
    """Agreement of the rows (raters) of a raters × units matrix of categories (``None``/``none`` missing):
    Krippendorff's α (nominal; the ``krippendorff`` package via ``rubriclab.stats.krippendorff_alpha``), Fleiss' κ
    on the units every rater rated, mean pairwise agreement; intervals resample ``unit_pairs`` (a unit's pair)."""
    r = np.where(np.isin(ratings.astype(object), [None, "none"]), None, ratings.astype(object))
    alpha = krippendorff_alpha(r, level="nominal", value_domain=None)
    counts = category_counts(r, cats)
    d, n_c = alpha_parts(counts)

    def alpha_stat(summed: np.ndarray) -> np.ndarray:
        return alpha_from_parts(summed[..., 0], summed[..., 1:])

    out: dict[str, Any] = {"n_raters": int(r.shape[0]), "n_units": int(r.shape[1])}
    if np.isfinite(alpha["alpha"]):
        boot = additive_bootstrap(np.column_stack([d, n_c]), alpha_stat, unit_pairs, n_resamples=s.n_boot,
                                  confidence=s.confidence, seed=s.seed)
        out["krippendorff_alpha"] = entry(alpha["alpha"], n=alpha["n_pairable_items"], boot=boot, settings=s,
                                          unit=unit, level_of_measurement="nominal")
    else:
        out["krippendorff_alpha"] = _missing(alpha["reason"] or "undefined", alpha["n_pairable_items"])
    full = counts.sum(axis=1) == r.shape[0]
    if full.sum() >= 2 and r.shape[0] >= 2:
        parts = np.column_stack([fleiss_parts(counts[full]), np.ones(int(full.sum()))])
        boot = additive_bootstrap(parts, lambda x: fleiss_from_parts(x[..., :-1], x[..., -1]), unit_pairs[full],
                                  n_resamples=s.n_boot, confidence=s.confidence, seed=s.seed)
        out["fleiss_kappa"] = entry(fleiss_kappa(counts[full]), n=int(full.sum()), boot=boot, settings=s, unit=unit,
                                    n_units_left_out=int((~full).sum()))
    else:
        out["fleiss_kappa"] = _missing("fewer than 2 units rated by every rater", int(full.sum()))
    out["pairwise_agreement"] = entry(pairwise_agreement(r), n=int(r.shape[1]))
    return out


def judge_agreement(df: pd.DataFrame, s: Settings) -> list[dict[str, Any]]:
    """Per condition with ≥ 2 judges: agreement of the judges' choices on the (pair, order) units."""
    rows = []
    for cond, g in df.groupby("condition", sort=True):
        judges = sorted(g["judge"].unique())
        if len(judges) < 2:
            continue
        wide = g.pivot_table(index=["pair_id", "order"], columns="judge", values="choice", aggfunc="first")
        res = rater_agreement(wide[judges].to_numpy(object).T, wide.index.get_level_values(0).to_numpy(),
                              ["1", "2", "tie"], s)
        rows.append({"condition": cond, "judges": judges, **res})
    return rows


def annotator_agreement(rs: RecordedSet, s: Settings) -> dict[str, Any] | None:
    """Agreement among the annotators of the pairs that have at least two labels (None when no pair has)."""
    pairs = [p for p in rs.pairs.values() if len(p.labels) >= 2]
    if not pairs:
        return None
    names = sorted({a for p in pairs for a, _ in p.labels})
    m = np.array([[dict(p.labels).get(a) for p in pairs] for a in names], dtype=object)
    res = rater_agreement(m, np.array([p.id for p in pairs]), ["1", "2", "tie"], s)
    return {"annotators": names, "pairs": len(pairs), "pairs_without_majority": sum(p.label is None for p in pairs),
            **res}


# -- majority of judges, biases ------------------------------------------------------------------------------------
def majority_of_judges(df: pd.DataFrame, s: Settings) -> list[dict[str, Any]]:
    """Per condition with ≥ 3 judges: accuracy of the judges' majority choice per (pair, order) (split votes a
    tie, no vote at all ``none``), against the best single judge on the same pairs."""
    rows = []
    lab = df[df["label"].notna()]
    for cond, g in lab.groupby("condition", sort=True):
        judges = sorted(g["judge"].unique())
        if len(judges) < MIN_MAJORITY_JUDGES:
            continue
        credits = []
        for (pid, _), u in g.groupby(["pair_id", "order"], sort=True):
            votes = [c for c in u["choice"] if c != "none"]
            mv = majority_vote(votes) or "none"
            label = u["label"].iloc[0]
            credits.append((pid, 1.0 if mv == label else (s.tie_credit if mv == "tie" else 0.0)))
        per_pair = pd.DataFrame(credits, columns=["pair_id", "credit"]).groupby("pair_id")["credit"].mean()
        singles = {j: gj.groupby("pair_id")["credit"].mean() for j, gj in g.groupby("judge")}
        best = max(sorted(singles), key=lambda j: singles[j].mean())
        common = per_pair.index.intersection(singles[best].index)
        cmp = _paired_bootstrap(per_pair.loc[common].to_numpy(float), singles[best].loc[common].to_numpy(float),
                                n_resamples=s.n_boot, seed=s.seed, confidence=s.confidence) if len(common) >= 2 else {}
        rows.append({"condition": cond, "judges": judges,
                     "majority_accuracy": _mean_entry(per_pair.to_numpy(), per_pair.index.to_numpy(), s, "no pair"),
                     "best_judge": best, "best_judge_accuracy": float(singles[best].mean()),
                     "diff_vs_best": cmp.get("diff"), "diff_low": cmp.get("low"), "diff_high": cmp.get("high"),
                     "p_value": cmp.get("p_value"), "ci": s.interval("pairs").replace("bootstrap", "paired bootstrap")})
    return rows


def biases(rs: RecordedSet, df: pd.DataFrame, s: Settings) -> list[dict[str, Any]]:
    """Per judge × condition (and for the labels themselves): the probability of preferring the longer response
    (pairs whose outputs differ in length) and the one with a list (pairs where exactly one has one), among
    first/second verdicts."""
    longer = {pid: _longer(p) for pid, p in rs.pairs.items()}
    listed = {pid: _with_list(p) for pid, p in rs.pairs.items()}
    rows = []
    if not any(longer.values()) and not any(listed.values()):
        return rows
    decided = df[df["choice"].isin(["1", "2"])]
    for (judge, cond), g in decided.groupby(["judge", "condition"], sort=True):
        row: dict[str, Any] = {"judge": judge, "condition": cond}
        for name, side in (("prefers_longer", longer), ("prefers_list", listed)):
            sides = g["pair_id"].map(side)
            ok = sides.notna()
            row[name] = _mean_entry((g.loc[ok, "choice"] == sides[ok]).to_numpy(float), g.loc[ok, "pair_id"].to_numpy(),
                                    s, "no pair where the outputs differ in this respect")
        rows.append(row)
    labelled = [(pid, p.label) for pid, p in rs.pairs.items() if p.label in ("1", "2")]
    row = {"judge": "(labels)", "condition": "—"}
    for name, side in (("prefers_longer", longer), ("prefers_list", listed)):
        use = [(pid, lab == side[pid]) for pid, lab in labelled if side[pid]]
        row[name] = _mean_entry(np.array([v for _, v in use], dtype=float), np.array([pid for pid, _ in use]), s,
                                "no labelled pair where the outputs differ in this respect")
    rows.append(row)
    return rows


# -- all together --------------------------------------------------------------------------------------------------
def analyze(rs: RecordedSet, settings: Settings | None = None) -> RecordedAnalysis:
    """The whole audit of a RecordedSet (see the module docstring)."""
    s = settings or Settings()
    df = judgments_frame(rs, s.tie_credit)
    classes = [c for c in ("1", "2", "tie") if any(p.label == c for p in rs.pairs.values())]
    res = RecordedAnalysis(
        source={"name": rs.name, "format": rs.format, "path": rs.path, "provenance": rs.provenance,
                "license": rs.license, "label_rule": rs.label_rule, "judges": rs.judges, "conditions": rs.conditions,
                "classes": classes},
        settings=s, counts=rs.counts(), notes=list(rs.notes))
    for (judge, cond), sub in df.groupby(["judge", "condition"], sort=True):
        cell = _cell(sub, classes, s)
        res.cells.append({"judge": judge, "condition": cond, "n_pairs": int(sub["pair_id"].nunique()),
                          "n_judgments": len(sub), "n_none": int((sub["verdict"] == "none").sum()),
                          "n_tie": int((sub["verdict"] == "tie").sum()),
                          "n_unlabelled_pairs": int(sub.loc[sub["label"].isna(), "pair_id"].nunique()),
                          "metrics": cell})
    res.comparisons = comparisons(df, s)
    spec = s.contrasts if s.contrasts is not None else tuple(rs.extras.get("contrasts") or ())
    if spec:
        res.source["contrasts"] = [list(c) for c in spec]
        res.source["contrast_judges"] = list(s.contrast_judges) if s.contrast_judges is not None else None
        res.contrasts = contrasts(df, s, tuple(_contrast(c) for c in spec), s.contrast_judges)
    res.judge_agreement = judge_agreement(df, s)
    res.annotator_agreement = annotator_agreement(rs, s)
    res.majority = majority_of_judges(df, s)
    res.biases = biases(rs, df, s)
    return res
