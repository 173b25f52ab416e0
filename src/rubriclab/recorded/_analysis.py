"""The audit of recorded judgments: per judge × condition metrics, paired comparisons, agreement among judges and
among annotators, majority-of-judges accuracy and surface biases — every estimate with its interval's method,
level and n, ties and no-verdicts counted.

Definitions (per judge × condition; "pairs" are the pairs with a label unless said otherwise):

* **credit** of a judgment: 1 if its choice equals the label, ``tie_credit`` (the project's one rule,
  ``rubriclab.stats.TIE_CREDIT`` = 0.5: a fair coin's expected credit) if it is a tie and the label is not, else 0
  (where such ties are more than 5% of a cell's judgments, ``accuracy.at_other_tie_credit`` gives the accuracy with
  ties at 0) — a reply that is no verdict (``none``) is a wrong answer, in every denominator.
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
pair come along). Paired comparisons, on the pairs both cells judged: Δ with its percentile paired bootstrap
interval (``rubriclab.stats.paired_bootstrap``), the paired t-test's p-value (``rubriclab.stats.paired_t_tests``:
not floored at 2/(B + 1) as a bootstrap p-value is, which made large families untestable), BH over each family
(one judge's conditions; one condition's judges), and the t-test's MDE at the family's Bonferroni level α/m
(``rubriclab.stats.mde_paired_t``; its power is checked by simulation in tests/stats/test_stats_power.py).
Named contrasts (``Settings.contrasts``, or the importer's own: LLMBar's rules = Vanilla − Vanilla_NoRules and own
rubric first = Metrics − Vanilla): the same paired test within each judge, one family per metric over every judge ×
contrast, so the questions a source was set up for are not diluted by every other pair of conditions.

Speed (``_boot``, ``_rows``): the frame is grouped once into integer-coded arrays, and every bootstrap with the
same number of pairs shares scipy's draws, its replicate sums a matrix product: the same numbers as the
per-call functions named above, bit for bit (``tests/recorded/test_recorded_scale.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

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
from rubriclab.recorded._biases import biases as bias_rows
from rubriclab.recorded._boot import Resampling, additive_bootstraps, dropped_fields, mean_bootstrap, paired_differences
from rubriclab.recorded._disagreements import confusion_counts, disagreements
from rubriclab.recorded._leaderboard import judge_vs_judge, leaderboard
from rubriclab.recorded._records import CHOICES, ORDERS, VERDICTS, RecordedSet
from rubriclab.recorded._rows import NONE, PairValues, Rows, codes_and_values, codes_of, shared_codes
from rubriclab.settings import Recorded, RecordedSource, as_section, check_places
from rubriclab.stats import (
    TIE_CREDIT,
    adjust_family,
    krippendorff_alpha,
    other_tie_credit,
    paired_t_tests,
    ties_common,
)

CELL_METRICS = ("accuracy", "accuracy_original", "accuracy_swapped", "both_correct", "positional_agreement",
                "first_position_rate", "kappa", "kappa_original", "kappa_swapped", "macro_precision", "macro_recall",
                "macro_f1")
COMPARED = ("accuracy", "positional_agreement")
ORDER_UNKNOWN = "presentation order not recorded by the source (see its notes)"
ORDER_FREE = "pointwise rating: each output scored alone, so presentation order plays no part"
MIN_MAJORITY_JUDGES = 3


_RESAMPLING: ContextVar[Resampling | None] = ContextVar("recorded_resampling", default=None)  # analyze's bootstrap
_R = Recorded()  # recorded.*'s defaults (rubriclab.settings.Recorded, docs there)
# Settings fields under the same name in recorded, which holds their ranges (contrasts, a mapping there: _contrast)
_CHECKED = ("confidence", "n_boot", "seed", "alpha", "power", "tie_credit", "length_delta", "min_list_items", "baseline",
            "contrast_judges")
_OWN = ("baseline", "contrasts", "contrast_judges")  # a source's own value replaces recorded.<key>


@dataclass(frozen=True)
class Settings:
    """How the analysis counts and what its intervals are (``recorded.*`` in params.yaml)."""

    confidence: float = _R.confidence
    n_boot: int = _R.n_boot
    seed: int = _R.seed
    alpha: float = _R.alpha
    power: float = _R.power
    tie_credit: float = _R.tie_credit
    length_delta: int = _R.length_delta  # prefers longer: lengths differ by more than this (AlpacaEval's 30)
    min_list_items: int = _R.min_list_items  # prefers lists: list lines that make a list (AlpacaEval's 1)
    baseline: str | None = _R.baseline  # within a judge: compare this condition with each other one (None: every pair)
    # named contrasts (name, a, b): Δ = a − b within each judge, one BH family per metric over judges × contrasts
    # (None: the importer's own, e.g. LLMBar's rules and Metrics contrasts; (): none)
    contrasts: tuple[tuple[str, str, str], ...] | None = _R.contrasts
    contrast_judges: tuple[str, ...] | None = _R.contrast_judges  # the judges the contrasts are drawn for (None: all)

    @classmethod
    def of(cls, recorded: Recorded | dict[str, Any] | None, source: RecordedSource | None = None) -> Settings:
        """The ``recorded`` section (typed, or a mapping validated as params.yaml's), with ``source``'s own
        ``baseline``, ``contrasts``, ``contrast_judges`` where it sets them; ``contrasts`` ``{name: [a, b]}``."""
        r = as_section("recorded", recorded)
        kw = {k: getattr(r, k) for k in (*_CHECKED, "contrasts")}
        kw.update({k: v for k in _OWN if source is not None and (v := getattr(source, k)) is not None})
        if kw["contrasts"] is not None:
            kw["contrasts"] = tuple((n, *ab) for n, ab in kw["contrasts"].items())
        return cls(**kw)

    def __post_init__(self) -> None:
        if self.contrasts is not None:
            object.__setattr__(self, "contrasts", tuple(_contrast(c) for c in self.contrasts))
        if self.contrast_judges is not None:
            object.__setattr__(self, "contrast_judges", tuple(str(j) for j in self.contrast_judges))
        check_places(self, {k: k for k in _CHECKED}, "recorded")

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
    bias_info: dict[str, Any] = field(default_factory=dict)
    leaderboard: list[dict[str, Any]] = field(default_factory=list)  # head-to-head sources (AlpacaEval)
    judges_compared: list[dict[str, Any]] = field(default_factory=list)  # their leaderboards, judge against judge
    confusion: list[dict[str, Any]] = field(default_factory=list)  # label × choice counts per judge × condition
    disagreements: pd.DataFrame | None = None  # every labelled judgment off its label (disagreements.csv)
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
                "bias_info": self.bias_info, "leaderboard": self.leaderboard,
                "judges_compared": self.judges_compared, "confusion": self.confusion,
                "n_disagreements": 0 if self.disagreements is None else len(self.disagreements),
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

    def fill() -> None:  # the interval, once its bootstrap has run; the extras stay last, as they always were
        tail = {k: out.pop(k) for k in extra}
        out.update(low=clean(boot.get("low")), high=clean(boot.get("high")), method="percentile bootstrap",
                   level=settings.confidence, unit=unit, resamples=settings.n_boot, n_units=boot.get("n_items"))
        if boot.get("degenerate"):
            out["interval_note"] = boot["degenerate"]
        out.update(dropped_fields(boot))
        out.update(tail)

    if out["value"] is None and out["reason"] is None:
        out["reason"] = "undefined on these data"
    out.update(extra)
    if boot is not None and settings is not None:
        if boot.get("_pending") is not None:  # a batched bootstrap (``_boot.Resampling``): filled in after its run
            boot["_pending"].then(fill)
        else:
            fill()
    return out


def _missing(reason: str, n: int = 0) -> dict[str, Any]:
    return entry(None, n=n, reason=reason)


def _resampling(ids: np.ndarray, s: Settings) -> tuple[Resampling, np.ndarray]:
    """The analysis' resampling (one draw of the source's pairs per replicate) and the pair codes of ``ids``
    (pair codes already, or pair ids); outside ``analyze``, an eager one over these ids' pairs."""
    ids = np.asarray(ids)
    res = _RESAMPLING.get()
    if res is None:
        universe = np.unique(ids)
        res = Resampling(universe, s.n_boot, s.seed, eager=True)
        return res, np.searchsorted(universe, ids)
    return res, (ids.astype(np.intp) if ids.dtype.kind in "iu" else res.codes(ids.tolist()))


