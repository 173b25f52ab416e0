"""The judgments frame as integer-coded arrays, grouped once into judge × condition cells.

The analysis visits every cell several times (its metrics, its per-pair values for each paired comparison and
contrast, its surface biases); filtering a pandas frame per cell and per comparison cost far more than the
statistics. Rows keep the frame's order (judge, condition, pair, order), so a cell is a slice, and within it
pairs come in sorted id order, which is the item order every bootstrap of the analysis has always used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rubriclab.recorded._records import CHOICES, ORDERS, VERDICTS

NONE = CHOICES.index("none")


def codes_of(values: Any, vocabulary: tuple[str, ...]) -> np.ndarray:
    """Codes of string values in ``vocabulary``; -1 for a missing value (None/NaN)."""
    cat = pd.Categorical(values, categories=list(vocabulary))  # each distinct value looked up once
    return np.asarray(cat.codes, dtype=np.int64)


def codes_and_values(col: pd.Series) -> tuple[np.ndarray, Any]:
    """A column's integer codes and the values they stand for (a categorical's own; else factorised)."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        return np.asarray(col.cat.codes, dtype=np.intp), col.cat.categories
    codes, uniques = pd.factorize(col)
    return np.asarray(codes, dtype=np.intp), uniques


@dataclass
class PairValues:
    """One per-pair value per pair (pair codes ascending) for a paired comparison; ``dense``: the values at their
    pair codes, NaN elsewhere (so two cells' shared pairs are one mask, not a set intersection)."""

    pairs: np.ndarray
    values: np.ndarray
    dense: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.pairs)

    def spread(self, n_pairs: int) -> PairValues:
        dense = np.full(n_pairs, np.nan)
        dense[self.pairs] = self.values
        return PairValues(self.pairs, self.values, dense)


def shared(va: PairValues, vb: PairValues) -> tuple[np.ndarray, np.ndarray]:
    """Both cells' values on the pairs both have (pair codes ascending), from their ``dense`` vectors."""
    both = ~(np.isnan(va.dense) | np.isnan(vb.dense))
    return va.dense[both], vb.dense[both]


def shared_codes(va: PairValues, vb: PairValues) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``shared`` with the shared pairs' codes."""
    both = ~(np.isnan(va.dense) | np.isnan(vb.dense))
    return np.flatnonzero(both), va.dense[both], vb.dense[both]


def first_codes(ids: np.ndarray) -> tuple[np.ndarray, int]:
    """Item codes in order of first appearance (as ``item_bootstrap`` numbers its items) and their count."""
    ids = np.asarray(ids)
    if ids.dtype.kind in "iu" and len(ids) and bool(np.all(ids[1:] >= ids[:-1])):  # ascending pair codes
        codes = np.r_[0, np.cumsum(ids[1:] != ids[:-1])].astype(np.intp)
        return codes, int(codes[-1]) + 1
    codes, uniques = pd.factorize(ids, sort=False)
    return np.asarray(codes, dtype=np.intp), len(uniques)


@dataclass
class Rows:
    """The frame's columns the analysis reads, as arrays: pair (code into ``pair_ids``, sorted), order (index
    into ORDERS), verdict (VERDICTS), choice and label (CHOICES; label -1 without one), credit, order_free;
    ``cells``: (judge, condition) → the slice of its rows, in sorted order."""

    pair_ids: np.ndarray
    pair: np.ndarray
    order: np.ndarray
    verdict: np.ndarray
    choice: np.ndarray
    label: np.ndarray
    credit: np.ndarray
    order_free: np.ndarray
    order_unknown: np.ndarray
    cells: dict[tuple[str, str], slice]
    _per_pair: dict[tuple[str, str, str], PairValues] = field(default_factory=dict)

    @classmethod
    def of(cls, df: pd.DataFrame, universe: np.ndarray | None = None) -> Rows:
        """From ``judgments_frame`` (sorted by judge, condition, pair_id, order); pair codes into ``universe`` (the
        source's sorted pair ids; default: the judged ones)."""
        codes, cats = codes_and_values(df["pair_id"])  # each distinct pair id handled once, not once per row
        cats = np.asarray(cats, dtype=str)
        if universe is None:
            pair_ids = np.unique(cats[np.unique(codes)]) if len(codes) else np.array([], dtype=str)
        else:
            pair_ids = np.asarray(universe, dtype=str)
        pair = np.searchsorted(pair_ids, cats)[codes] if len(codes) else np.array([], dtype=np.intp)
        judge, judges = codes_and_values(df["judge"])
        cond, conds = codes_and_values(df["condition"])
        starts = np.flatnonzero(np.r_[True, (judge[1:] != judge[:-1]) | (cond[1:] != cond[:-1])]) if len(df) else []
        ends = [*list(starts[1:]), len(df)] if len(df) else []
        cells = {(str(judges[judge[a]]), str(conds[cond[a]])): slice(int(a), int(b))
                 for a, b in zip(starts, ends, strict=True)}
        return cls(pair_ids=pair_ids.astype(object), pair=pair.astype(np.intp), order=codes_of(df["order"], ORDERS),
                   verdict=codes_of(df["verdict"], VERDICTS), choice=codes_of(df["choice"], CHOICES),
                   label=codes_of(df["label"], CHOICES), credit=df["credit"].to_numpy(float),
                   order_free=df["order_free"].to_numpy(bool), order_unknown=df["order_unknown"].to_numpy(bool),
                   cells=cells)

    def judges(self) -> list[str]:
        return sorted({j for j, _ in self.cells})

    def conditions(self) -> list[str]:
        return sorted({c for _, c in self.cells})

    def per_pair(self, judge: str, condition: str, metric: str) -> PairValues:
        """The cell's per-pair values of ``metric`` (``accuracy``: mean credit over the orders a labelled pair was
        judged in; ``positional_agreement``: same choice, not none, in both orders; empty where it does not
        apply), computed once per cell."""
        key = (judge, condition, metric)
        if key not in self._per_pair:
            sl = self.cells[(judge, condition)]
            values = self.accuracy_per_pair(sl) if metric == "accuracy" else self.agreement_per_pair(sl)
            self._per_pair[key] = values.spread(len(self.pair_ids))
        return self._per_pair[key]

    def accuracy_per_pair(self, sl: slice) -> PairValues:
        lab = self.label[sl] >= 0
        pairs, inv = np.unique(self.pair[sl][lab], return_inverse=True)
        # a pair has at most one judgment per order: the mean is (c1 + c2) / 2 as pandas' groupby mean gives it
        sums = np.bincount(inv, weights=self.credit[sl][lab], minlength=len(pairs))
        return PairValues(pairs, sums / np.bincount(inv, minlength=len(pairs)))

    def both_orders(self, sl: slice) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Pairs judged in both orders (ascending) and their original and swapped choices."""
        order, pair, choice = self.order[sl], self.pair[sl], self.choice[sl]
        first, second = order == 0, order == 1
        common, i, k = np.intersect1d(pair[first], pair[second], assume_unique=True, return_indices=True)
        return common, choice[first][i], choice[second][k]

    def agreement_per_pair(self, sl: slice) -> PairValues:
        if not ({0, 1} <= set(self.order[sl].tolist())) or self.order_free[sl].all():
            return PairValues(np.array([], dtype=np.intp), np.array([], dtype=float))
        common, orig, swapped = self.both_orders(sl)
        return PairValues(common, ((orig == swapped) & (orig != NONE)).astype(float))