def _mean_entry(values: np.ndarray, ids: np.ndarray, s: Settings, reason: str, **extra: Any) -> dict[str, Any]:
    if len(values) == 0:
        return _missing(reason)
    # = rubriclab.stats.item_bootstrap(values, "mean", ids), its resamples drawn once per number of pairs
    res, codes = _resampling(ids, s)
    boot = mean_bootstrap(values.astype(float), codes, res, s.confidence)
    return entry(boot["estimate"], n=len(values), boot=boot, settings=s, **extra)


# -- the judgments as one frame --------------------------------------------------------------------------------------
def judgments_frame(rs: RecordedSet, tie_credit: float = TIE_CREDIT) -> pd.DataFrame:
    """``rs.frame()`` with ``credit`` (NaN without a label) and the pair's output lengths and list flags."""
    # a fixed row order, so that the bootstrap draws the same pairs whatever order the importer read them in
    df = rs.frame()
    keys = ["judge", "condition", "pair_id", "order"]
    for col in keys:  # a categorical sorts by its categories: put them in the strings' order
        if isinstance(df[col].dtype, pd.CategoricalDtype):
            df[col] = df[col].cat.reorder_categories(sorted(df[col].cat.categories, key=str))
    df = df.sort_values(keys, kind="stable").reset_index(drop=True)
    labels = df["label"]
    choice = df["choice"]
    credit = np.where(choice == labels, 1.0, np.where((choice == "tie") & labels.notna(), tie_credit, 0.0))
    df["credit"] = np.where(labels.isna(), np.nan, credit)
    df["order_free"] = df["meta"].str.contains(r"(?:^|;)mode=rating(?:;|$)", regex=True)
    df["order_unknown"] = df["meta"].str.contains(r"(?:^|;)order_known=0(?:;|$)", regex=True)
    return df


# -- per cell ------------------------------------------------------------------------------------------------------
def _cell(rows: Rows, sl: slice, classes: list[str], s: Settings) -> dict[str, Any]:
    out: dict[str, Any] = {}
    pair, order, verdict, credit = rows.pair[sl], rows.order[sl], rows.verdict[sl], rows.credit[sl]
    lab = rows.label[sl] >= 0
    none, tie = verdict == VERDICTS.index("none"), verdict == VERDICTS.index("tie")
    for o, name in enumerate(ORDERS):
        m = lab & (order == o)
        out[f"accuracy_{name}"] = _mean_entry(credit[m], pair[m], s, f"no {name}-order judgment of a labelled pair",
                                              n_none=int(none[m].sum()), n_tie=int(tie[m].sum()))
    per_pair = rows.accuracy_per_pair(sl)
    # ties that earned tie_credit (a tie verdict on a pair whose label is not a tie): the card states the rule and,
    # where they are common, the accuracy under the other rule beside it
    credited = lab & tie & (rows.label[sl] != CHOICES.index("tie"))
    out["accuracy"] = _mean_entry(per_pair.values, per_pair.pairs, s, "no labelled pair judged",
                                  n_none=int(none[lab].sum()), n_tie=int(tie[lab].sum()), n_judgments=int(lab.sum()),
                                  tie_credit=s.tie_credit, n_tie_credited=int(credited.sum()))
    if out["accuracy"]["value"] is not None and ties_common(int(credited.sum()), int(lab.sum())):
        other = other_tie_credit(s.tie_credit)
        moved = np.where(credited, other - s.tie_credit, 0.0)[lab]
        pairs, inv = np.unique(pair[lab], return_inverse=True)
        shift = np.bincount(inv, weights=moved, minlength=len(pairs)) / np.bincount(inv, minlength=len(pairs))
        out["accuracy"]["at_other_tie_credit"] = {"tie_credit": other,
                                                  "value": float(np.mean(per_pair.values + shift))}
    orders = set(order.tolist())
    if orders == {0, 1}:
        common, orig, swapped = rows.both_orders(sl)
        agree = ((orig == swapped) & (orig != NONE)).astype(float)
        out["positional_agreement"] = _mean_entry(agree, common, s, "")
        labelled, label = _labels_of(rows, sl, common)
        both = (orig[labelled] == label) & (swapped[labelled] == label)
        out["both_correct"] = _mean_entry(both.astype(float), common[labelled], s, "no labelled pair in both orders")
    else:
        why = f"judged in one order only ({', '.join(sorted(ORDERS[o] for o in orders))})"
        out["positional_agreement"] = _missing(why)
        out["both_correct"] = _missing(why)
    decided = verdict < VERDICTS.index("tie")  # first or second
    out["first_position_rate"] = _mean_entry((verdict[decided] == 0).astype(float), pair[decided], s,
                                             "no first/second verdict")
    if rows.order_free[sl].all():  # each output scored alone: the two "orders" are one judgment, position means nothing
        for key in ("positional_agreement", "first_position_rate"):
            out[key] = _missing(ORDER_FREE)
    elif rows.order_unknown[sl].all():  # the source does not say which output the judge saw first
        for key in ("positional_agreement", "first_position_rate"):
            out[key] = _missing(ORDER_UNKNOWN)
    out.update(_agreement_with_label(rows, sl, lab, classes, s))
    return out


def _labels_of(rows: Rows, sl: slice, pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which of ``pairs`` (ascending) have a label in the cell, and those labels' codes."""
    lab = rows.label[sl] >= 0
    known, first = np.unique(rows.pair[sl][lab], return_index=True)
    at = np.minimum(np.searchsorted(known, pairs), max(len(known) - 1, 0))
    labelled = (known[at] == pairs) if len(known) else np.zeros(len(pairs), dtype=bool)
    return labelled, rows.label[sl][lab][first][at[labelled]]


def _agreement_with_label(rows: Rows, sl: slice, lab: np.ndarray, classes: list[str],
                          s: Settings) -> dict[str, Any]:
    """κ and macro P/R/F1 from confusion counts (categories: label classes, then tie/none if they occur); a row's
    confusion part is one-hot, so a replicate's confusion matrix is the sum of its drawn pairs' parts."""
    cats = list(dict.fromkeys([*classes, *CHOICES]))
    k = len(cats)
    cls = [cats.index(c) for c in classes]
    to_cat = np.array([cats.index(c) for c in CHOICES])

    def kappa(cm: np.ndarray) -> np.ndarray:
        return kappa_batch(cm.reshape(*cm.shape[:-1], k, k))

    def prf(which: str) -> Callable[[np.ndarray], np.ndarray]:
        return lambda cm: macro_prf_batch(cm.reshape(*cm.shape[:-1], k, k), cls)[which]

    out: dict[str, Any] = {}
    order = rows.order[sl]
    for suffix, m in (("", lab), *((f"_{o}", lab & (order == i)) for i, o in enumerate(ORDERS))):
        parts = np.zeros((int(m.sum()), k * k))
        parts[np.arange(len(parts)), to_cat[rows.label[sl][m]] * k + to_cat[rows.choice[sl][m]]] = 1.0
        ids = rows.pair[sl][m]
        why = f"no labelled judgments{suffix.replace('_', ' in the ')}" + (" order" if suffix else "")
        stats = {"kappa": kappa, **({f"macro_{w}": prf(w) for w in ("precision", "recall", "f1")} if not suffix else {})}
        if not len(ids):
            out.update({f"{name}{suffix}": _missing(why) for name in stats})
            continue
        res, codes = _resampling(ids, s)
        boots = additive_bootstraps(parts, stats, codes, res, s.confidence)
        for name, boot in boots.items():
            extra = {"classes": list(classes)} if name.startswith("macro_") else {}
            out[f"{name}{suffix}"] = entry(boot["estimate"], n=len(ids), boot=boot, settings=s, **extra)
    return out


# -- comparisons ---------------------------------------------------------------------------------------------------
def _adjust(rows: list[dict[str, Any]], s: Settings) -> list[dict[str, Any]]:
    """BH over one family's paired t-test p-values and each row's MDE (``rubriclab.stats.adjust_family``: the
    t-test's at the family's Bonferroni level α/m, power ``s.power``)."""
    for row in rows:
        row["n_test"] = row["n_pairs"]
    return adjust_family(rows, alpha=s.alpha, power=s.power)


def _paired_rows(families: list[list[tuple[dict[str, Any], PairValues, PairValues]]],
                 s: Settings) -> list[dict[str, Any]]:
    """Each family's paired comparisons (``(fixed fields, a, b)``: Δ = a − b on the pairs both have), then its BH
    and MDE. The bootstrap intervals of every family run together (``paired_differences``: one matrix product per
    number of shared pairs), each the same as ``rubriclab.stats.paired_bootstrap`` on its own; the p-values are
    paired t-tests, whose smallest value is not floored by the number of resamples (a bootstrap p-value cannot go
    below 2/(B + 1), above the Bonferroni level of a large family)."""
    res = _RESAMPLING.get()
    universe = None
    if res is None:  # outside analyze: an eager resampling of the pairs the comparisons share
        used = np.zeros(max((len(v.dense) for f in families for _, va, vb in f for v in (va, vb)), default=0), bool)
        for family in families:
            for _, va, vb in family:
                both = ~(np.isnan(va.dense) | np.isnan(vb.dense))
                if both.sum() >= 2:
                    used |= both
        universe = np.flatnonzero(used)
        res, _ = _resampling(universe, s)
    out: list[dict[str, Any]] = []
    for family in families:  # a family at a time: its per-pair values are dropped once its sums are asked for
        pairs = [shared_codes(va, vb) for _, va, vb in family]
        todo = [(c if universe is None else np.searchsorted(universe, c), a, b) for c, a, b in pairs if len(a) >= 2]
        done = iter(paired_differences(todo, res, s.confidence))
        tested = iter(_t_tests([(a, b) for _, a, b in todo]))
        rows = [_paired_row(fixed, len(a), *((next(done), next(tested)) if len(a) >= 2 else (None, None)), s)
                for (fixed, _, _), (_, a, _) in zip(family, pairs, strict=True)]
        out += _adjust(rows, s)
    if universe is not None:
        res.run()
    return out


def _paired_row(fixed: dict[str, Any], n_common: int, res: dict[str, Any] | None, test: dict[str, float] | None,
                s: Settings) -> dict[str, Any]:
    """One paired comparison, before the family's BH and MDE: Δ and its percentile paired bootstrap interval
    (``res``), the paired t-test's SE and p-value (``test``)."""
    row: dict[str, Any] = {**fixed, "n_pairs": n_common,
                           "ci": s.interval("pairs").replace("percentile bootstrap", "percentile paired bootstrap"),
                           "p_value": None, "se": None, "low": None, "high": None, "diff": None}
    if res is None or test is None:
        return {**row, "degenerate": "fewer than 2 shared pairs"}
    out = {**row, "mean_a": res["mean_a"], "mean_b": res["mean_b"], "diff": res["diff"], "low": res["low"],
           "high": res["high"], "se": test["se"], "p_value": test["p_value"], "boot_se": res["se"],
           "degenerate": res.get("degenerate"), "resamples_dropped": res["n_invalid_resamples"]}
    if res.get("_pending") is not None:  # a batched bootstrap: its interval once it has run

        def fill() -> None:
            out.update(low=res["low"], high=res["high"], boot_se=res["se"], degenerate=res.get("degenerate"),
                       resamples_dropped=res["n_invalid_resamples"])

        res["_pending"].then(fill)
    return out


def _t_tests(todo: list[tuple[np.ndarray, np.ndarray]]) -> list[dict[str, float]]:
    """``paired_t_tests`` of each ``(a, b)``, those of the same length in one call."""
    out: list[dict[str, float]] = [{} for _ in todo]
    by_n: dict[int, list[int]] = {}
    for i, (a, _) in enumerate(todo):
        by_n.setdefault(len(a), []).append(i)
    for which in by_n.values():
        res = paired_t_tests(np.column_stack([todo[i][0] for i in which]), np.column_stack([todo[i][1] for i in which]))
        for c, i in enumerate(which):
            out[i] = {"se": float(res["se"][c]), "p_value": float(res["p_value"][c])}
    return out


def _family(values: dict[str, PairValues], names: list[tuple[str, str]], family: str, metric: str,
            fixed: dict[str, str]) -> list[tuple[dict[str, Any], PairValues, PairValues]]:
    return [({"family": family, "metric": metric, **fixed, "a": a, "b": b}, values[a], values[b]) for a, b in names]


def comparisons(df: pd.DataFrame, s: Settings, rows: Rows | None = None) -> list[dict[str, Any]]:
    """Within each judge (its conditions: each other one against ``baseline``, or every pair) and within each
    condition (every pair of judges), for accuracy and positional agreement; BH per family."""
    rows = Rows.of(df) if rows is None else rows
    families = []
    for metric in COMPARED:
        for judge in rows.judges():
            values = {c: rows.per_pair(j, c, metric) for j, c in rows.cells if j == judge}
            values = {c: v for c, v in values.items() if len(v)}
            conds = sorted(values)
            if s.baseline and s.baseline in values:  # Δ = condition − baseline
                names = [(c, s.baseline) for c in conds if c != s.baseline]
            else:
                names = list(combinations(conds, 2))
            if names:
                families.append(_family(values, names, f"judge:{judge}", metric, {"judge": judge, "condition": None}))
        for cond in rows.conditions():
            values = {j: rows.per_pair(j, c, metric) for j, c in rows.cells if c == cond}
            values = {j: v for j, v in values.items() if len(v)}
            names = list(combinations(sorted(values), 2))
            if names:
                families.append(_family(values, names, f"condition:{cond}", metric, {"judge": None, "condition": cond}))
    return _paired_rows(families, s)


def contrasts(df: pd.DataFrame, s: Settings, spec: tuple[tuple[str, str, str], ...],
              judges: tuple[str, ...] | None = None, rows: Rows | None = None) -> list[dict[str, Any]]:
    """The named contrasts (``(name, a, b)``: Δ = a − b) within each judge (``judges``, or every judge) that has
    both conditions, for accuracy and positional agreement; one family per metric (every judge × contrast of
    that metric): BH over it, MDE at its Bonferroni level α/m."""
    rows = Rows.of(df) if rows is None else rows
    present = rows.judges()
    keep = present if judges is None else [j for j in judges if j in set(present)]
    families = []
    for metric in COMPARED:
        family = []
        for judge in keep:
            for name, a, b in spec:
                if (judge, a) not in rows.cells or (judge, b) not in rows.cells:
                    continue
                va, vb = rows.per_pair(judge, a, metric), rows.per_pair(judge, b, metric)
                if len(va) and len(vb):
                    family.append(({"family": f"contrasts:{metric}", "metric": metric, "contrast": name,
                                    "judge": judge, "condition": None, "a": a, "b": b}, va, vb))
        families.append(family)
    return _paired_rows(families, s)


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
        res, codes = _resampling(unit_pairs, s)
        boot = additive_bootstraps(np.column_stack([d, n_c]), {"": alpha_stat}, codes, res, s.confidence)[""]
        out["krippendorff_alpha"] = entry(alpha["alpha"], n=alpha["n_pairable_items"], boot=boot, settings=s,
                                          unit=unit, level_of_measurement="nominal")
    else:
        out["krippendorff_alpha"] = _missing(alpha["reason"] or "undefined", alpha["n_pairable_items"])
    full = counts.sum(axis=1) == r.shape[0]
    if full.sum() >= 2 and r.shape[0] >= 2:
        parts = np.column_stack([fleiss_parts(counts[full]), np.ones(int(full.sum()))])
        res, codes = _resampling(unit_pairs[full], s)
        boot = additive_bootstraps(parts, {"": lambda x: fleiss_from_parts(x[..., :-1], x[..., -1])}, codes, res,
                                   s.confidence)[""]
        out["fleiss_kappa"] = entry(fleiss_kappa(counts[full]), n=int(full.sum()), boot=boot, settings=s, unit=unit,
                                    n_units_left_out=int((~full).sum()))
    else:
        out["fleiss_kappa"] = _missing("fewer than 2 units rated by every rater", int(full.sum()))
    out["pairwise_agreement"] = entry(pairwise_agreement(r), n=int(r.shape[1]))
    return out


def judge_agreement(df: pd.DataFrame, s: Settings) -> list[dict[str, Any]]:
    """Per condition with ≥ 2 judges: agreement of the judges' choices on the (pair, order) units (a judge that
    did not judge a unit: missing). The raters × units matrix is laid out from the columns' codes."""
    rows = []
    pair, pair_ids = codes_and_values(df["pair_id"])
    judge, judge_names = codes_and_values(df["judge"])
    cond, cond_names = codes_and_values(df["condition"])
    unit_of = pair * len(ORDERS) + codes_of(df["order"], ORDERS)
    choice = np.array([*CHOICES, np.nan], dtype=object)[codes_of(df["choice"], CHOICES)]
    for c in sorted(np.unique(cond), key=lambda k: str(cond_names[k])):
        at = np.flatnonzero(cond == c)
        present = np.unique(judge[at])
        judges = sorted(str(judge_names[j]) for j in present)
        if len(judges) < 2:
            continue
        row_of = np.empty(len(judge_names), dtype=np.intp)
        row_of[[list(map(str, judge_names)).index(j) for j in judges]] = np.arange(len(judges))
        units, col = np.unique(unit_of[at], return_inverse=True)
        wide = np.full((len(judges), len(units)), np.nan, dtype=object)
        wide[row_of[judge[at]], col] = choice[at]
        res = rater_agreement(wide, np.asarray(pair_ids, dtype=object)[units // len(ORDERS)], ["1", "2", "tie"], s)
        rows.append({"condition": str(cond_names[c]), "judges": judges, **res})
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
def majority_of_judges(df: pd.DataFrame, s: Settings, judged: Rows | None = None) -> list[dict[str, Any]]:
    """Per condition with ≥ 3 judges: accuracy of the judges' majority choice per (pair, order) (split votes a
    tie, no vote at all ``none``), against the best single judge. The best judge is picked on a seeded half of
    the labelled pairs (``selection``) and compared with the majority on the other half (``evaluation``): picked
    and compared on the same pairs, its accuracy would be biased upward by the pick."""
    judged = Rows.of(df) if judged is None else judged
    rows = []
    for cond in judged.conditions():
        cells = [(j, sl) for (j, c), sl in judged.cells.items() if c == cond and (judged.label[sl] >= 0).any()]
        judges = [j for j, _ in cells]
        if len(judges) < MIN_MAJORITY_JUDGES:
            continue
        per_pair = _majority_per_pair(judged, [sl for _, sl in cells], s.tie_credit)
        singles = {j: judged.per_pair(j, cond, "accuracy") for j in judges}
        order = np.random.default_rng(s.seed).permutation(per_pair.pairs)
        select = np.zeros(len(judged.pair_ids), dtype=bool)
        select[order[: len(order) // 2]] = True
        means = {j: _mean_on(v, select) for j, v in singles.items()}
        best = max(sorted(singles), key=lambda j: np.nan_to_num(means[j], nan=-1.0))  # first of equals, by name
        held = per_pair.spread(len(judged.pair_ids))
        held = PairValues(held.pairs[~select[held.pairs]], held.values[~select[held.pairs]])
        codes, a, b = shared_codes(held.spread(len(judged.pair_ids)), singles[best])
        cmp = paired_result(codes, a, b, s) if len(a) >= 2 else {}
        rows.append(row := {"condition": cond, "judges": judges,
                     "majority_accuracy": _mean_entry(per_pair.values, per_pair.pairs, s, "no pair"),
                     "best_judge": best, "best_judge_selection_accuracy": means[best],
                     "selection": f"best judge picked on a seeded half of the {len(order)} labelled pairs "
                                  f"({len(order) // 2}, seed {s.seed}); compared on the other {len(order) - len(order) // 2}",
                     "n_selection_pairs": len(order) // 2, "n_evaluation_pairs": int(len(a)),
                     "best_judge_accuracy": float(np.mean(b)) if len(b) else None,
                     "majority_evaluation_accuracy": float(np.mean(a)) if len(a) else None,
                     "diff_vs_best": cmp.get("diff"), "diff_low": cmp.get("low"), "diff_high": cmp.get("high"),
                     "p_value": cmp.get("p_value"), "diff_resamples_dropped": cmp.get("n_invalid_resamples"),
                     "ci": s.interval("pairs").replace("bootstrap", "paired bootstrap")
                     + ", on the evaluation half"})
        when_done(cmp, lambda row=row, cmp=cmp: row.update(diff_low=cmp["low"], diff_high=cmp["high"],
                                                           p_value=cmp["p_value"],
                                                           diff_resamples_dropped=cmp["n_invalid_resamples"]))
    return rows


def paired_result(codes: np.ndarray, a: np.ndarray, b: np.ndarray, s: Settings) -> dict[str, Any]:
    """Δ = mean(a) − mean(b) over the pairs ``codes`` with its percentile paired bootstrap interval, on the
    analysis' resampling (filled in when it runs: ``when_done``)."""
    res, codes = _resampling(codes, s)
    return paired_differences([(codes, a, b)], res, s.confidence)[0]


def when_done(boot: dict[str, Any], fn: Callable[[], None]) -> None:
    """``fn`` once ``boot`` (an estimate of the analysis' resampling) is filled in: now, or after the run."""
    if boot.get("_pending") is not None:
        boot["_pending"].then(fn)
    elif boot:
        fn()


def _mean_on(values: PairValues, keep: np.ndarray) -> float:
    """The mean of a cell's per-pair values over the pairs ``keep`` marks (NaN when it has none of them)."""
    picked = values.values[keep[values.pairs]]
    return float(picked.mean()) if len(picked) else float("nan")


def _majority_per_pair(judged: Rows, slices: list[slice], tie_credit: float) -> PairValues:
    """Per labelled pair, the mean over its (pair, order) units of the credit of the judges' majority choice
    (``majority_vote`` of the choices that are not none: the strictly most frequent, ``tie`` when the top is
    shared, ``none`` without a vote)."""
    pick = np.concatenate([np.flatnonzero(judged.label[sl] >= 0) + sl.start for sl in slices])
    unit_key = judged.pair[pick] * len(ORDERS) + judged.order[pick]
    units, unit = np.unique(unit_key, return_inverse=True)
    choice = judged.choice[pick]
    votes = choice != NONE
    counts = np.bincount(unit[votes] * NONE + choice[votes], minlength=len(units) * NONE).reshape(-1, NONE)
    top = counts.max(axis=1)
    shared_top = (counts == top[:, None]).sum(axis=1) > 1
    tie = CHOICES.index("tie")
    winner = np.where(top == 0, NONE, np.where(shared_top, tie, counts.argmax(axis=1)))
    label = np.empty(len(units), dtype=np.int64)
    label[unit] = judged.label[pick]
    credit = np.where(winner == label, 1.0, np.where(winner == tie, tie_credit, 0.0))
    pairs, inv = np.unique(units // len(ORDERS), return_inverse=True)
    return PairValues(pairs, np.bincount(inv, weights=credit, minlength=len(pairs)) / np.bincount(inv))


def biases(rs: RecordedSet, df: pd.DataFrame, s: Settings, judged: Rows | None = None) -> list[dict[str, Any]]:
    """Per judge × condition (and for the labels themselves): AlpacaEval's P(prefer longer) and P(prefer lists),
    every left-out pair counted, judge and labels on the same pairs (``rubriclab.recorded._biases``)."""
    return bias_rows(rs, Rows.of(df) if judged is None else judged, s, _mean_entry, paired_result, when_done)[0]


# -- all together --------------------------------------------------------------------------------------------------
def analyze(rs: RecordedSet, settings: Settings | None = None, *, batched: bool = True) -> RecordedAnalysis:
    """The whole audit of a RecordedSet (see the module docstring). Its bootstraps run batched (``_boot.Resampling``):
    every estimate's replicate sums over the same number of pairs in one pass over the draws, then the entries
    are filled in; ``batched=False`` runs each on its own (the reference the batched path equals)."""
    s = settings or Settings()
    resampling = Resampling(sorted(rs.pairs), s.n_boot, s.seed, eager=not batched)
    token = _RESAMPLING.set(resampling)
    try:
        with threadpool_limits(limits=1, user_api="blas"):  # the analysis' own small products
            res = _analyze(rs, s)
        resampling.run()  # the batched products: BLAS's threads help here
    finally:
        _RESAMPLING.reset(token)
    return res


def _analyze(rs: RecordedSet, s: Settings) -> RecordedAnalysis:
    df = judgments_frame(rs, s.tie_credit)
    classes = [c for c in ("1", "2", "tie") if any(p.label == c for p in rs.pairs.values())]
    res = RecordedAnalysis(
        source={"name": rs.name, "format": rs.format, "path": rs.path, "provenance": rs.provenance,
                "license": rs.license, "label_rule": rs.label_rule, "judges": rs.judges, "conditions": rs.conditions,
                "classes": classes},
        settings=s, counts=rs.counts(), notes=list(rs.notes))
    rows = Rows.of(df, _RESAMPLING.get().pair_ids if _RESAMPLING.get() is not None else None)  # grouped once
    for (judge, cond), sl in rows.cells.items():
        cell = _cell(rows, sl, classes, s)
        pair, verdict = rows.pair[sl], rows.verdict[sl]
        res.cells.append({"judge": judge, "condition": cond, "n_pairs": len(np.unique(pair)),
                          "n_judgments": len(pair), "n_none": int((verdict == VERDICTS.index("none")).sum()),
                          "n_tie": int((verdict == VERDICTS.index("tie")).sum()),
                          "n_unlabelled_pairs": len(np.unique(pair[rows.label[sl] < 0])),
                          "metrics": cell})
    res.comparisons = comparisons(df, s, rows)
    spec = s.contrasts if s.contrasts is not None else tuple(rs.extras.get("contrasts") or ())
    if spec:
        res.source["contrasts"] = [list(c) for c in spec]
        res.source["contrast_judges"] = list(s.contrast_judges) if s.contrast_judges is not None else None
        res.contrasts = contrasts(df, s, tuple(_contrast(c) for c in spec), s.contrast_judges, rows)
    res.judge_agreement = judge_agreement(df, s)
    res.annotator_agreement = annotator_agreement(rs, s)
    res.majority = majority_of_judges(df, s, rows)
    res.biases, res.bias_info = bias_rows(rs, rows, s, _mean_entry, paired_result, when_done)
    res.disagreements = disagreements(rs, frame=df)
    res.confusion = confusion_counts(rs, frame=df).to_dict("records")
    if "alpaca_eval" in rs.extras:  # each model against a baseline: the publishers' leaderboard, judge against judge
        res.leaderboard = leaderboard(rs, s)
        res.judges_compared = judge_vs_judge(rs, s)
    return res
